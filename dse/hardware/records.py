"""Chip records: the YAML chip (:class:`ChipSpec` and its parts) and its dotted parameter names."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from dse.errors import SpecError, unknown_name
from dse.precision import format_names, get_format
from dse.spec.types import (
    Area,
    Bandwidth,
    Bytes,
    BytesOrZero,
    Count,
    CountOrZero,
    EnergyPerByte,
    EnergyPerFlop,
    Fraction,
    Frequency,
    Power,
    PowerOrZero,
    Record,
    TimeOrZero,
)

MEMORY_KINDS = ("hbm", "dram", "sram")
#: The HBM generations a chip's ``hbm.generation`` may name.
HBM_GENERATIONS = ("hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4")


def _format_names() -> list[str]:
    return list(format_names())


def _canonical_format(name: str) -> str:
    return get_format(name).name


class InstructionTile(Record):
    """Shape of one matrix instruction, m x n x k (seed 004 §4.2.1)."""

    m: Count = Field(16, description="rows of the output tile one matrix instruction computes")
    n: Count = Field(16, description="columns of that output tile")
    k: Count = Field(16, description="reduction depth of one instruction")
    source: str | None = None


class RegisterTile(Record):
    """The output block one reader of the local buffer holds in registers (dse.model.hierarchy)."""

    m: Count | None = Field(None, description="rows: each B element is read from the local buffer once per R_M rows "
                                              "of the tile (default: the instruction's m)")
    n: Count | None = Field(None, description="columns: each A element is read once per R_N columns of the tile "
                                              "(default: the instruction's n)")
    source: str | None = None


class MatrixUnit(Record):
    instruction: InstructionTile = Field(InstructionTile(),
        description="the shape of the matrix instruction (tiles are whole multiples of it)")
    register_tile: RegisterTile | None = Field(
        None, description="the output block one reader (warp group, wave) accumulates in registers while it reads "
                          "the tile's operands from the local buffer (dse.model.hierarchy); default: the "
                          "instruction (m, n); a systolic array reads its weights once per tile")
    array: Literal["tensor_core", "systolic"] | None = Field(
        None, description="organisation of the matrix datapath: a tensor core fed from registers, or a "
                          "weight-stationary systolic array; default: systolic when the instruction streams one "
                          "row (m = 1) through an array of at least 64 x 64, else tensor_core")
    weight_load_cycles: Count | None = Field(
        None, description="systolic arrays: cycles to load one block of weights (default: the instruction's k, "
                          "one row of weights shifted in per cycle, as TPU v1)")
    flops_per_cycle: dict[str, float] = Field(
        description="dense FLOPs per cycle per compute unit, by number format (a MAC counts 2)"
    )
    flops_per_cycle_physical: dict[str, float] | None = Field(
        None, description="area model: dense FLOPs per cycle per compute unit the datapath is built for (a MAC "
                          "counts 2), by number format, where the product enables less: GeForce runs FP16/BF16 "
                          "with FP32 accumulate at half the rate of the same tensor core with FP16 accumulate "
                          "(NVIDIA GA102, AD102, GB202 whitepapers); sizes the matrix area, never the "
                          "performance; default: flops_per_cycle")
    source: str | None = None

    @field_validator("flops_per_cycle", "flops_per_cycle_physical")
    @classmethod
    def _known_formats(cls, v: dict | None, info) -> dict | None:
        if v is None:
            return None
        out = {}
        for name, rate in v.items():
            try:
                canon = _canonical_format(name)
            except SpecError as e:
                raise ValueError(str(e)) from None
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0 or rate == float("inf"):
                raise ValueError(f"{info.field_name}.{name} must be a finite number > 0 (FLOP/cycle), got {rate!r}")
            out[canon] = float(rate)
        if not out:
            raise ValueError("at least one number format is needed")
        return out

    @model_validator(mode="after")
    def _physical_covers_enabled(self):
        """The datapath as built is at least what the product enables (a product can halve a rate, not add to it)."""
        for fmt, built in (self.flops_per_cycle_physical or {}).items():
            enabled = self.flops_per_cycle.get(fmt)
            if enabled is not None and built < enabled:
                raise ValueError(f"flops_per_cycle_physical.{fmt} = {built:g} FLOP/cycle is below the enabled "
                                 f"flops_per_cycle.{fmt} = {enabled:g}: the datapath as built cannot be smaller "
                                 f"than what the product runs")
        return self


class VectorUnit(Record):
    flops_per_cycle: float = Field(gt=0, description="FP32 vector FLOPs per cycle per unit")
    format: Literal["fp32", "fp16", "bf16"] = Field("fp32", description="number format of the vector lanes "
                                                                        "(area model: an FP16 lane is a quarter "
                                                                        "of an FP32 lane)")
    exp_per_cycle: float = Field(gt=0, description="exponentials per cycle per unit (special function unit)")
    source: str | None = None


class Hbm(Record):
    """HBM stacks (seed 004 §4.1.3): R = pins x rate / 8, C = layers x per-layer."""

    generation: str = Field(
        description="HBM generation (sets the default pins, pin rate, stack build and energy per bit: "
                    "dse/data/technology/memories.yaml)")
    stacks: Count = Field(description="active HBM stacks")
    pins_per_stack: Count | None = Field(None, description="data pins per stack (default: the generation's, 1024; "
                                                           "HBM4 2048)")
    pin_rate: Bandwidth | None = Field(None, description="per-pin data rate, e.g. '5.24 Gb/s' (default: the "
                                                         "generation's)")
    layers: Count | None = Field(None, description="DRAM dies per stack, with capacity_per_layer (default, without "
                                                   "capacity_per_stack: the generation's)")
    capacity_per_layer: Bytes | None = Field(None, description="capacity of one DRAM die (default, without "
                                                               "capacity_per_stack: the generation's)")
    capacity_per_stack: Bytes | None = Field(None, description="capacity of one stack")
    capacity: Bytes | None = Field(None, description="enabled capacity, when below the raw stacks x per-stack")
    stack_sites: Count | None = Field(None, description="stack positions on the package (H100: 6 sites, 5 active)")
    source: str | None = None

    @field_validator("generation")
    @classmethod
    def _gen(cls, v: str) -> str:
        if v.lower() not in HBM_GENERATIONS:
            raise ValueError(unknown_name("HBM generation", v, HBM_GENERATIONS))
        return v.lower()

    @model_validator(mode="before")
    @classmethod
    def _generation_defaults(cls, data):
        """What the chip leaves out, from its generation's row of memories.yaml (the documented defaults): pins per
        stack, pin rate and, without a capacity per stack, the stack build (layers x capacity per layer). A what-if
        or study that changes the generation takes the same defaults (dse.hardware.overrides.with_overrides)."""
        gen = data.get("generation") if isinstance(data, dict) else None
        if not isinstance(gen, str) or gen.lower() not in HBM_GENERATIONS:
            return data  # (the field's own validator says what is wrong)
        from dse import technology

        mem = technology.memory(gen.lower())
        out = dict(data)
        out.setdefault("pins_per_stack", int(mem.pins))
        out.setdefault("pin_rate", f"{float(mem.pin_rate)!r} B/s")
        if out.get("capacity_per_stack") is None:
            out.setdefault("layers", int(mem.layers))
            out.setdefault("capacity_per_layer", f"{float(mem.capacity_per_layer)!r} B")
        return out

    @model_validator(mode="after")
    def _capacity_given(self):
        if self.capacity_per_stack is None and (self.layers is None or self.capacity_per_layer is None):
            raise ValueError("give capacity_per_stack, or layers and capacity_per_layer")
        return self

    @property
    def stack_capacity(self) -> float:
        if self.capacity_per_stack is not None:
            return self.capacity_per_stack
        return self.layers * self.capacity_per_layer

    @property
    def stack_bandwidth(self) -> float:
        # pin_rate is parsed to bytes/s per pin ("5.24 Gb/s" -> 0.655e9 B/s): R = pins x rate (x 1/8 done by the unit)
        return self.pins_per_stack * self.pin_rate


class Dram(Record):
    """Off-package or on-board DRAM given by its headline figures (GDDR, LPDDR, DDR)."""

    kind: Literal["gddr6", "gddr6x", "gddr7", "lpddr4x", "lpddr5", "lpddr5x", "ddr4", "ddr5"] = Field(
        description="DRAM standard")
    bandwidth: Bandwidth = Field(description="total bandwidth of the interface")
    capacity: Bytes = Field(description="total capacity")
    bus_width: Count | None = Field(None, description="data bus width in bits (memory PHYs of the area model); "
                                                      "default: bandwidth / the kind's default pin rate")
    source: str | None = None


class SramMemory(Record):
    """SRAM as the main memory (Groq LPU, Cerebras WSE): weights live on die."""

    capacity: Bytes = Field(description="total on-chip SRAM of the package")
    bandwidth: Bandwidth = Field(description="bandwidth of the SRAM main memory")
    bank: Bytes | None = Field(None, description="the SRAM array one access reads (a bank, a tile, a core's "
                                                 "memory): its read energy is the main memory's J/B; default "
                                                 "the per-die capacity")
    source: str | None = None


class MemorySideCache(Record):
    """A memory-side last-level cache in front of the main memory, shared by every die of the package (AMD
    Infinity Cache: 256 MiB on the MI300X / MI355X IODs). What the dies' L2s miss passes through it; what it
    holds is not read from main memory again (dse.model.tiling.cache_reads, at package scope)."""

    capacity: Bytes = Field(description="capacity of the package's memory-side cache")
    bandwidth: Bandwidth = Field(description="peak bandwidth of the memory-side cache to the dies")
    energy: EnergyPerByte | None = Field(None, description="energy per byte read or written (default: the node's "
                                                           "SRAM read energy of an array of its capacity)")
    source: str | None = None


class Link(Record):
    """A link: T = alpha + V/R (seed 004 §4.5.3); bandwidth per direction."""

    bandwidth: Bandwidth | None = Field(None, description="bytes/s per direction")
    lanes: Count | None = Field(None, description="lanes (with lane_rate, instead of bandwidth)")
    lane_rate: Bandwidth | None = Field(None, description="per-lane rate, e.g. '112 Gb/s'")
    alpha: TimeOrZero = Field(0.0, description="latency per message (T = alpha + V/R)")
    peers: Count = Field(1, description="chips reachable over the link (a mesh or a torus: one link to each)")
    topology: Literal["switch", "mesh", "ring", "torus"] | None = Field(None,
        description="scale-up: how the chips connect -- switch (the rate is the chip's port, shared by its peers), "
                    "mesh (one link of the rate to each peer), ring (one to each of two neighbours), torus (one "
                    "to each of the peers, 2 per dimension); default mesh when given as lanes x lane_rate, switch "
                    "when given as a bandwidth. Collectives take the cheapest algorithm the topology has")
    source: str | None = None

    @model_validator(mode="after")
    def _rate(self):
        if self.bandwidth is None and (self.lanes is None or self.lane_rate is None):
            raise ValueError("give bandwidth, or lanes and lane_rate")
        return self

    @property
    def rate(self) -> float:
        """Bytes/s per direction of one link (lanes x lane rate / 8 when given so)."""
        if self.bandwidth is not None:
            return self.bandwidth
        return self.lanes * self.lane_rate  # lane_rate already in bytes/s ("38.4 Gb/s" -> 4.8e9 B/s)


class Links(Record):
    die_to_die: Link | None = Field(None, description="between the dies of one package")
    host: Link | None = Field(None, description="to the host (PCIe)")
    scale_up: Link | None = Field(None, description="to the other chips of a system (NVLink, Infinity Fabric, ICI)")


class Energy(Record):
    """Per-chip energy overrides; unset values come from the technology tables."""

    memory: EnergyPerByte | None = Field(None,
        description="main-memory energy per byte (default: from the memory technology)")
    l2: EnergyPerByte | None = Field(None, description="L2 energy per byte (default: by its size and the node)")
    local: EnergyPerByte | None = Field(None,
        description="local-buffer energy per byte (default: by its size and the node)")
    register_file: EnergyPerByte | None = Field(None,
        description="register-file energy per byte of the matrix instructions' operand and accumulator traffic "
                    "(default: the node's operand energy)")
    flop: dict[str, EnergyPerFlop] | None = Field(None,
        description="matrix datapath energy per FLOP by number format, arithmetic and instruction overhead; the "
                    "register file is its own level, energy.register_file (default: from the node)")
    source: str | None = None


class PowerSpec(Record):
    static: PowerOrZero | None = Field(None, description="leakage at the nominal voltage; default from the die's "
                                                         "logic and SRAM area and the node's leakage density")
    clock: PowerOrZero | None = Field(None, description="clock tree and control power at the rated clock and the "
                                                        "nominal voltage; default from the unit logic area")
    rated_clock: Frequency | None = Field(None, description="the clock reached at the node's nominal voltage; "
                                                            "default the chip's clock (a design that changes the "
                                                            "clock keeps its base chip's)")
    voltage_scaling: bool = Field(True, description="the supply voltage follows the clock (else fixed)")
    source: str | None = None


class MemorySystem(Record):
    """In-flight transactions cap the usable bandwidth: R_eff <= N_o s / L (seed 004 §4.3.3, Little's law)."""

    latency: TimeOrZero = Field(0.0, description="load-to-use latency of the main memory, e.g. '500 ns'")
    outstanding: CountOrZero = Field(0, description="transactions the chip can keep in flight (0: no cap)")
    transaction: Bytes = Field(128.0, description="bytes per transaction")
    source: str | None = None


class SystemSpec(Record):
    """Chips that serve one model together over the scale-up links (seed 004 §4.5.3, §4.7.2).

    Tensor parallel (default): each chip holds 1/chips of every weight matrix
    and of the KV cache; the operators' work splits over the chips, and after
    each attention output, FFN down projection and MoE layer the partial
    activations are all-reduced by the cheapest algorithm the scale-up
    topology has (ring: 2 (p-1) (alpha + V / (p R)), Patarasuk & Yuan 2009;
    direct through a switch or a mesh: two steps; a tree; dse.model.links).
    Pipeline parallel (``pipeline: true``): each chip
    holds 1/chips of the layers; a step runs the layers one chip after the
    other at one chip's rates, plus (p-1) hops of alpha + activations / R;
    a workload of m micro-batches flows through the stages, (m + p - 1)
    stage times (GPipe). Expert parallel (``expert_parallel: chips``, MoE
    models, tensor parallel): each chip holds 1/chips of the experts and a
    MoE layer's tokens go to their experts and back in two all-to-alls.
    Capacity, TDP and static power add up over the chips either way.
    """

    chips: Count = Field(1, description="chips serving one model together (tensor parallel unless pipeline)")
    pipeline: bool = Field(False, description="split the layers over the chips instead (pipeline parallel): each "
                                              "token passes every chip in turn, one hop per chip boundary")
    expert_parallel: Count = Field(1, description="MoE layers: the experts spread over this many of the chips (1, "
                                                  "or all of them: system.chips), whole experts per chip; each MoE "
                                                  "layer dispatches the tokens to their experts and combines them "
                                                  "back by all-to-all over the scale-up links instead of "
                                                  "all-reducing the experts' partial sums")
    partitions: Count = Field(1, description="logical devices one package is split into (MI355X compute modes SPX / "
                                             "DPX / QPX / CPX = 1 / 2 / 4 / 8, seed 000 'Partition modes'): each "
                                             "gets 1/partitions of the dies, memory bandwidth and capacity, TDP and "
                                             "static power; the package (area) stays whole")
    source: str | None = None


class Calibration(Record):
    """Knobs fitted to measurements; the default is the ideal bound (seed 004 §4.8.3)."""

    compute_efficiency: Fraction = Field(1.0,
        description="share of the matrix peak reached (fitted by `dse calibrate`)")
    bandwidth_efficiency: Fraction = Field(1.0, description="share of the memory bandwidth reached")
    kernel_overhead: TimeOrZero = Field(0.0,
        description="fixed time per kernel launch (launches overlap device work)")
    step_overhead: TimeOrZero = Field(0.0, description="fixed time added to every step")
    source: str | None = None


class AreaSpec(Record):
    """Facts of the die the area model needs beyond the performance figures (no per-chip corrections)."""

    graphics: bool = Field(False, description="the units carry a graphics pipeline (texture units, ray tracing, "
                                              "raster: consumer and workstation GPUs)")
    reticle_fields: Count = Field(1, description="reticle fields a die is stitched across (wafer-scale: > 1)")
    notes: str | None = None
    source: str | None = None


class Reference(Record):
    """Published figures kept for comparison only; the model never reads them."""

    die_area: Area | None = None
    peak: dict[str, float] | None = None
    notes: str | None = None
    source: str | None = None


class ChipSpec(Record):
    name: str = Field(description="the chip's name (catalog names are the file names)")
    title: str | None = Field(None, description="a long name for reports")
    vendor: str | None = Field(None, description="the vendor")
    year: int | None = Field(None, description="year of introduction")
    source: str | None = None
    process: str = Field("n5", description="process node (sets logic density, energies, leakage, voltage range)")
    dies: Count = Field(1, description="compute dies in the package")
    units: Count = Field(description="compute units per die (SMs, CUs, cores)")
    units_physical: Count | None = Field(None, description="units on the die incl. spares for yield (area model); "
                                                           "default: units plus a spare fraction")
    clock: Frequency = Field(description="the clock the peak figures are quoted at")
    tdp: Power | None = Field(None,
        description="the module power limit (default: the model's estimate, reported, not imposed)")
    matrix: MatrixUnit = Field(description="the matrix (tensor) unit of one compute unit")
    vector: VectorUnit | None = Field(None,
        description="the vector unit of one compute unit (default: a GPU SM's, from the technology tables: "
                    "dse/data/technology/hierarchy.yaml)")
    local_buffer: BytesOrZero = Field(0.0,
        description="on-chip buffer per compute unit that holds the tiles (shared memory, SRAM)")
    register_file: BytesOrZero = Field(0.0,
        description="register file per compute unit (holds the accumulator tile on GPUs)")
    accumulator: BytesOrZero = Field(0.0,
        description="separate accumulator store per compute unit (TPU, TMEM, PSUM); 0: none")
    local_bytes_per_cycle: float | None = Field(
        None, gt=0, description="bytes per cycle one unit's local buffer delivers to its matrix unit (shared memory "
                                "/ LDS bandwidth); default: the on-chip rule of dse/data/technology/hierarchy.yaml")
    l2: BytesOrZero = Field(0.0, description="last-level cache per die")
    l2_bytes_per_cycle: float | None = Field(
        None, gt=0, description="bytes per cycle the L2 of one die delivers to the units; default: the on-chip "
                                "rule of dse/data/technology/hierarchy.yaml (per unit)")
    l2_multicast: Count = Field(1, description="units that share one L2 request by multicast (Hopper / Blackwell "
                                                "thread-block clusters with TMA multicast); 1: none")
    l2_physical: Bytes | None = Field(None, description="L2 on the die incl. disabled slices (area model); "
                                                        "default: l2")
    l2_scope: Literal["package", "die"] = Field(
        "package", description="who shares the L2: package (one pool for every unit of the package, or each die's "
                               "L2 in front of its own memory, reached by the others over the die-to-die link) or "
                               "die (each die's L2 serves only its own units: MI300X / MI355X XCDs, whose L2s "
                               "hold no data for one another's tiles)")
    memory_side_cache: MemorySideCache | None = Field(
        None, description="a memory-side cache shared by the package's dies (AMD Infinity Cache); none by default")
    hbm: Hbm | None = Field(None, description="HBM main memory")
    dram: Dram | None = Field(None, description="DRAM main memory (GDDR, LPDDR, DDR)")
    sram: SramMemory | None = Field(None, description="SRAM main memory (weights on die)")
    memory_system: MemorySystem = Field(MemorySystem(), description="latency and in-flight limits of the main memory")
    system: SystemSpec = Field(SystemSpec(), description="chips that serve one model together")
    links: Links = Field(Links(), description="interconnect links")
    energy: Energy = Field(Energy(), description="per-chip energy overrides")
    power: PowerSpec = Field(PowerSpec(), description="static and clock-tree power, voltage scaling")
    calibration: Calibration = Field(Calibration(),
        description="efficiency and overhead knobs (default: the ideal bound)")
    area: AreaSpec = Field(AreaSpec(), description="facts of the die the area model needs (graphics pipeline, reticle fields)")
    reference: Reference = Field(Reference(), description="published figures, for comparison only")

    @field_validator("process")
    @classmethod
    def _known_process(cls, v: str) -> str:
        """A node of the technology table (issue 21: `process: n1` validated, then failed in `dse eval`)."""
        from dse import technology

        try:
            technology.process(v)
        except SpecError as e:
            raise ValueError(str(e)) from None
        return v

    @model_validator(mode="before")
    @classmethod
    def _default_vector(cls, data):
        """A chip file without a vector unit gets the technology tables' (a GPU SM's lanes and special function
        units, hierarchy.yaml): with none, every operator with vector work (softmax, norms) took infinite time,
        silently."""
        if isinstance(data, dict) and data.get("vector") is None:
            from dse import technology

            oc = technology.on_chip_defaults()
            data = {**data, "vector": {"flops_per_cycle": oc.vector_flops_per_cycle,
                                       "exp_per_cycle": oc.vector_exp_per_cycle,
                                       "source": "default: a GPU SM's, dse/data/technology/hierarchy.yaml"}}
        return data

    @model_validator(mode="after")
    def _expert_parallel(self):
        ep, sysm = self.system.expert_parallel, self.system
        if ep != 1 and ep != sysm.chips:
            raise ValueError(f"system.expert_parallel: {ep} of {sysm.chips} chips; the experts spread over all the "
                             f"chips of the system or none (expected 1 or {sysm.chips})")
        if ep > 1 and sysm.pipeline:
            raise ValueError(f"system.expert_parallel: {ep} with system.pipeline; a pipeline stage is one chip, so "
                             "its experts cannot spread (expected 1, or a tensor-parallel system)")
        return self

    @model_validator(mode="after")
    def _whole_dies_per_partition(self):
        if self.dies % self.system.partitions:
            raise ValueError(f"system.partitions: {self.system.partitions} partitions of {self.dies} dies; a "
                             f"partition is whole dies (MI355X: 1, 2, 4 or 8 of its 8 XCDs)")
        return self

    @model_validator(mode="after")
    def _one_memory(self):
        given = [k for k in MEMORY_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one main memory (hbm, dram or sram), got {given or 'none'}")
        return self

    @field_validator("units_physical")
    @classmethod
    def _spares(cls, v, info):
        """The area model counts units_physical >= units (the fuzzer of issue 21: 216 enabled units on a die of
        128 validated, then failed in `dse eval`)."""
        units = info.data.get("units")
        if v is not None and units is not None and v < units:
            raise ValueError(f"must be >= units ({units}): the units on the die include the enabled ones")
        return v

    # ---- derived figures (scalar; the vectorized twins live on Chips) ----
    @property
    def total_units(self) -> int:
        return self.dies * self.units

    def peak_flops(self, fmt: str) -> float:
        """dies x units x FLOPs/cycle x clock (seed 000 "Dense and sparse peaks")."""
        fmt = _canonical_format(fmt)
        return self.total_units * self.matrix.flops_per_cycle.get(fmt, 0.0) * self.clock

    @property
    def memory_kind(self) -> str:
        return next(k for k in MEMORY_KINDS if getattr(self, k) is not None)

    @property
    def memory_bandwidth(self) -> float:
        if self.hbm is not None:
            return self.hbm.stacks * self.hbm.stack_bandwidth
        return (self.dram or self.sram).bandwidth

    @property
    def memory_capacity(self) -> float:
        if self.hbm is not None:
            return self.hbm.capacity or self.hbm.stacks * self.hbm.stack_capacity
        return (self.dram or self.sram).capacity

    @property
    def raw_memory_capacity(self) -> float:
        if self.hbm is not None:
            return self.hbm.stacks * self.hbm.stack_capacity
        return self.memory_capacity

    def machine_balance(self, fmt: str = "bf16") -> float:
        """FLOPs per byte at which compute and memory time are equal (seed 004 §4.8.1)."""
        return self.peak_flops(fmt) / self.memory_bandwidth

    def flat(self) -> dict[str, object]:
        """Dotted-name view of every field (the names design spaces and what-ifs use)."""
        return flatten(self.model_dump(exclude_none=True))


def flatten(d: dict, prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            out.update(flatten(v, key + "."))
        else:
            out[key] = v
    return out


def unflatten(flat: dict[str, object]) -> dict:
    out: dict = {}
    for key, v in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = v
    return out


def _field_dimension(field) -> str | None:
    for meta in field.metadata:
        fn = getattr(meta, "func", None)
        if fn is not None and hasattr(fn, "dimension"):
            return fn.dimension
    for arg in getattr(field.annotation, "__args__", ()) or ():
        for meta in getattr(arg, "__metadata__", ()) or ():
            fn = getattr(meta, "func", None)
            if fn is not None and hasattr(fn, "dimension"):
                return fn.dimension
    return None


def param_dimension(key: str) -> str | None:
    """Dimension of a dotted chip parameter ('clock' -> 'frequency'; counts -> None).

    Raises SpecError (with did-you-mean) for a name that is not a chip parameter.
    """
    import typing

    from pydantic import BaseModel

    model: type[BaseModel] = ChipSpec
    if not isinstance(key, str):  # a YAML key such as `true:` or `12:`
        raise SpecError(f"{key!r}: a chip parameter name is a dotted name like 'hbm.stacks', got {type(key).__name__}")
    parts = key.split(".")
    for i, part in enumerate(parts):
        field = model.model_fields.get(part)
        if field is None:
            raise SpecError(unknown_name("chip parameter", key, sorted(parameter_names())))
        ann = field.annotation
        sub = next((a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)),
                   None)
        if i == len(parts) - 1:
            return _field_dimension(field)
        if sub is None:
            if typing.get_origin(ann) is dict or any(a is dict or typing.get_origin(a) is dict
                                                     for a in typing.get_args(ann)):
                if part in ("flops_per_cycle", "flops_per_cycle_physical") and i == len(parts) - 2:
                    _canonical_format(parts[-1])
                    return None
                return _field_dimension(field) if i == len(parts) - 2 else None
            raise SpecError(unknown_name("chip parameter", key, sorted(parameter_names())))
        model = sub
    return None


def parameter_names() -> list[str]:
    """Every dotted chip parameter name a design space or override may set."""
    import typing

    from pydantic import BaseModel

    out = []

    def walk(model, prefix):
        for name, field in model.model_fields.items():
            ann = field.annotation
            sub = next((a for a in (typing.get_args(ann) or (ann,)) if isinstance(a, type) and issubclass(a, BaseModel)),
                       None)
            if sub is not None:
                walk(sub, f"{prefix}{name}.")
            elif name not in ("source", "notes", "name", "title", "vendor"):
                out.append(f"{prefix}{name}")

    walk(ChipSpec, "")
    return out + [f"matrix.flops_per_cycle.{f}" for f in ("bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8", "mxfp4",
                                                          "nvfp4", "mxfp6", "mxfp8", "tf32", "fp32")]


def yaml_value(key: str, value):
    """A parsed SI number of parameter ``key`` written back as YAML: ``('clock', 1.83e9)`` -> ``'1830000000.0 Hz'``.

    Every digit is kept (``repr``), so validation parses it back to the same
    float. Numbers without a dimension (counts, fractions) and other values are
    returned as they are.
    """
    dim = _safe_dimension(key)
    if dim and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{float(value)!r} {_CANON_UNIT[dim]}"
    return value


_CANON_UNIT = {"bytes": "B", "bandwidth": "B/s", "time": "s", "frequency": "Hz", "power": "W", "area": "mm^2",
               "length": "mm", "energy_per_byte": "J/B", "energy_per_flop": "J/FLOP", "money": "$"}


def _safe_dimension(key: str) -> str | None:
    try:
        return param_dimension(key)
    except SpecError:
        return None
