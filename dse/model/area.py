"""Area and packaging: die area, die outline, HBM shoreline, interposer (vectorized over Chips).

Seed 004 §4.1.3 ("Reticle and packaging"): compute units, memory and
interfaces share the die; one die cannot exceed the reticle (26 x 33 mm =
858 mm^2); HBM stacks line the die edges and the interposer carries dies and
stacks (Figure 4-6). The numbers come from ``dse.technology`` (area_model.yaml, processes.yaml,
memories.yaml, packaging.yaml), looked up once per distinct process node and
memory technology among the design points.

Die area (per die; the resources a chip spec gives are per die except the HBM stacks and the links, which
are per package and split evenly over the dies) is the sum of its parts, each a fitted coefficient of
``area_model.yaml`` times a quantity of the chip, scaled from the reference node (N7) by the node's published
logic density (L) or SRAM bitcell (S) (:func:`area_terms`; the same terms are the fit's features,
:mod:`dse.model.area_fit`, so the fitted model is the production model)::

    matrix    units x max_f(FLOPs/cycle_f x format_area_f) x (tensor-core | systolic figure) x L
    vector    units x vector FLOPs/cycle x lane format area x vector-lane figure x L
    control   units x per-unit figure x L               graphics  units x figure x L (area.graphics)
    registers units x register file x figure x S        local     units x (local + accumulator) x scratchpad x S
    SRAM main memory beyond the units' buffers x scratchpad x S
    L2        physical L2 (l2_physical, else l2) x cache figure x S
    memory PHYs  HBM stack sites x PHY area; DRAM bus width / interface pins x PHY area (memories.yaml, at N7:
              the analog PHY as is, its controller_fraction x L)
    I/O       off-package link GB/s (host + scale-up) x SerDes figure + die-to-die TB/s x die_to_die
    uncore    die-overhead figure x L

A format no faster than the vector lanes (FP32 GEMMs on CUDA cores, an Apple GPU's ALUs, a WSE core's FMAC)
runs on the lanes: it sizes no matrix datapath. Lower precisions share one datapath (a BF16/FP8/FP4 unit at
1 : 2 : 4 is the size of its BF16 part), so the most expensive format sizes it. The organisation
(``matrix.array``: a tensor core fed from registers, or a weight-stationary systolic array) picks the matrix
figure. No chip carries a per-chip correction: a many-small-core SRAM wafer, a systolic chip and a GPU are the
same sum. The parts ``unit_logic`` (vector + control + graphics) and ``units`` are kept for the power model
(clock tree over matrix + unit logic) and the split solver.

SRAM main memory (Groq, Cerebras) is counted beyond what the units' local
buffers already hold: a wafer-scale engine's 44 GB *is* its cores' 48 kB of
local SRAM (seed 001), counted once.

Reticle fields: a die may be stitched across several reticle fields
(``area.reticle_fields``; Cerebras WSE-3: 84 fields of ~550 mm^2). The die area
is the whole die; :attr:`PackageArea.reticle_fields` lets the reticle
constraint check the area per field.

Physical, not enabled, units set the area: a die carries spares for yield
(A100 enables 108 of 128 SMs, H100 132 of 144, MI355X 32 of 36 CUs per XCD).
A chip's ``units_physical`` gives the count; where it does not, ``units_physical = units +
floor(units x spare / (1 - spare))`` with the default spare fraction :data:`DEFAULT_SPARE_FRACTION`
(0.10: A100 15.6%, H100 8.3%, MI355X 11.1%, MI300X 5%), unless the caller passes one.

Memory PHYs: the PHY + controller area per interface (memories.yaml) is an analog PHY that keeps its area at
every node plus a controller (``controller_fraction``; A100 die shot 5.3 of ~15 mm^2 per stack) that is logic
and scales by L. HBM counts its stack sites (H100: 6 sites, 5 stacks active);
DRAM counts interfaces = ceil(bus width / interface pins), the bus width given
(``dram.bus_width``) or bandwidth / the kind's default pin rate (an RTX 4090's
384-bit GDDR6X = 12 x32 devices).

Layouts (how dies and stacks sit on the package; default from the die count):

* ``monolithic`` (1 die; H100, A100): HBM on the two long edges, the short
  edges carry PCIe / scale-up I/O.
* ``side_by_side`` (2 dies; B200, Figure 4-6): the dies abut on a long edge
  (die-to-die link), the other long edge carries I/O, HBM on the two short
  edges of each die (B200: 2 + 2 per die).
* ``base_dies`` (> 2 dies; MI300X, MI355X): compute chiplets stacked on base
  (I/O) dies that carry the HBM PHYs, the I/O and the caches the schema does not
  describe. The compute dies then hold no PHY and no I/O; the base complex's
  footprint is the compute silicon / :data:`BASE_COVERAGE` and the stacks line
  its two long edges.

Outline: a die of area A is drawn at the reticle's aspect (26 : 33) unless an
aspect ratio is given: long = sqrt(A x aspect), short = A / long.

Shoreline: stacks along an edge of length L = floor(L / w + 1/2), w the stack
footprint's edge facing the die (its shorter side): a stack counts when at
least half its width lines the edge (the rows of H100's and MI300X's stacks
overhang the die corners). This reproduces technology.md's rule of 3 stacks
per 33 mm edge and 2 per 26 mm edge for an 11 mm stack (packaging.yaml
``hbm_stacks_per_long_edge`` / ``_short_edge``, checked in the tests).

Interposer: the bounding box of the die complex and the stack rows,
die-to-stack gap and the interposer margin included (0 when the chip has no HBM).
A rectangular stack (HBM2/2E, 7.75 x 11.87 mm) turns its long side to the dies
when the row still fits along the edge, whichever bounding box is smaller.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse import technology
from dse.errors import SpecError, unknown_name
from dse.hardware.chips import over_points, same_at_every_point
from dse.model import jit, links
from dse.model.args import nan_to_num

__all__ = [
    "DEFAULT_SPARE_FRACTION",
    "BASE_COVERAGE",
    "LAYOUTS",
    "PackageArea",
    "package_area",
    "area_terms",
    "design_terms",
    "node_scales",
    "matrix_equivalent",
    "COEFFICIENTS",
    "units_physical",
    "die_outline",
    "stacks_per_edge",
    "per_point",
    "reticle_area_mm2",
    "interposer_limit_mm2",
]

DEFAULT_SPARE_FRACTION = 0.10
"""Fraction of physical compute units kept as spares (disabled) when ChipSpec gives no physical count.

