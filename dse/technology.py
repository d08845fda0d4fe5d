"""Technology tables: process nodes, memory technologies, packaging.

The figures the area, power, energy and cost model reads live in YAML shipped
with the package (``dse/data/technology/``): ``processes.yaml`` (energy per
FLOP and area per FLOP/cycle by number format, SRAM density and read energy,
per-unit logic, uncore and I/O area, static power fraction, wafer cost, defect
density, power-density limits), ``memories.yaml`` (HBM generations and DRAM
kinds: pins, pin rate, layers, energy per byte, PHY area, footprint, cost) and
``packaging.yaml`` (reticle, interposers, HBM shoreline, yield alphas, link
energy). Every data field carries a ``source`` (the loader refuses one
without); estimates say "est.". Sources: seed 004 §4.1.3 and
``docs/technology.md`` (the project's copy of the reference technology table, with its later sections).

Use the module-level functions for the default tables::

    process("n4").energy_per_flop("fp8_e4m3")     # J/FLOP (n4 is an alias of n5)
    memory("hbm3e").energy_per_byte              # J/B
    packaging().reticle_area                      # mm^2
    chip_energy(spec)                             # the per-level energies of a chip

and :func:`overridden` for a study that changes any value::

    tech = overridden({"processes": {"n5": {"wafer_cost": "18000 $"}}})
    tech.process("n5").wafer_cost                 # 18000.0; the defaults are untouched

Units are SI inside (dse.units): J/FLOP, J/B, mm, mm^2, mm^2/B, $, $/B, /mm^2.
"""

from __future__ import annotations

import copy
import functools
import re
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from dse.errors import SpecError, unknown_name
from dse.precision import get_format
from dse.spec import load_yaml, validate
from dse.spec.types import (
    Area,
    Bandwidth,
    Bytes,
    Count,
    EnergyPerByte,
    EnergyPerFlop,
    Fraction,
    Length,
    Money,
    PositiveFloat,
    Q,
    Record,
)

__all__ = [
    "FORMAT_CLASSES",
    "ProcessNode",
    "MemoryTech",
    "Packaging",
    "Interposer",
    "Technology",
    "format_class",
    "default",
    "process",
    "process_names",
    "memory",
    "memory_names",
    "packaging",
    "area_model",
    "AreaModel",
    "chip_energy",
    "on_chip_defaults",
    "sram_read_energy",
    "overridden",
]

TECH_DIR = Path(__file__).parent / "data" / "technology"

#: Number-format classes the process tables are written for. Every dse.precision
#: format maps onto one (see :func:`format_class`).
FORMAT_CLASSES = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4", "int8", "int4")

AreaPerByte = Q("area_per_byte")
MoneyPerByte = Q("money_per_byte")
DefectDensity = Q("defect_density")
PowerDensity = Q("power_density")
Voltage = Q("voltage")
EnergyPerArea = Q("energy_per_area")


# ----------------------------------------------------------------- formats


def format_class(fmt: str) -> str:
    """The process-table class of a number format name.

    A class name itself (``'fp8'``, ``'fp4'``, ...) is accepted as is; any other
    name goes through ``dse.precision.get_format`` (aliases allowed) and maps
    by kind and element width: fp32/tf32/bf16/fp16/int8/int4 to themselves,
    fp8_e4m3, fp8_e5m2, mxfp8* to ``fp8``; mxfp6* to ``fp6``; mxfp4, nvfp4 to
    ``fp4``. Block scales do not change the datapath class. Unknown names
    raise SpecError with a did-you-mean.
    """
    key = str(fmt).strip().lower()
    if key in FORMAT_CLASSES:
        return key

    f = get_format(key)
    if f.name in FORMAT_CLASSES:
        return f.name
    cls = f"{'int' if f.kind == 'int' else 'fp'}{f.element_bits}"
    if cls not in FORMAT_CLASSES:  # pragma: no cover - every shipped format maps
        raise SpecError(f"number format '{fmt}' has no technology class ({cls}); known: {', '.join(FORMAT_CLASSES)}")
    return cls


# ----------------------------------------------------------------- records


