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

Time of the mix (a roofline per operator at the peak clock, seed 004 §4.8.1; the tile-level detail --
wave quantization, tile shapes -- belongs to :mod:`dse.solvers.cpsat_tiles`):

    T = sum over workloads w (weight a_w / sum a) of sum over operators o (count c_o) of t_o
    t_o = max( K_o / (u f),  B_o(b, l) / (s R_stack),  B_o(b, l) / cap_Little )
    K_o = max(padded FLOPs / (FLOP/cycle x compute efficiency), vector cycles)   (unit-cycles; evaluator)
          (a fused attention block's QK, softmax and PV, which pipeline across resources, are one operator:
          the larger of their matrix and vector cycles added, their bytes and energies added)
    B_o(b, l) = the evaluator's off-chip bytes for o with the default tiles of a local buffer b and an L2 l
                (re-reads of operands that do not fit L2); it does not depend on u, s or f
    t_o is the evaluator's compute-busy time of the operator at the peak clock (busy_c of its power
    ceiling); the evaluator's own time adds wave quantization, launches and step overheads, so T is a lower
    bound of the join's time (the workload weights are normalized as the join's mix is)

Limits (each linear in the decisions for a fixed process; the constants come from dse.model.area, the
evaluator and dse.technology, probed once, so the model follows those modules):

    reticle        die(u, b, l, s) = uphys(u) A_unit(b) + l A_cache + s A_phy + A_fixed <= reticle
                   uphys(u) = the area model's physical units (spares for yield) for u enabled units
    hbm_shoreline  s <= 2 stacks_per_edge(sqrt(die x aspect))  <=>  die >= A_shore(s)  (a table over s)
    tdp            P_static(u, b, l, f) + max_o E_o(u, b, l, f) / t_o <= TDP: the evaluator's peak power (its peak_power_w,
                   static power + the largest energy / time of an operator) at the peak clock, E_o the
                   evaluator's energy of one instance of o (compute and memory). This is the join's tdp
                   constraint, peak_power_w <= tdp, for a design that holds its peak clock -- and it makes
                   the design hold it: the evaluator throttles an operator only when its power at the peak
                   clock exceeds TDP - static, which this rules out. Without wave losses it equals the
                   join's peak power; with them it is an upper bound of it.
    fits_memory    s C_stack >= resident bytes (the largest of the mix)

The chosen design is re-evaluated by the join (:func:`dse.evaluate.evaluate_design`): the result reports
the join's time, peak power and die area (``time_s``, ``power_w``, ``die_area_mm2``) beside the model's
(``model_time_s``, ``model_power_w``), and the join's tdp constraint and clock ratio in ``info``; a choice
the join finds over the TDP is a SolverError (the model and the evaluator disagree).

Formulation (CP-SAT; data -> model -> variables -> constraints -> objective -> solve -> extract): the units,
the stacks, the clock and the (b, l) pair are one-hot booleans; the product uphys x [b] is an integer
variable pinned by enforcement literals (``only_enforce_if``); the 1 / (u f) and 1 / s of the roofline become
products kept on the left and pinned on both sides, ``t_c x u`` in ``sum_f [f] ceil(K_o / (f q)) + [0,
u - 1]`` and ``t_m x s`` likewise for ``B_o / (R q)`` (``add_multiplication_equality``), ``t_o = max(t_c,
t_m, t_Little)``, so t_o is the roofline time exactly up to the time unit q (2^-30 of the mix's lower
bound); the tdp limit is ``P (t_o - 1) >= sum_ubl [u,b,l] E_o(u, b, l, f)`` with the one-hot product [u,b,l]
of the unit and (b, l) selectors (rounded so that it implies the float limit); workload weights x counts
become integers at 2^-30 (or as fine as int64 allows); areas in 1e-6 mm^2, all through
:func:`~dse.solvers.cpsat_common.to_int`. Each limit's constraints carry one enforcement literal named
after the constraint module; the solve assumes them all, so an infeasible space comes back with CP-SAT's
core of limits that conflict, named in the InfeasibleError. Among designs of the least time the smallest
die wins (then the first in the order of the space: a unique answer, which the grid reproduces). 1 worker
and a fixed seed, limited in deterministic time (dse.solvers.cpsat_common: the same answer on any machine
load); OPTIMAL and FEASIBLE accepted.

:func:`split_grid` enumerates every combination with numpy over the same data, with the die area, the
shoreline and the constraint values from dse.model.area.package_area and the ``constraints/`` modules
themselves, and the join's metrics of every design: it is the test oracle.
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
from dse.evaluate import evaluate_design
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model import area as area_model, links
from dse.model.evaluator import evaluate_workload, matrix_rate, op_table, power_inputs
from dse.solvers.cpsat_common import (DETERMINISTIC_LIMIT, WALL_LIMIT_S, new_solver, status_name, to_int,
                                      wall_limit_error)
from dse.space import ChoiceParam, DesignSpace, IntParam
from dse.workload import Workload