A100 20/128 = 15.6%, H100 12/144 = 8.3%, MI355X 4/36 = 11.1%, MI300X 2/40 = 5% (vendor whitepapers;
published_chips.yaml): 10% is the middle of that range (est.).
"""

BASE_COVERAGE = 0.62
"""Fraction of a base-die complex covered by compute chiplets (est.).

MI300X: 8 XCDs of ~115 mm^2 on 4 IODs of ~370 mm^2 -> 920 / 1480 = 0.62
(AMD ISSCC 2024 die sizes as reported by the press; est.).
"""

BASE_DIE_PROCESS = "n6"
"""Node the base (I/O) dies are costed at: AMD's MI300X / MI355X IODs are N6 (published_chips.yaml)."""

LAYOUTS = ("monolithic", "side_by_side", "base_dies")

RETICLE_ASPECT = 33.0 / 26.0


# ------------------------------------------------------------------ technology lookups


# ``tech`` is a dse.technology.Technology (a study's overridden tables) or None for the shipped defaults.


@functools.lru_cache(maxsize=64)
def _default_process(name: str):
    return technology.process(name)


@functools.lru_cache(maxsize=64)
def _default_memory(name: str):
    return technology.memory(name)


def _process(name: str, tech=None):
    return _default_process(name) if tech is None else tech.process(name)


def _memory(name: str, tech=None):
    return _default_memory(name) if tech is None else tech.memory(name)


def _packaging(tech=None):
    if tech is not None:
        return tech.packaging

    return technology.packaging()


def reticle_area_mm2(tech=None) -> float:
    """The reticle area of the technology tables (26 x 33 = 858 mm^2, seed 004 §4.1.3)."""
    return float(_packaging(tech).reticle_area)


def interposer_limit_mm2(name: str | None = None, tech=None) -> float:
    """The largest interposer of the technology tables (default CoWoS-S: 3.3 x reticle)."""
    return float(_packaging(tech).max_interposer_area(name))


# ------------------------------------------------------------------ per-point strings


def per_point(chips, what: str, given=None) -> Sequence:
    """The process node or memory technology name of each design point.

    ``what`` is "process" or "memory". ``given`` (a name, or a sequence of N
    names) wins; otherwise the names come from ``chips.specs`` (a chip's HBM
    generation or DRAM kind; None for SRAM main memory). Chips built from a
    base spec carry no specs: pass ``given`` (the study knows its base chip).
    """
    n = len(chips)
    if given is not None:
        if isinstance(given, str):
            return _Same(given, n)
        if isinstance(given, _Same) and len(given) == n:
            return given
        given = list(given)
        if len(given) != n:
            raise SpecError(f"{what}: {len(given)} names for {n} design points")
        return given
    specs = getattr(chips, "specs", None)
    if specs:
        if what == "process":
            return [s.process for s in specs]
        if what == "memory":
            return [s.hbm.generation if s.hbm is not None else (s.dram.kind if s.dram is not None else None)
                    for s in specs]
        raise SpecError(unknown_name("per-point name", what, ("process", "memory")))
    raise SpecError(f"the {what} of these design points is not known (chips built without specs): "
                    f"pass {what}='...' (the base chip's {what})")


class _Same(Sequence):
    """N copies of one name (:func:`per_point` of a name given once), not held N times (a list of 100,000 names
    took 0.09 ms a call, issue 20): lookups per name are O(1), not O(N)."""

    def __init__(self, name, n: int):
        self.name, self._n = name, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.name] * len(range(*i.indices(self._n)))
        if not -self._n <= i < self._n:
            raise IndexError(i)
        return self.name


def _by_name(names: Sequence, fn, n: int) -> np.ndarray:
    """A float array holding fn(name) for each point, looked up once per distinct name (NaN for None); of one name,
    its value laid over the points (read-only, a stride of 0: known to be one value without reading it)."""
    if isinstance(names, _Same):
        return over_points(np.nan if names.name is None else float(fn(names.name)), n)
    out = np.full(n, np.nan)
    for name in set(names):
        if name is None:
            continue
        idx = np.fromiter((x == name for x in names), dtype=bool, count=n)
        out[idx] = fn(name)
    return out


# ------------------------------------------------------------------ pieces


def units_physical(units, spare_fraction=DEFAULT_SPARE_FRACTION):
    """Physical units per die: units + floor(units x spare / (1 - spare)) (spares for yield; module doc).

    The floor keeps single-unit designs (TPU v1's one matrix unit, Groq's four
    planes) at their count: a spare there is a whole second array, not a fraction.
    H100 132 -> 146 (144 published), A100 108 -> 120 (128), MI355X 32 -> 35 (36).
    """
    s = np.asarray(spare_fraction, dtype=float)
    if np.any((s < 0) | (s >= 1)):
        raise SpecError(f"spare fraction must be in [0, 1), got {spare_fraction!r}")
    u = np.asarray(units, dtype=float)
    return u + np.floor(u * s / (1.0 - s) + 1e-9)


def _area_model(tech=None):
    return technology.area_model() if tech is None else tech.area


def node_scales(procs, n: int, tech=None) -> tuple[np.ndarray, np.ndarray]:
    """(L, S) of each point: logic and SRAM area relative to the area model's reference node (N7).

    L = logic_density(reference) / logic_density(node), S = sram_bitcell(node) / sram_bitcell(reference)
    (processes.yaml: published standard-cell densities and high-density bitcells).
    """
    ref = _process(_area_model(tech).reference_node, tech)
    logic = _by_name(procs, lambda p: ref.logic_density / _process(p, tech).logic_density, n)
    sram = _by_name(procs, lambda p: _process(p, tech).sram_bitcell / ref.sram_bitcell, n)
    return logic, sram