class Sourced(Record):
    """A table record whose every data field has an entry in ``sources``."""

    METADATA: ClassVar[frozenset[str]] = frozenset({"name", "title", "aliases", "sources"})

    sources: dict[str, str]

    @model_validator(mode="after")
    def _every_value_has_a_source(self):
        fields = type(self).model_fields
        data = [f for f in fields if f not in self.METADATA and getattr(self, f) is not None]
        missing = [f for f in data if not str(self.sources.get(f, "")).strip()]
        extra = [k for k in self.sources if k not in fields or k in self.METADATA]
        problems = []
        if missing:
            problems.append(f"sources: no source for {', '.join(missing)}")
        if extra:
            problems.append(f"sources: entries for unknown fields {', '.join(extra)}")
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _check_classes(table: dict) -> dict:
    bad = [k for k in table if k not in FORMAT_CLASSES]
    if bad:
        raise ValueError(unknown_name("format class", bad[0], FORMAT_CLASSES))
    if "bf16" not in table:
        raise ValueError("the bf16 entry is required (the reference of the relative rules)")
    return table


class SramReadEnergy(Record):
    """Read energy of a small and a MB-scale array; log-log in between, flat outside."""

    small: EnergyPerByte
    small_size: Bytes
    large: EnergyPerByte
    large_size: Bytes

    @model_validator(mode="after")
    def _ordered(self):
        if not self.large_size > self.small_size:
            raise ValueError("large_size must be above small_size")
        return self


def sram_read_energy(size_bytes, small, small_size, large, large_size):
    """J/B to read an SRAM array of ``size_bytes``, every argument a scalar or a numpy array (broadcast).

    The rule of :meth:`ProcessNode.sram_energy_per_byte` with the node's anchors
    (``sram_read_energy``: ``small`` J/B at ``small_size`` bytes, ``large`` at
    ``large_size``) given as values, so that design points on different nodes
    are one vectorized call (``dse.hardware.derive``): flat outside the
    anchors, a straight line in log(size)-log(energy) between (Horowitz 45 nm:
    8 KB 1.25, 32 KB 2.5, 1 MB 12.5 pJ/B).
    """
    size = np.asarray(size_bytes, dtype=float)
    lo, hi = np.asarray(small_size, dtype=float), np.asarray(large_size, dtype=float)
    x = np.log(np.clip(size, lo, hi))
    x0, x1 = np.log(lo), np.log(hi)
    y0, y1 = np.log(np.asarray(small, dtype=float)), np.log(np.asarray(large, dtype=float))
    out = np.exp(y0 + (x - x0) * (y1 - y0) / (x1 - x0))
    return float(out) if out.ndim == 0 else out


class PowerDensityLimit(Record):
    air: PowerDensity
    liquid: PowerDensity


class VoltageRange(Record):
    """The supply voltages of a node's logic (V): the clock is linear in V - threshold (alpha-power law)."""

    min: Voltage = Field(description="lowest supply (SRAM retention / idle); below it only the clock falls")
    nominal: Voltage = Field(description="supply at a chip's rated clock; the energy tables are quoted here")
    max: Voltage = Field(description="highest supply the node allows (reliability)")
    threshold: Voltage = Field(description="threshold voltage of the alpha-power law f ~ V - V_th")

    @model_validator(mode="after")
    def _order(self):
        if not self.threshold < self.min <= self.nominal <= self.max:
            raise ValueError(f"expected threshold < min <= nominal <= max, got {self.threshold:g} < {self.min:g} "
                             f"<= {self.nominal:g} <= {self.max:g} V")
        return self


class LeakageDensity(Record):
    """Leakage power per mm^2 at the nominal voltage, by kind of silicon."""

    logic: PowerDensity
    sram: PowerDensity


class InstructionOverhead(Record):
    """Instruction fetch, decode, control and operand routing, as a fraction of the arithmetic energy."""

    matrix: Annotated[float, Field(ge=0, le=100)]
    vector: Annotated[float, Field(ge=0, le=100)]


