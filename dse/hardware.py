"""Chips: the hardware spec (YAML -> frozen record) and its vectorized form.

A chip is written once as a nested YAML record (:class:`ChipSpec`) and used
inside dse as :class:`Chips`: N design points held as numpy arrays keyed by
the same dotted names the YAML uses ("hbm.stacks", "clock",
"matrix.flops_per_cycle.bf16"). Design spaces, what-if overrides and the
evaluator all speak those names, so a parameter a user can write is a
parameter a search can vary.

Model (seed 004 §4.1.3, §4.2; seed 000 "Dense and sparse peaks"):
    peak FLOP/s per format  = dies x units x FLOPs/cycle/unit x clock
    HBM stack bandwidth     = pins x pin rate / 8   (the /8 happens when "Gb/s" is parsed to bytes/s)
    HBM stack capacity      = layers x capacity per layer
    machine balance         = peak FLOP/s / memory bandwidth
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from dse import technology
from dse.errors import SpecError, unknown_name
from dse.precision import format_names, get_format
from dse.spec import load_yaml, validate
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

DATA = Path(__file__).parent / "data"
CHIP_DIR = DATA / "chips"

MEMORY_KINDS = ("hbm", "dram", "sram")


def _format_names() -> list[str]:
    return list(format_names())


def _canonical_format(name: str) -> str:
    return get_format(name).name


class InstructionTile(Record):
    """Shape of one matrix instruction, m x n x k (seed 004 §4.2.1)."""

    m: Count = 16
    n: Count = 16
    k: Count = 16
    source: str | None = None


class MatrixUnit(Record):
    instruction: InstructionTile = InstructionTile()
    flops_per_cycle: dict[str, float] = Field(
        description="dense FLOPs per cycle per compute unit, by number format (a MAC counts 2)"
    )
    source: str | None = None

    @field_validator("flops_per_cycle")
    @classmethod
    def _known_formats(cls, v: dict) -> dict:
        out = {}
        for name, rate in v.items():
            try:
                canon = _canonical_format(name)
            except SpecError as e:
                raise ValueError(str(e)) from None
            if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
                raise ValueError(f"flops_per_cycle.{name} must be a number > 0, got {rate!r}")
            out[canon] = float(rate)
        if not out:
            raise ValueError("at least one number format is needed")
        return out


class VectorUnit(Record):
    flops_per_cycle: float = Field(gt=0, description="FP32 vector FLOPs per cycle per unit")
    exp_per_cycle: float = Field(gt=0, description="exponentials per cycle per unit (special function unit)")
    source: str | None = None


class Hbm(Record):
    """HBM stacks (seed 004 §4.1.3): R = pins x rate / 8, C = layers x per-layer."""

    generation: str
    stacks: Count
    pins_per_stack: Count = 1024
    pin_rate: Bandwidth = Field(description="per-pin data rate, e.g. '5.24 Gb/s'")
    layers: Count | None = None
    capacity_per_layer: Bytes | None = None
    capacity_per_stack: Bytes | None = None
    capacity: Bytes | None = Field(None, description="enabled capacity, when below the raw stacks x per-stack")
    stack_sites: Count | None = Field(None, description="stack positions on the package (H100: 6 sites, 5 active)")
    source: str | None = None

    @field_validator("generation")
    @classmethod
    def _gen(cls, v: str) -> str:
        known = ("hbm2", "hbm2e", "hbm3", "hbm3e", "hbm4")
        if v.lower() not in known:
            raise ValueError(unknown_name("HBM generation", v, known))
        return v.lower()

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

    kind: Literal["gddr6", "gddr6x", "gddr7", "lpddr4x", "lpddr5", "lpddr5x", "ddr4", "ddr5"]
    bandwidth: Bandwidth
    capacity: Bytes
    source: str | None = None


class SramMemory(Record):
    """SRAM as the main memory (Groq LPU, Cerebras WSE): weights live on die."""

    capacity: Bytes = Field(description="total on-chip SRAM of the package")
    bandwidth: Bandwidth
    source: str | None = None


class Link(Record):
    """A link: T = alpha + V/R (seed 004 §4.5.3); bandwidth per direction."""

    bandwidth: Bandwidth | None = None
    lanes: Count | None = None
    lane_rate: Bandwidth | None = None
    alpha: TimeOrZero = 0.0
    peers: Count = 1
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
    die_to_die: Link | None = None
    host: Link | None = None
    scale_up: Link | None = None


class Energy(Record):
    """Per-chip energy overrides; unset values come from the technology tables."""

    memory: EnergyPerByte | None = None
    l2: EnergyPerByte | None = None
    local: EnergyPerByte | None = None
    flop: dict[str, EnergyPerFlop] | None = None
    source: str | None = None


class PowerSpec(Record):
    static: PowerOrZero | None = Field(None, description="leakage + idle power; default a fraction of TDP")
    static_fraction: Fraction | None = None
    voltage_scaling: bool = Field(True, description="clock falls as cube root of the power ratio (else linearly)")
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
    each attention output and FFN down projection the partial activations are
    all-reduced over a ring: 2 (p-1) (alpha + V / (p R)) per all-reduce
    (Patarasuk & Yuan 2009). Pipeline parallel (``pipeline: true``): each chip
    holds 1/chips of the layers; a step runs the layers one chip after the
    other at one chip's rates, plus (p-1) hops of alpha + activations / R.
    Capacity, TDP and static power add up over the chips either way.
    """

    chips: Count = 1
    pipeline: bool = Field(False, description="split the layers over the chips instead (pipeline parallel): each "
                                              "token passes every chip in turn, one hop per chip boundary")
    source: str | None = None


