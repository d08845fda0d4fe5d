"""Power and clock: static + dynamic power, the TDP budget, sustained clock.

Seed 004 §4.1.3 ("Power ceiling"): the module power (TDP) is shared by static
power, memory and compute. The energy budget per FLOP at peak rate is
    b = (TDP - P_static - P_mem) / F_peak
and when the actual energy per FLOP e exceeds b the power controller lowers
the clock: to b/e of peak at fixed voltage (P ~ f), to (b/e)^(1/3) when the
voltage falls with the frequency (P ~ f V^2 ~ f^3).
"""

from __future__ import annotations

import numpy as np


def memory_power(bandwidth_bytes_per_s, energy_per_byte_j):
    """Power of memory traffic at a bandwidth: R x e (seed 004 §4.1.3: 3.35 TB/s x 31.76 pJ/B = 106 W)."""
    return np.asarray(bandwidth_bytes_per_s, dtype=float) * energy_per_byte_j


def energy_budget_per_flop(tdp_w, peak_flops, memory_power_w=0.0, static_w=0.0):
    """b = (TDP - P_static - P_mem) / F_peak in J/FLOP (seed 004 §4.1.3); <= 0 means no budget left."""
    return (np.asarray(tdp_w, dtype=float) - static_w - memory_power_w) / np.asarray(peak_flops, dtype=float)


def sustained_clock_ratio(budget_j_per_flop, energy_j_per_flop, voltage_scaling=True):
    """Sustained / peak clock: 1 if e <= b; b/e at fixed voltage; (b/e)^(1/3) with voltage scaling (seed 004 §4.1.3)."""
    b = np.asarray(budget_j_per_flop, dtype=float)
    e = np.asarray(energy_j_per_flop, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(e > 0, np.clip(b, 0.0, None) / e, 1.0)
    ratio = np.minimum(ratio, 1.0)
    scaled = np.cbrt(ratio)
    out = np.where(np.asarray(voltage_scaling, dtype=bool), scaled, ratio)
    return np.maximum(out, 1e-6)  # a chip with no budget crawls, it does not divide by zero


def dynamic_power_ratio(voltage_ratio=1.0, frequency_ratio=1.0, capacitance_ratio=1.0, activity_ratio=1.0):
    """P_dyn ~ alpha C V^2 f, as a ratio to a reference design (seed 004 §4.1.3, LogicFolding example)."""
    return (np.asarray(activity_ratio) * capacitance_ratio * np.square(voltage_ratio) * frequency_ratio)


def power_density(power_w, area_mm2):
    """Average power per die area in W/mm^2 (seed 004 §4.1.3: 0.75 power / 0.60 area = 1.25x density)."""
    return np.asarray(power_w, dtype=float) / np.asarray(area_mm2, dtype=float)


def average_power(energy_j, time_s):
    """Average power over a step: E / T (seed 004 §4.1.3: 0.534 J over 4.88 ms ~ 110 W)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(energy_j, dtype=float) / np.asarray(time_s, dtype=float)


def dynamic_power(flop_rate, energy_per_flop_j, byte_rate=0.0, energy_per_byte_j=0.0):
    """Dynamic power at an operating point: F x e_flop + R x e_byte, in W (seed 004 §4.1.3).

    ``byte_rate`` and ``energy_per_byte_j`` may be per level (broadcasting
    arrays); their products are summed by the caller when levels differ.
    """
    return (np.asarray(flop_rate, dtype=float) * np.asarray(energy_per_flop_j, dtype=float)
            + np.asarray(byte_rate, dtype=float) * np.asarray(energy_per_byte_j, dtype=float))


def operating_power(static_w, flop_rate, energy_per_flop_j, byte_rate=0.0, energy_per_byte_j=0.0):
    """P = P_static + F x e_flop + R x e_byte at an operating point, in W (seed 004 §4.1.3)."""
    return np.asarray(static_w, dtype=float) + dynamic_power(flop_rate, energy_per_flop_j, byte_rate,
                                                             energy_per_byte_j)


def tdp_violation(power_w, tdp_w):
    """P - TDP in W: <= 0 within the power ceiling (seed 004 §4.1.3); a missing TDP (inf) is no limit (0)."""
    p = np.asarray(power_w, dtype=float)
    t = np.asarray(tdp_w, dtype=float)
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(t), p - t, 0.0)


def energy_at_power(power_w, time_s):
    """E = P x T for a constant power (seed 004 §4.8.4: 450 W x 16.22 ms = 7.30 J per step)."""
    return np.asarray(power_w, dtype=float) * np.asarray(time_s, dtype=float)
