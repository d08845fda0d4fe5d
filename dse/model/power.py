"""Power and clock: memory power, the sustained clock under the power ceiling, average power, energy.

Seed 004 §4.1.3 ("Power ceiling"): the module power (TDP) is shared by static
power, memory and compute. The energy budget per FLOP at peak rate is
    b = (TDP - P_static - P_mem) / F_peak
and when the actual energy per FLOP e exceeds b the power controller lowers
the clock: to b/e of peak at fixed voltage (P ~ f), to (b/e)^(1/3) when the
voltage falls with the frequency (P ~ f V^2 ~ f^3). b/e is the ratio of the
power left for compute, TDP - P_static - P_mem, to the power compute draws at
the peak clock, e F_peak: :func:`sustained_clock_ratio` takes those two powers.

Each rule lives here once; the evaluator (dse/model/evaluator.py) and the CP-SAT data steps call these
functions. Pure, unchecked, numpy-vectorized (scalars or arrays, broadcasting).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MIN_CLOCK_RATIO", "memory_power", "sustained_clock_ratio", "average_power", "energy_at_power",
           "power_density"]

#: Lowest sustained clock modelled (fraction of peak); below it the design breaks its TDP (peak power > TDP).
MIN_CLOCK_RATIO = 0.05


def memory_power(bandwidth_bytes_per_s, energy_per_byte_j):
    """Power of memory traffic at a bandwidth: R x e (seed 004 §4.1.3: 3.35 TB/s x 31.76 pJ/B = 106 W)."""
    return bandwidth_bytes_per_s * energy_per_byte_j


def sustained_clock_ratio(room_w, demand_w, voltage_scaling=True, floor=MIN_CLOCK_RATIO):
    """Sustained / peak clock under the power ceiling (seed 004 §4.1.3).

    ``room_w``: power left for compute (TDP - static - memory power; inf without a TDP); ``demand_w``:
    the power compute draws at the peak clock. 1 where demand <= room; else room / demand at fixed
    voltage (P ~ f), (room / demand)^(1/3) when the voltage scales with the clock (P ~ f^3); never below
    ``floor`` (a chip with no power left crawls at the lowest modelled clock: it breaks its TDP).
    H100 700 W, 106.4 W of HBM, compute at 1.5x its budget: 0.667 at fixed voltage, 0.874 scaled.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(demand_w > 0, np.clip(room_w, 0.0, None) / demand_w, 1.0)
    ratio = np.minimum(ratio, 1.0)
    out = np.where(voltage_scaling, np.cbrt(ratio), ratio)
    out = np.maximum(out, floor)
    return np.where(np.isfinite(out), out, 1.0)


def average_power(energy_j, time_s):
    """Average power over an interval: E / T, 0 for an empty interval (seed 004 §4.1.3: 0.534 J over
    4.88 ms ~ 110 W). The evaluator's step power, each operator's power and the power ceiling's inputs."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(time_s > 0, energy_j / time_s, 0.0)


def energy_at_power(power_w, time_s):
    """E = P x T for a constant power (seed 004 §4.8.4: 450 W x 16.22 ms = 7.30 J per step); the
    evaluator's static energy."""
    return power_w * time_s


def power_density(power_w, area_mm2):
    """Average power per die area in W/mm^2 (seed 004 §4.1.3: 0.75 power / 0.60 area = 1.25x density)."""
    return np.asarray(power_w, dtype=float) / np.asarray(area_mm2, dtype=float)