__all__ = ["SPLIT_PARAMS", "SplitData", "SplitChoice", "split_data", "solve_split", "split_grid", "CONSTRAINTS"]

#: The decisions, by the chip's dotted names.
SPLIT_PARAMS = ("units", "local_buffer", "l2", "hbm.stacks", "clock")
#: The limits, by the names of their constraint modules (constraints/).
CONSTRAINTS = ("reticle", "hbm_shoreline", "tdp", "fits_memory")
TIME_BITS = 30      # the time unit is the mix's lower-bound time / 2^30
AREA_UNIT = 1e-6    # mm^2
POWER_BITS = 20     # the power left beside static power (TDP - static) is 2^20 power units
#: CP-SAT's presolve stays off for this model: with it (OR-Tools 9.x) the a100-70b-decode space returned OPTIMAL
#: for a design 33% slower than a feasible one the same model accepts when fixed (tests/solvers/test_cpsat_split.py)
PRESOLVE = False


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
    weight: np.ndarray           # (O,) workload weight (normalized over the mix) x count
    cycles: np.ndarray           # (O,) K_o: unit-cycles (compute time = K_o / (u f))
    bytes: np.ndarray            # (O, U, B, L) off-chip bytes
    energy: np.ndarray           # (O, U, B, L, F) J of one instance of o (the evaluator's compute + memory energy)
    stack_bandwidth: float       # B/s per stack, efficiency included
    little_cap: float            # B/s, inf without a Little's-law cap
    uphys: np.ndarray            # (U,) physical units
    unit_area: np.ndarray        # (B,) mm^2 per physical unit
    cache_area: float            # mm^2 per byte of L2
    phy_area: float              # mm^2 per stack
    fixed_area: float            # mm^2: I/O, uncore
    shore_area: np.ndarray       # (S,) smallest die area whose long edges hold s stacks
    reticle: float               # mm^2
    static_power: np.ndarray     # (U, B, L, F) W: leakage and clock power at the design clock
    tdp: float                   # W (inf: no limit)
    stack_capacity: float        # B
    resident: float              # B

    def op_times(self, iu, ib, il, is_, if_) -> np.ndarray:
        """t_o (s) of every operator at decision indices (numpy, broadcasting; operators last)."""
        u = self.units[iu][..., None]
        f = self.clocks[if_][..., None]
        s = self.stacks[is_][..., None]
        by = np.moveaxis(self.bytes[:, iu, ib, il], 0, -1)
        bw = np.minimum(s * self.stack_bandwidth, self.little_cap)  # links.effective_bandwidth, per stack count
        return np.maximum(self.cycles / (u * f), by / bw)

    def time_of(self, iu, ib, il, is_, if_) -> np.ndarray:
        """The mix's time (s) at decision indices (numpy, broadcasting): the objective, in floats."""
        return (self.op_times(iu, ib, il, is_, if_) * self.weight).sum(axis=-1)

    def die_area(self, iu, ib, il, is_) -> np.ndarray:
        return (self.uphys[iu] * self.unit_area[ib] + self.l2s[il] * self.cache_area + self.stacks[is_] * self.phy_area
                + self.fixed_area)

    def power(self, iu, ib, il, is_, if_) -> np.ndarray:
        """The evaluator's peak power at the peak clock (W): static + max_o E_o / t_o (the tdp limit's quantity)."""
        e = np.moveaxis(self.energy[:, iu, ib, il, if_], 0, -1)
        return self.static_power[iu, ib, il, if_] + (e / self.op_times(iu, ib, il, is_, if_)).max(axis=-1)


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

    # ---- time: unit-cycles per operator (at the base chip) and off-chip bytes per (buffer, L2); energy per
    # (units, buffer, L2, clock); each from the evaluator on every (u, b, l, f) of the space
    names, weights, cycles, byte_rows, energy_rows = [], [], [], [], []
    nu, nb, nl, nf = len(units), len(buffers), len(l2s), len(clocks)
    grid_u, grid_b, grid_l, grid_f = (a.ravel() for a in np.meshgrid(units, buffers, l2s, clocks, indexing="ij"))
    ublf = _chips(base, grid_u.size, {"units": grid_u, "local_buffer": grid_b, "l2": grid_l, "clock": grid_f})
    # leakage and clock power at the design clock (dse.model.power) per (u, b, l, f): they grow with the units,
    # the SRAM and the clock (at the base chip's stacks: a stack's PHY leaks a few watts at most)
    static = power_inputs(ublf)["fixed1"].reshape(nu, nb, nl, nf)
    u0, f0 = float(ref.total_units[0]), g("clock")
    total_weight = sum(a for _, a in mix)
    # the roofline is at the peak clock (the TDP is a limit of the model, not a throttle): padded FLOPs and
    # vector times from the base chip without a TDP, where no operator's clock throttles
    peak = _chips(base, 1, {"tdp": np.array([np.inf])})
    for w, a in mix:
        t = op_table(w)
        out = evaluate_workload(peak, w, breakdown=True).operators
        fpc = np.zeros(len(t.names))
        for key in set(t.rate_keys):
            cols = [i for i, x in enumerate(t.rate_keys) if x == key]
            fpc[cols] = matrix_rate(ref, key)[0][0]
        with np.errstate(divide="ignore", invalid="ignore"):
            pf = out.padded_flops[0]
            k_matrix = np.where(pf > 0, pf / (fpc * g("calibration.compute_efficiency", 1.0)), 0.0)
        k_vector = out.t_vector[0] * u0 * f0  # t_vector at the peak clock x unit-cycles per second
        if not np.all(np.isfinite(k_matrix)):
            bad = [t.names[i] for i in np.nonzero(~np.isfinite(k_matrix))[0]]
            raise SpecError(f"split solver: chip {base.name} has no matrix rate for operators {bad}")
        ops = evaluate_workload(ublf, w, breakdown=True).operators
        O = len(t.names)
        traffic = ops.bytes_memory.T.reshape(O, nu, nb, nl, nf)
        if not np.allclose(traffic, traffic[..., :1], rtol=1e-12):
            raise SolverError("split solver: the evaluator's off-chip traffic now depends on the clock, which the "
                              "split model takes as separable; revisit dse.solvers.cpsat_split")
        e_ops = ops.energy.T.reshape(O, nu, nb, nl, nf)
        # a fused attention block's QK, softmax and PV pipeline across resources (dse.model.evaluator.
        # _attention_overlap, seed 004 §4.2.3): one operator of the split model, whose compute is the larger of
        # the three's matrix and vector cycles added, bytes and energy added (a lower bound of the block's time,
        # and so an upper bound of its power)
        groups = [list(cols) for cols in t.attn_groups]
        alone = [i for i in range(O) if not any(i in cols for cols in groups)]
        names += [f"{w.name}/{t.names[i]}" for i in alone] + [f"{w.name}/{t.names[c[0]]}+{t.names[c[2]]}" for c in groups]
        weights.append(a / total_weight * np.concatenate([t.count[alone], [t.count[c[0]] for c in groups]]))
        k_alone = np.maximum(k_matrix, k_vector)[alone]
        k_groups = [max(k_matrix[c].sum(), k_vector[c].sum()) for c in groups]
        cycles.append(np.concatenate([k_alone, k_groups]) / g("dies", 1.0))
        # (O, U, B, L): the units' concurrent block shares operand slices
        byte_rows.append(np.concatenate([traffic[alone, ..., 0]] + [traffic[c, ..., 0].sum(axis=0, keepdims=True)
                                                                     for c in groups], axis=0))
        energy_rows.append(np.concatenate([e_ops[alone]] + [e_ops[c].sum(axis=0, keepdims=True) for c in groups],
                                          axis=0))
    weight, cyc, byt = np.concatenate(weights), np.concatenate(cycles), np.concatenate(byte_rows, axis=0)
    energy = np.concatenate(energy_rows, axis=0)

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

    # ---- memory interface: the stacks' bandwidth and the Little's-law cap (dse.model.links)
    stack_bw = float(base.hbm.stack_bandwidth) * g("calibration.bandwidth_efficiency", 1.0)
    little = float(links.effective_bandwidth(np.inf, g("memory_system.outstanding"),
                                             g("memory_system.transaction", 128.0), g("memory_system.latency")))
    return SplitData(
        base=base, process=process, memory=memory, units=units, buffers=buffers, l2s=l2s, stacks=stacks,
        clocks=clocks, op_names=tuple(names), weight=weight, cycles=cyc, bytes=byt, energy=energy,
        stack_bandwidth=stack_bw, little_cap=little,
        uphys=uphys, unit_area=unit_area, cache_area=cache_area, phy_area=phy_area, fixed_area=fixed_area,
        shore_area=shore, reticle=float(reticle if reticle is not None else area_model.reticle_area_mm2()),
        static_power=static,
        tdp=float(tdp if tdp is not None else g("tdp", math.inf)),
        stack_capacity=float(base.hbm.stack_capacity),
        resident=max(float(w.resident_bytes) for w, _ in mix),
    )


