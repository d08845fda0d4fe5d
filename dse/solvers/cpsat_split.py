"""Exact resource split of one die (OR-Tools CP-SAT), and the grid that checks it.

The question (seed 004 §4.1.3, §4.8.1): for one die of a fixed process and memory technology, how many
compute units, how much local buffer per unit, how much L2, how many HBM stacks and which clock minimize a
workload mix's time, within the reticle, the HBM shoreline, the TDP and the memory capacity?

Decisions (each a finite set, from a :class:`~dse.space.DesignSpace` over the chip's dotted names;
a name the space leaves out stays at the base chip's value):

    units          u   compute units on the die (IntParam or ChoiceParam)
    local_buffer   b   bytes per unit (a set)
    l2             l   bytes (a set)
    hbm.stacks     s   stacks, s >= 1
    clock          f   Hz (a set)

Time of the mix (a roofline per operator, seed 004 §4.8.1; the tile-level detail -- wave quantization,
the clock throttling of one tiling -- belongs to :mod:`dse.solvers.cpsat_tiles`):

    T = sum over workloads w (weight a_w) of sum over operators o (count c_o) of t_o
    t_o = max( K_o / (u f),  B_o(b, l) / (s R_stack),  B_o(b, l) / cap_Little )
    K_o = max(padded FLOPs / (FLOP/cycle x compute efficiency), vector cycles)   (unit-cycles; evaluator,
          at the peak clock: the evaluator's per-operator power throttle is replaced by the tdp limit)
    B_o(b, l) = the evaluator's off-chip bytes for o with the default tiles of a local buffer b and an L2 l
                (re-reads of operands that do not fit L2); it does not depend on u, s or f

Limits (each linear in the decisions for a fixed process; the constants come from dse.model.area and
dse.technology, probed once, so the model follows those modules):

    reticle        die(u, b, l, s) = uphys(u) A_unit(b) + l A_cache + s A_phy + A_fixed <= reticle
                   uphys(u) = the area model's physical units (spares for yield) for u enabled units
    hbm_shoreline  s <= 2 stacks_per_edge(sqrt(die x aspect))  <=>  die >= A_shore(s)  (a table over s)
    tdp            P_static + u P_unit(f) + s P_stack <= TDP     P_unit(f) = FLOP/cycle e_FLOP f (f / f0)^2
                   (voltage scales with clock, P ~ f^3; ~ f at fixed voltage), P_stack = R_stack e_byte
    fits_memory    s C_stack >= resident bytes (the largest of the mix)

Formulation (CP-SAT; data -> model -> variables -> constraints -> objective -> solve -> extract): the clock
and the (b, l) pair are one-hot booleans; the products u x [f] and uphys x [b] are integer variables
pinned by enforcement literals (``only_enforce_if``); the 1 / (u f) and 1 / s of the roofline become
products kept on the left, ``t_o x u >= sum_f [f] ceil(K_o / (f q))`` and ``t_o x s >= sum_bl [b,l]
ceil(B_o / (R q))`` (``add_multiplication_equality``), exact up to the time unit q (2^-30 of the mix's
lower bound); workload weights x counts become integers at 2^-30 (or as fine as int64 allows); areas in
1e-6 mm^2, power in mW, all through :func:`~dse.solvers.cpsat_tiles.to_int`.
Each limit's constraints carry one enforcement literal named after the constraint module; the solve
assumes them all, so an infeasible space comes back with CP-SAT's core of limits that conflict, named in
the InfeasibleError. 1 worker, a time limit; OPTIMAL and FEASIBLE accepted.

:func:`split_grid` enumerates every combination with numpy over the same data, with the die area, the
shoreline and the constraint values from dse.model.area.package_area and the ``constraints/`` modules
themselves: it is the test oracle.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from dse import technology
from dse.errors import InfeasibleError, SolverError, SpecError, unknown_name
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model import area as area_model
from dse.model.evaluator import _format_rate, evaluate_workload, op_table
from dse.solvers.cpsat_tiles import status_name, to_int
from dse.space import ChoiceParam, DesignSpace, IntParam
from dse.workload import Workload

__all__ = ["SPLIT_PARAMS", "SplitData", "SplitChoice", "split_data", "solve_split", "split_grid", "CONSTRAINTS"]

#: The decisions, by the chip's dotted names.
SPLIT_PARAMS = ("units", "local_buffer", "l2", "hbm.stacks", "clock")
#: The limits, by the names of their constraint modules (constraints/).
CONSTRAINTS = ("reticle", "hbm_shoreline", "tdp", "fits_memory")
TIME_BITS = 30      # the time unit is the mix's lower-bound time / 2^30
AREA_UNIT = 1e-6    # mm^2
POWER_UNIT = 1e-3   # W


# ------------------------------------------------------------------ data


@dataclass(frozen=True)
class SplitData:
    """Every constant of the split problem (SI units; arrays over each decision's values)."""

    base: ChipSpec
    process: str
    memory: str
    units: np.ndarray            # (U,) enabled units per die
    buffers: np.ndarray          # (B,) bytes per unit
    l2s: np.ndarray              # (L,) bytes
    stacks: np.ndarray           # (S,)
    clocks: np.ndarray           # (F,) Hz
    op_names: tuple[str, ...]    # "workload/op"
    weight: np.ndarray           # (O,) workload weight x count
    cycles: np.ndarray           # (O,) K_o: unit-cycles (compute time = K_o / (u f))
    bytes: np.ndarray            # (O, B, L) off-chip bytes
    stack_bandwidth: float       # B/s per stack, efficiency included
    little_cap: float            # B/s, inf without a Little's-law cap
    uphys: np.ndarray            # (U,) physical units
    unit_area: np.ndarray        # (B,) mm^2 per physical unit
    cache_area: float            # mm^2 per byte of L2
    phy_area: float              # mm^2 per stack
    fixed_area: float            # mm^2: I/O, uncore
    shore_area: np.ndarray       # (S,) smallest die area whose long edges hold s stacks
    reticle: float               # mm^2
    static_power: float          # W
    unit_power: np.ndarray       # (F,) W per unit at each clock
    stack_power: float           # W per stack at full bandwidth
    tdp: float                   # W (inf: no limit)
    stack_capacity: float        # B
    resident: float              # B

    def time_of(self, iu, ib, il, is_, if_) -> np.ndarray:
        """The mix's time (s) at decision indices (numpy, broadcasting): the objective, in floats."""
        u = self.units[iu][..., None]
        f = self.clocks[if_][..., None]
        s = self.stacks[is_][..., None]
        by = self.bytes[:, ib, il]
        by = np.moveaxis(by, 0, -1)
        t = np.maximum(self.cycles / (u * f), by / (s * self.stack_bandwidth))
        if math.isfinite(self.little_cap):
            t = np.maximum(t, by / self.little_cap)
        return (t * self.weight).sum(axis=-1)

    def die_area(self, iu, ib, il, is_) -> np.ndarray:
        return (self.uphys[iu] * self.unit_area[ib] + self.l2s[il] * self.cache_area + self.stacks[is_] * self.phy_area
                + self.fixed_area)

    def power(self, iu, is_, if_) -> np.ndarray:
        return self.static_power + self.units[iu] * self.unit_power[if_] + self.stacks[is_] * self.stack_power


def _values(space: DesignSpace | None, name: str, default: float) -> np.ndarray:
    if space is None or name not in space.names:
        return np.array([default], dtype=float)
    p = space[name]
    if not isinstance(p, (IntParam, ChoiceParam)):
        raise SpecError(f"split solver: parameter '{name}' must be an integer range or a set of choices "
                        f"(CP-SAT needs a finite domain), got {type(p).__name__}")
    try:
        vals = np.asarray(p.grid_values(), dtype=float)
    except (TypeError, ValueError):
        vals = np.array([np.nan])
    if not np.all(np.isfinite(vals)):
        raise SpecError(f"split solver: parameter '{name}' must have finite numeric values, got {p.grid_values()!r}")
    return np.unique(vals)


def _mix(workloads) -> list[tuple[Workload, float]]:
    if isinstance(workloads, Workload):
        return [(workloads, 1.0)]
    if isinstance(workloads, Mapping):
        items = list(workloads.items())
    else:
        items = [(w, 1.0) if isinstance(w, Workload) else tuple(w) for w in workloads]
    out = []
    for w, a in items:
        if not isinstance(w, Workload):
            raise SpecError(f"split solver: expected workloads (or (workload, weight) pairs), got {type(w).__name__}")
        if not (isinstance(a, (int, float)) and a > 0 and math.isfinite(a)):
            raise SpecError(f"split solver: the weight of workload {w.name} must be a number > 0, got {a!r}")
        out.append((w, float(a)))
    if not out:
        raise SpecError("split solver: give at least one workload")
    return out


def _chips(base: ChipSpec, n: int, overrides: Mapping[str, np.ndarray]) -> Chips:
    """n design points of the base chip with some inputs replaced; physical units follow the spare rule."""
    over = {k: np.asarray(v, dtype=float) for k, v in overrides.items()}
    if "hbm.stacks" in over and "hbm.stack_sites" in Chips.numeric_view(base):
        over["hbm.stack_sites"] = over["hbm.stacks"]  # the design places as many stacks as it has sites
    chips = Chips.from_base(base, n, over)
    if "units_physical" in chips:  # a catalog chip's own count; a design with other units gets the spare rule
        chips.arrays["units_physical"] = np.full(n, np.nan)
    return chips


def split_data(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
               reticle: float | None = None) -> SplitData:
    """The data step: constants of the split problem from the evaluator, the area model and the chip.

    ``base``: a catalog name or ChipSpec with one die and HBM. ``workloads``: a Workload, a list of them, a
    list of (workload, weight) pairs or a {workload: weight} mapping. ``space``: the decisions (names in
    SPLIT_PARAMS). ``tdp`` / ``reticle``: limits other than the base chip's TDP and the reticle of the
    technology tables.
    """
    if isinstance(base, str):
        base = load_chip(base)
    if not isinstance(base, ChipSpec):
        raise SpecError(f"split solver: base must be a chip name or a ChipSpec, got {type(base).__name__}")
    if base.dies != 1:
        raise SpecError(f"split solver: it designs one die; base chip {base.name} has {base.dies} dies "
                        f"(give a single-die base)")
    if base.hbm is None:
        raise SpecError(f"split solver: base chip {base.name} has no HBM (the stacks are a decision)")
    if space is not None:
        unknown = [n for n in space.names if n not in SPLIT_PARAMS]
        if unknown:
            raise SpecError([unknown_name("split parameter", n, SPLIT_PARAMS) for n in unknown])
    mix = _mix(workloads)
    ref = Chips.from_specs([base])
    g = lambda key, default=0.0: float(ref.get(key, default)[0])  # noqa: E731
    units = _values(space, "units", base.units)
    buffers = _values(space, "local_buffer", base.local_buffer)
    l2s = _values(space, "l2", base.l2)
    stacks = _values(space, "hbm.stacks", base.hbm.stacks)
    clocks = _values(space, "clock", base.clock)
    for name, vals, low in (("units", units, 1), ("hbm.stacks", stacks, 1), ("clock", clocks, 1e-9),
                            ("local_buffer", buffers, 0), ("l2", l2s, 0)):
        if vals.min() < low:
            raise SpecError(f"split solver: {name} must be >= {low:g}, got {vals.min():g}")
    if np.any(units != np.round(units)) or np.any(stacks != np.round(stacks)):
        raise SpecError("split solver: units and hbm.stacks must be integers")
    process, memory = base.process, base.hbm.generation

    # ---- time: unit-cycles per operator (at the base chip) and off-chip bytes per (buffer, L2)
    names, weights, cycles, byte_rows = [], [], [], []
    nb, nl = len(buffers), len(l2s)
    grid_b, grid_l = np.repeat(buffers, nl), np.tile(l2s, nb)
    bl = _chips(base, nb * nl, {"local_buffer": grid_b, "l2": grid_l})
    u0, f0 = float(ref.total_units[0]), g("clock")
    # the roofline is at the peak clock (the TDP is a limit of the model, not a throttle): padded FLOPs and
    # vector times from the base chip without a TDP, where no operator's clock throttles
    peak = _chips(base, 1, {"tdp": np.array([np.inf])})
    for w, a in mix:
        t = op_table(w)
        out = evaluate_workload(peak, w, breakdown=True).operators
        fpc = np.zeros(len(t.names))
        for fmt in set(t.formats):
            cols = [i for i, x in enumerate(t.formats) if x == fmt]
            fpc[cols] = _format_rate(ref, fmt)[0][0]
        with np.errstate(divide="ignore", invalid="ignore"):
            pf = out.padded_flops[0]
            k_matrix = np.where(pf > 0, pf / (fpc * g("calibration.compute_efficiency", 1.0)), 0.0)
        k_vector = out.t_vector[0] * u0 * f0  # t_vector at the peak clock x unit-cycles per second
        if not np.all(np.isfinite(k_matrix)):
            bad = [t.names[i] for i in np.nonzero(~np.isfinite(k_matrix))[0]]
            raise SpecError(f"split solver: chip {base.name} has no matrix rate for operators {bad}")
        traffic = evaluate_workload(bl, w, breakdown=True).operators.bytes_memory  # (B L, O)
        check = evaluate_workload(_chips(base, nb * nl, {"local_buffer": grid_b, "l2": grid_l,
                                                         "units": np.full(nb * nl, units.max())}), w,
                                  breakdown=True).operators.bytes_memory
        if not np.allclose(traffic, check, rtol=1e-12):
            raise SolverError("split solver: the evaluator's off-chip traffic now depends on the unit count, "
                              "which the split model takes as separable; revisit dse.solvers.cpsat_split")
        names += [f"{w.name}/{n}" for n in t.names]
        weights.append(a * t.count)
        cycles.append(np.maximum(k_matrix, k_vector) / g("dies", 1.0))
        byte_rows.append(traffic.T.reshape(len(t.names), nb, nl))
    weight, cyc, byt = np.concatenate(weights), np.concatenate(cycles), np.concatenate(byte_rows, axis=0)

    # ---- area: probe the area model (linear in uphys x unit(b), l2, stacks for one monolithic die)
    probe = _chips(base, nb, {"local_buffer": buffers, "l2": np.full(nb, max(base.l2, 2.0**20)),
                              "hbm.stacks": np.full(nb, float(stacks.max()))})
    pa = area_model.package_area(probe, process=process, memory=memory)
    if set(pa.layout) != {"monolithic"}:
        raise SpecError(f"split solver: one monolithic die expected, the area model lays it out as {pa.layout[0]}")
    parts = pa.parts
    unit_area = parts["units"] / pa.units_physical
    cache_area = float(parts["l2"][0] / max(base.l2, 2.0**20))
    phy_area = float(parts["memory_phy"][0] / stacks.max())
    fixed = parts["io"] + parts["uncore"] + parts["sram_memory"]
    if not np.allclose(fixed, fixed[0]):
        raise SolverError("split solver: the area model's fixed parts depend on the buffer; revisit the split model")
    fixed_area = float(fixed[0])
    uphys = np.asarray(area_model.units_physical(units), dtype=float)
    lin = pa.units_physical * unit_area + max(base.l2, 2.0**20) * cache_area + stacks.max() * phy_area + fixed_area
    if not np.allclose(lin, pa.die_area_mm2, rtol=1e-12):
        raise SolverError("split solver: the area model is no longer the linear sum the split model assumes")
    fields = area_model.reticle_fields(probe)
    if np.any(fields != 1.0):
        raise SpecError("split solver: a die stitched across reticle fields is not a split-solver design")
    # shoreline: s stacks on the two long edges need floor(long / w + 1/2) >= ceil(s / 2), long = sqrt(A aspect)
    fp = technology.memory(memory).footprint
    w_face = min(fp.width, fp.height)
    shore = np.zeros(len(stacks))
    for i, s in enumerate(stacks):
        h = math.ceil(s / 2)
        a = (w_face * (h - 0.5 - 1e-9)) ** 2 / area_model.RETICLE_ASPECT if h > 0 else 0.0
        while 2 * area_model.stacks_per_edge(area_model.die_outline(a)[0], w_face) < s:  # the module's own rounding
            a = a * (1 + 1e-12) + 1e-12
        shore[i] = a

    # ---- power (seed 004 §4.1.3): static + units x unit power at clock + stacks x stack power
    fmts = {f for w, _ in mix for f in op_table(w).formats}
    per_unit0 = max(_format_rate(ref, f)[0][0] * _format_rate(ref, f)[1][0] for f in fmts) * f0  # W at f0
    exponent = 3.0 if g("power.voltage_scaling", 1.0) > 0.5 else 1.0
    unit_power = per_unit0 * (clocks / f0) ** exponent
    stack_bw = float(base.hbm.stack_bandwidth) * g("calibration.bandwidth_efficiency", 1.0)
    lat, inflight = g("memory_system.latency"), g("memory_system.outstanding")
    txn = g("memory_system.transaction", 128.0)
    return SplitData(
        base=base, process=process, memory=memory, units=units, buffers=buffers, l2s=l2s, stacks=stacks,
        clocks=clocks, op_names=tuple(names), weight=weight, cycles=cyc, bytes=byt,
        stack_bandwidth=stack_bw, little_cap=inflight * txn / lat if lat > 0 and inflight > 0 else math.inf,
        uphys=uphys, unit_area=unit_area, cache_area=cache_area, phy_area=phy_area, fixed_area=fixed_area,
        shore_area=shore, reticle=float(reticle if reticle is not None else area_model.reticle_area_mm2()),
        static_power=g("power.static"), unit_power=unit_power,
        stack_power=float(base.hbm.stack_bandwidth) * g("calibration.bandwidth_efficiency", 1.0) * g("energy.memory"),
        tdp=float(tdp if tdp is not None else g("tdp", math.inf)),
        stack_capacity=float(base.hbm.stack_capacity),
        resident=max(float(w.resident_bytes) for w, _ in mix),
    )


# ------------------------------------------------------------------ result


@dataclass(frozen=True)
class SplitChoice:
    """The chosen die and what it costs. ``time_s``: the mix's time by the data's float formulas;
    ``model_time_s``: CP-SAT's integer objective scaled back (equal within ~1e-7)."""

    units: int
    local_buffer: float
    l2: float
    hbm_stacks: int
    clock: float
    time_s: float
    model_time_s: float
    die_area_mm2: float
    power_w: float
    status: str
    solve_time_s: float
    info: dict = field(default_factory=dict, compare=False)

    @property
    def params(self) -> dict[str, float]:
        """The design as the chip's dotted names (a DesignSpace point)."""
        return {"units": self.units, "local_buffer": self.local_buffer, "l2": self.l2,
                "hbm.stacks": self.hbm_stacks, "clock": self.clock}


# ------------------------------------------------------------------ model


class _SplitModel:
    """data -> model -> variables -> constraints -> objective (see the module doc)."""

    def __init__(self, d: SplitData):
        self.d = d
        self.m = cp_model.CpModel()
        self.limit = {name: self.m.new_bool_var(f"limit[{name}]") for name in CONSTRAINTS}
        self._scales()
        self._variables()
        self._constraints()
        self._objective()

    def _scales(self):
        d = self.d
        u, f, s = d.units.max(), d.clocks.max(), d.stacks.max()
        t_ops = np.maximum(d.cycles / (u * f), d.bytes.min(axis=(1, 2)) / (s * d.stack_bandwidth))
        lb = float((t_ops * d.weight).sum())
        if lb <= 0:
            raise SpecError("split solver: the workloads do no work")
        self.q = lb / 2**TIME_BITS

    def _variables(self):
        d, m = self.d, self.m
        self.x_f = [m.new_bool_var(f"clock[{f:.6g}]") for f in d.clocks]
        self.x_s = [m.new_bool_var(f"stacks[{int(s)}]") for s in d.stacks]
        self.y_bl = [[m.new_bool_var(f"buffer_l2[{int(b)},{int(l2)}]") for l2 in d.l2s] for b in d.buffers]
        m.add_exactly_one(self.x_f)
        m.add_exactly_one(self.x_s)
        m.add_exactly_one([y for row in self.y_bl for y in row])
        self.x_b = [m.new_bool_var(f"buffer[{int(b)}]") for b in d.buffers]
        self.x_l = [m.new_bool_var(f"l2[{int(l2)}]") for l2 in d.l2s]
        for i, x in enumerate(self.x_b):
            m.add(x == sum(self.y_bl[i]))
        for j, x in enumerate(self.x_l):
            m.add(x == sum(self.y_bl[i][j] for i in range(len(d.buffers))))
        self.i_u = m.new_int_var(0, len(d.units) - 1, "units_index")
        self.u = m.new_int_var(int(d.units.min()), int(d.units.max()), "units")
        m.add_element(self.i_u, [int(x) for x in d.units], self.u)
        self.uphys = m.new_int_var(int(d.uphys.min()), int(d.uphys.max()), "units_physical")
        m.add_element(self.i_u, [int(x) for x in d.uphys], self.uphys)
        self.s = m.new_int_var(int(d.stacks.min()), int(d.stacks.max()), "stacks")
        m.add(self.s == sum(int(s) * x for s, x in zip(d.stacks, self.x_s)))
        # u x [f] and uphys x [b], pinned by the selectors
        self.u_at_f = []
        for f, x in zip(d.clocks, self.x_f):
            z = m.new_int_var(0, int(d.units.max()), f"units_at_clock[{f:.6g}]")
            m.add(z == self.u).only_enforce_if(x)
            m.add(z == 0).only_enforce_if(~x)
            self.u_at_f.append(z)
        self.uphys_at_b = []
        for b, x in zip(d.buffers, self.x_b):
            z = m.new_int_var(0, int(d.uphys.max()), f"units_physical_at_buffer[{int(b)}]")
            m.add(z == self.uphys).only_enforce_if(x)
            m.add(z == 0).only_enforce_if(~x)
            self.uphys_at_b.append(z)

    def _constraints(self):
        d, m, lim = self.d, self.m, self.limit
        # reticle and shoreline: the die area in AREA_UNIT
        unit_a = [to_int(a, AREA_UNIT, "nearest") for a in d.unit_area]
        area = (sum(c * z for c, z in zip(unit_a, self.uphys_at_b))
                + sum(to_int(l2 * d.cache_area, AREA_UNIT) * x for l2, x in zip(d.l2s, self.x_l))
                + to_int(d.phy_area, AREA_UNIT) * self.s + to_int(d.fixed_area, AREA_UNIT))
        hi = to_int(d.uphys.max() * d.unit_area.max() + d.l2s.max() * d.cache_area + d.stacks.max() * d.phy_area
                    + d.fixed_area, AREA_UNIT, "up") + 1
        self.area = m.new_int_var(0, hi, "die_area")
        m.add(self.area == area)
        m.add(self.area <= to_int(d.reticle, AREA_UNIT, "down")).only_enforce_if(lim["reticle"])
        m.add(self.area >= sum(to_int(a, AREA_UNIT, "up") * x for a, x in zip(d.shore_area, self.x_s))
              ).only_enforce_if(lim["hbm_shoreline"])
        # TDP, in POWER_UNIT
        if math.isfinite(d.tdp):
            power = (to_int(d.static_power, POWER_UNIT) + to_int(d.stack_power, POWER_UNIT) * self.s
                     + sum(to_int(p, POWER_UNIT) * z for p, z in zip(d.unit_power, self.u_at_f)))
            m.add(power <= to_int(d.tdp, POWER_UNIT, "down")).only_enforce_if(lim["tdp"])
        # capacity
        m.add(self.s >= math.ceil(d.resident / d.stack_capacity - 1e-12)).only_enforce_if(lim["fits_memory"])

    def _objective(self):
        d, m, q = self.d, self.m, self.q
        self.t = []
        his = []
        u_lo, s_lo = int(d.units.min()), int(d.stacks.min())
        for o, name in enumerate(d.op_names):
            comp = [to_int(d.cycles[o] / f, q, "up") for f in d.clocks]
            mem = [[to_int(d.bytes[o, i, j] / d.stack_bandwidth, q, "up") for j in range(len(d.l2s))]
                   for i in range(len(d.buffers))]
            hi = max(max(comp) // u_lo, max(max(r) for r in mem) // s_lo) + 1
            if math.isfinite(d.little_cap):
                little = [[to_int(d.bytes[o, i, j] / d.little_cap, q, "up") for j in range(len(d.l2s))]
                          for i in range(len(d.buffers))]
                hi = max(hi, max(max(r) for r in little))
            t = m.new_int_var(0, hi, f"t[{name}]")
            tu = m.new_int_var(0, hi * int(d.units.max()), f"t_x_units[{name}]")
            ts = m.new_int_var(0, hi * int(d.stacks.max()), f"t_x_stacks[{name}]")
            m.add_multiplication_equality(tu, [t, self.u])
            m.add_multiplication_equality(ts, [t, self.s])
            m.add(tu >= sum(c * x for c, x in zip(comp, self.x_f)))  # t >= K / (u f)
            m.add(ts >= sum(mem[i][j] * self.y_bl[i][j] for i in range(len(d.buffers)) for j in range(len(d.l2s))))
            if math.isfinite(d.little_cap):
                m.add(t >= sum(little[i][j] * self.y_bl[i][j] for i in range(len(d.buffers))
                               for j in range(len(d.l2s))))
            self.t.append(t)
            his.append(hi)
        # weights as integers: as fine as the objective's int64 range allows (2^-30 at best)
        top = float(np.dot(d.weight, his))
        self.w_scale = 2.0 ** min(30, math.floor(61 - math.log2(max(top, 1.0))))
        if self.w_scale < 1:
            raise SolverError("split solver: the objective does not fit CP-SAT's 64-bit integers; "
                              "narrow the space or the workload mix")
        m.minimize(sum(to_int(w * self.w_scale) * t for w, t in zip(d.weight, self.t)))
        m.add_assumptions(list(self.limit.values()))

    def conflict(self, time_limit_s: float, seed: int) -> list[str]:
        """The limits that conflict: CP-SAT's core of assumed limits, shrunk to a minimal one by deletion.

        Each limit of the core is dropped in turn (a feasibility solve with the others assumed); it stays
        out when the rest is still infeasible. Without any limit the space is feasible (every decision has a
        value), so at least one limit remains.
        """
        solver, status = self.solve(time_limit_s, seed)
        by_index = {lit.index: name for name, lit in self.limit.items()}
        core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility() if i in by_index]
        core = core or list(CONSTRAINTS)
        probe = self.m.clone()
        probe.clear_objective()
        for name in list(core):
            rest = [c for c in core if c != name]
            probe.clear_assumptions()
            probe.add_assumptions([self.limit[c] for c in rest])
            check = cp_model.CpSolver()
            check.parameters.num_workers = 1
            check.parameters.max_time_in_seconds = time_limit_s
            if rest and status_name(check.solve(probe)) == "INFEASIBLE":
                core = rest
        return core

    def solve(self, time_limit_s: float, seed: int):
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = time_limit_s
        solver.parameters.random_seed = int(seed)
        return solver, status_name(solver.solve(self.m))


def solve_split(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
                reticle: float | None = None, time_limit_s: float = 10.0, seed: int = 0) -> SplitChoice:
    """The die (units, local buffer, L2, HBM stacks, clock) that minimizes the mix's time (CP-SAT).

    Arguments as :func:`split_data`. Raises InfeasibleError naming the conflicting limits when no design of
    the space satisfies them, SolverError on a CP-SAT status other than OPTIMAL / FEASIBLE / INFEASIBLE.
    """
    start = time.perf_counter()
    d = split_data(base, workloads, space, tdp=tdp, reticle=reticle)
    sm = _SplitModel(d)
    solver, status = sm.solve(time_limit_s, seed)
    if status == "INFEASIBLE":
        raise InfeasibleError(_infeasible_message(d, sm.conflict(time_limit_s, seed)))
    if status not in ("OPTIMAL", "FEASIBLE"):
        raise SolverError(f"split solver: CP-SAT returned {status}"
                          + (f" ({sm.m.validate()})" if status == "MODEL_INVALID" else ""))
    iu = int(solver.value(sm.i_u))
    ib = next(i for i, x in enumerate(sm.x_b) if solver.value(x))
    il = next(j for j, x in enumerate(sm.x_l) if solver.value(x))
    is_ = next(i for i, x in enumerate(sm.x_s) if solver.value(x))
    if_ = next(i for i, x in enumerate(sm.x_f) if solver.value(x))
    return SplitChoice(
        units=int(d.units[iu]), local_buffer=float(d.buffers[ib]), l2=float(d.l2s[il]), hbm_stacks=int(d.stacks[is_]),
        clock=float(d.clocks[if_]), time_s=float(d.time_of(iu, ib, il, is_, if_)),
        model_time_s=solver.objective_value * sm.q / sm.w_scale,
        die_area_mm2=float(d.die_area(iu, ib, il, is_)), power_w=float(d.power(iu, is_, if_)), status=status,
        solve_time_s=time.perf_counter() - start,
        info={"wall_time_s": solver.wall_time, "time_unit_s": sm.q,
              "bound_s": solver.best_objective_bound * sm.q / sm.w_scale,
              "designs": len(d.units) * len(d.buffers) * len(d.l2s) * len(d.stacks) * len(d.clocks)},
    )


def _infeasible_message(d: SplitData, names: Sequence[str]) -> str:
    """Name the conflicting limits, each with the best any design of the space can do against it."""
    lines = []
    for name in names:
        if name == "reticle":
            a = d.die_area(0, 0, 0, 0)
            lines.append(f"reticle: the smallest die of the space (units {int(d.units[0])}, local buffer "
                         f"{d.buffers[0]:,.0f} B, L2 {d.l2s[0]:,.0f} B, {int(d.stacks[0])} stacks) is {a:,.1f} mm^2, "
                         f"the reticle {d.reticle:,.1f} mm^2")
        elif name == "hbm_shoreline":
            lines.append(f"hbm_shoreline: s stacks need a die of at least " + ", ".join(
                f"{a:,.0f} mm^2 (s = {int(s)})" for s, a in zip(d.stacks, d.shore_area)))
        elif name == "tdp":
            p = d.power(0, 0, 0)
            lines.append(f"tdp: the least power of the space is {p:,.1f} W, the TDP {d.tdp:,.1f} W")
        elif name == "fits_memory":
            lines.append(f"fits_memory: {d.resident:,.0f} B resident need {math.ceil(d.resident / d.stack_capacity)} "
                         f"stacks of {d.stack_capacity:,.0f} B; the space allows at most {int(d.stacks.max())}")
    what = (f"the {names[0]} limit" if len(names) == 1
            else ", ".join(names[:-1]) + f" and {names[-1]} together")
    return f"no design in the space satisfies {what} (CP-SAT proved it): " + "; ".join(lines)


# ------------------------------------------------------------------ grid (the oracle)


def split_grid(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
               reticle: float | None = None) -> dict:
    """Every combination of the space with numpy: the time from the data, the die area and the HBM shoreline
    from ``dse.model.area.package_area`` on the designs themselves, and the constraint values from the
    ``constraints/`` modules (reticle, hbm_shoreline, tdp, fits_memory). Returns the arrays (one entry per
    design) and ``best`` (the index of the fastest feasible design, or None).
    """
    import constraints.fits_memory as c_mem
    import constraints.hbm_shoreline as c_shore
    import constraints.reticle as c_reticle
    import constraints.tdp as c_tdp

    d = split_data(base, workloads, space, tdp=tdp, reticle=reticle)
    shape = (len(d.units), len(d.buffers), len(d.l2s), len(d.stacks), len(d.clocks))
    iu, ib, il, is_, if_ = (a.ravel() for a in np.indices(shape))
    n = iu.size
    chips = _chips(d.base, n, {"units": d.units[iu], "local_buffer": d.buffers[ib], "l2": d.l2s[il],
                               "hbm.stacks": d.stacks[is_], "clock": d.clocks[if_]})
    pa = area_model.package_area(chips, process=d.process, memory=d.memory)
    metrics = {**pa.columns(), "peak_power_w": d.power(iu, is_, if_), "tdp": np.full(n, d.tdp),
               "resident_bytes": np.full(n, d.resident), "capacity_bytes": d.stacks[is_] * d.stack_capacity}
    values = {"reticle": c_reticle.constraint(metrics, max=d.reticle),
              "hbm_shoreline": c_shore.constraint(metrics),
              "tdp": c_tdp.constraint(metrics),
              "fits_memory": c_mem.constraint(metrics)}
    feasible = np.all([v <= 0 for v in values.values()], axis=0)
    t = d.time_of(iu, ib, il, is_, if_)
    best = int(np.argmin(np.where(feasible, t, np.inf))) if feasible.any() else None
    return {"time_s": t, "feasible": feasible, "constraints": values, "die_area_mm2": pa.die_area_mm2,
            "model_die_area_mm2": d.die_area(iu, ib, il, is_), "index": (iu, ib, il, is_, if_),
            "params": {"units": d.units[iu], "local_buffer": d.buffers[ib], "l2": d.l2s[il],
                       "hbm.stacks": d.stacks[is_], "clock": d.clocks[if_]},
            "best": best, "data": d}