def matrix_equivalent(chips, tech=None) -> np.ndarray:
    """BF16-equivalent FLOPs/cycle of one unit's matrix datapath: max over its formats of rate x format_area.

    Lower precisions share the multipliers of one datapath (a BF16/FP8/FP4 unit at 1 : 2 : 4 is the size
    of its BF16 part), so the most expensive format sizes it. A format no faster than the vector lanes
    (FP32 GEMMs on CUDA cores, an Apple GPU's ALUs, a WSE core's FMAC) runs on the lanes: no matrix area.
    A format's rate is the datapath as built (``matrix.flops_per_cycle_physical``) where the product enables
    less: GeForce runs FP16/BF16 with FP32 accumulate at half its FP16-accumulate rate (RTX 5090 512 of 1024
    FLOP/cycle per SM; the RTX PRO 6000 runs the same GB202 at 1024).
    """
    fa = _area_model(tech).format_area
    vector = chips.compact("vector.flops_per_cycle", 0.0)
    prefix = "matrix.flops_per_cycle_physical."
    physical = {k[len(prefix):] for k in getattr(chips, "arrays", {}) if k.startswith(prefix)}
    rates, areas = [np.zeros(1)], [0.0]  # (a datapath of no format: 0)
    for fmt in sorted(set(chips.formats) | physical):
        rate = chips.compact(f"matrix.flops_per_cycle.{fmt}", 0.0) if fmt in chips.formats else np.zeros(1)
        if fmt in physical:  # the datapath as built, where the product enables less (GeForce FP32 accumulate)
            rate = np.fmax(rate, nan_to_num(chips.compact(prefix + fmt, 0.0)))
        rates.append(rate)
        areas.append(fa[technology.format_class(fmt)])
    # (the formats' rates as rows, their largest per point: one pass, not one per format)
    rate = np.vstack(np.broadcast_arrays(*rates)) if len(rates) > 1 else rates[0][None, :]
    out = np.where(rate > vector, rate * np.array(areas)[:, None], 0.0).max(axis=0)
    return over_points(out, len(chips))


#: the area model's fitted coefficients (area_model.yaml ``parameters``), in the order the fit reports them
COEFFICIENTS = ("matrix_tensor_core", "matrix_systolic", "vector_lane", "unit_control", "graphics",
                "die_overhead", "register_file", "scratchpad", "cache", "serdes")


def _link_rate(chips, link: str) -> np.ndarray:
    """Bytes/s one way of a chip's ``link`` in all: lanes x lane rate is one link per peer, a bandwidth the total."""
    rate = nan_to_num(chips.compact(f"links.{link}.rate", 0.0))
    if link == "scale_up":  # a mesh or torus drives one link per peer, a ring two, a switch port one
        topology = chips.arrays.get("links.scale_up.topology")
        topology = links.topology_code(None if topology is None else chips.compact("links.scale_up.topology"),
                                       chips.compact("links.scale_up.lanes", np.nan),
                                       chips.compact("links.scale_up.bandwidth", np.nan))
        rate = rate * links.links_per_chip(topology, nan_to_num(chips.compact("links.scale_up.peers", 1.0),
                                                                   nan=1.0))
    return over_points(rate, len(chips))


def _term_inputs(chips, *, procs, mems, uphys, base, dies, tech=None) -> tuple:
    """The inputs of :func:`die_terms` (per point: arrays of N, or numbers), in its order."""
    n = len(chips)
    logic, sram = node_scales(procs, n, tech)
    l2 = chips.get("l2_physical", np.nan)

    def memory(fn):
        return _by_name(mems, lambda m: fn(_memory(m, tech)), n)

    links_out = (_link_rate(chips, "host"), _link_rate(chips, "scale_up"), dies)
    if all(same_at_every_point(x) for x in links_out):  # (one value: laid over the points, not computed n times)
        off_package = over_points((links_out[0][:1] + links_out[1][:1]) / links_out[2][:1], n)
    else:
        off_package = (links_out[0] + links_out[1]) / links_out[2]

    return (uphys, matrix_equivalent(chips, tech), logic, sram, chips.get("matrix.systolic", 0.0),
            chips.get("vector.flops_per_cycle", 0.0), chips.get("tech.vector_lane_area", 1.0),
            chips.get("area.graphics", 0.0), chips.get("local_buffer"), chips.get("accumulator"),
            chips.get("register_file"), chips.get("memory.kind", 0.0), chips.get("sram.capacity", 0.0), dies,
            l2, chips.get("l2"), off_package, base,
            memory(lambda m: m.phy_area), memory(lambda m: m.controller_fraction or 0.0), memory(lambda m: m.pins),
            memory(lambda m: m.pin_rate),
            chips.get("hbm.stacks", 0.0), chips.get("hbm.stack_sites", np.nan), chips.get("dram.bus_width", np.nan),
            chips.get("memory.bandwidth", 0.0), chips.get("links.die_to_die.rate", 0.0),
            _area_model(tech).die_to_die)


#: :func:`die_terms`' quantities: (part, coefficient) of each fitted term, in its order
TERMS = (("matrix", "matrix_tensor_core"), ("matrix", "matrix_systolic"), ("vector", "vector_lane"),
         ("control", "unit_control"), ("graphics", "graphics"), ("register_file", "register_file"),
         ("local", "scratchpad"), ("sram_memory", "scratchpad"), ("l2", "cache"), ("io", "serdes"),
         ("uncore", "die_overhead"))