# ------------------------------------------------------------------ result


@dataclass(frozen=True)
class SplitChoice:
    """The chosen die and what the join says it costs.

    ``time_s``, ``power_w`` and ``die_area_mm2`` are the join's (:func:`dse.evaluate.evaluate_design` on the
    chosen design: the mix's time, its peak power ``peak_power_w`` and the die area), the figures every other
    solver reports; ``model_time_s`` and ``model_power_w`` are the split model's (the roofline mix time and
    the peak power at the peak clock, CP-SAT's integer objective scaled back for the time). ``info`` holds the
    join's clock ratio and tdp constraint value (``join_tdp_w``: peak_power_w - tdp, <= 0), the solve's
    statistics and the deterministic time used.
    """

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
    model_power_w: float = math.nan
    info: dict = field(default_factory=dict, compare=False)

    @property
    def params(self) -> dict[str, float]:
        """The design as the chip's dotted names (a DesignSpace point)."""
        return {"units": self.units, "local_buffer": self.local_buffer, "l2": self.l2,
                "hbm.stacks": self.hbm_stacks, "clock": self.clock}


def design_chips(d: SplitData, iu, ib, il, is_, if_) -> Chips:
    """The designs at decision indices (arrays) as Chips: the base chip with the five decisions (and the
    split's TDP, when one was given) -- what the join evaluates."""
    iu, ib, il, is_, if_ = (np.atleast_1d(np.asarray(x)) for x in (iu, ib, il, is_, if_))
    n = iu.size
    over = {"units": d.units[iu], "local_buffer": d.buffers[ib], "l2": d.l2s[il], "hbm.stacks": d.stacks[is_],
            "clock": d.clocks[if_]}
    if math.isfinite(d.tdp) and d.tdp != d.base.tdp:
        over["tdp"] = np.full(n, d.tdp)
    return _chips(d.base, n, over)


