"""Cost: dies per wafer, yield, die and chip cost, cost per token, break-even of specialization.

Pure, numpy-vectorized functions (scalars or arrays, broadcasting; scalars in
give floats out). Units: mm and mm^2, US dollars, seconds, joules; a defect
density is per mm^2 (0.1 per cm^2 = 0.001 per mm^2).

Model (beyond the seeds except the break-even, seed 004 §4.8.4):
    dies per wafer   DPW = pi (d/2)^2 / A - pi d / sqrt(2 A)         (d = 300 mm; edge loss term)
    yield            Y   = (1 + A D0 / alpha)^-alpha                  (negative binomial; alpha = 10)
    die cost         C_die = wafer cost / (DPW x Y)
    HBM cost         C_hbm = cost per byte x capacity (raw stacks, not the enabled capacity)
    interposer       C_int = interposer wafer cost / (DPW_int x Y_int)
    chip cost        dies x C_die + base dies + C_hbm + C_int + assembly and test
    cost per token   chip cost / (tokens/s x utilization x lifetime) + energy per token x price
    break-even       V* = F0 / dc; machines = ceil(V* / (q u L)); years = V* / (D q u year)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError
from dse.hardware.chips import same_at_every_point
from dse.model import area as area_mod, jit

__all__ = [
    "WAFER_DIAMETER_MM",
    "YEAR_S",
    "dies_per_wafer",
    "negative_binomial_yield",
    "die_cost",
    "hbm_cost",
    "cost_per_token",
    "cost_per_million_tokens",
    "lifetime_tokens",
    "BreakEven",
    "break_even",
    "ChipCost",
    "chip_cost",
]

from dse.model.args import checked, scalar_or_array as _out  # noqa: E402

WAFER_DIAMETER_MM = 300.0
YEAR_S = 365.0 * 86400.0  # seed 004 Example 4-3: "calculated at 365 days per year"


def _positive(name: str, value) -> np.ndarray:
    return checked(name, value, positive=True)


def _non_negative(name: str, value) -> np.ndarray:
    return checked(name, value)


def dies_per_wafer(area_mm2, wafer_diameter_mm=WAFER_DIAMETER_MM):
    """Gross dies per wafer: pi (d/2)^2 / A - pi d / sqrt(2 A) (standard edge-loss formula; d = 300 mm).

    Not rounded (a fractional expectation keeps the cost smooth for the
    optimizer); never below 0. Example: A = 800 mm^2 -> 88.4 - 23.6 = 64.8.
    """
    a = _positive("die area", area_mm2)
    d = _positive("wafer diameter", wafer_diameter_mm)
    dpw = np.pi * (d / 2.0) ** 2 / a - np.pi * d / np.sqrt(2.0 * a)
    return _out(np.maximum(dpw, 0.0))


def negative_binomial_yield(area_mm2, defect_density_per_mm2, alpha=10.0):
    """Y = (1 + A D0 / alpha)^-alpha (negative binomial, clustering alpha; alpha = 10 dies, 6 interposers).

    Source: ttm-cas / LLMCompass cost model; Cunningham 1990. D0 is per mm^2.
    """
    a = _non_negative("die area", area_mm2)
    d0 = _non_negative("defect density", defect_density_per_mm2)
    al = _positive("yield alpha", alpha)
    return _out((1.0 + a * d0 / al) ** (-al))


def die_cost(area_mm2, wafer_cost_usd, defect_density_per_mm2, alpha=10.0, wafer_diameter_mm=WAFER_DIAMETER_MM):
    """Cost of one good die: wafer cost / (DPW x Y). Infinite when no whole die fits the wafer."""
    dpw = np.asarray(dies_per_wafer(area_mm2, wafer_diameter_mm))
    y = np.asarray(negative_binomial_yield(area_mm2, defect_density_per_mm2, alpha))
    return _out(_good_die_cost(wafer_cost_usd, dpw, y))


def _good_die_cost(wafer_cost_usd, dpw, y) -> np.ndarray:
    """:func:`die_cost` from the dies per wafer and the yield: wafer cost / (DPW x Y), inf where no good die."""
    good = dpw * y
    with np.errstate(divide="ignore"):
        return np.where(good > 0, np.asarray(wafer_cost_usd, dtype=float) / np.where(good > 0, good, 1.0), np.inf)


def hbm_cost(capacity_bytes, cost_per_byte_usd):
    """Memory cost: cost per byte x capacity (HBM $/GB from the technology tables)."""
    return _out(_non_negative("capacity", capacity_bytes) * np.asarray(cost_per_byte_usd, dtype=float))


def lifetime_tokens(tokens_per_s, utilization, lifetime_s, machines=1.0):
    """Output over a lifetime: D u q L (seed 004 §4.8.4)."""
    return _out(np.asarray(machines, dtype=float) * np.asarray(utilization, dtype=float)
                * np.asarray(tokens_per_s, dtype=float) * np.asarray(lifetime_s, dtype=float))


def cost_per_token(chip_cost_usd, tokens_per_s, energy_per_token_j, *, lifetime_s, utilization, price_per_j):
    """$ per token: chip cost / (q u L) + energy per token x price (seed 004 §4.8.4: c / (3600 u q)).

    A design that produces no tokens costs +inf per token.
    """
    made = np.asarray(lifetime_tokens(tokens_per_s, utilization, lifetime_s))
    with np.errstate(divide="ignore", invalid="ignore"):
        capital = np.where(made > 0, np.asarray(chip_cost_usd, dtype=float) / np.where(made > 0, made, 1.0), np.inf)
    return _out(capital + np.asarray(energy_per_token_j, dtype=float) * np.asarray(price_per_j, dtype=float))


def cost_per_million_tokens(chip_cost_usd, tokens_per_s, energy_per_token_j, *, lifetime_s, utilization,
                            price_per_j):
    """$ per million tokens: 1e6 x :func:`cost_per_token`."""
    return _out(1e6 * np.asarray(cost_per_token(chip_cost_usd, tokens_per_s, energy_per_token_j,
                                                lifetime_s=lifetime_s, utilization=utilization,
                                                price_per_j=price_per_j)))


# ------------------------------------------------------------------ specialization break-even


@dataclass(frozen=True)
class BreakEven:
    """Break-even of a fixed investment (seed 004 §4.8.4, Example 4-3)."""

    break_even_tokens: float      # V* = F0 / dc
    tokens_per_lifetime: float    # D q u L
    tokens_per_year: float        # D q u x 365 days
    machines_needed: int          # ceil(V* / (q u L))
    years_to_break_even: float    # V* / (D q u year)
    pays_off: bool                # tokens_per_lifetime >= V*
    yearly_saving: float          # dc x D q u year


def break_even(fixed_cost, saving_per_token, *, machines, tokens_per_s, utilization, lifetime_s=YEAR_S) -> BreakEven:
    """Break-even of a specialized design: V* = F0 / dc against the output D u q L (seed 004 §4.8.4).

    ``saving_per_token`` in $ per token (0.50 $ per million tokens = 5e-7).
    Example 4-3: F0 = 20e6, dc = 5e-7, D = 100, q = 10,000 token/s, u = 0.5,
    L = 1 year -> V* = 4e13, 1.577e13 tokens/year, 254 machines, 2.54 years.
    """
    f0 = float(_non_negative("fixed cost", fixed_cost))
    dc = float(_positive("saving per token", saving_per_token))
    d = float(_positive("machines", machines))
    q = float(_positive("tokens per second", tokens_per_s))
    u = float(_positive("utilization", utilization))
    if u > 1:
        raise SpecError(f"utilization must be <= 1, got {utilization!r}")
    life = float(_positive("lifetime", lifetime_s))
    v_star = f0 / dc
    per_machine_life = float(lifetime_tokens(q, u, life))
    per_year = float(lifetime_tokens(q, u, YEAR_S, machines=d))
    need = v_star / per_machine_life
    machines_needed = int(np.ceil(need * (1 - 1e-12)))  # 254.0000000001 -> 255 would be float noise
    return BreakEven(
        break_even_tokens=v_star,
        tokens_per_lifetime=d * per_machine_life,
        tokens_per_year=per_year,
        machines_needed=machines_needed,
        years_to_break_even=v_star / per_year,
        pays_off=d * per_machine_life >= v_star,
        yearly_saving=dc * per_year,
    )


# ------------------------------------------------------------------ chip cost from the technology tables


@dataclass(frozen=True)
class ChipCost:
    """Per design point cost breakdown in $ (arrays of length N)."""

    die_usd: np.ndarray           # one good compute die
    dies_usd: np.ndarray          # all compute dies of the package
    base_usd: np.ndarray          # base (I/O) dies under chiplets (layout base_dies), else 0
    hbm_usd: np.ndarray
    interposer_usd: np.ndarray
    assembly_usd: np.ndarray
    chip_cost_usd: np.ndarray     # sum of the above
    die_yield: np.ndarray
    dies_per_wafer: np.ndarray

    def columns(self) -> dict[str, np.ndarray]:
        return {"chip_cost_usd": self.chip_cost_usd, "die_cost_usd": self.die_usd,
                "hbm_cost_usd": self.hbm_usd, "interposer_cost_usd": self.interposer_usd,
                "die_yield": self.die_yield}


def chip_cost(chips, area=None, *, process=None, memory=None, tech=None) -> ChipCost:
    """Manufacturing cost of each design point of ``chips`` from its areas and the technology tables.

    chip = dies x wafer cost / (DPW x Y) + base dies + memory $/B x raw capacity
           + interposer wafer cost / (DPW_int x Y_int) + assembly and test
    ``area`` is the :class:`dse.model.area.PackageArea` of the same chips
    (computed when not given). The node and memory technology come from
    ``chips.specs`` or the ``process`` / ``memory`` arguments (as for
    :func:`dse.model.area.package_area`). Memory is priced on the raw capacity
    (HBM: stacks x capacity per stack; the disabled part is bought too); DRAM
    boards are priced the same way on their capacity; SRAM main memory is on
    the dies. Yields: negative binomial per die (alpha from packaging.yaml),
    per interposer (its own alpha and D0). No yield loss at assembly (the
    tables carry no assembly yield). ``tech``: a study's
    :class:`dse.technology.Technology` (default: the shipped tables). Beyond
    the seeds: technology.md "Dies per wafer", "Yield", "Wafer cost" rows.
    """

    if area is None:
        area = area_mod.package_area(chips, process=process, memory=memory, tech=tech)
    n = len(chips)
    procs = area_mod.per_point(chips, "process", process)
    mems = area_mod.per_point(chips, "memory", memory) if (memory is not None or chips.specs) else \
        area_mod._Same(None, n)
    wafer = area_mod._by_name(procs, lambda p: area_mod._process(p, tech).wafer_cost, n)
    d0 = area_mod._by_name(procs, lambda p: area_mod._process(p, tech).defect_density, n)
    # the silicon's costs (:func:`_silicon_cost`) once per set of points alike in its inputs: a search's points
    # share packages (100,000 of the benchmark's H100 variants: 1,864), each point's numbers those of its set's first
    inputs = [np.broadcast_to(np.asarray(x, dtype=float), (n,)) for x in (
        area.die_area_mm2, area.dies, area.base_area_mm2, area.interposer_area_mm2, wafer, d0)]
    vary = [x for x in inputs if not same_at_every_point(x)]
    alike = jit.sets_alike(vary, n) if n > 1 else None
    if alike is None:
        silicon = _silicon_cost(*inputs, tech)
    else:
        first, inverse = alike
        silicon = tuple(jit.laid_over(x, inverse) for x in _silicon_cost(*(x[first] for x in inputs), tech))
    one_die, dies, base, interposer, assembly, y, dpw = silicon

    kind = chips.get("memory.kind", 0.0)
    per_byte = np.nan_to_num(area_mod._by_name(mems, lambda m: area_mod._memory(m, tech).cost_per_byte, n))
    raw_hbm = chips.get("hbm.stacks", 0.0) * chips.get("hbm.capacity_per_stack", 0.0)
    raw = np.where(kind == 0.0, raw_hbm, np.where(kind == 1.0, chips.get("memory.capacity", 0.0), 0.0))
    memory_usd = np.asarray(hbm_cost(np.nan_to_num(raw), per_byte), dtype=float)
    total = dies + base + memory_usd + interposer + assembly
    return ChipCost(one_die, dies, base, memory_usd, interposer, assembly, total, y, dpw)


def _silicon_cost(die_area, dies, base_area, interposer_area, wafer, d0, tech=None) -> tuple:
    """:func:`chip_cost`'s silicon, per point of the (k,) inputs: one good compute die, the package's compute dies,
    its base dies, its interposer, assembly and test, the compute die's yield and dies per wafer ($ and counts).
    The dies per wafer and the yield of a die once for its cost and its columns; base dies and interposers priced
    where some point has them."""
    pkg = area_mod._packaging(tech)
    alpha, diameter = pkg.die_yield_alpha, pkg.wafer_diameter
    dpw = np.asarray(dies_per_wafer(die_area, diameter), dtype=float)
    y = np.asarray(negative_binomial_yield(die_area, d0, alpha), dtype=float)
    one_die = _good_die_cost(wafer, dpw, y)
    base_n = area_mod.base_die_count(base_area, tech)
    has_base = base_n > 0
    base = np.zeros(np.shape(one_die))
    if has_base.any():
        base_node = area_mod._process(area_mod.BASE_DIE_PROCESS, tech)
        base_each = np.where(has_base, base_area / np.where(has_base, base_n, 1.0), 1.0)
        base = np.where(has_base, base_n * np.asarray(
            die_cost(base_each, base_node.wafer_cost, base_node.defect_density, alpha, diameter), dtype=float), 0.0)
    has_int = interposer_area > 0
    interposer, assembly = np.zeros(np.shape(one_die)), np.zeros(np.shape(one_die))
    if has_int.any():
        inter = pkg.interposer()
        safe = np.where(has_int, interposer_area, 1.0)
        interposer = np.where(has_int, np.asarray(
            die_cost(safe, inter.wafer_cost, inter.defect_density, inter.yield_alpha, diameter), dtype=float), 0.0)
        assembly = np.where(has_int, pkg.assembly_test_cost, 0.0)
    return one_die, dies * one_die, base, interposer, assembly, y, dpw