@jit.rule
def die_terms(uphys, mat_eq, logic, sram, systolic, vector_fpc, lane_area, graphics, local_buffer, accumulator,
              register_file, kind, sram_capacity, dies, l2_physical, l2, off_package, base, phy_area, controller,
              pins, pin_rate, hbm_stacks, stack_sites, bus_width, memory_bandwidth, d2d_rate, d2d_figure):
    """One die's fitted terms' quantities (per die, the order of :data:`TERMS`; quantities already scaled by the
    node: L ``logic``, S ``sram``), then the memory PHYs' and the die-to-die PHY's mm^2 and the HBM stacks
    (numbers or arrays; the inputs as :func:`_term_inputs` gives them, raw chip values where a NaN means absent)."""
    mat = uphys * mat_eq * logic
    is_systolic = systolic > 0.5
    lanes = vector_fpc * jit.nan_to_num(lane_area, 1.0)
    # SRAM main memory the units' local buffers do not already hold (a WSE's 44 GB *is* its cores' 48 kB)
    sram_main = jit.where(kind == 2.0, jit.maximum(jit.nan_to_num(sram_capacity, 0.0) / dies - uphys * local_buffer,
                                                   0.0), 0.0)
    l2 = jit.where(np.isfinite(l2_physical), l2_physical, l2)
    on_base = base > 0.5
    # ---- memory PHYs: HBM stack sites; DRAM interfaces from the bus width (base dies carry them: 0 here)
    # PHY + controller per interface (memories.yaml, at N7): the analog PHY keeps its area at every node, the
    # controller (controller_fraction of it) is logic and scales by L (A100 die shot: 9.7 PHY + 5.3 controller)
    ctrl = jit.nan_to_num(controller, 0.0)
    phy = jit.nan_to_num(phy_area, 0.0) * ((1.0 - ctrl) + ctrl * logic)
    is_hbm = kind == 0.0
    stacks = jit.nan_to_num(jit.where(is_hbm, jit.fmax(hbm_stacks, stack_sites), 0.0), 0.0)
    bus = jit.where(np.isfinite(bus_width), bus_width, memory_bandwidth / pin_rate)  # pin_rate in B/s
    dram_ifaces = jit.where((kind == 1.0) & (pins > 0), np.ceil(bus / pins - 1e-9), 0.0)
    interfaces = jit.where(is_hbm, stacks, jit.nan_to_num(dram_ifaces, 0.0))
    phys_per_die = jit.where(on_base, 0.0, jit.maximum(np.ceil(interfaces / dies - 1e-9), 0.0))
    return (jit.where(is_systolic, 0.0, mat), jit.where(is_systolic, mat, 0.0), uphys * lanes * logic, uphys * logic,
            jit.where(jit.nan_to_num(graphics, 0.0) > 0.5, uphys * logic, 0.0), uphys * register_file * sram,
            uphys * (local_buffer + accumulator) * sram, sram_main * sram, l2 * sram,
            jit.where(on_base, 0.0, off_package / 1e9), logic,
            phys_per_die * phy, jit.nan_to_num(d2d_rate, 0.0) / 1e12 * d2d_figure, stacks)


def area_terms(chips, *, procs, mems, uphys, base, dies, tech=None) -> tuple[list, dict[str, np.ndarray]]:
    """The die's parts as fitted terms and fixed figures (per die, arrays of N).

    Returns ``(terms, fixed)``: ``terms`` is a list of ``(part, coefficient, quantity)``, the part's area
    being ``coefficient value x quantity`` (quantity already scaled by the node: L for logic, S for SRAM);
    ``fixed`` maps the parts the fit does not touch (memory PHYs, die-to-die PHY) to mm^2. The fit
    (:mod:`dse.model.area_fit`) and :func:`package_area` both build the die from these (:func:`die_terms`), so
    the fitted model and the production model are one.
    """
    n = len(chips)
    with jit.quiet():
        q = [np.broadcast_to(np.asarray(x, dtype=float), (n,))
             for x in die_terms(*_term_inputs(chips, procs=procs, mems=mems, uphys=uphys, base=base, dies=dies,
                                              tech=tech))]
    terms = [(part, name, x) for (part, name), x in zip(TERMS, q)]
    return terms, {"memory_phy": q[11], "die_to_die": q[12], "hbm_stacks": q[13]}


def reticle_fields(chips) -> np.ndarray:
    """Reticle fields each die is stitched across (``area.reticle_fields``; 1 where a chip does not say)."""
    f = chips.compact("area.reticle_fields", 1.0).astype(float)
    f = np.where(np.isfinite(f), f, 1.0)
    if np.any(f < 1):
        raise SpecError("area.reticle_fields must be >= 1 (a die covers at least one reticle field)")
    return over_points(f, len(chips))


def die_outline(area_mm2, aspect=RETICLE_ASPECT):
    """(long, short) edges in mm of a rectangle of ``area_mm2`` with long/short = ``aspect`` (default 33/26)."""
    a = np.asarray(area_mm2, dtype=float)
    with jit.quiet():
        return outline(a, _checked_aspect(aspect))


def _checked_aspect(aspect) -> np.ndarray:
    """``aspect`` as floats, a SpecError where one is below 1 (an aspect ratio is long / short)."""
    r = np.asarray(aspect, dtype=float)
    if np.any(r < 1):
        raise SpecError(f"aspect ratio is long/short and must be >= 1, got {aspect!r}")
    return r


@jit.rule
def outline(area, aspect):
    """:func:`die_outline` of numbers (no check): long = sqrt(A x aspect), short = A / long (0 for no area)."""
    long = jit.sqrt(area * aspect)
    return long, jit.where(long > 0, area / long, 0.0)


def stacks_per_edge(edge_mm, stack_edge_mm):
    """HBM stacks along one edge: floor(L / w + 1/2) (a stack counts when half its width lines the edge)."""
    with jit.quiet():
        return edge_stacks(np.asarray(edge_mm, dtype=float), np.asarray(stack_edge_mm, dtype=float))


@jit.rule
def edge_stacks(edge, stack_edge):
    """:func:`stacks_per_edge` of numbers: floor(L / w + 1/2), 0 where w <= 0."""
    n = np.floor(jit.where(stack_edge > 0, edge / jit.where(stack_edge > 0, stack_edge, 1.0), 0.0) + 0.5 + 1e-9)
    return jit.maximum(n, 0.0)


# ------------------------------------------------------------------ the package