# ------------------------------------------------------------------ model


class _SplitModel:
    """data -> model -> variables -> constraints -> objective (see the module doc)."""

    def __init__(self, d: SplitData):
        self.d = d
        self.m = cp_model.CpModel()
        self.limit = {name: self.m.new_bool_var(f"limit[{name}]") for name in CONSTRAINTS}
        self._scales()
        self._variables()
        self._objective()
        self._constraints()
        self.m.add_assumptions(list(self.limit.values()))

    def _scales(self):
        d = self.d
        u, f, s = d.units.max(), d.clocks.max(), d.stacks.max()
        t_ops = np.maximum(d.cycles / (u * f), d.bytes.min(axis=(1, 2, 3)) / (s * d.stack_bandwidth))
        lb = float((t_ops * d.weight).sum())
        if lb <= 0:
            raise SpecError("split solver: the workloads do no work")
        self.q = lb / 2**TIME_BITS
        # integer coefficients of the time terms (rounded up: the model's t_o is the least integer >= t_o / q)
        self.comp = np.array([[to_int(c / f, self.q, "up") for f in d.clocks] for c in d.cycles], dtype=np.int64)
        ints = lambda arr, rate: np.array([to_int(b / rate, self.q, "up") for b in arr.ravel()],  # noqa: E731
                                          dtype=np.int64).reshape(arr.shape)
        self.mem = ints(d.bytes, d.stack_bandwidth)
        if math.isfinite(d.little_cap):
            self.little = ints(d.bytes, d.little_cap)
        else:
            self.little = np.zeros_like(self.mem)

    def _variables(self):
        d, m = self.d, self.m
        self.x_f = [m.new_bool_var(f"clock[{f:.6g}]") for f in d.clocks]
        self.x_s = [m.new_bool_var(f"stacks[{int(s)}]") for s in d.stacks]
        self.x_u = [m.new_bool_var(f"units[{int(u)}]") for u in d.units]
        self.y_bl = [[m.new_bool_var(f"buffer_l2[{int(b)},{int(l2)}]") for l2 in d.l2s] for b in d.buffers]
        m.add_exactly_one(self.x_f)
        m.add_exactly_one(self.x_s)
        m.add_exactly_one(self.x_u)
        m.add_exactly_one([y for row in self.y_bl for y in row])
        self.x_b = [m.new_bool_var(f"buffer[{int(b)}]") for b in d.buffers]
        self.x_l = [m.new_bool_var(f"l2[{int(l2)}]") for l2 in d.l2s]
        for i, x in enumerate(self.x_b):
            m.add(x == sum(self.y_bl[i]))
        for j, x in enumerate(self.x_l):
            m.add(x == sum(self.y_bl[i][j] for i in range(len(d.buffers))))
        # the one-hot product [u] x [b, l] (off-chip bytes and static power depend on all three)
        nu, nb, nl = len(d.units), len(d.buffers), len(d.l2s)
        self.w_ubl = [[[m.new_bool_var(f"units_buffer_l2[{int(d.units[a])},{int(d.buffers[i])},{int(d.l2s[j])}]")
                        for j in range(nl)] for i in range(nb)] for a in range(nu)]
        for a in range(nu):
            m.add(sum(self.w_ubl[a][i][j] for i in range(nb) for j in range(nl)) == self.x_u[a])
        for i in range(nb):
            for j in range(nl):
                m.add(sum(self.w_ubl[a][i][j] for a in range(nu)) == self.y_bl[i][j])
        self.i_u = m.new_int_var(0, len(d.units) - 1, "units_index")
        m.add(self.i_u == sum(i * x for i, x in enumerate(self.x_u)))
        self.u = m.new_int_var(int(d.units.min()), int(d.units.max()), "units")
        m.add(self.u == sum(int(u) * x for u, x in zip(d.units, self.x_u)))
        self.uphys = m.new_int_var(int(d.uphys.min()), int(d.uphys.max()), "units_physical")
        m.add(self.uphys == sum(int(p) * x for p, x in zip(d.uphys, self.x_u)))
        self.s = m.new_int_var(int(d.stacks.min()), int(d.stacks.max()), "stacks")
        m.add(self.s == sum(int(s) * x for s, x in zip(d.stacks, self.x_s)))
        # uphys x [b], pinned by the selectors
        self.uphys_at_b = []
        for b, x in zip(d.buffers, self.x_b):
            z = m.new_int_var(0, int(d.uphys.max()), f"units_physical_at_buffer[{int(b)}]")
            m.add(z == self.uphys).only_enforce_if(x)
            m.add(z == 0).only_enforce_if(~x)
            self.uphys_at_b.append(z)

    def _objective(self):
        d, m = self.d, self.m
        self.t, self.t_hi = [], []
        u_lo, s_lo = int(d.units.min()), int(d.stacks.min())
        nb, nl = len(d.buffers), len(d.l2s)
        for o, name in enumerate(d.op_names):
            comp, mem, little = self.comp[o], self.mem[o], self.little[o]
            hc = int(comp.max()) // u_lo + 1
            hm = int(mem.max()) // s_lo + 1
            hi = max(hc, hm, int(little.max()))
            # t_c = ceil(sum_f [f] C_f / u), t_m = ceil(sum_bl [b,l] M_bl / s): pinned on both sides
            tc = m.new_int_var(0, hc, f"t_compute[{name}]")
            tcu = m.new_int_var(0, hc * int(d.units.max()), f"t_compute_x_units[{name}]")
            m.add_multiplication_equality(tcu, [tc, self.u])
            c_sel = sum(int(c) * x for c, x in zip(comp, self.x_f))
            m.add(tcu >= c_sel)
            m.add(tcu <= c_sel + self.u - 1)
            tm = m.new_int_var(0, hm, f"t_memory[{name}]")
            tms = m.new_int_var(0, hm * int(d.stacks.max()), f"t_memory_x_stacks[{name}]")
            m.add_multiplication_equality(tms, [tm, self.s])
            nu = len(d.units)
            m_sel = sum(int(mem[a, i, j]) * self.w_ubl[a][i][j] for a in range(nu) for i in range(nb) for j in range(nl))
            m.add(tms >= m_sel)
            m.add(tms <= m_sel + self.s - 1)
            terms = [tc, tm]
            if math.isfinite(d.little_cap):
                tl = m.new_int_var(0, int(little.max()), f"t_little[{name}]")
                m.add(tl == sum(int(little[a, i, j]) * self.w_ubl[a][i][j]
                                for a in range(nu) for i in range(nb) for j in range(nl)))
                terms.append(tl)
            t = m.new_int_var(0, hi, f"t[{name}]")
            m.add_max_equality(t, terms)
            self.t.append(t)
            self.t_hi.append(hi)
        # weights as integers: as fine as the objective's int64 range allows (2^-30 at best)
        top = float(np.dot(d.weight, self.t_hi))
        self.w_scale = 2.0 ** min(30, math.floor(61 - math.log2(max(top, 1.0))))
        if self.w_scale < 1:
            raise SolverError("split solver: the objective does not fit CP-SAT's 64-bit integers; "
                              "narrow the space or the workload mix")
        self.w_int = [to_int(w * self.w_scale) for w in d.weight]
        self.objective = sum(w * t for w, t in zip(self.w_int, self.t))
        m.minimize(self.objective)

    def _constraints(self):
        d, m, lim = self.d, self.m, self.limit
        # reticle and shoreline: the die area in AREA_UNIT
        self.unit_a = [to_int(a, AREA_UNIT, "nearest") for a in d.unit_area]
        self.l2_a = [to_int(l2 * d.cache_area, AREA_UNIT) for l2 in d.l2s]
        self.phy_a, self.fixed_a = to_int(d.phy_area, AREA_UNIT), to_int(d.fixed_area, AREA_UNIT)
        area = (sum(c * z for c, z in zip(self.unit_a, self.uphys_at_b))
                + sum(c * x for c, x in zip(self.l2_a, self.x_l)) + self.phy_a * self.s + self.fixed_a)
        hi = to_int(d.uphys.max() * d.unit_area.max() + d.l2s.max() * d.cache_area + d.stacks.max() * d.phy_area
                    + d.fixed_area, AREA_UNIT, "up") + 1
        self.area = m.new_int_var(0, hi, "die_area")
        m.add(self.area == area)
        m.add(self.area <= to_int(d.reticle, AREA_UNIT, "down")).only_enforce_if(lim["reticle"])
        m.add(self.area >= sum(to_int(a, AREA_UNIT, "up") * x for a, x in zip(d.shore_area, self.x_s))
              ).only_enforce_if(lim["hbm_shoreline"])
        if math.isfinite(d.tdp):
            self._tdp()
        # capacity
        m.add(self.s >= math.ceil(d.resident / d.stack_capacity - 1e-12)).only_enforce_if(lim["fits_memory"])

    def _tdp(self):
        """P (t_o - 1) >= sum_ubl [u,b,l] E_o(u, b, l, f) for every operator (and clock f, where the energies
        depend on it): E_o / t_o <= TDP - static.

        Power in units of (TDP - static) / 2^PB (P = 2^PB), energy in that unit x q, rounded up; t_o - 1 <
        t_o(float) / q, so the integer limit implies the float one.
        """
        d, m = self.d, self.m
        rooms = d.tdp - d.static_power  # (U, B, L, F): the power beside each design's own static power
        room = float(rooms.max())  # the power unit's reference; each design's energy is scaled by room / its room
        nu, nb, nl = len(d.units), len(d.buffers), len(d.l2s)
        # P t_hi x (terms + 1) within int64: CP-SAT bounds a linear constraint by the sum of its terms' ranges; 9 bits
        # of headroom besides (at 61 bits CP-SAT 9.x's presolve proved a feasible space infeasible: h100-serving)
        pb = min(POWER_BITS, math.floor(52 - math.log2(max(self.t_hi) + 1) - math.log2(nu * nb * nl + 2)))
        w = self.w_ubl  # the one-hot product [u] x [b, l]
        lit = self.limit["tdp"]
        if room <= 0:
            m.add_bool_or([lit.negated()])  # no power beside the static power: no design meets the limit
            return
        unit = room / 2**pb
        p = 2**pb
        # one limit per operator where the energies do not depend on the clock, else one per operator and clock
        by_clock = not (np.allclose(d.energy, d.energy[..., :1], rtol=1e-12)
                        and np.allclose(rooms, rooms[..., :1], rtol=1e-12))
        for o, (t, hi) in enumerate(zip(self.t, self.t_hi)):
            cap = p * hi + 1  # an energy above P t_hi fails the limit whatever t_o is: any larger value will do
            for k in range(len(d.clocks) if by_clock else 1):
                r = rooms[..., k]
                with np.errstate(divide="ignore"):  # E_o / t_o <= room_ublf  <=>  E_o room / room_ublf <= room t_o
                    e = np.where(r > 0, d.energy[o, ..., k] * room / np.where(r > 0, r, 1.0), np.inf)
                if not np.any(e > 0):
                    continue
                coef = [[[min(to_int(min(e[a, i, j] / (unit * self.q), float(cap)), rounding="up"), cap)
                          for j in range(nl)] for i in range(nb)] for a in range(nu)]
                m.add(p * (t - 1) >= sum(coef[a][i][j] * w[a][i][j] for a in range(nu) for i in range(nb)
                                         for j in range(nl))).only_enforce_if([lit, self.x_f[k]] if by_clock else lit)

    def tie_key(self):
        """Among designs of the least time: the smallest die, then the first in the order of the space."""
        d = self.d
        n_b, n_l, n_s, n_f = len(d.buffers), len(d.l2s), len(d.stacks), len(d.clocks)
        index = (self.i_u * (n_b * n_l * n_s * n_f)
                 + sum(i * x for i, x in enumerate(self.x_b)) * (n_l * n_s * n_f)
                 + sum(j * x for j, x in enumerate(self.x_l)) * (n_s * n_f)
                 + sum(k * x for k, x in enumerate(self.x_s)) * n_f
                 + sum(k * x for k, x in enumerate(self.x_f)))
        return self.area * self.designs + index

    @property
    def designs(self) -> int:
        d = self.d
        return len(d.units) * len(d.buffers) * len(d.l2s) * len(d.stacks) * len(d.clocks)

    # ---- the same integer quantities with numpy (the grid's tie-break reproduces the solver's)
    def objective_of(self, iu, ib, il, is_, if_) -> np.ndarray:
        """The model's integer objective of designs at decision indices (numpy object ints: exact)."""
        d = self.d
        u = d.units[iu].astype(np.int64)[..., None]
        s = d.stacks[is_].astype(np.int64)[..., None]
        comp = np.moveaxis(self.comp[:, if_], 0, -1)
        mem = np.moveaxis(self.mem[:, iu, ib, il], 0, -1)
        little = np.moveaxis(self.little[:, iu, ib, il], 0, -1)
        t = np.maximum(np.maximum(-(-comp // u), -(-mem // s)), little)
        return (t.astype(object) * np.array(self.w_int, dtype=object)).sum(axis=-1)

    def area_of(self, iu, ib, il, is_) -> np.ndarray:
        d = self.d
        return (d.uphys[iu].astype(np.int64) * np.array(self.unit_a, dtype=np.int64)[ib]
                + np.array(self.l2_a, dtype=np.int64)[il] + self.phy_a * d.stacks[is_].astype(np.int64) + self.fixed_a)

    def conflict(self, deterministic_s: float, wall_s: float, seed: int) -> list[str]:
        """The limits that conflict: CP-SAT's core of assumed limits, shrunk to a minimal one by deletion.

        Each limit of the core is dropped in turn (a feasibility solve with the others assumed); it stays
        out when the rest is still infeasible. Without any limit the space is feasible (every decision has a
        value), so at least one limit remains.
        """
        solver, status = self.solve(deterministic_s, wall_s, seed)
        by_index = {lit.index: name for name, lit in self.limit.items()}
        core = [by_index[i] for i in solver.sufficient_assumptions_for_infeasibility() if i in by_index]
        core = core or list(CONSTRAINTS)
        probe = self.m.clone()
        probe.clear_objective()
        for name in list(core):
            rest = [c for c in core if c != name]
            probe.clear_assumptions()
            probe.add_assumptions([self.limit[c] for c in rest])
            check = new_solver(deterministic_s=deterministic_s, wall_s=wall_s, seed=seed, presolve=PRESOLVE)
            if rest and status_name(check.solve(probe)) == "INFEASIBLE":
                core = rest
        return core

    def solve(self, deterministic_s: float, wall_s: float, seed: int):
        solver = new_solver(deterministic_s=deterministic_s, wall_s=wall_s, seed=seed, presolve=PRESOLVE)
        return solver, status_name(solver.solve(self.m))


def _value_index(solver, xs) -> int:
    return next(i for i, x in enumerate(xs) if solver.value(x))


def solve_split(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
                reticle: float | None = None, deterministic_limit: float = DETERMINISTIC_LIMIT,
                time_limit_s: float = WALL_LIMIT_S, seed: int = 0) -> SplitChoice:
    """The die (units, local buffer, L2, HBM stacks, clock) that minimizes the mix's time (CP-SAT).

    Arguments as :func:`split_data`; ``deterministic_limit`` (CP-SAT deterministic seconds, per solve) is the
    limit that applies, ``time_limit_s`` the wall-clock safety net (dse.solvers.cpsat_common): a solve it stops
    before a proof is a SolverError, never another answer. Two solves on
    one model: the least time, then among designs of that time the smallest die (a unique answer). The
    chosen design is re-evaluated by the join; the result carries the join's figures (see
    :class:`SplitChoice`). Raises InfeasibleError naming the conflicting limits when no design of the space
    satisfies them, SolverError on a CP-SAT status other than OPTIMAL / FEASIBLE / INFEASIBLE, or when the
    join finds the chosen design over the TDP.
    """
    start = time.perf_counter()
    mix = _mix(workloads)
    d = split_data(base, mix, space, tdp=tdp, reticle=reticle)
    sm = _SplitModel(d)

    def wall_left() -> float:
        return max(time_limit_s - (time.perf_counter() - start), 0.0)

    def wall_check(status: str, what: str) -> None:
        """A solve the wall-clock safety net stopped before a proof is an error, not an answer (cpsat_common)."""
        if status not in ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID") and wall_left() <= 0:
            raise wall_limit_error(f"split solver ({what})", time_limit_s, deterministic_limit)

    solver, status = sm.solve(deterministic_limit, wall_left(), seed)
    wall_check(status, "the least time")
    if status == "INFEASIBLE":
        names = sm.conflict(deterministic_limit, wall_left(), seed)
        wall_check("UNKNOWN", "the conflicting limits")  # a probe cut short could change the names
        raise InfeasibleError(_infeasible_message(d, names))
    if status not in ("OPTIMAL", "FEASIBLE"):
        raise SolverError(f"split solver: CP-SAT returned {status}"
                          + (f" (the deterministic limit of {deterministic_limit:g} CP-SAT deterministic seconds ran "
                             f"out before a solution)" if status == "UNKNOWN" else "")
                          + (f" ({sm.m.validate()})" if status == "MODEL_INVALID" else ""))
    best = int(solver.value(sm.objective))
    bound = solver.best_objective_bound
    det, wall = solver.deterministic_time, solver.wall_time
    statuses = [status]
    # the tie-break: among designs of that time, the smallest die (then the first in the space's order)
    sm.m.add(sm.objective <= best)
    sm.m.minimize(sm.tie_key())
    tie, tie_status = sm.solve(deterministic_limit, wall_left(), seed)
    wall_check(tie_status, "the smallest die of the least time")
    statuses.append(tie_status)
    if tie_status in ("OPTIMAL", "FEASIBLE"):
        solver = tie
        det, wall = det + tie.deterministic_time, wall + tie.wall_time
    idx = (int(solver.value(sm.i_u)), _value_index(solver, sm.x_b), _value_index(solver, sm.x_l),
           _value_index(solver, sm.x_s), _value_index(solver, sm.x_f))
    iu, ib, il, is_, if_ = idx
    # ---- the join on the chosen design (the figures every other solver reports)
    join = evaluate_design(design_chips(d, *idx), mix)
    peak, limit_w = float(join["peak_power_w"][0]), float(join["tdp"][0])
    if math.isfinite(d.tdp) and peak > d.tdp * (1 + 1e-9):
        raise SolverError(f"split solver: the join puts the chosen design's peak power at {peak:.1f} W, over the "
                          f"TDP of {d.tdp:.1f} W that the split model meets; did a formula of dse.model change?")
    final = "OPTIMAL" if all(x == "OPTIMAL" for x in statuses) else "FEASIBLE"
    return SplitChoice(
        units=int(d.units[iu]), local_buffer=float(d.buffers[ib]), l2=float(d.l2s[il]), hbm_stacks=int(d.stacks[is_]),
        clock=float(d.clocks[if_]), time_s=float(join["time_s"][0]),
        model_time_s=best * sm.q / sm.w_scale, die_area_mm2=float(join["die_area_mm2"][0]), power_w=peak,
        status=final, solve_time_s=time.perf_counter() - start,
        model_power_w=float(d.power(iu, ib, il, is_, if_)),
        info={"wall_time_s": wall, "deterministic_time": det, "statuses": tuple(statuses), "time_unit_s": sm.q,
              "bound_s": bound * sm.q / sm.w_scale,
              "designs": sm.designs, "join_clock_ratio": float(join["clock_ratio"][0]),
              "join_tdp_w": peak - limit_w if math.isfinite(limit_w) else 0.0,
              "model_float_time_s": float(d.time_of(iu, ib, il, is_, if_))},
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
            lines.append("hbm_shoreline: s stacks need a die of at least " + ", ".join(
                f"{a:,.0f} mm^2 (s = {int(s)})" for s, a in zip(d.stacks, d.shore_area)))
        elif name == "tdp":
            # the peak power falls with the stacks and the clock (longer times, and energies no larger where the
            # voltage follows the clock): the least at the fewest stacks and the slowest clock
            iu, ib, il = (a.ravel() for a in np.indices((len(d.units), len(d.buffers), len(d.l2s))))
            p = float(np.min(d.power(iu, ib, il, np.zeros_like(iu), np.zeros_like(iu))))
            lines.append(f"tdp: the least peak power of the space is {p:,.1f} W, the TDP {d.tdp:,.1f} W")
        elif name == "fits_memory":
            lines.append(f"fits_memory: {d.resident:,.0f} B resident need {math.ceil(d.resident / d.stack_capacity)} "
                         f"stacks of {d.stack_capacity:,.0f} B; the space allows at most {int(d.stacks.max())}")
    what = (f"the {names[0]} limit" if len(names) == 1
            else ", ".join(names[:-1]) + f" and {names[-1]} together")
    return f"no design in the space satisfies {what} (CP-SAT proved it): " + "; ".join(lines)


# ------------------------------------------------------------------ grid (the oracle)


def split_grid(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
               reticle: float | None = None) -> dict:
    """Every combination of the space with numpy: the model's time and peak power from the data, the die
    area and the HBM shoreline from ``dse.model.area.package_area`` on the designs themselves, the
    constraint values from the ``constraints/`` modules (reticle, hbm_shoreline, tdp, fits_memory), and the
    join's metrics of every design (``join``: time_s, peak_power_w, die_area_mm2, clock_ratio). ``best`` is
    the index of the design the split solver must choose (the least model time, then the smallest die, then
    the first in the space's order, by the model's own integers), or None; ``time_s`` the join's time.
    """
    import constraints.fits_memory as c_mem
    import constraints.hbm_shoreline as c_shore
    import constraints.reticle as c_reticle
    import constraints.tdp as c_tdp

    mix = _mix(workloads)
    d = split_data(base, mix, space, tdp=tdp, reticle=reticle)
    sm = _SplitModel(d)
    shape = (len(d.units), len(d.buffers), len(d.l2s), len(d.stacks), len(d.clocks))
    iu, ib, il, is_, if_ = (a.ravel() for a in np.indices(shape))
    n = iu.size
    chips = design_chips(d, iu, ib, il, is_, if_)
    join = evaluate_design(chips, mix)
    pa = area_model.package_area(chips, process=d.process, memory=d.memory)
    model_power = d.power(iu, ib, il, is_, if_)
    metrics = {**pa.columns(), "peak_power_w": model_power, "tdp": np.full(n, d.tdp),
               "resident_bytes": np.full(n, d.resident), "capacity_bytes": d.stacks[is_] * d.stack_capacity}
    values = {"reticle": c_reticle.constraint(metrics, max=d.reticle),
              "hbm_shoreline": c_shore.constraint(metrics),
              "tdp": c_tdp.constraint(metrics),
              "fits_memory": c_mem.constraint(metrics)}
    feasible = np.all([v <= 0 for v in values.values()], axis=0)
    t = d.time_of(iu, ib, il, is_, if_)
    best = None
    if feasible.any():
        objective = sm.objective_of(iu, ib, il, is_, if_)
        key = sm.area_of(iu, ib, il, is_).astype(object) * sm.designs + np.arange(n)
        cand = np.flatnonzero(feasible)
        least = min(objective[cand])
        cand = cand[objective[cand] == least]
        best = int(cand[np.argmin(key[cand])])
    return {"time_s": np.asarray(join["time_s"]), "model_time_s": t, "feasible": feasible, "constraints": values,
            "die_area_mm2": pa.die_area_mm2, "model_die_area_mm2": d.die_area(iu, ib, il, is_),
            "model_power_w": model_power, "join": join, "index": (iu, ib, il, is_, if_),
            "params": {"units": d.units[iu], "local_buffer": d.buffers[ib], "l2": d.l2s[il],
                       "hbm.stacks": d.stacks[is_], "clock": d.clocks[if_]},
            "best": best, "data": d}
