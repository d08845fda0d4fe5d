"""Seed cases of dse.model.power (seed 004 §4.1.3, §4.8.4), the functions the evaluator and the CP-SAT
data steps call. Chip figures come from the catalog (dse.hardware.load_chip), energies from the
technology tables (dse.technology), workload bytes from dse.workload; the expected values are the seed's
(tests/data/seed_cases.yaml). The same rules through the evaluator: tests/reference/test_evaluator_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse import technology
from dse.hardware import load_chip
from dse.model import power
from dse.workload import decode
from tests.reference_cases import approx, case, expected


def test_power_density_ratio():
    # seed 004 §4.1.3: DSP power 0.75 over area 0.60 of the reference
    approx("dynamic_power_scaling", "power_density_ratio", power.power_density(0.75, 0.60))


#: The seed's two laws (seed 004 §4.1.3): V ~ f (P ~ f^3: threshold 0, no voltage floor) and a fixed voltage (P ~ f)
V_FOLLOWS_F = power.ClockLaw(1.0, 0.0, 1.0, 0.0, scaling=True)
FIXED_V = power.ClockLaw(1.0, 0.0, 1.0, 0.0, scaling=False)


def test_tdp_energy_budget():
    cid = "tdp_energy_budget"
    h100 = load_chip("h100-sxm")  # 700 W; 5 x 1024 x 5.24 Gb/s / 8 = 3.35 TB/s; 132 x 4096 x 1.83 GHz
    hbm2 = technology.memory("hbm2").energy_per_byte  # the seed's HBM2 row: 3.97 pJ/bit = 31.76 pJ/B
    p_mem = power.memory_power(h100.memory_bandwidth, hbm2)
    approx(cid, "memory_power_w", p_mem)
    room = h100.tdp - p_mem  # the seed's scenario has no static power
    peak = h100.peak_flops("bf16")
    # the seed's budget b: compute at b J/FLOP and the peak rate draws just the room (the clock holds),
    # a little more and the clock falls
    b = float(expected(cid, "budget_pj_per_flop")) * 1e-12
    tol = case(cid)["rel_tol"]
    assert power.sustained_clock_ratio(room, b * (1 - tol) * peak, V_FOLLOWS_F) == 1.0
    assert power.sustained_clock_ratio(room, b * (1 + tol) * peak, FIXED_V) < 1.0
    # compute at 1.5 b: the clock falls to 1/1.5 at fixed voltage, to its cube root when the voltage scales
    demand = 1.5 * room
    approx(cid, "sustained_clock_fixed_voltage", power.sustained_clock_ratio(room, demand, FIXED_V))
    approx(cid, "sustained_clock_voltage_scaling", power.sustained_clock_ratio(room, demand, V_FOLLOWS_F))


def test_sustained_clock_floor_and_no_tdp():
    # no power left: the lowest clock modelled; no TDP (inf room) or no compute power: the peak clock
    got = power.sustained_clock_ratio(np.array([0.0, np.inf, 100.0, -5.0]), np.array([50.0, 50.0, 0.0, 50.0]),
                                      V_FOLLOWS_F)
    np.testing.assert_array_equal(got, [power.MIN_CLOCK_RATIO, 1.0, 1.0, power.MIN_CLOCK_RATIO])


def test_average_power_of_an_empty_interval_is_zero():
    np.testing.assert_array_equal(power.average_power(np.array([2.0, 0.0]), np.array([4.0, 0.0])), [0.5, 0.0])


def test_per_step_energy_cards_decode():
    # power cap x read-bound step time: RTX 4090 450 W x 16.345 GB / 1,008 GB/s = 7.30 J;
    # RTX 5090 575 W x 16.345 GB / 1,792 GB/s = 5.24 J (seed 004 §4.8.4)
    nbytes = decode("qwen3-8b", batch=1, context=8192).bytes_read
    for name, key in (("rtx-4090", "rtx4090_j"), ("rtx-5090", "rtx5090_j")):
        chip = load_chip(name)
        approx("per_step_energy_cards", key, power.energy_at_power(chip.tdp, nbytes / chip.memory_bandwidth))


def test_per_step_energy_cards_qproj():
    # RTX PRO 6000 600 W cap x the measured per-call time of the Q projection (reuse group of
    # seed 004 §4.8.3: 42.9 us at M = 1, 32.6 us at M = 256): 25.7 mJ and 19.6 mJ. The seed uses the
    # measured times here, not the read bound (18.7 us x 600 W would be 11.2 mJ).
    chip = load_chip("rtx-pro-6000")
    for m, time_key, key in ((1, "measured_m1_reuse_s", "rtx_pro_6000_qproj_m1_mj"),
                             (256, "measured_m256_reuse_s", "rtx_pro_6000_qproj_m256_mj")):
        t = float(expected("measured_qproj", time_key))
        approx("per_step_energy_cards", key, power.energy_at_power(chip.tdp, t) * 1e3)
    assert case("per_step_energy_cards")["section"] == "4.8.4"
    assert power.energy_at_power(450.0, 16.22e-3) == pytest.approx(7.299)


@pytest.mark.parametrize("r", [1.0, 0.6, 0.05])
@pytest.mark.parametrize("t_busy, t_clocked, t_memory", [
    (2e-3, 2.5e-3, 1e-3),  # compute-bound: the busy and clocked times set the rates above t_memory / r
    (2e-4, 3e-4, 1e-3),  # memory-bound
    (0.0, 0.0, 1e-3),  # no compute time: the traffic's time alone
    (2e-3, 2.5e-3, 0.0),  # no memory time
])
def test_operator_power_is_the_seeds_sum_of_its_parts(r, t_busy, t_clocked, t_memory):
    """dse.model.power.operator_power at r x the design clock against the seed's sum (seed 004 §4.1.3: static +
    memory + compute), written out here: leakage and clock power at V(r) (P_leak ~ V^2, P_clock ~ f V^2), the
    memory traffic's energy over its time max(t_clocked / r, t_memory), the switching energy at V(r) (E ~ V^2, given
    at V1) over max(t_busy / r, t_memory). The power ceiling bisects on it (dividing once per operator)."""
    law = power.ClockLaw(0.9, 0.65, 0.9, 0.35)  # V(f) = max(0.65, 0.35 + 0.55 f / f_rated), the design at 0.9
    e_comp, e_mem, leak, clk = 0.3, 0.12, 40.0, 25.0
    v = max(0.65, 0.35 + 0.55 * 0.9 * r)
    v1 = 0.35 + 0.55 * 0.9
    want = (leak * (v / 0.9) ** 2 + clk * 0.9 * r * (v / 0.9) ** 2
            + e_mem / max(t_clocked / r, t_memory) + e_comp * (v / v1) ** 2 / max(t_busy / r, t_memory))
    got = power.operator_power(r, e_comp, e_mem, t_busy, t_clocked, t_memory, leak, clk, law)
    assert got == pytest.approx(want, rel=1e-13)


def test_operator_power_without_energy_or_time():
    """No energy draws no power, whatever its time (0 / 0 is 0 W, not NaN); energy in no time draws an infinite
    power (the operator cannot run within any TDP)."""
    law = power.ClockLaw(1.0, 0.6, 0.9, 0.3)
    fixed = power.fixed_power(40.0, 25.0, law, 0.5)
    with np.errstate(all="raise"):
        assert power.operator_power(0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 40.0, 25.0, law) == pytest.approx(fixed, rel=1e-15)
    assert power.operator_power(0.5, 0.3, 0.0, 0.0, 0.0, 0.0, 40.0, 25.0, law) == np.inf
    assert power.operator_power(0.5, 0.0, 0.3, 0.0, 0.0, 0.0, 40.0, 25.0, law) == np.inf