@dataclass(frozen=True)
class PackageArea:
    """Area and packaging of N design points (arrays of N; mm and mm^2)."""

    die_area_mm2: np.ndarray            # one compute die (all its reticle fields)
    dies: np.ndarray
    total_silicon_area_mm2: np.ndarray  # compute dies + base dies
    base_area_mm2: np.ndarray           # base-die complex (0 unless layout base_dies)
    units_physical: np.ndarray
    die_long_mm: np.ndarray
    die_short_mm: np.ndarray
    hbm_stacks: np.ndarray              # stacks placed (stack sites, active or not); 0 without HBM
    hbm_shoreline_stacks: np.ndarray    # the most stacks the usable edges hold
    interposer_area_mm2: np.ndarray     # 0 without HBM
    layout: np.ndarray                  # (N,) str: monolithic, side_by_side or base_dies
    parts: Mapping[str, np.ndarray] = field(default_factory=dict)  # per-die area by part
    reticle_fields: np.ndarray | None = None  # fields each die is stitched across (1: an ordinary die)
    # points alike computed once: (their parts at the first point of each set, (k,) each; each point's set)
    alike: tuple[dict[str, np.ndarray], np.ndarray] | None = None

    def __post_init__(self):
        if self.reticle_fields is None:
            object.__setattr__(self, "reticle_fields", np.ones_like(self.die_area_mm2))

    def columns(self) -> dict[str, np.ndarray]:
        """The per-point columns the study layer adds to the metrics table."""
        return {
            "die_area_mm2": self.die_area_mm2,
            "total_silicon_area_mm2": self.total_silicon_area_mm2,
            "interposer_area_mm2": self.interposer_area_mm2,
            "hbm_shoreline_stacks": self.hbm_shoreline_stacks,
            "hbm_stacks": self.hbm_stacks,
            "reticle_fields": self.reticle_fields,
        }


def _layouts(dies: np.ndarray, layout) -> list[str]:
    n = len(dies)
    if layout is not None:
        names = [layout] * n if isinstance(layout, str) else list(layout)
        if len(names) != n:
            raise SpecError(f"layout: {len(names)} names for {n} design points")
        bad = [x for x in names if x not in LAYOUTS]
        if bad:
            raise SpecError(unknown_name("package layout", bad[0], LAYOUTS))
        return names
    return list(np.where(dies > 2, "base_dies", np.where(dies == 2, "side_by_side", "monolithic")))


def _setup(chips, process, memory, spare_fraction, units_physical_, layout):
    """Per-point node and memory names, die counts, layouts and physical units (shared by package_area and the fit)."""
    n = len(chips)
    procs = per_point(chips, "process", process)
    mems = per_point(chips, "memory", memory) if (memory is not None or chips.specs) else _Same(None, n)
    kind = chips.get("memory.kind", 0.0)
    is_hbm = kind == 0.0
    if memory is None and not chips.specs and np.any(is_hbm & (chips.get("hbm.stacks", 0.0) > 0)):
        raise SpecError("the HBM generation of these design points is not known (chips built without specs): "
                        "pass memory='hbm3' (the base chip's hbm.generation)")
    dies = chips.get("dies", 1.0)
    if layout is None:  # by die count, vectorized (_layouts names them), once where every point has the same count
        d = dies[:1] if same_at_every_point(dies) else dies
        base, side = d > 2, d == 2
        layouts = np.array(LAYOUTS).take(base * 2 + side)  # (LAYOUTS' order: 0 monolithic, 1 side, 2 base)
        if d.shape[0] != n:
            base, side, layouts = (np.broadcast_to(x, (n,)) for x in (base, side, layouts))
    else:
        layouts = np.array(_layouts(dies, layout))
        base, side = layouts == "base_dies", layouts == "side_by_side"

    # ---- units
    if units_physical_ is not None:
        uphys = np.broadcast_to(np.asarray(units_physical_, dtype=float), (n,)).copy()
    elif "units_physical" in chips:  # given per chip; NaN where a chip does not say: the spare rule
        uphys = chips["units_physical"].copy()
        missing = np.isnan(uphys)
        uphys[missing] = units_physical(chips["units"][missing], spare_fraction)
    else:
        uphys = units_physical(chips["units"], spare_fraction)
    if np.any(uphys < chips["units"]):
        raise SpecError("units_physical must be >= units (the enabled units)")
    return procs, mems, dies, base, side, layouts, uphys


def design_terms(chips, *, process=None, memory=None, spare_fraction=DEFAULT_SPARE_FRACTION, units_physical_=None,
                 layout=None, tech=None):
    """:func:`area_terms` of design points set up as :func:`package_area` does (the area fit's features)."""
    procs, mems, dies, base, _, _, uphys = _setup(chips, process, memory, spare_fraction, units_physical_, layout)
    return area_terms(chips, procs=procs, mems=mems, uphys=uphys, base=base, dies=dies, tech=tech)


def package_area(chips, *, process=None, memory=None, spare_fraction=DEFAULT_SPARE_FRACTION,
                 units_physical_=None, aspect=RETICLE_ASPECT, layout=None, tech=None) -> PackageArea:
    """Die area, outline, HBM shoreline and interposer of each design point (see the module doc).

    ``process`` / ``memory``: node and memory-technology names when ``chips``
    has no specs (a name or one per point). ``units_physical_`` overrides the
    physical units per die (else the chips' ``units_physical`` array, else the
    spare-fraction rule). ``layout`` overrides the default layout by die count.
    ``tech``: a study's :class:`dse.technology.Technology` (default: the shipped tables).
    """
    r, inverse, (dies, layouts, uphys) = _package_results(chips, process, memory, spare_fraction, units_physical_,
                                                          aspect, layout, tech)
    sets = None
    if inverse is not None:
        sets = ({k: r[k] for k in PARTS}, inverse)  # (the parts laid over the points where read: _LaidOver)
        r = {name: (v if name in PARTS else jit.laid_over(v, inverse)) for name, v in r.items()}
    return PackageArea(
        die_area_mm2=r["die"],
        dies=dies if not dies.flags.writeable else dies.copy(),  # (a read-only shared figure: no copy needed)
        total_silicon_area_mm2=r["total_silicon"],
        base_area_mm2=r["base_area"],
        units_physical=uphys,
        die_long_mm=r["long"],
        die_short_mm=r["short"],
        hbm_stacks=r["hbm_stacks"],
        hbm_shoreline_stacks=r["shoreline"],
        interposer_area_mm2=r["interposer"],
        layout=layouts,
        parts=_LaidOver(*sets) if sets is not None else {k: r[k] for k in PARTS},
        reticle_fields=reticle_fields(chips),
        alike=sets,
    )