class ProcessNode(Sourced):
    """One process node (processes.yaml). Values in SI; see the YAML header for meanings."""

    name: str = ""
    title: str | None = None
    aliases: list[str] = []
    flop_energy: dict[str, EnergyPerFlop] = Field(description="J/FLOP of the matrix datapath by format class")
    logic_density: DefectDensity = Field(description="standard-cell logic transistors per mm^2 (the area model's "
                                                     "logic scaling between nodes)")
    sram_bitcell: Area = Field(description="high-density 6T SRAM bitcell (the area model's SRAM scaling)")
    sram_read_energy: SramReadEnergy
    voltage: VoltageRange
    leakage: LeakageDensity
    clock_energy: EnergyPerArea = Field(description="clock tree and control, J per cycle per mm^2 of unit logic "
                                                    "at the nominal voltage")
    operand_energy: EnergyPerByte = Field(description="register-file reads and writes of a matrix instruction's "
                                                      "operands, J/B")
    instruction_overhead: InstructionOverhead
    wafer_cost: Money
    defect_density: DefectDensity
    power_density_limit: PowerDensityLimit

    @field_validator("flop_energy")
    @classmethod
    def _format_classes(cls, v: dict) -> dict:
        return _check_classes(v)

    def energy_per_flop(self, fmt: str) -> float:
        """J per FLOP of the matrix datapath for number format ``fmt`` (any dse.precision name)."""
        return self._lookup(self.flop_energy, fmt, "flop_energy")

    def sram_energy_per_byte(self, size_bytes):
        """J/B to read an SRAM array of ``size_bytes`` (scalar or numpy array).

        ``sram_read_energy.small`` at or below ``small_size`` (64 KiB; 8 KiB at
        the 45 nm reference node), ``large`` at or above ``large_size`` (1 MiB,
        "MB-scale"), and a straight line in log(size)-log(energy) between:
        array energy grows with wire length, ~ size^0.4-0.5 (Horowitz 45 nm:
        8 KB 1.25, 32 KB 2.5, 1 MB 12.5 pJ/B). Flat outside the anchors: banked
        arrays above 1 MiB do not keep getting costlier per byte in this model,
        and a size of 0 (no such level) reads as the small-array figure.
        """
        e = self.sram_read_energy
        return sram_read_energy(size_bytes, e.small, e.small_size, e.large, e.large_size)

    def _lookup(self, table: dict[str, float], fmt: str, what: str) -> float:
        cls = format_class(fmt)
        if cls not in table:
            raise SpecError(f"process {self.name}: no {what} entry for format '{fmt}' (class {cls}); "
                            f"known: {', '.join(sorted(table))}")
        return table[cls]


class Footprint(Record):
    width: Length
    height: Length

    @property
    def area(self) -> float:
        return self.width * self.height


class MemoryTech(Sourced):
    """One HBM generation or DRAM kind (memories.yaml)."""

    METADATA: ClassVar[frozenset[str]] = Sourced.METADATA | {"kind"}
    name: str = ""
    title: str | None = None
    aliases: list[str] = []
    kind: Literal["hbm", "dram"]
    interface: str = Field(description="what one interface is: stack, x32 device, x16 channel, x64 channel")
    pins: Count
    pin_rate: Bandwidth
    layers: Count | None = None
    max_layers: Count | None = None
    capacity_per_layer: Bytes | None = None
    energy_per_byte: EnergyPerByte
    phy_area: Area = Field(description="PHY + controller mm^2 per interface on the logic die, at the area model's "
                                       "reference node (N7)")
    controller_fraction: float | None = Field(None, ge=0.0, le=1.0,
        description="share of phy_area that is controller logic (scales with the node's logic density; the "
                    "analog PHY does not); default 0")
    footprint: Footprint | None = None
    cost_per_byte: MoneyPerByte

    @model_validator(mode="after")
    def _hbm_has_stack_figures(self):
        if self.kind == "hbm":
            needed = ("layers", "max_layers", "capacity_per_layer", "footprint")
            missing = [f for f in needed if getattr(self, f) is None]
            if missing:
                raise ValueError(f"an hbm memory needs {', '.join(missing)}")
            if self.layers > self.max_layers:
                raise ValueError(f"layers {self.layers} above max_layers {self.max_layers}")
        return self

    @property
    def interface_bandwidth(self) -> float:
        """B/s of one interface: pins x pin rate / 8 (seed 004 §4.1.3).

        ``pin_rate`` is held in bytes/s per pin ("9.6 Gb/s" parses to 1.2e9),
        so the /8 of the formula is already in it: bandwidth = pins x pin_rate.
        """
        return self.pins * self.pin_rate

    @property
    def stack_capacity(self) -> float | None:
        """B per HBM stack: layers x capacity per layer (seed 004 §4.1.3); None for DRAM."""
        if self.layers is None or self.capacity_per_layer is None:
            return None
        return self.layers * self.capacity_per_layer

    @property
    def power_at_full_bandwidth(self) -> float:
        """W of one interface at its full bandwidth: bandwidth x energy per byte (derived)."""
        return self.interface_bandwidth * self.energy_per_byte


