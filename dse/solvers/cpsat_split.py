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

The split model is a surrogate: its roofline time T at the peak clock is a lower bound of the evaluator's time
(the evaluator adds wave quantization, launches, overheads, and slows an operator over its power ceiling),
and its tdp limit refuses designs that the evaluator throttles instead. The answer is the evaluator's optimum
over the space (:func:`solve_split`): CP-SAT's surrogate optimum is the first design to beat; CP-SAT then
enumerates every design of the relaxation (no tdp limit) whose T is at most the best evaluated time, and the
evaluator (the join, or a study's own objective and constraints) re-evaluates them all; no design left out can
beat the answer, since its T, a lower bound of its evaluator time, is already above it. The result reports the
evaluator's time, peak power and die area (``time_s``, ``power_w``, ``die_area_mm2``) beside the model's
(``model_time_s``, ``model_power_w``), and in ``info`` the surrogate's design with its evaluator time and
``surrogate_gap`` (how much slower by the evaluator it is than the answer), ``model_gap`` (evaluator /
model time of the answer, - 1) and how many designs were re-evaluated.

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
themselves, and the join's metrics of every design: the test oracle of the surrogate (``best``) and of the
answer (``join_best``, the evaluator's grid optimum).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse import technology
from dse.errors import InfeasibleError, SolverError, SpecError, unknown_name
from dse.evaluate import evaluate_design
from dse.hardware import ChipSpec, Chips, load_chip
from dse.model import area as area_model, links
from dse.model.evaluator import evaluate_workload, matrix_rate, op_table, power_inputs
from dse.solvers.cpsat_common import (DETERMINISTIC_LIMIT, WALL_LIMIT_S, cp_sat, new_solver, status_name,
                                      to_int, wall_limit_error)
from dse.space import ChoiceParam, DesignSpace, IntParam
from dse.units import format_quantity
from dse.workload import Workload

__all__ = ["SPLIT_PARAMS", "SplitData", "SplitChoice", "split_data", "solve_split", "split_grid", "join_evaluator",
           "CONSTRAINTS"]

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
#: The most designs one round of the evaluator's search re-evaluates (a count: the same answer on any machine)
MAX_CANDIDATES = 4096
#: AREA_UNITs the relaxation widens the reticle and the shoreline by (0.01 mm^2): far above the integer rounding
#: of the model's die area (1e-6 mm^2 per term), so no design the evaluator's area model admits is cut off
AREA_SLACK = 10_000


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
    static = power_inputs(ublf, most=False)["fixed1"].reshape(nu, nb, nl, nf)
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
    """The chosen die and what the evaluator says it costs.

    ``time_s``, ``power_w`` and ``die_area_mm2`` are the evaluator's (by default the join,
    :func:`dse.evaluate.evaluate_design` on the chosen design: the mix's time, its peak power ``peak_power_w``
    and the die area; a study's evaluator gives its objective as ``time_s``), the figures every other solver
    reports; ``model_time_s`` and ``model_power_w`` are the split model's (the roofline mix time and the peak
    power at the peak clock) of the same design. ``info``: the surrogate's design (``surrogate``: its params,
    model and evaluator times, status), ``surrogate_gap`` (its evaluator time over the answer's, - 1),
    ``model_gap`` (the answer's evaluator time over its model time, - 1), ``candidates`` (designs the
    enumeration returned), ``evaluated``, ``bound_s`` (every design left out has a model time above it), the
    answer's ``clock_ratio`` and the CP-SAT deterministic time used.
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

    def __init__(self, d: SplitData, limits: Sequence[str] = CONSTRAINTS, area_slack: int = 0):
        """``limits``: the limits the model has (all of CONSTRAINTS: the surrogate; the relaxation of the
        evaluator's search leaves tdp out, see :func:`solve_split`); ``area_slack``: AREA_UNITs the reticle and
        the shoreline are widened by (a relaxation that covers the integer rounding of the areas)."""
        self.d = d
        self.area_slack = int(area_slack)
        self.m = cp_sat().CpModel()
        self.limit = {name: self.m.new_bool_var(f"limit[{name}]") for name in CONSTRAINTS if name in limits}
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
        slack = self.area_slack
        if "reticle" in lim:
            m.add(self.area <= to_int(d.reticle, AREA_UNIT, "down") + slack).only_enforce_if(lim["reticle"])
        if "hbm_shoreline" in lim:
            m.add(self.area + slack >= sum(to_int(a, AREA_UNIT, "up") * x for a, x in zip(d.shore_area, self.x_s))
                  ).only_enforce_if(lim["hbm_shoreline"])
        if math.isfinite(d.tdp) and "tdp" in lim:
            self._tdp()
        # capacity
        if "fits_memory" in lim:
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
        core = core or list(self.limit)
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


def join_limits(d: SplitData, metrics, limits: Sequence[str] = CONSTRAINTS) -> dict[str, np.ndarray]:
    """The ``constraints/`` modules named in ``limits`` on the join's metrics of designs of ``d`` (<= 0 feasible):
    reticle at the split's reticle, tdp at the split's TDP (the join's peak power after its own throttling)."""
    import constraints.fits_memory as c_mem
    import constraints.hbm_shoreline as c_shore
    import constraints.reticle as c_reticle
    import constraints.tdp as c_tdp

    terms = {"reticle": lambda m: c_reticle.constraint(m, max=d.reticle),
             "hbm_shoreline": c_shore.constraint,
             "tdp": lambda m: c_tdp.constraint(m, max=d.tdp),
             "fits_memory": c_mem.constraint}
    return {name: np.asarray(terms[name](metrics), dtype=float) for name in limits}


def join_evaluator(d: SplitData, mix, limits: Sequence[str] = CONSTRAINTS):
    """The evaluator :func:`solve_split` judges designs by when none is given: the join
    (:func:`dse.evaluate.evaluate_design`) on :func:`design_chips`, the objective its mix time ``time_s``, and
    feasible where :func:`join_limits` are all <= 0.

    Returns ``evaluate(params) -> (objective, feasible, metrics)``, ``params`` a mapping of SPLIT_PARAMS to
    (N,) arrays of values of the space.
    """
    mix = _mix(mix)

    def evaluate(params):
        join = evaluate_design(design_chips(d, *indices_of(d, params)), mix)
        values = list(join_limits(d, join, limits).values())
        n = len(join["time_s"])
        feasible = np.all(np.array(values) <= 0, axis=0) if values else np.ones(n, dtype=bool)
        return np.asarray(join["time_s"], dtype=float), feasible, join

    return evaluate


def indices_of(d: SplitData, params) -> tuple[np.ndarray, ...]:
    """Decision indices (iu, ib, il, is, if) of designs given by their values (SPLIT_PARAMS -> arrays)."""
    out = []
    for name, vals in zip(SPLIT_PARAMS, (d.units, d.buffers, d.l2s, d.stacks, d.clocks)):
        v = np.atleast_1d(np.asarray(params[name], dtype=float))
        i = np.searchsorted(vals, v)
        i = np.minimum(i, len(vals) - 1)
        if not np.all(vals[i] == v):
            raise SpecError(f"split solver: {name} = {v[vals[i] != v][0]!r} is not a value of the space")
        out.append(i)
    return tuple(out)


def params_of(d: SplitData, iu, ib, il, is_, if_) -> dict[str, np.ndarray]:
    """The designs at decision indices as SPLIT_PARAMS -> (N,) values."""
    return {name: vals[np.atleast_1d(np.asarray(i, dtype=int))] for name, vals, i in
            zip(SPLIT_PARAMS, (d.units, d.buffers, d.l2s, d.stacks, d.clocks), (iu, ib, il, is_, if_))}


@functools.cache
def _enumerate_class():
    """The solution callback class (:func:`_enumerate`), made at its first use (OR-Tools is imported then:
    dse.solvers.cpsat_common.cp_sat)."""
    class _Enumerate(cp_sat().CpSolverSolutionCallback):
        """Collects the decision indices of every solution, up to ``cap`` (then stops: the round is incomplete)."""

        def __init__(self, sm: "_SplitModel", cap: int):
            super().__init__()
            self.sm, self.cap, self.found, self.capped = sm, int(cap), [], False

        def on_solution_callback(self):
            sm = self.sm
            if len(self.found) >= self.cap:
                self.capped = True
                self.stop_search()
                return
            self.found.append((int(self.value(sm.i_u)), _value_index(self, sm.x_b), _value_index(self, sm.x_l),
                               _value_index(self, sm.x_s), _value_index(self, sm.x_f)))
    return _Enumerate


def _enumerate(sm: "_SplitModel", cap: int):
    """A CP-SAT solution callback that collects the decision indices of every solution, up to ``cap`` (then
    stops the search: the round is incomplete, ``capped``)."""
    return _enumerate_class()(sm, cap)


def _bound_int(sm: "_SplitModel", bound_s: float) -> int:
    """An integer objective every design of model time <= ``bound_s`` (float s) stays within.

    Per operator the model's integer time is at most t_o / q + 2 (two roundings up) and its integer weight at
    most w_o W + 1/2 (W the weight scale), so the objective is at most (W / q) T + 2 W sum(w) + (1/2q) sum(t_o)
    + O, and sum(t_o) <= T / min(w).
    """
    d, q, ws = sm.d, sm.q, sm.w_scale
    w = d.weight[d.weight > 0]
    top = (ws / q) * bound_s + 2 * ws * float(d.weight.sum()) + 0.5 * bound_s / (q * float(w.min())) + len(d.weight)
    return int(math.floor(top)) + 1


def solve_split(base, workloads, space: DesignSpace | None = None, *, tdp: float | None = None,
                reticle: float | None = None, evaluate=None, limits: Sequence[str] = CONSTRAINTS,
                deterministic_limit: float = DETERMINISTIC_LIMIT, time_limit_s: float = WALL_LIMIT_S, seed: int = 0,
                max_candidates: int = MAX_CANDIDATES) -> SplitChoice:
    """The die (units, local buffer, L2, HBM stacks, clock) of the space that the evaluator finds fastest.

    Arguments as :func:`split_data`. ``evaluate``: the evaluator that judges the designs,
    ``evaluate(params) -> (objective, feasible, metrics)`` (see :func:`join_evaluator`, the default; a study
    passes its own objective and constraints: dse.study.cpsat); its objective must be the mix's time (the
    split model's roofline time is a lower bound of it, checked on every design it evaluates). ``limits``: the
    constraints the evaluator imposes (the relaxation below keeps those of them it models, tdp aside).

    Two steps (the module doc):

    1. the surrogate: CP-SAT's optimum of the roofline model at the peak clock under all four limits (two solves:
       the least time, then the smallest die of that time): a first design to beat;
    2. the evaluator's optimum: the model's time T(x) is a lower bound of the evaluator's time, so no design
       with T(x) above the best evaluated time V can beat it. CP-SAT enumerates (solution callback) every design
       of the relaxation -- the model without the tdp limit (the evaluator throttles a design over its TDP
       instead of refusing it) and with the reticle and the shoreline widened by AREA_SLACK -- whose T(x) is at
       most V, and the evaluator re-evaluates them all in one call; the best feasible by the evaluator is the
       answer (ties: the smallest die, then the first in the space's order). Where the surrogate has no
       feasible design the bound starts at the relaxation's least time x 1.05 and grows until the evaluator
       finds one.

    ``status`` is OPTIMAL when that enumeration was complete (so the answer is the evaluator's optimum over the
    space), FEASIBLE when ``max_candidates`` designs or the deterministic limit cut a round short.
    ``deterministic_limit`` (CP-SAT deterministic seconds, per solve) is the limit that applies,
    ``time_limit_s`` the wall-clock safety net (dse.solvers.cpsat_common): a solve it stops before a proof is a
    SolverError, never another answer. Raises InfeasibleError naming the conflicting limits when no design of
    the space is feasible, SolverError on a CP-SAT status other than OPTIMAL / FEASIBLE / INFEASIBLE, or when
    the evaluator's time falls below the model's (the model is then no bound; a formula of dse.model changed).
    """
    start = time.perf_counter()
    mix = _mix(workloads)
    d = split_data(base, mix, space, tdp=tdp, reticle=reticle)
    limits = tuple(n for n in CONSTRAINTS if n in tuple(limits))
    if evaluate is None:
        evaluate = join_evaluator(d, mix, limits)
    sm = _SplitModel(d)

    def wall_left() -> float:
        return max(time_limit_s - (time.perf_counter() - start), 0.0)

    def wall_check(status: str, what: str) -> None:
        """A solve the wall-clock safety net stopped before a proof is an error, not an answer (cpsat_common)."""
        if status not in ("OPTIMAL", "INFEASIBLE", "MODEL_INVALID") and wall_left() <= 0:
            raise wall_limit_error(f"split solver ({what})", time_limit_s, deterministic_limit)

    # ---- 1. the surrogate: the roofline model's optimum (all four limits, the peak clock held)
    solver, status = sm.solve(deterministic_limit, wall_left(), seed)
    wall_check(status, "the least time")
    det = solver.deterministic_time
    statuses = [status]
    surrogate, conflict = None, None
    if status == "INFEASIBLE":
        conflict = sm.conflict(deterministic_limit, wall_left(), seed)
        wall_check("UNKNOWN", "the conflicting limits")  # a probe cut short could change the names
    elif status not in ("OPTIMAL", "FEASIBLE"):
        raise SolverError(f"split solver: CP-SAT returned {status}"
                          + (f" (the deterministic limit of {deterministic_limit:g} CP-SAT deterministic seconds ran "
                             f"out before a solution)" if status == "UNKNOWN" else "")
                          + (f" ({sm.m.validate()})" if status == "MODEL_INVALID" else ""))
    else:
        best = int(solver.value(sm.objective))
        bound = solver.best_objective_bound
        # the tie-break: among designs of that time, the smallest die (then the first in the space's order)
        sm.m.add(sm.objective <= best)
        sm.m.minimize(sm.tie_key())
        tie, tie_status = sm.solve(deterministic_limit, wall_left(), seed)
        wall_check(tie_status, "the smallest die of the least time")
        statuses.append(tie_status)
        if tie_status in ("OPTIMAL", "FEASIBLE"):
            solver = tie
            det += tie.deterministic_time
        surrogate = {"index": (int(solver.value(sm.i_u)), _value_index(solver, sm.x_b), _value_index(solver, sm.x_l),
                               _value_index(solver, sm.x_s), _value_index(solver, sm.x_f)),
                     "status": "OPTIMAL" if all(x == "OPTIMAL" for x in statuses) else "FEASIBLE",
                     "model_objective_s": best * sm.q / sm.w_scale, "model_bound_s": bound * sm.q / sm.w_scale}

    # ---- 2. the evaluator's optimum: every design whose model time is within the best evaluated time
    seen: dict[tuple, tuple[float, bool, float]] = {}  # index -> (objective, feasible, die area)
    least: dict[str, float] = {}  # limit -> the least value (<= 0 feasible) among the evaluated designs

    def judge(idx: list[tuple]) -> None:
        new = [i for i in dict.fromkeys(idx) if i not in seen]
        if not new:
            return
        cols = tuple(np.array(c, dtype=int) for c in zip(*new))
        obj, ok, m = evaluate(params_of(d, *cols))
        obj, ok = np.asarray(obj, dtype=float), np.asarray(ok, dtype=bool)
        lower = d.time_of(*cols)
        low = np.isfinite(obj) & (obj < lower * (1 - 1e-9))
        if low.any():
            k = int(np.argmax(low))
            raise SolverError(f"split solver: the evaluator's objective of {params_of(d, *(c[k:k + 1] for c in cols))} "
                              f"is {obj[k]:.6g}, below the split model's time {lower[k]:.6g} s: the model is no "
                              f"lower bound of it (is the objective the mix's time? did a formula of dse.model change?)")
        area = np.asarray(m["die_area_mm2"], dtype=float)
        for name, v in join_limits(d, m, limits).items():  # for the message, should nothing be feasible
            least[name] = min(least.get(name, math.inf), float(np.nanmin(v)) if np.isfinite(v).any() else math.inf)
        for j, i in enumerate(new):
            seen[i] = (float(obj[j]), bool(ok[j]) and bool(np.isfinite(obj[j])), float(area[j]))

    shape = (len(d.units), len(d.buffers), len(d.l2s), len(d.stacks), len(d.clocks))

    def incumbent():
        ok = [(v, a, int(np.ravel_multi_index(i, shape)), i) for i, (v, f, a) in seen.items() if f]
        return min(ok)[3] if ok else None

    relaxed_limits = tuple(n for n in limits if n != "tdp")
    rounds, candidates, proven, bound_s = 0, 0, False, math.inf
    if surrogate is not None:
        judge([surrogate["index"]])
    inc = incumbent()
    if inc is not None:
        bound_s = seen[inc][0]
    else:  # no design known feasible: start from the relaxation's least time
        r = _SplitModel(d, limits=relaxed_limits, area_slack=AREA_SLACK)
        rs, rstatus = r.solve(deterministic_limit, wall_left(), seed)
        wall_check(rstatus, "the relaxation's least time")
        det += rs.deterministic_time
        if rstatus == "INFEASIBLE":
            names = r.conflict(deterministic_limit, wall_left(), seed)
            wall_check("UNKNOWN", "the conflicting limits")
            raise InfeasibleError(_infeasible_message(d, names))
        if rstatus not in ("OPTIMAL", "FEASIBLE"):
            raise SolverError(f"split solver: CP-SAT returned {rstatus} on the relaxation of the split model")
        bound_s = float(rs.value(r.objective)) * r.q / r.w_scale * 1.05
    top_s = float(np.dot(d.weight, sm.t_hi)) * sm.q  # above every design's model time
    while True:
        rounds += 1
        r = _SplitModel(d, limits=relaxed_limits, area_slack=AREA_SLACK)
        r.m.clear_objective()
        if math.isfinite(bound_s):
            r.m.add(r.objective <= _bound_int(r, bound_s))
        enum = new_solver(deterministic_s=deterministic_limit, wall_s=wall_left(), seed=seed, presolve=PRESOLVE)
        enum.parameters.enumerate_all_solutions = True
        cb = _enumerate(r, max_candidates)
        estatus = status_name(enum.solve(r.m, cb))
        wall_check(estatus, "the designs within the bound")
        det += enum.deterministic_time
        complete = estatus in ("OPTIMAL", "INFEASIBLE") and not cb.capped
        candidates += len(cb.found)
        judge(cb.found)
        inc = incumbent()
        if inc is not None and seen[inc][0] <= bound_s:
            proven = complete  # every design outside has a model time, so an evaluator time, above the answer's
            break
        if not complete or not math.isfinite(bound_s):
            break
        grown = bound_s * 4 if bound_s * 4 < top_s else math.inf
        bound_s = min(seen[inc][0], grown) if inc is not None else grown
    if inc is None:
        if complete and not math.isfinite(bound_s):
            raise InfeasibleError(_evaluator_infeasible_message(d, least, len(seen)))
        raise SolverError(f"split solver: no design the evaluator finds feasible among the {len(seen):,} it evaluated "
                          f"before the limit of {max_candidates:,} candidates or {deterministic_limit:g} deterministic "
                          f"seconds per round")

    # ---- the answer, with the evaluator's figures, and the surrogate beside it
    iu, ib, il, is_, if_ = inc
    obj, _, m = evaluate(params_of(d, *inc))
    value = float(obj[0])
    sur = None
    if surrogate is not None:
        si = surrogate["index"]
        sv, sok, _ = seen[si]
        sur = {"params": {k: float(v[0]) for k, v in params_of(d, *si).items()}, "status": surrogate["status"],
               "model_time_s": float(d.time_of(*si)), "time_s": sv, "feasible": sok,
               "gap": sv / value - 1 if sok else math.nan}
    model_t = float(d.time_of(iu, ib, il, is_, if_))
    return SplitChoice(
        units=int(d.units[iu]), local_buffer=float(d.buffers[ib]), l2=float(d.l2s[il]), hbm_stacks=int(d.stacks[is_]),
        clock=float(d.clocks[if_]), time_s=value, model_time_s=model_t,
        die_area_mm2=float(np.asarray(m["die_area_mm2"])[0]), power_w=float(np.asarray(m["peak_power_w"])[0]),
        status="OPTIMAL" if proven else "FEASIBLE", solve_time_s=time.perf_counter() - start,
        model_power_w=float(d.power(iu, ib, il, is_, if_)),
        info={"deterministic_time": det, "statuses": tuple(statuses), "time_unit_s": sm.q,
              "designs": sm.designs, "candidates": candidates, "evaluated": len(seen), "rounds": rounds,
              "bound_s": bound_s, "surrogate": sur, "surrogate_conflict": tuple(conflict) if conflict else (),
              "surrogate_gap": sur["gap"] if sur else math.nan,
              "model_gap": value / model_t - 1,
              "clock_ratio": float(np.asarray(m["clock_ratio"])[0]) if "clock_ratio" in m else math.nan},
    )


def _evaluator_infeasible_message(d: SplitData, least: Mapping[str, float], n: int) -> str:
    """No design the evaluator finds feasible, after it re-evaluated all ``n`` within the relaxation: each limit
    that rejects every one of them alone, with the best any of them does against it (the evaluator's figures)."""
    alone = [k for k, v in least.items() if v > 0] or [k for k, v in least.items() if math.isfinite(v)]
    what = (f"the {alone[0]} limit" if len(alone) == 1 else ", ".join(alone[:-1]) + f" and {alone[-1]} together")
    parts = []
    for k in alone:
        v = least[k]
        if k == "tdp":
            parts.append(f"tdp: the least peak power of them, after the evaluator's throttling, is "
                         f"{format_quantity(v + d.tdp, 'power')}, the TDP {format_quantity(d.tdp, 'power')}")
        elif k == "reticle":
            parts.append(f"reticle: the smallest die of them is {format_quantity(v + d.reticle, 'area')}, the reticle "
                         f"{format_quantity(d.reticle, 'area')}")
        elif k == "hbm_shoreline":
            parts.append(f"hbm_shoreline: at best {v:g} stacks over what the die's edges hold")
        elif k == "fits_memory":
            parts.append(f"fits_memory: at best {format_quantity(v, 'bytes')} short of the capacity needed")
        else:
            parts.append(f"{k}: at best {v:g} over its limit")
    return (f"no design in the space satisfies {what} by the evaluator (it re-evaluated all {n:,} designs within the "
            f"split model's other limits): " + "; ".join(parts))


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
    the first in the space's order, by the model's own integers): the surrogate's optimum, or None; ``time_s``
    the join's time. ``join_feasible`` / ``join_constraints``: the constraint modules on the join's own metrics
    (:func:`join_limits`), ``join_best``: the evaluator's optimum (the least join time among those, then the
    smallest die, then the first in the space's order), the design :func:`solve_split` must return.
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
    # the evaluator's grid: the join's time, feasible by the constraint modules on the join's own metrics
    joined = join_limits(d, join)
    join_ok = np.all([v <= 0 for v in joined.values()], axis=0) & np.isfinite(np.asarray(join["time_s"], dtype=float))
    join_best = None
    if join_ok.any():
        cand = np.flatnonzero(join_ok)
        jt = np.asarray(join["time_s"], dtype=float)
        order = np.lexsort((cand, np.asarray(join["die_area_mm2"], dtype=float)[cand], jt[cand]))
        join_best = int(cand[order[0]])
    return {"time_s": np.asarray(join["time_s"]), "model_time_s": t, "feasible": feasible, "constraints": values,
            "join_feasible": join_ok, "join_constraints": joined, "join_best": join_best,
            "die_area_mm2": pa.die_area_mm2, "model_die_area_mm2": d.die_area(iu, ib, il, is_),
            "model_power_w": model_power, "join": join, "index": (iu, ib, il, is_, if_),
            "params": {"units": d.units[iu], "local_buffer": d.buffers[ib], "l2": d.l2s[il],
                       "hbm.stacks": d.stacks[is_], "clock": d.clocks[if_]},
            "best": best, "data": d}