def _package_results(chips, process, memory, spare_fraction, units_physical_, aspect, layout, tech,
                     sums_only: bool = False):
    """:data:`PACKAGE_RESULTS` of the points (name -> array) and ``inverse``: None, one value per point; else the
    results of each set of alike points (jit.distinct's first points) and each point's set; with the points' dies,
    layouts and physical units (:func:`_setup`). ``sums_only``: :data:`PART_SUMS` alone (:func:`_part_sums_kernel`)."""
    kernel, results = (_part_sums_kernel, PART_SUMS) if sums_only else (_package_kernel, PACKAGE_RESULTS)
    n = len(chips)
    procs, mems, dies, base, side, layouts, uphys = _setup(chips, process, memory, spare_fraction,
                                                           units_physical_, layout)
    pkg = _packaging(tech)
    aspect = _checked_aspect(aspect)
    inputs = _term_inputs(chips, procs=procs, mems=mems, uphys=uphys, base=base, dies=dies, tech=tech)
    coef = _area_model(tech).parameters

    def face(m, pick):
        fp = _memory(m, tech).footprint
        return np.nan if fp is None else pick(fp.width, fp.height)

    def points(x):
        return jit.points(x, n)

    given = (side, chips.get("memory_side_cache.capacity", 0.0), _by_name(mems, lambda m: face(m, min), n),
             _by_name(mems, lambda m: face(m, max), n), aspect)
    args = [tuple(points(x) for x in inputs), *(points(x) for x in given)]
    fixed = (np.array([getattr(coef, name).value for _, name in TERMS]), float(pkg.die_to_stack_gap),
             float(pkg.interposer_margin), BASE_COVERAGE)
    setup = (dies, layouts, uphys)

    def rows(s, e):  # (the kernel's results of points s..e, one row each)
        return kernel(tuple(x[s:e] for x in args[0]), *(x[s:e] for x in args[1:]), *fixed)

    # the points whose inputs are alike (jit.distinct over the inputs some point changes: a sweep of the clock, the
    # power or the memory leaves the package as it is) computed once
    alike = None
    if n > 1:
        vary = [x for x, g in zip((*args[0], *args[1:]), (*inputs, *given))
                if not (np.ndim(g) == 0 or same_at_every_point(np.asarray(g)))]
        alike = jit.sets_alike(vary, n)
    if alike is not None:  # (at least half the points repeat)
        first, inverse = alike

        def at_first(x):  # (read-only, as the points' are: a writable array is a compiled signature of its own)
            return jit.points(x[first], first.size)
        once = kernel(tuple(at_first(x) for x in args[0]), *(at_first(x) for x in args[1:]), *fixed)
        return {name: once[k, :first.size] for k, name in enumerate(results)}, inverse, setup
    if n <= _CHUNK_POINTS:
        out = rows(0, n)
        return {name: out[k, :n] for k, name in enumerate(results)}, None, setup
    # (in chunks: a (results, points) array over 32 MiB would come from fresh pages at every call)
    chunks = [(rows(s, min(n, s + _CHUNK_POINTS)), min(n, s + _CHUNK_POINTS) - s) for s in range(0, n, _CHUNK_POINTS)]
    return {name: np.concatenate([out[k, :m] for out, m in chunks]) for k, name in enumerate(results)}, None, \
        setup