class Interposer(Sourced):
    title: str | None = None
    max_reticles: PositiveFloat
    wafer_cost: Money
    defect_density: DefectDensity
    yield_alpha: PositiveFloat


class Packaging(Sourced):
    """Reticle, interposers, shoreline, yields (packaging.yaml)."""

    reticle_width: Length
    reticle_height: Length
    default_interposer: str
    interposers: dict[str, Interposer]
    hbm_stacks_per_long_edge: Count
    hbm_stacks_per_short_edge: Count
    die_to_stack_gap: Length
    interposer_margin: Length
    die_yield_alpha: PositiveFloat
    wafer_diameter: Length
    assembly_test_cost: Money
    link_energy: EnergyPerByte = Field(description="J/B of a die-to-die / chip-to-chip link (NVLink-C2C)")

    @model_validator(mode="after")
    def _default_known(self):
        if self.default_interposer not in self.interposers:
            raise ValueError(unknown_name("interposer", self.default_interposer, self.interposers))
        return self

    @property
    def reticle_area(self) -> float:
        """mm^2 one exposure covers: 26 x 33 = 858 (seed 004 §4.1.3)."""
        return self.reticle_width * self.reticle_height

    def interposer(self, name: str | None = None) -> Interposer:
        name = name or self.default_interposer
        if name not in self.interposers:
            raise SpecError(unknown_name("interposer", name, self.interposers))
        return self.interposers[name]

    def max_interposer_area(self, name: str | None = None) -> float:
        """mm^2 of the largest interposer: max_reticles x reticle area."""
        return self.interposer(name).max_reticles * self.reticle_area



class OnChipDefaults(Sourced):
    """The default bandwidths of the on-chip levels of chips that publish none, and the default vector unit
    (hierarchy.yaml)."""

    local_bytes_per_cycle: PositiveFloat = Field(description="bytes per cycle per unit of a tensor-core chip's "
                                                             "local buffer (shared memory, LDS)")
    l2_bytes_per_cycle_per_unit: PositiveFloat = Field(description="bytes per cycle of a die's L2, per unit")
    systolic_rows_per_cycle: PositiveFloat = Field(description="input rows per cycle a systolic array's local "
                                                               "buffer delivers (x k x the widest format's bytes)")
    vector_flops_per_cycle: PositiveFloat = Field(description="FP32 FLOPs per cycle per unit of the vector lanes of "
                                                              "a chip file without a vector section")
    vector_exp_per_cycle: PositiveFloat = Field(description="exponentials per cycle per unit of such a chip")


# ----------------------------------------------------------------- the area model


class FittedArea(Record):
    """One fitted area coefficient: its value, the prior it was fitted against and that prior's source."""

    value: Area
    prior: Area
    sigma: PositiveFloat = Field(description="log-normal width of the prior (0.3: about a factor 1.35)")
    source: str


class FittedAreaPerByte(Record):
    value: AreaPerByte
    prior: AreaPerByte
    sigma: PositiveFloat
    source: str


class AreaParameters(Record):
    """The area model's fitted coefficients, at the reference node (area_model.yaml; dse.model.area)."""

    matrix_tensor_core: FittedArea = Field(description="per BF16-equivalent FLOP/cycle of a tensor core (GPU "
                                                       "matrix unit fed from registers)")
    matrix_systolic: FittedArea = Field(description="per BF16-equivalent FLOP/cycle of a systolic array")
    vector_lane: FittedArea = Field(description="per FP32 FLOP/cycle of vector lanes (SIMD ALUs, SFU share)")
    unit_control: FittedArea = Field(description="per compute unit: sequencer, scheduler, network-on-chip port")
    graphics: FittedArea = Field(description="per compute unit of a chip with a graphics pipeline (texture, "
                                             "ray tracing, raster)")
    die_overhead: FittedArea = Field(description="per die: command processors, clocking, test, spares")
    register_file: FittedAreaPerByte = Field(description="per byte of register file (multi-ported banks)")
    scratchpad: FittedAreaPerByte = Field(description="per byte of software-managed SRAM (shared memory, "
                                                      "local buffers, SRAM main memory)")
    cache: FittedAreaPerByte = Field(description="per byte of cache (tags, control, crossbar share)")
    serdes: FittedArea = Field(description="per GB/s (one direction) of off-package links (PCIe, scale-up)")


