"""The one rule set of chip overrides and the one derivation of chip figures (issue 13 item 3).

Every way a changed chip is built uses these: chip files and what-if proposals
(:func:`dse.hardware.with_overrides`), study bases and categorical values
(with_overrides), study points and CP-SAT designs (:meth:`dse.hardware.Chips.from_base`),
catalog chips and chip files as design points (:meth:`dse.hardware.Chips.from_specs`).
"""

from __future__ import annotations

import numpy as np

from dse import technology
from dse.hardware.records import MEMORY_KINDS
from dse.model import power
from dse.precision import get_format

# ----------------------------------------------------------------- the override rule set
#
# One rule set for every way a chip is changed: chip files and what-if proposals (with_overrides), study
# bases and categorical values (with_overrides), study points and CP-SAT designs (Chips.from_base). Two
# kinds of rule, both keyed by the dotted name that changed, both skipped for a name given in the same
# change:
#
# * RESETS: inputs that described the base chip's silicon and stop being true. They are dropped and go
#   back to their default rule (derived by :func:`derive` or by the area model).
# * KEEPS: derived figures that belong to the silicon, not to the changed input. They keep the value they
#   had before that input changed, on the design with every other change applied (written as given).
#
# Derived quantities themselves (bandwidths, capacities, energies, static power, link rates) are never
# carried over from the base chip: :func:`derive` recomputes them from the inputs of each design.

#: changed input -> inputs that go back to their default rule unless given in the same change
RESETS: dict[str, tuple[str, ...]] = {
    # other units, other spares: the area model's spare rule (dse/model/area.py units_physical)
    "units": ("units_physical",),
    # another L2 is another die: its physical L2 is the L2 asked for (no disabled slices)
    "l2": ("l2_physical",),
    # a design that asks for n stacks has n stack sites (PHYs, shoreline); the enabled capacity of the
    # base's stacks (H200: 141 of 144 GB) is not that of other stacks: raw = stacks x per-stack
    "hbm.stacks": ("hbm.stack_sites", "hbm.capacity"),
    # other stacks: per-stack capacity = layers x per-layer (seed 004 §4.1.3)
    "hbm.layers": ("hbm.capacity_per_stack", "hbm.capacity"),
    "hbm.capacity_per_layer": ("hbm.capacity_per_stack", "hbm.capacity"),
    "hbm.capacity_per_stack": ("hbm.capacity",),
    # another generation: its pins, pin rate and stack build (memories.yaml defaults, with_overrides)
    "hbm.generation": ("hbm.pin_rate", "hbm.pins_per_stack", "hbm.layers", "hbm.capacity_per_layer",
                       "hbm.capacity_per_stack", "hbm.capacity"),
}

#: changed input -> derived figures kept at their value before that input changed (on the design with every
#: other change applied), unless given in the same change
KEEPS: dict[str, tuple[str, ...]] = {
    # another clock is the same silicon at another operating point: its rated clock (reached at the node's
    # nominal voltage) stays the base chip's, so a faster clock needs a higher voltage (dse.model.power)
    "clock": ("power.rated_clock",),
}


def override_rules(changed) -> tuple[set[str], set[str]]:
    """(inputs to reset, derived figures to keep) when the dotted names ``changed`` are overridden.

    The one rule set of chip overrides (see RESETS and KEEPS above); called by
    :func:`with_overrides` and :meth:`Chips.from_base`. A name in ``changed``
    is never reset or kept (a value given wins), and a reset wins over a keep
    (none of the present rules overlap).
    """
    changed = set(changed)
    # another matrix rate is another datapath: the base's physical rate of that format (the area model's
    # matrix.flops_per_cycle_physical) stops being true
    physical = {"matrix.flops_per_cycle_physical." + c.rsplit(".", 1)[1] for c in changed
                if isinstance(c, str) and c.startswith("matrix.flops_per_cycle.")}
    reset = ({k for c in changed for k in RESETS.get(c, ())} | physical) - changed
    keep = {k for c in changed for k in KEEPS.get(c, ())} - changed - reset
    return reset, keep


MEMORY_CODE = {k: i for i, k in enumerate(MEMORY_KINDS)}