class _LaidOver(Mapping):
    """:data:`PARTS` of points alike (:attr:`PackageArea.alike`): each part laid over the points when first read
    (the evaluator's power model reads sums of parts, summed before they are laid over: :func:`part_sums`)."""

    def __init__(self, once: dict, inverse: np.ndarray):
        self._once, self._inverse, self._laid = once, inverse, {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._laid:
            self._laid[name] = jit.laid_over(self._once[name], self._inverse)
        return self._laid[name]

    def __iter__(self):
        return iter(self._once)

    def __len__(self) -> int:
        return len(self._once)


#: the parts of a die that leak as logic and as SRAM (dse.model.power.leakage_power), and those the clock tree
#: drives (the matrix units and the units' other logic: dse.model.power.clock_power)
LOGIC_PARTS = ("matrix", "unit_logic", "io", "uncore", "memory_phy")
SRAM_PARTS = ("local", "register_file", "l2", "sram_memory", "msc")
CLOCKED_PARTS = ("matrix", "unit_logic")


def part_sums(package: PackageArea) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """mm^2 per die of logic, SRAM and clocked logic (:data:`LOGIC_PARTS`, :data:`SRAM_PARTS`,
    :data:`CLOCKED_PARTS`, each summed in that order) of each point; for points alike, summed once per set and
    laid over the points."""
    *sums, inverse = part_sets(package)
    return tuple(sums) if inverse is None else tuple(jit.laid_over(x, inverse) for x in sums)


def part_sets(package: PackageArea) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`part_sums` as computed: (logic, SRAM, clocked logic, inverse): ``inverse`` None, one sum per point;
    else one per set of alike points (:attr:`PackageArea.alike`) and each point's set, not laid over."""
    if package.alike is None:
        return (*_part_sums(package.parts), None)
    return (*_part_sums(package.alike[0]), package.alike[1])


def part_sets_for(chips, tech=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`part_sets` of :func:`package_area_for`'s package, its sums of parts alone (:func:`_part_sums_kernel`: the
    evaluator's power model reads nothing else of it; 100,000 points of continuous L2 and local buffers, no two
    alike: 5.2 ms for the package's kernel, 2.0 for the sums'; a GEMM of them ~25.6 -> ~22.5 ms) (issue 20).

    Points alike in the figures the package reads (:data:`_PACKAGE_READS`: those a call was seen to read) share a
    package: it is computed on the first point of each set alone (a sweep of the clock, the power or the memory
    bandwidth leaves it as it is), not on every point before its sets are found; the sets' call checks that it read
    nothing else (else, and on the first call, the package of every point, the figures it reads noted)."""
    process, memory = process_and_memory(chips)
    n = len(chips)
    if n > 1 and _PACKAGE_READS and not chips.specs:  # (points of specs: their own node and memory, by name)
        alike = jit.sets_alike([a for k, a in chips.arrays.items() if k in _PACKAGE_READS
                                and not same_at_every_point(a)], n)
        if alike is not None:
            first, inverse = alike
            firsts = chips.take(first)
            firsts.arrays = arrays = _Reads(firsts.arrays)
            r, again, _ = _package_results(firsts, process, memory, DEFAULT_SPARE_FRACTION, None, RETICLE_ASPECT,
                                           None, tech, sums_only=True)
            if arrays.read <= _PACKAGE_READS:
                return (*(r[k] for k in PART_SUMS), inverse if again is None else again[inverse])
    learn = n > 1 or not _PACKAGE_READS  # (one point: no sets to find, nothing to note once something is)
    reading = chips
    if learn:
        reading = copy.copy(chips)
        reading.arrays = _Reads(chips.arrays)
    r, inverse, _ = _package_results(reading, process, memory, DEFAULT_SPARE_FRACTION, None, RETICLE_ASPECT, None,
                                     tech, sums_only=True)
    if learn:
        _PACKAGE_READS.update(reading.arrays.read)
    return (*(r[k] for k in PART_SUMS), inverse)


#: the chip's figures (:class:`dse.hardware.chips.Chips` names) :func:`part_sets_for` has seen the package read
_PACKAGE_READS: set[str] = set()


class _Reads(dict):
    """A chip's arrays that note the names read: looked up or asked for, or all of them where their values are
    iterated over (the names alone, the same at every point, are not read)."""

    def __init__(self, arrays):
        super().__init__(arrays)
        self.read = set()

    def __getitem__(self, key):
        self.read.add(key)
        return dict.__getitem__(self, key)

    def get(self, key, default=None):
        self.read.add(key)
        return dict.get(self, key, default)

    def __contains__(self, key):
        self.read.add(key)
        return dict.__contains__(self, key)

    def values(self):
        self.read.update(dict.keys(self))
        return dict.values(self)

    def items(self):
        self.read.update(dict.keys(self))
        return dict.items(self)


def _part_sums(parts: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = tuple(parts[name] for name in PARTS)
    return tuple(parts_total(p, at) for at in _PART_SUMS_AT)


@jit.rule(loops=True)
def parts_total(p, at):
    """The sum of a die's parts ``p`` (:data:`PARTS`' order) at the indices ``at``, added in that order."""
    x = p[at[0]]
    for k in range(1, len(at)):
        x = x + p[at[k]]
    return x


#: points per call of :func:`_package_kernel`: its (22 results x points) array stays under glibc's largest mmap
#: threshold (32 MiB, dse.model.evaluator._MALLOC_SETTINGS), so that it comes from the kept heap, not from fresh
#: pages (a million points in one call: 0.7 M page faults, 1.3 s of system time per call)
_CHUNK_POINTS = 1 << 17

#: the per-die parts of :attr:`PackageArea.parts` (mm^2), in the order :func:`die_parts` returns them
PARTS = ("matrix", "vector", "control", "graphics", "register_file", "local", "sram_memory", "l2", "io", "uncore",
         "memory_phy", "unit_logic", "units", "msc")
#: :func:`_package_kernel`'s results, one row each
PACKAGE_RESULTS = PARTS + ("die", "hbm_stacks", "long", "short", "base_area", "shoreline", "interposer",
                           "total_silicon")

#: the power model's sums of a die's parts (:func:`part_sums`): logic, SRAM, clocked logic; and the indices in
#: :data:`PARTS` of the parts each adds, in order
PART_SUMS = ("logic", "sram", "clocked")
_PART_SUMS_AT = tuple(tuple(PARTS.index(name) for name in names) for names in (LOGIC_PARTS, SRAM_PARTS,
                                                                                   CLOCKED_PARTS))


@jit.rule
def die_parts(q, coef, memory_phy, d2d, msc_capacity, sram, dies, base):
    """A die's parts in mm^2 (:data:`PARTS`), its area, and the memory-side cache's mm^2 per package, from
    :func:`die_terms`' quantities ``q`` (a tuple) and the area model's coefficient of each (``coef``, the order
    of :data:`TERMS`). A memory-side cache (memory_side_cache.capacity, per package) is SRAM arrays at the
    scratchpad figure, on the base dies of a chiplet package (where AMD's Infinity Cache sits), else shared
    evenly by the compute dies (``msc``: per die, as every part; the power model's SRAM leakage counts it)."""
    matrix = (0.0 + coef[0] * q[0]) + coef[1] * q[1]
    vector, control, graphics = 0.0 + coef[2] * q[2], 0.0 + coef[3] * q[3], 0.0 + coef[4] * q[4]
    register_file, local, sram_memory = 0.0 + coef[5] * q[5], 0.0 + coef[6] * q[6], 0.0 + coef[7] * q[7]
    l2, io, uncore = 0.0 + coef[8] * q[8], (0.0 + coef[9] * q[9]) + d2d, 0.0 + coef[10] * q[10]
    msc = jit.nan_to_num(msc_capacity, 0.0) * coef[6] * sram
    unit_logic = vector + control + graphics
    units = matrix + unit_logic + register_file + local
    die = units + l2 + memory_phy + io + uncore + sram_memory
    die = die + jit.where(base > 0.5, 0.0, msc / dies)
    return (matrix, vector, control, graphics, register_file, local, sram_memory, l2, io, uncore, memory_phy,
            unit_logic, units, msc / dies, die, msc)


@jit.rule
def package_outline(die, msc, dies, base, side, stacks, aspect, w_face, depth, gap, margin, coverage):
    """(long, short) of a die, the base complex's area, the HBM shoreline (stacks), the interposer's area and the
    silicon in all (mm, mm^2; numbers or arrays; the module doc). ``w_face`` / ``depth``: a stack's edge facing
    the die and its depth; ``gap`` / ``margin`` the die-to-stack gap and the interposer margin; ``coverage``
    :data:`BASE_COVERAGE`; ``base`` / ``side``: the layout is base_dies / side_by_side."""
    on_base, beside = base > 0.5, side > 0.5
    long, short = outline(die, aspect)
    # ---- base complex (chiplets on base dies): the footprint the compute dies need, or more where the base must
    # hold a memory-side cache larger than that
    base_area = jit.where(on_base, jit.maximum(dies * die / coverage, msc), 0.0)
    b_long, b_short = outline(base_area, aspect)
    # ---- shoreline
    shore = jit.nan_to_num(jit.where(on_base, 2.0 * edge_stacks(b_long, w_face),
                                     jit.where(beside, dies * 2.0 * edge_stacks(short, w_face),
                                               2.0 * edge_stacks(long, w_face))), 0.0)
    # ---- interposer: bounding box of the die complex and the two rows of stacks
    per_row = np.ceil(stacks / 2.0 - 1e-9)
    row_len = per_row * w_face
    # complex edge the rows run along, and the complex depth across them
    along = jit.where(on_base, b_long, jit.where(beside, dies * short, long))
    across = jit.where(on_base, b_short, jit.where(beside, long, short))
    width = jit.maximum(along, row_len) + 2.0 * margin
    height = across + 2.0 * (gap + depth) + 2.0 * margin
    # a row may turn its stacks' long side to the dies when the row still fits along the edge (less depth)
    turned_fits = per_row * depth <= along + 1e-9
    height_turned = across + 2.0 * (gap + w_face) + 2.0 * margin
    turned = jit.maximum(along, per_row * depth) + 2.0 * margin
    area_turned = jit.where(turned_fits, turned * height_turned, np.inf)
    interposer = jit.where(stacks > 0, jit.nan_to_num(jit.minimum(width * height, area_turned), 0.0), 0.0)
    return long, short, base_area, shore, interposer, dies * die + base_area


@jit.rule
def _die_of(t, i, msc_capacity, coef):
    """Point i's :func:`die_terms` and :func:`die_parts` from the kernels' inputs (``t``: :func:`_term_inputs`' arrays,
    in its order)."""
    q = die_terms(t[0][i], t[1][i], t[2][i], t[3][i], t[4][i], t[5][i], t[6][i], t[7][i], t[8][i], t[9][i], t[10][i],
                  t[11][i], t[12][i], t[13][i], t[14][i], t[15][i], t[16][i], t[17][i], t[18][i], t[19][i], t[20][i],
                  t[21][i], t[22][i], t[23][i], t[24][i], t[25][i], t[26][i], t[27][i])
    return q, die_parts(q, coef, q[11], q[12], msc_capacity[i], t[3][i], t[13][i], t[17][i])


@jit.kernel
def _package_kernel(t, side, msc_capacity, w_face, depth, aspect, coef, gap, margin, coverage):
    """:data:`PACKAGE_RESULTS` of every point, one row each: :func:`die_terms` of the inputs ``t`` (a tuple of
    arrays, :func:`_term_inputs`' order), :func:`die_parts`, :func:`package_outline`. (Its inputs every point shares
    as numbers, jit.of_op, took 5.2 -> 4.3 ms for 100,000 points of continuous L2 and local buffers, but compiled a
    signature per pattern of shared and varying figures: 43 in the test suite; not kept, issue 20.)"""
    n = side.size
    out = jit.staggered(len(PACKAGE_RESULTS), n)
    for i in range(n):
        q, p = _die_of(t, i, msc_capacity, coef)
        g = package_outline(p[14], p[15], t[13][i], t[17][i], side[i], q[13], aspect[i],
                            w_face[i], depth[i], gap, margin, coverage)
        out[0, i], out[1, i], out[2, i], out[3, i], out[4, i], out[5, i], out[6, i] = p[0], p[1], p[2], p[3], p[4], p[5], p[6]
        out[7, i], out[8, i], out[9, i], out[10, i], out[11, i], out[12, i], out[13, i] = p[7], p[8], p[9], p[10], p[11], p[12], p[13]
        out[14, i], out[15, i] = p[14], q[13]
        out[16, i], out[17, i], out[18, i], out[19, i], out[20, i], out[21, i] = g[0], g[1], g[2], g[3], g[4], g[5]
    return out


@jit.kernel
def _part_sums_kernel(t, side, msc_capacity, w_face, depth, aspect, coef, gap, margin, coverage):
    """:func:`_package_kernel`'s die parts summed as :func:`part_sums` sums them (:data:`PART_SUMS`, one row each),
    nothing else: the power model's figures without the outline, the shoreline and the interposer (a loop storing
    22 results ran one point at a time) (issue 20)."""
    n = side.size
    out = jit.staggered(len(PART_SUMS), n)
    for i in range(n):
        q, p = _die_of(t, i, msc_capacity, coef)
        out[0, i] = parts_total(p, _PART_SUMS_AT[0])
        out[1, i] = parts_total(p, _PART_SUMS_AT[1])
        out[2, i] = parts_total(p, _PART_SUMS_AT[2])
    return out


def process_and_memory(chips):
    """The node and main-memory technology of the points: (None, None) where each point's spec says (from_specs),
    else the base chip's (from_base)."""
    base = getattr(chips, "base", None)
    if chips.specs or base is None:
        return None, None
    mem = base.hbm.generation if base.hbm else (base.dram.kind if base.dram else None)
    return base.process, mem


def package_area_for(chips, tech=None) -> PackageArea:
    """:func:`package_area` of the points with their own node and memory technology (:func:`process_and_memory`)."""
    process, memory = process_and_memory(chips)
    return package_area(chips, process=process, memory=memory, tech=tech)


def base_die_count(base_area_mm2, tech=None) -> np.ndarray:
    """Base dies under a chiplet complex: ceil(area / half a reticle) (MI300X: 4 IODs, est.)."""
    a = np.asarray(base_area_mm2, dtype=float)
    return np.where(a > 0, np.ceil(a / (0.5 * reticle_area_mm2(tech)) - 1e-9), 0.0)
