"""Tests of dse.model.cost: wafer arithmetic by hand, the seed's break-even example, chip cost, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dse import technology
from dse.errors import SpecError
from dse.hardware import Chips, load_chip
from dse.model.area import package_area
from dse.model.cost import (
    YEAR_S,
    break_even,
    chip_cost,
    cost_per_million_tokens,
    cost_per_token,
    die_cost,
    dies_per_wafer,
    hbm_cost,
    lifetime_tokens,
    negative_binomial_yield,
)
from tests.reference_cases import approx, case


def test_dies_per_wafer_by_hand():
    # 800 mm^2 on 300 mm: pi 150^2 / 800 - pi 300 / sqrt(1600) = 88.357 - 23.562 = 64.795
    assert dies_per_wafer(800.0) == pytest.approx(64.795, abs=1e-3)
    # 100 mm^2: 706.86 - 66.64 = 640.2
    assert dies_per_wafer(100.0) == pytest.approx(640.22, abs=1e-2)
    # vectorized, and 0 when nothing fits
    np.testing.assert_allclose(dies_per_wafer(np.array([800.0, 1e6])), [64.795, 0.0], atol=1e-3)


def test_negative_binomial_yield_by_hand():
    # A = 800 mm^2, D0 = 0.1 /cm^2 = 0.001 /mm^2, alpha 10: (1 + 0.08)^-10 = 0.46319
    assert negative_binomial_yield(800.0, 0.001, 10.0) == pytest.approx(1.08**-10)
    assert negative_binomial_yield(0.0, 0.001) == 1.0
    # alpha -> infinity tends to Poisson e^(-A D0)
    assert negative_binomial_yield(800.0, 0.001, 1e7) == pytest.approx(math.exp(-0.8), rel=1e-6)


def test_die_cost_by_hand():
    # 16,000 $ / (64.795 x 0.46319) = 533.1 $
    assert die_cost(800.0, 16000.0, 0.001) == pytest.approx(16000 / (64.7953 * 1.08**-10), rel=1e-4)
    assert die_cost(1e6, 16000.0, 0.001) == math.inf


def test_hbm_cost():
    assert hbm_cost(80e9, 15e-9) == pytest.approx(1200.0)  # 80 GB at 15 $/GB


def test_cost_per_million_tokens_by_hand():
    # $20,000 chip, 10,000 token/s, 50% for 4 years: 20000 / 6.3072e11 = 3.171e-8 $/token;
    # 0.1 J/token at 0.10 $/kWh (2.778e-8 $/J): 2.778e-9 $/token; sum x 1e6 = 0.03449 $
    price = 0.10 / 3.6e6
    want = 1e6 * (20000 / (1e4 * 0.5 * 4 * YEAR_S) + 0.1 * price)
    got = cost_per_million_tokens(20000.0, 1e4, 0.1, lifetime_s=4 * YEAR_S, utilization=0.5, price_per_j=price)
    assert got == pytest.approx(want) and got == pytest.approx(0.03449, rel=1e-3)
    assert cost_per_token(20000.0, 0.0, 0.1, lifetime_s=YEAR_S, utilization=0.5, price_per_j=price) == math.inf


def test_lifetime_tokens_seed_example():
    # seed 004 Example 4-3: 100 x 10,000 x 0.5 x 31,536,000 = 1.5768e13
    approx("specialization_break_even", "tokens_per_year", lifetime_tokens(1e4, 0.5, YEAR_S, machines=100))


def test_specialization_break_even_seed_case():
    inp = case("specialization_break_even")
    be = break_even(20e6, 0.50 / 1e6, machines=100, tokens_per_s=10_000, utilization=0.5, lifetime_s=YEAR_S)
    approx("specialization_break_even", "break_even_tokens", be.break_even_tokens)
    approx("specialization_break_even", "tokens_per_year", be.tokens_per_year)
    approx("specialization_break_even", "machines_for_one_year", be.machines_needed)
    approx("specialization_break_even", "years_to_break_even", be.years_to_break_even)
    assert not be.pays_off
    assert be.yearly_saving == pytest.approx(7.88e6, rel=1e-3)  # "saves about 7.88 million per year"
    half = break_even(20e6, 0.50 / 1e6, machines=100, tokens_per_s=10_000, utilization=0.5, lifetime_s=YEAR_S / 2)
    approx("specialization_break_even", "machines_half_lifetime", half.machines_needed)
    quarter_util = break_even(20e6, 0.50 / 1e6, machines=100, tokens_per_s=10_000, utilization=0.25)
    assert quarter_util.machines_needed == half.machines_needed == 508  # "the same if utilization drops to 25%"
    assert inp["seed"].startswith("004")


def test_break_even_errors():
    with pytest.raises(SpecError, match="utilization"):
        break_even(1e6, 1e-7, machines=1, tokens_per_s=1, utilization=1.5)
    with pytest.raises(SpecError, match="saving"):
        break_even(1e6, 0.0, machines=1, tokens_per_s=1, utilization=0.5)


def test_wafer_math_errors():
    with pytest.raises(SpecError, match="die area"):
        dies_per_wafer(-1.0)
    with pytest.raises(SpecError, match="defect density"):
        negative_binomial_yield(100.0, -0.1)
    with pytest.raises(SpecError, match="alpha"):
        negative_binomial_yield(100.0, 0.001, 0.0)


def test_h100_chip_cost_by_hand():
    spec = load_chip("h100-sxm")
    chips = Chips.from_specs([spec])
    a = package_area(chips)
    n5, hbm3, pkg = technology.process("n4"), technology.memory("hbm3"), technology.packaging()
    A = a.die_area_mm2[0]
    dpw = math.pi * 150**2 / A - math.pi * 300 / math.sqrt(2 * A)
    y = (1 + A * n5.defect_density / pkg.die_yield_alpha) ** -pkg.die_yield_alpha
    die = n5.wafer_cost / (dpw * y)
    ip = pkg.interposer()
    Ai = a.interposer_area_mm2[0]
    dpw_i = math.pi * 150**2 / Ai - math.pi * 300 / math.sqrt(2 * Ai)
    y_i = (1 + Ai * ip.defect_density / ip.yield_alpha) ** -ip.yield_alpha
    interposer = ip.wafer_cost / (dpw_i * y_i)
    memory = 5 * 16e9 * hbm3.cost_per_byte  # 5 stacks x 16 GB
    want = die + memory + interposer + pkg.assembly_test_cost
    c = chip_cost(chips, a)
    assert c.chip_cost_usd[0] == pytest.approx(want, rel=1e-9)
    assert c.die_usd[0] == pytest.approx(die) and c.hbm_usd[0] == pytest.approx(memory)
    assert c.base_usd[0] == 0
    assert set(c.columns()) >= {"chip_cost_usd"}


def test_chip_cost_vectorized_and_monotone_in_stacks():
    base = load_chip("h200-sxm")
    chips = Chips.from_base(base, 3, {"hbm.stacks": np.array([4, 5, 6]), "hbm.stack_sites": np.array([6, 6, 6])})
    c = chip_cost(chips, process="n4", memory="hbm3e")
    assert np.all(np.diff(c.chip_cost_usd) > 0)
    np.testing.assert_allclose(np.diff(c.hbm_usd), 24e9 * technology.memory("hbm3e").cost_per_byte)


def test_chiplets_pay_for_their_base_dies():
    c = chip_cost(Chips.from_specs([load_chip("mi355x")]))
    assert c.base_usd[0] > 0
    assert c.chip_cost_usd[0] == pytest.approx(c.dies_usd[0] + c.base_usd[0] + c.hbm_usd[0]
                                               + c.interposer_usd[0] + c.assembly_usd[0])


def test_chip_cost_needs_process_without_specs():
    with pytest.raises(SpecError, match="process"):
        chip_cost(Chips.from_base(load_chip("h100-sxm"), 1))


def test_a_studys_wafer_cost_override_is_used():
    tech = technology.overridden({"processes": {"n5": {"wafer_cost": "32000 $"}}})
    chips = Chips.from_specs([load_chip("h100-sxm")])
    assert chip_cost(chips, tech=tech).die_usd[0] == pytest.approx(2 * chip_cost(chips).die_usd[0])


@pytest.mark.parametrize("base", ["h100-sxm", "mi300x", "groq-tsp"])
def test_chip_cost_of_many_points_is_each_points_own(base):
    """chip_cost prices the silicon once per set of points alike in its inputs (die area, dies, base dies,
    interposer, process): every point's figures are those of the point alone, to the bit. Points of a few unit
    counts and HBM stacks (sets of points alike), the L2 from a continuous range (none alike), and one figure for
    every point; MI300X's base dies and interposer, Groq's neither."""
    from dse.model.area import package_area_for, process_and_memory
    rng = np.random.default_rng(29)
    n = 40
    spec = load_chip(base)
    alike = {"units": rng.choice([64.0, 96.0, 128.0], n)}
    if spec.hbm is not None:
        alike["hbm.stacks"] = rng.choice([4.0, 6.0], n)
    for over in (alike, dict(alike, l2=rng.uniform(1e6, 3e8, n)), {"clock": rng.uniform(1e9, 2e9, n)}):
        chips = Chips.from_base(spec, n, over)
        process, memory = process_and_memory(chips)
        many = chip_cost(chips, package_area_for(chips), process=process, memory=memory)
        for i in (0, 7, 23, n - 1):
            one = chips.take([i])
            alone = chip_cost(one, package_area_for(one), process=process, memory=memory)
            for k in many.__dataclass_fields__:
                np.testing.assert_array_equal(np.broadcast_to(getattr(many, k), n)[i:i + 1], getattr(alone, k),
                                              err_msg=f"{base} {k}")