#: optional inputs a chip may leave out (a default rule stands in: :func:`derive` or the area model), so a
#: design point may give them whether its base chip does or not
OPTIONAL_INPUTS = ("units_physical", "tdp", "sram.bank", "power.static", "power.clock", "power.rated_clock",
                   "energy.memory", "energy.l2", "energy.vector_flop", "energy.local", "l2_physical",
                   "dram.bus_width", "hbm.stack_sites", "hbm.capacity", "links.scale_up.topology",
                   "energy.register_file", "local_bytes_per_cycle", "l2_bytes_per_cycle", "matrix.register_tile.m",
                   "matrix.register_tile.n", "memory_side_cache.energy")

#: the links whose rate :func:`derive` computes
LINK_KEYS = ("links.die_to_die", "links.host", "links.scale_up")


def format_bytes(fmt: str) -> float:
    """Bytes of one value of number format ``fmt`` (scales included: dse.precision)."""
    return get_format(fmt).bits_per_value / 8.0


def derive(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every derived chip figure of N design points from their raw inputs, vectorized: the inputs plus

    ``hbm.capacity_per_stack`` = given, else layers x capacity per layer          (seed 004 §4.1.3)
    ``memory.bandwidth`` = HBM stacks x pins x pin rate (the /8 is in the parsed rate); DRAM or SRAM: given
    ``memory.capacity`` = HBM enabled capacity if given, else stacks x per-stack; DRAM or SRAM: given
    ``energy.memory`` = given, else the memory technology's J/B; SRAM main memory: the node's SRAM read
                        energy of an array of ``sram.bank`` bytes (the array one access reads; default the
                        per-die capacity)
    ``energy.l2``, ``energy.local`` = given, else the node's SRAM read energy of an array of ``l2`` /
                        ``local_buffer`` bytes (:func:`dse.technology.sram_read_energy`)
    ``memory_side_cache.energy`` = given, else the node's SRAM read energy of an array of its capacity (0 and
                        capacity 0 where a point has no memory-side cache)
    ``energy.flop.<fmt>`` = given, else the node's arithmetic J/FLOP x (1 + instruction overhead): the matrix
                        datapath (:func:`dse.model.power.matrix_energy_per_flop`; seed 004 §4.1.3)
    ``energy.register_file`` = given, else the node's operand J/B: the register-file level, charged by the
                        evaluator on each instruction's operand and accumulator bytes (dse.model.hierarchy)
    ``local_bytes_per_cycle`` = given, else the on-chip rule (hierarchy.yaml): a tensor-core chip's default
                        bytes per cycle per unit; a systolic array's input rows per cycle x the bytes of one
                        row at its fastest format (FLOPs/cycle x bytes per value / 2 n)
    ``l2_bytes_per_cycle`` = given, else the on-chip rule's bytes per cycle per unit x units (per die)
    ``matrix.register_tile.m`` / ``.n`` = given, else the instruction's m / n
    ``energy.vector_flop`` = given, else the node's FP32 J/FLOP x (1 + vector instruction overhead)
    ``power.rated_clock`` = given, else the clock
    ``power.static``, ``power.clock`` = given, else NaN: the evaluator derives them from the die's area
                        (dse.model.power, which needs the area model)
    ``tdp`` = given, else no limit (inf; the evaluator puts its estimate there)
    ``links.<link>.rate`` = bandwidth if given, else lanes x lane rate (per direction)

    ``inputs`` is :meth:`Chips.inputs_view` per point (NaN: not given), with any
    overrides; a derived name present in ``inputs`` with a number is "given" and
    wins over its derivation. The one derivation of :meth:`Chips.from_specs`,
    :meth:`Chips.from_base` and (through from_specs) :func:`with_overrides`.
    """
    a = {k: np.asarray(v, dtype=float) for k, v in inputs.items()}
    nan = np.full(1, np.nan)  # (arrays of N or of one value broadcast: a figure derived from one-value inputs alone
    #  has one value, Chips.from_base)

    def get(key):
        return a.get(key, nan)

    def given(key, derived):
        g = a.get(key)
        if g is None:
            return derived
        if g.size == 1 and not np.isnan(g).any():  # (one value given for every point: itself, one value, whatever
            # the derivation's; laid over an array of the points it was read point by point, and streamed, where
            # the derivation varies: an H100's L2 bandwidth and rated clock beside a sweep of units and clock)
            return g.reshape(1)
        return np.where(np.isnan(g), derived, g)

    out = dict(a)
    kind = get("memory.kind")
    hbm, dram, sram = kind == 0, kind == 1, kind == 2
    per_stack = given("hbm.capacity_per_stack", get("hbm.layers") * get("hbm.capacity_per_layer"))
    if "hbm.stacks" in a:
        out["hbm.capacity_per_stack"] = per_stack
    stacks = get("hbm.stacks")
    with np.errstate(invalid="ignore"):
        bandwidth = np.where(hbm, stacks * (get("hbm.pins_per_stack") * get("hbm.pin_rate")),
                             np.where(dram, get("dram.bandwidth"), get("sram.bandwidth")))
        capacity = np.where(hbm, given("hbm.capacity", stacks * per_stack),
                            np.where(dram, get("dram.capacity"), get("sram.capacity")))
    out["memory.bandwidth"] = given("memory.bandwidth", bandwidth)
    out["memory.capacity"] = given("memory.capacity", capacity)

    def sram_energy(size):
        return technology.sram_read_energy(size, get("tech.sram_small"), get("tech.sram_small_size"),
                                           get("tech.sram_large"), get("tech.sram_large_size"))

    with np.errstate(invalid="ignore", divide="ignore"):
        on_die = np.where(sram, get("sram.capacity") / get("dies"), 0.0)
        bank = given("sram.bank", on_die) if "sram.bank" in a else on_die
        out["energy.memory"] = given("energy.memory", np.where(sram, sram_energy(bank), get("tech.memory_energy")))
    out["energy.l2"] = given("energy.l2", sram_energy(get("l2")))
    out["energy.local"] = given("energy.local", sram_energy(get("local_buffer")))
    if "memory_side_cache.capacity" in a:  # a memory-side cache (dse.model.tiling.cache_reads); 0 where none
        msc = np.nan_to_num(a["memory_side_cache.capacity"])
        out["memory_side_cache.capacity"] = msc
        out["memory_side_cache.bandwidth"] = np.nan_to_num(get("memory_side_cache.bandwidth"))
        out["memory_side_cache.energy"] = np.where(msc > 0, given("memory_side_cache.energy", sram_energy(msc)), 0.0)
    for key in [k for k in a if k.startswith("tech.flop.")]:
        fmt = key[len("tech.flop."):]
        derived = power.matrix_energy_per_flop(a[key], get("tech.overhead_matrix"))
        out[f"energy.flop.{fmt}"] = given(f"energy.flop.{fmt}", derived)
    out["energy.register_file"] = given("energy.register_file", get("tech.operand_energy"))
    # the on-chip levels' bandwidths (dse.model.hierarchy; the rules of dse/data/technology/hierarchy.yaml)
    systolic = get("matrix.systolic") > 0.5
    out["local_bytes_per_cycle"] = given("local_bytes_per_cycle", np.where(
        systolic, get("tech.systolic_rows_per_cycle") * get("tech.systolic_row_bytes"),
        get("tech.local_bytes_per_cycle")))
    out["l2_bytes_per_cycle"] = given("l2_bytes_per_cycle", get("tech.l2_bytes_per_cycle_per_unit") * get("units"))
    out["matrix.register_tile.m"] = given("matrix.register_tile.m", get("matrix.instruction.m"))
    out["matrix.register_tile.n"] = given("matrix.register_tile.n", get("matrix.instruction.n"))
    out["energy.vector_flop"] = given("energy.vector_flop",
                                      get("tech.vector_flop") * (1.0 + get("tech.overhead_vector")))
    out["power.rated_clock"] = given("power.rated_clock", get("clock"))
    out["power.static"] = given("power.static", nan)
    out["power.clock"] = given("power.clock", nan)
    tdp = get("tdp")
    out["tdp"] = np.where(np.isnan(tdp), np.inf, tdp)
    for key in LINK_KEYS:
        if any(k in a for k in (f"{key}.bandwidth", f"{key}.lanes", f"{key}.lane_rate")):
            out[f"{key}.rate"] = given(f"{key}.rate",
                                       given(f"{key}.bandwidth", get(f"{key}.lanes") * get(f"{key}.lane_rate")))
    return out