class Calibration(Record):
    """Knobs fitted to measurements; the default is the ideal bound (seed 004 §4.8.3)."""

    compute_efficiency: Fraction = 1.0
    bandwidth_efficiency: Fraction = 1.0
    kernel_overhead: TimeOrZero = 0.0
    step_overhead: TimeOrZero = 0.0
    source: str | None = None


class AreaSpec(Record):
    """Per-chip corrections to the area model, each with its reason (the technology tables hold the defaults)."""

    unit_logic: Area | None = Field(None, description="logic area per compute unit (replaces the node's figure)")
    uncore: Area | None = None
    io: Area | None = None
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
    name: str
    title: str | None = None
    vendor: str | None = None
    year: int | None = None
    source: str | None = None
    process: str = "n5"
    dies: Count = 1
    units: Count = Field(description="compute units per die (SMs, CUs, cores)")
    units_physical: Count | None = Field(None, description="units on the die incl. spares for yield (area model); "
                                                           "default: units plus a spare fraction")
    clock: Frequency
    tdp: Power | None = None
    matrix: MatrixUnit
    vector: VectorUnit | None = None
    local_buffer: BytesOrZero = 0.0
    register_file: BytesOrZero = 0.0
    accumulator: BytesOrZero = 0.0
    l2: BytesOrZero = 0.0
    hbm: Hbm | None = None
    dram: Dram | None = None
    sram: SramMemory | None = None
    memory_system: MemorySystem = MemorySystem()
    system: SystemSpec = SystemSpec()
    links: Links = Links()
    energy: Energy = Energy()
    power: PowerSpec = PowerSpec()
    calibration: Calibration = Calibration()
    area: AreaSpec = AreaSpec()
    reference: Reference = Reference()

    @model_validator(mode="after")
    def _one_memory(self):
        given = [k for k in MEMORY_KINDS if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one main memory (hbm, dram or sram), got {given or 'none'}")
        return self

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
            if typing.get_origin(ann) is dict or dict in typing.get_args(ann):
                if part == "flops_per_cycle" and i == len(parts) - 2:
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


def with_overrides(spec: ChipSpec, overrides: dict[str, object]) -> ChipSpec:
    """A copy of ``spec`` with dotted-name overrides applied and revalidated.

    Values are YAML values (strings with units, numbers, or "x2" to scale the
    current value). Changing ``hbm.generation`` resets the pin rate and the
    per-layer capacity to that generation's defaults unless they are also
    given (dse/data/technology/memories.yaml).
    """

    data = spec.model_dump(exclude_none=True)
    flat = flatten(data)
    for key, value in overrides.items():
        param_dimension(key)  # unknown names fail here, with did-you-mean
        if isinstance(value, str) and value.strip().lower().startswith("x"):
            try:
                factor = float(value.strip()[1:])
            except ValueError:
                raise SpecError(f"{key}: expected a value or a multiplier like 'x2', got {value!r}") from None
            cur = flat.get(key)
            if not isinstance(cur, (int, float)) or isinstance(cur, bool):
                raise SpecError(f"{key}: cannot scale {cur!r} by {value!r}")
            value = cur * factor
            if isinstance(cur, int):
                if not float(value).is_integer():
                    raise SpecError(f"{key}: {cur} x {factor:g} = {value:g} is not a whole number of {key}; "
                                    f"give the count itself (e.g. {key}: {round(value)})")
                value = int(value)
            flat[key] = value
            continue
        if key == "hbm.generation":
            mem = technology.memory(str(value))
            for k in list(flat):
                if k.startswith("hbm.") and k.split(".")[1] in ("pin_rate", "capacity_per_stack", "layers",
                                                                "capacity_per_layer", "capacity", "pins_per_stack"):
                    if k not in overrides:
                        del flat[k]
            flat.setdefault("hbm.pin_rate", f"{mem.pin_rate * 8 / 1e9:g} Gb/s")
            flat.setdefault("hbm.pins_per_stack", int(mem.pins))
            if "hbm.capacity_per_stack" not in flat:
                flat.setdefault("hbm.layers", int(mem.layers))
                flat.setdefault("hbm.capacity_per_layer", f"{mem.capacity_per_layer:g} B")
        flat[key] = value
    if "units" in overrides and "units_physical" not in overrides:
        flat.pop("units_physical", None)  # other units, other spares: the area model's default rule
    # re-express already-parsed SI floats as strings with canonical units so validation re-parses them
    for k, v in list(flat.items()):
        if k in overrides and not isinstance(v, float):
            continue
        dim = _safe_dimension(k)
        if dim and isinstance(v, (int, float)) and not isinstance(v, bool):
            flat[k] = f"{v!r} {_CANON_UNIT[dim]}"
    return validate(ChipSpec, unflatten(flat))


_CANON_UNIT = {"bytes": "B", "bandwidth": "B/s", "time": "s", "frequency": "Hz", "power": "W", "area": "mm^2",
               "length": "mm", "energy_per_byte": "J/B", "energy_per_flop": "J/FLOP", "money": "$"}


def _safe_dimension(key: str) -> str | None:
    try:
        return param_dimension(key)
    except SpecError:
        return None


# ----------------------------------------------------------------- catalog


def catalog_names() -> list[str]:
    return sorted(p.stem for p in CHIP_DIR.glob("*.yaml"))


_ALIASES = {
    "h100": "h100-sxm", "h200": "h200-sxm", "b200": "b200", "a100": "a100-sxm-80gb", "v100": "v100-sxm2",
    "rtx-pro-6000-blackwell": "rtx-pro-6000", "m1-ultra": "apple-m1-ultra", "m3-ultra": "apple-m3-ultra",
    "m4-max": "apple-m4-max", "m2-max": "apple-m2-max", "groq": "groq-tsp", "wse-3": "cerebras-wse-3", "tpu-v1": "tpu-v1",
}


def resolve_name(name: str) -> Path:
    names = catalog_names()
    key = name.lower()
    key = _ALIASES.get(key, key)
    if key in names:
        return CHIP_DIR / f"{key}.yaml"
    raise SpecError(unknown_name("chip", name, names))


def _exists(p: Path) -> bool:
    """Path.exists that says no to a name the OS cannot even look up (too long, NUL byte)."""
    try:
        return p.exists()
    except (OSError, ValueError):
        return False


def load_chip_dict(name_or_path: str | Path):
    """The raw (located) YAML of a catalog chip or a chip file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or _exists(p):
        return load_yaml(p)
    return load_yaml(resolve_name(str(name_or_path)))


@functools.lru_cache(maxsize=256)
def _load_catalog_chip(path: str) -> ChipSpec:
    return validate(ChipSpec, load_yaml(path))


def load_chip(name_or_path: str | Path) -> ChipSpec:
    """A validated chip from the catalog (by name) or from a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or _exists(p):
        return validate(ChipSpec, load_yaml(p))
    return _load_catalog_chip(str(resolve_name(str(name_or_path))))


def chip_from_dict(data: dict) -> ChipSpec:
    return validate(ChipSpec, data)


def catalog() -> list[ChipSpec]:
    return [load_chip(n) for n in catalog_names()]


# ----------------------------------------------------------------- vectorized


_MEM_CODE = {k: i for i, k in enumerate(MEMORY_KINDS)}


class Chips:
    """N design points as a struct of numpy arrays (the evaluator's input).

    ``arrays`` maps dotted names to float64 arrays of length N. Built from
    specs (:meth:`from_specs`) or from one base spec broadcast over N points
    with some names overridden by arrays (:meth:`from_base`) — the path every
    search takes. Derived figures are computed vectorized on access.
    """

    # the numeric inputs the model reads; everything else on a spec is descriptive
    def __init__(self, arrays: dict[str, np.ndarray], formats: list[str], names: list[str] | None = None,
                 specs: list[ChipSpec] | None = None, base: ChipSpec | None = None):
        self.arrays = arrays
        self.formats = formats
        n = {len(a) for a in arrays.values()}
        if len(n) != 1:
            raise ValueError(f"arrays of different lengths: {n}")
        self.n = n.pop()
        self.names = names or [f"point{i}" for i in range(self.n)]
        self.specs = specs
        self.base = base  # the chip the points were built on (from_base): its node and memory technology

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, key: str) -> np.ndarray:
        return self.arrays[key]

    def __contains__(self, key: str) -> bool:
        return key in self.arrays

    # ------------------------------------------------------------ building
    @staticmethod
    def numeric_view(spec: ChipSpec) -> dict[str, float]:
        """The numeric model inputs of one spec, by dotted name."""

        flat = spec.flat()
        out: dict[str, float] = {}
        for k, v in flat.items():
            if isinstance(v, bool):
                out[k] = float(v)
            elif isinstance(v, (int, float)):
                out[k] = float(v)
        out["memory.kind"] = float(_MEM_CODE[spec.memory_kind])
        out["memory.bandwidth"] = spec.memory_bandwidth
        out["memory.capacity"] = spec.memory_capacity
        if spec.hbm is not None:
            out["hbm.capacity_per_stack"] = spec.hbm.stack_capacity
        tech = technology.chip_energy(spec)
        out.update({f"energy.{k}": v for k, v in tech.items()})
        # the vector unit computes in FP32 (softmax, norms): its energy per FLOP from the process node
        out["energy.vector_flop"] = technology.process(spec.process).energy_per_flop("fp32")
        static = spec.power.static
        if static is None:
            frac = spec.power.static_fraction
            if frac is None:
                frac = technology.process(spec.process).static_fraction
            static = frac * (spec.tdp or 0.0)
        out["power.static"] = static
        out["tdp"] = spec.tdp if spec.tdp is not None else np.inf
        for key in ("links.die_to_die", "links.host", "links.scale_up"):
            link = spec.links
            for part in key.split(".")[1:]:
                link = getattr(link, part)
            if link is not None:
                out[f"{key}.rate"] = link.rate
        return out

    @classmethod
    def from_specs(cls, specs: list[ChipSpec]) -> "Chips":
        views = [cls.numeric_view(s) for s in specs]
        formats = sorted({f for s in specs for f in s.matrix.flops_per_cycle})
        keys = sorted({k for v in views for k in v})
        arrays = {k: np.array([v.get(k, np.nan) for v in views], dtype=float) for k in keys}
        for k, a in arrays.items():  # a format a chip lacks: rate 0 (the evaluator falls back to a wider one)
            if k.startswith(("matrix.flops_per_cycle.", "energy.flop.")):
                a[np.isnan(a)] = 0.0
        return cls(arrays, formats, [s.name for s in specs], list(specs))

    @classmethod
    def from_base(cls, base: ChipSpec, n: int, overrides: dict[str, np.ndarray] | None = None) -> "Chips":
        """Broadcast ``base`` over ``n`` points, replacing named inputs by arrays.

        Derived memory figures are recomputed from overridden HBM inputs.
        """
        view = cls.numeric_view(base)
        overrides = overrides or {}
        unknown = [k for k in overrides if k not in view and not k.startswith("matrix.flops_per_cycle.")]
        if unknown:
            raise SpecError([unknown_name("chip parameter", k, sorted(view)) for k in unknown])
        arrays = {k: np.full(n, v, dtype=float) for k, v in view.items()}
        for k, v in overrides.items():
            arrays[k] = np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy()
        formats = sorted(set(base.matrix.flops_per_cycle) | {
            k.rsplit(".", 1)[1] for k in overrides if k.startswith("matrix.flops_per_cycle.")})
        chips = cls(arrays, formats, None, None, base)
        chips._rederive(set(overrides))
        return chips

    def _rederive(self, changed: set[str]) -> None:
        a = self.arrays
        if "units" in changed and "units_physical" in a and "units_physical" not in changed:
            del a["units_physical"]  # a design with other units has its own spares (the area model's rule)
        if "hbm.stacks" in changed and "hbm.stack_sites" in a and "hbm.stack_sites" not in changed:
            a["hbm.stack_sites"] = a["hbm.stacks"].copy()  # a design with n stacks has n sites
        if "hbm.stacks" in a and changed & {"hbm.stacks", "hbm.pin_rate", "hbm.pins_per_stack", "hbm.layers",
                                            "hbm.capacity_per_layer", "hbm.capacity_per_stack"}:
            if changed & {"hbm.layers", "hbm.capacity_per_layer"} and "hbm.layers" in a:
                a["hbm.capacity_per_stack"] = a["hbm.layers"] * a["hbm.capacity_per_layer"]
            a["memory.bandwidth"] = a["hbm.stacks"] * a["hbm.pins_per_stack"] * a["hbm.pin_rate"]
            if "hbm.capacity" not in changed:
                a["memory.capacity"] = a["hbm.stacks"] * a["hbm.capacity_per_stack"]
                a.pop("hbm.capacity", None)
        for kind in ("dram", "sram"):
            if f"{kind}.bandwidth" in changed:
                a["memory.bandwidth"] = a[f"{kind}.bandwidth"]
            if f"{kind}.capacity" in changed:
                a["memory.capacity"] = a[f"{kind}.capacity"]
        # (a changed TDP leaves power.static as derived from the base chip: leakage does not follow the TDP)

    # ------------------------------------------------------------ derived, vectorized
    @property
    def total_units(self) -> np.ndarray:
        return self["dies"] * self["units"]

    def flops_per_cycle(self, fmt: str) -> np.ndarray:
        key = f"matrix.flops_per_cycle.{_canonical_format(fmt)}"
        return self.arrays[key] if key in self.arrays else np.zeros(self.n)

    def peak_flops(self, fmt: str) -> np.ndarray:
        """dies x units x FLOPs/cycle x clock (seed 000 "Dense and sparse peaks")."""
        return self.total_units * self.flops_per_cycle(fmt) * self["clock"]

    @property
    def memory_bandwidth(self) -> np.ndarray:
        return self["memory.bandwidth"]

    @property
    def memory_capacity(self) -> np.ndarray:
        return self["memory.capacity"]

    def machine_balance(self, fmt: str = "bf16") -> np.ndarray:
        return self.peak_flops(fmt) / self.memory_bandwidth

    def get(self, key: str, default: float = 0.0) -> np.ndarray:
        a = self.arrays.get(key)
        return a if a is not None else np.full(self.n, default, dtype=float)

    def take(self, index) -> "Chips":
        idx = np.atleast_1d(np.asarray(index))
        arrays = {k: v[idx] for k, v in self.arrays.items()}
        names = [self.names[i] for i in idx]
        specs = [self.specs[i] for i in idx] if self.specs else None
        return Chips(arrays, self.formats, names, specs, self.base)