class AreaModel(Sourced):
    """The parts-based die-area model's tables (area_model.yaml): fitted coefficients and fixed figures."""

    METADATA: ClassVar[frozenset[str]] = Sourced.METADATA | {"fit", "reference_node"}
    reference_node: str
    format_area: dict[str, PositiveFloat] = Field(description="matrix area per FLOP/cycle relative to BF16")
    die_to_die: Area = Field(description="die-to-die PHY area per TB/s (one direction) of the link")
    parameters: AreaParameters
    fit: dict | None = None

    @field_validator("format_area")
    @classmethod
    def _format_classes(cls, v: dict) -> dict:
        return _check_classes(v)

# ----------------------------------------------------------------- the tables


def _normalize_node(name: str) -> str:
    key = str(name).strip().lower().replace(" ", "").replace("_", "").replace("-", "")
    key = key.removeprefix("tsmc")
    m = re.fullmatch(r"n?(\d+)nm", key)
    if m:
        key = f"n{m.group(1)}"
    return key


class Technology:
    """One consistent set of the three tables (defaults, or defaults + overrides).

    Build it with :func:`default` or :meth:`overridden`; it is not mutated
    afterwards. ``raw`` keeps the merged YAML data so overrides can chain.
    """

    _TABLES = ("processes", "memories", "packaging", "area", "hierarchy")

    def __init__(self, raw: dict):
        self.raw = raw
        self.processes: dict[str, ProcessNode] = {}
        self._process_alias: dict[str, str] = {}
        problems: list[str] = []
        for name, data in raw["processes"].items():
            try:
                node = validate(ProcessNode, data, ("processes", name)).model_copy(update={"name": name})
            except SpecError as e:
                problems.extend(e.problems)
                continue
            self.processes[name] = node
            for alias in [name, *node.aliases]:
                key = _normalize_node(alias)
                if key in self._process_alias and self._process_alias[key] != name:
                    problems.append(f"processes: alias '{alias}' of {name} already names {self._process_alias[key]}")
                self._process_alias[key] = name
        self.memories: dict[str, MemoryTech] = {}
        self._memory_alias: dict[str, str] = {}
        for name, data in raw["memories"].items():
            try:
                mem = validate(MemoryTech, data, ("memories", name)).model_copy(update={"name": name})
            except SpecError as e:
                problems.extend(e.problems)
                continue
            self.memories[name] = mem
            for alias in [name, *mem.aliases]:
                self._memory_alias[alias.lower()] = name
        try:
            self.packaging = validate(Packaging, raw["packaging"], ("packaging",))
        except SpecError as e:
            problems.extend(e.problems)
        try:
            self.area = validate(AreaModel, raw["area"], ("area",))
        except SpecError as e:
            problems.extend(e.problems)
        try:
            self.hierarchy = validate(OnChipDefaults, raw["hierarchy"], ("hierarchy",))
        except SpecError as e:
            problems.extend(e.problems)
        if problems:
            raise SpecError(problems)

    # ------------------------------------------------------------ lookups
    def process(self, name: str) -> ProcessNode:
        """The node called ``name`` (aliases such as n4, n6, n12, n3e and '7nm' resolve)."""
        key = self._process_alias.get(_normalize_node(name))
        if key is None:
            raise SpecError(unknown_name("process node", name, self.process_names(aliases=True)))
        return self.processes[key]

    def process_names(self, aliases: bool = False) -> list[str]:
        if not aliases:
            return sorted(self.processes)
        return sorted({*self.processes, *(a for p in self.processes.values() for a in p.aliases)})

    def memory(self, name: str) -> MemoryTech:
        """The HBM generation or DRAM kind called ``name`` (case-insensitive)."""
        key = self._memory_alias.get(str(name).strip().lower())
        if key is None:
            raise SpecError(unknown_name("memory technology", name, self.memory_names()))
        return self.memories[key]

    def memory_names(self) -> list[str]:
        return sorted(self.memories)

    # ------------------------------------------------------------ chip energies
    def chip_energy(self, spec) -> dict[str, float]:
        """Per-level energies of a chip (see the module function :func:`chip_energy`)."""
        node = self.process(spec.process)
        over = spec.energy
        out: dict[str, float] = {}
        if over.memory is not None:
            out["memory"] = over.memory
        elif spec.hbm is not None:
            out["memory"] = self.memory(spec.hbm.generation).energy_per_byte
        elif spec.dram is not None:
            out["memory"] = self.memory(spec.dram.kind).energy_per_byte
        else:  # SRAM as main memory: the array one access reads (its bank; default the per-die capacity)
            bank = spec.sram.bank if spec.sram.bank is not None else spec.sram.capacity / spec.dies
            out["memory"] = node.sram_energy_per_byte(bank)
        out["l2"] = over.l2 if over.l2 is not None else node.sram_energy_per_byte(spec.l2)
        out["local"] = over.local if over.local is not None else node.sram_energy_per_byte(spec.local_buffer)
        out["link"] = self.packaging.link_energy
        flop_over = {_canonical(k): v for k, v in (over.flop or {}).items()}
        for fmt in spec.matrix.flops_per_cycle:
            key = _canonical(fmt)
            out[f"flop.{key}"] = flop_over[key] if key in flop_over else node.energy_per_flop(key)
        for key, v in flop_over.items():
            out.setdefault(f"flop.{key}", v)
        return out

    # ------------------------------------------------------------ overrides
    def overridden(self, overrides: dict | None) -> "Technology":
        """A new Technology with ``overrides`` merged in; this one is unchanged.

        ``overrides`` mirrors the YAML: ``{"processes": {"n5": {"wafer_cost":
        "18000 $", "flop_energy": {"fp8": "0.08 pJ/FLOP"}}}, "memories":
        {"hbm3e": {...}}, "packaging": {...}}``. Names may be aliases (n4 ->
        n5). Mappings merge key by key; other values replace. A value
        overridden without its own ``sources`` entry gets the source
        "override". Unknown tables, nodes or memories raise SpecError with a
        did-you-mean; bad values raise the usual located validation errors.
        """
        if not overrides:
            return self
        if not isinstance(overrides, dict):
            raise SpecError(f"technology overrides: expected a mapping, got {type(overrides).__name__}")
        raw = copy.deepcopy(_plain(self.raw))
        for table, changes in overrides.items():
            if table not in self._TABLES:
                raise SpecError(unknown_name("technology table", table, self._TABLES))
            if not isinstance(changes, dict):
                raise SpecError(f"technology overrides: {table}: expected a mapping, got {type(changes).__name__}")
            if table in ("packaging", "area", "hierarchy"):
                raw[table] = _merge_record(raw[table], changes)
                continue
            for name, fields in changes.items():
                if table == "processes":
                    key = self._process_alias.get(_normalize_node(name))
                    if key is None:
                        raise SpecError(unknown_name("process node", name, self.process_names(aliases=True)))
                else:
                    key = self._memory_alias.get(str(name).strip().lower())
                    if key is None:
                        raise SpecError(unknown_name("memory technology", name, self.memory_names()))
                if not isinstance(fields, dict):
                    raise SpecError(f"technology overrides: {table}.{name}: expected a mapping of fields, "
                                    f"got {type(fields).__name__}")
                raw[table][key] = _merge_record(raw[table][key], fields)
        try:
            return Technology(raw)
        except SpecError as e:
            raise SpecError([_unlocate(p) for p in e.problems]) from None


def _canonical(fmt: str) -> str:
    try:

        return get_format(fmt).name
    except SpecError:
        return str(fmt)


def _plain(data):
    """Plain dicts/lists (no location wrappers) of loaded YAML."""
    if isinstance(data, dict):
        return {k: _plain(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_plain(v) for v in data]
    return data


def _merge_record(base: dict, changes: dict) -> dict:
    """Deep-merge ``changes`` into a copy of the record ``base``; mark overridden sources.

    A mapping value (a format table, ``sram_area``...) merges key by key; the
    ``interposers`` map merges per interposer record; anything else replaces.
    The field's source becomes "override" unless ``changes['sources']`` names one.
    """
    out = dict(base)
    sources = dict(base.get("sources", {}))
    for key, value in changes.items():
        if key == "sources":
            continue
        old = out.get(key)
        if key == "interposers" and isinstance(value, dict) and isinstance(old, dict):
            out[key] = {**old, **{name: _merge_record(old[name], v) if name in old and isinstance(v, dict)
                                  else _plain(v) for name, v in value.items()}}
        elif isinstance(value, dict) and isinstance(old, dict):
            out[key] = _deep_merge(old, _plain(value))
            was = sources.get(key)
            sources[key] = f"override of {', '.join(map(str, value))}" + (f"; otherwise: {was}" if was else "")
        else:
            out[key] = _plain(value)
            sources[key] = "override"
    if isinstance(changes.get("sources"), dict):
        sources.update(_plain(changes["sources"]))
    out["sources"] = sources
    return out


def _deep_merge(old: dict, new: dict) -> dict:
    """``old`` with ``new`` merged in, mapping by mapping (area_model.yaml's parameters are two levels deep)."""
    out = dict(old)
    for k, v in new.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


_LOCATION = re.compile(r"^<input>:\d+:\d+ ")


def _unlocate(problem: str) -> str:
    return "technology override " + _LOCATION.sub("", problem) if _LOCATION.match(problem) else problem


@functools.cache
def default() -> Technology:
    """The shipped tables, loaded and validated once."""
    raw = {
        "processes": load_yaml(TECH_DIR / "processes.yaml")["nodes"],
        "memories": load_yaml(TECH_DIR / "memories.yaml")["memories"],
        "packaging": load_yaml(TECH_DIR / "packaging.yaml"),
        "area": load_yaml(TECH_DIR / "area_model.yaml"),
        "hierarchy": load_yaml(TECH_DIR / "hierarchy.yaml"),
    }
    return Technology(raw)


# ----------------------------------------------------------------- module API


def process(name: str) -> ProcessNode:
    """The default table's node ``name`` (aliases resolve; unknown -> SpecError with did-you-mean)."""
    return default().process(name)


def process_names(aliases: bool = False) -> list[str]:
    return default().process_names(aliases)


def memory(name: str) -> MemoryTech:
    """The default table's memory technology ``name`` (HBM generation or DRAM kind)."""
    return default().memory(name)


def memory_names() -> list[str]:
    return default().memory_names()


def packaging() -> Packaging:
    return default().packaging


def area_model() -> AreaModel:
    """The default tables' parts-based die-area model (area_model.yaml)."""
    return default().area


def on_chip_defaults() -> OnChipDefaults:
    """The default tables' on-chip bandwidth rules (hierarchy.yaml; dse.model.hierarchy)."""
    return default().hierarchy


def overridden(overrides: dict | None) -> Technology:
    """The default tables with ``overrides`` applied (see :meth:`Technology.overridden`)."""
    return default().overridden(overrides)


def chip_energy(spec, tech: Technology | None = None) -> dict[str, float]:
    """Energy per byte of each level and per FLOP of each format of a chip, in J.

    Keys (seed 004 §4.1.3 energy hierarchy):

    * ``memory``: main memory, J/B, from ``memories.yaml`` by the HBM generation
      or DRAM kind; for an SRAM-main-memory chip the node's SRAM read energy of
      its bank (``sram.bank``; default the per-die capacity, the MB-scale figure);
    * ``l2``: J/B of an array of ``spec.l2`` bytes; ``local``: of
      ``spec.local_buffer`` bytes (per unit) -- :meth:`ProcessNode.sram_energy_per_byte`;
    * ``link``: J/B of a die-to-die / chip-to-chip link (NVLink-C2C 1.3 pJ/bit);
    * ``flop.<fmt>``: J/FLOP for every format in ``spec.matrix.flops_per_cycle``
      (canonical dse.precision names), from ``spec.process``.

    ``spec.energy.memory``, ``.l2``, ``.local`` and ``.flop[fmt]`` replace the
    table values when set. The scalar look-up of one spec: design points take
    their FLOP and link energies from it (``dse.hardware.Chips.inputs_view``)
    and derive the size-dependent ones (``memory`` of SRAM, ``l2``, ``local``)
    vectorized in ``dse.hardware.derive`` with the same :func:`sram_read_energy`
    (tests/test_overrides.py checks that the two agree on the catalog).
    """
    return (tech or default()).chip_energy(spec)
