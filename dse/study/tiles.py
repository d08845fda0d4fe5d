"""CP-SAT tiles for every design point of a study (``solver.tiles``), cached by what determines them.

A search (NSGA-II, TPE, random, grid) varies the hardware; with ``solver.tiles: cpsat`` each design point's
GEMM-like operators run on the tiles that minimize the evaluator's time for *that* design (then its off-chip
traffic, then its energy): :func:`dse.solvers.cpsat_tiles.solve_tiles`, proven optimal (status OPTIMAL) or, where its
deterministic work limit or solve count ends a search, the best tiling found, which the brute force then
checks (see that module). It is a bilevel search: the outer sampler picks chips, the inner CP-SAT picks
kernels, so a front of chips is not ranked by an untuned kernel heuristic (issue 18: on an RTX 4090 the
Q projection at M = 256 takes 103.2 us on the default 96 x 96 tiles, 129 tiles on 128 units = two waves,
and 52.01 us on CP-SAT's).

What determines a tile answer, and so the two cache levels of :class:`TileCache`:

1. the operator (shape, batch, formats; not its name or count) and the design point's chip arrays (every
   number the evaluator reads, its formats, node and memory technology): a repeated design, or the same
   operator twice in one workload (Q and O projections), is looked up without any work;
2. the operator and its *tile data* (:func:`dse.solvers.tile_data.tile_data`): every constant of the tile
   model, which the evaluator's own tables give (units, instruction, local buffer, accumulator, register
   file, L2 panels and re-read caps, split-K spill point, effective bandwidth, unit rate, vector time,
   the power budget, the energies and the clock law). Two designs that differ only in what the tile model does
   not read (memory capacity, the HBM stack size, the area of the uncore, a cost figure, ...) share one
   CP-SAT solve. Computing the data is one small evaluator call (~ms), a solve ~10 ms to ~0.3 s.

Operators with no tile that fits (InfeasibleError) keep the evaluator's default tiles, so such a design is
scored as before and the ``buffer_fit`` constraint rejects it as before; they are counted.

Whether to solve (``solver.tiles``): ``heuristic`` never, ``cpsat`` always, ``auto`` (the default) when a
budget check says it is affordable: the number of distinct tile problems the study can meet is estimated
before the run (:func:`estimate`), as (distinct designs as far as the tile model can tell) x (distinct
GEMM-like operators of a design); ``auto`` solves when that is at most :data:`AUTO_MAX_SOLVES`. A parameter
counts if changing it (from its first value to its last) changes some operator's tile data at the first
design point; a continuous one has as many values as trials (grid: its resolution). The default study (a
continuous clock, 2,000 trials, ~7 distinct GEMMs) is ~14,000 problems: heuristic. ``cpsat`` runs whatever
the estimate; it is reported in the run's meta (``tiles``).

A system of chips (``system.chips`` other than 1: tensor or pipeline parallel) is one chip with summed
resources in the evaluator, which the tile model does not build: ``cpsat`` is refused there and ``auto``
keeps the heuristic.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from dse.errors import DseError, SpecError
from dse.solvers.tile_data import tile_data
from dse.space import ChoiceParam, IntParam, LogParam
from dse.spec.study import TILE_MODES, has_systems, system_problem
from dse.study.problem import design_groups, design_space, evaluate_points
from dse.study.tile_cache import TileCache, data_key, evaluation_tag, op_key, study_cache

__all__ = ["TILE_MODES", "AUTO_MAX_SOLVES", "TileCache", "TileDecision", "study_cache", "decide", "estimate",
           "system_problem", "op_key", "data_key", "evaluation_tag", "front_effect", "tiles_meta"]

#: ``auto`` solves CP-SAT tiles when the study can meet at most this many distinct tile problems. Measured
#: (2 shared cores): ~7-15 ms CPU per solve for decode GEMMs and unthrottled chips, ~0.1-0.3 s where the
#: TDP throttles (prefill on an H100: 1.1 s for Qwen3-8B's 10 GEMMs); 64 problems are a few seconds at
#: worst, about what the evaluator spends on a 2,000-trial study. Larger studies ask for ``cpsat``.
AUTO_MAX_SOLVES = 64


# ------------------------------------------------------------------ the budget check


@dataclass(frozen=True)
class TileDecision:
    """What ``solver.tiles`` asked for, what the run uses, why, and the estimate it rests on."""

    requested: str
    used: str
    reason: str
    estimated_problems: float | None = None
    designs: float | None = None
    gemms: int | None = None
    relevant: tuple = ()

    def to_meta(self) -> dict:
        est = self.estimated_problems
        return {"requested": self.requested, "used": self.used, "reason": self.reason,
                "estimated_problems": None if est is None else (est if math.isfinite(est) else "unbounded"),
                "gemms_per_design": self.gemms, "parameters_that_change_tiles": list(self.relevant),
                "auto_max_problems": AUTO_MAX_SOLVES}


def _values(p, grid: bool, resolution: int) -> float:
    """Distinct values the search can give parameter ``p`` (inf: a continuous range sampled)."""
    if grid:
        return float(len(p.grid_values(resolution)))
    if isinstance(p, ChoiceParam):
        return float(len(p.choices))
    if isinstance(p, IntParam):
        return float(p.size)
    if isinstance(p, LogParam) and p.integer:
        return float(p.high - p.low + 1)
    return math.inf


def _first_and_last(p):
    if isinstance(p, ChoiceParam):
        return p.choices[0], p.choices[-1]
    return p.low, p.high


def estimate(spec) -> tuple[float, float, int, tuple[str, ...]]:
    """(distinct tile problems, distinct designs as the tile model sees them, GEMMs per design, the parameters
    that change tiles): see the module doc."""
    space = design_space(spec)
    params = list(space)
    n = 1 + len(params)
    batch = {}
    for i, p in enumerate(params):
        first, last = _first_and_last(p)
        col = np.empty(n, dtype=object if isinstance(p, ChoiceParam) else float)
        for r in range(n):
            col[r] = last if r == i + 1 else first
        if isinstance(p, ChoiceParam) and all(not isinstance(c, str) for c in p.choices):
            col = col.astype(float)
        batch[p.name] = col
    keys: list = [None] * n
    for idx, chips, mix in design_groups(spec, batch):
        for r_local, r in enumerate(idx):
            one = chips.take([r_local])
            ks = set()
            for wl, _ in mix:
                for op in wl.ops:
                    if op.m > 0 and op.n > 0 and op.k > 0:
                        try:
                            ks.add((op_key(op), data_key(tile_data(op_key(op), one))))
                        except DseError as e:
                            ks.add((op_key(op), ("error", str(e))))
            keys[r] = frozenset(ks)
    gemms = len(keys[0])
    relevant = tuple(p.name for i, p in enumerate(params) if keys[i + 1] != keys[0])
    grid = spec.solver.method == "grid"
    designs = 1.0
    for p in params:
        if p.name in relevant:
            designs *= _values(p, grid, spec.solver.resolution)
    designs = min(designs, float(spec.solver.trials) if not grid else space.grid_size(spec.solver.resolution))
    return designs * gemms, designs, gemms, relevant


def decide(spec) -> TileDecision:
    """Resolve ``solver.tiles`` for a run (see the module doc): 'heuristic' or 'cpsat', with the reason."""
    mode = getattr(spec.solver, "tiles", "auto")
    if mode == "heuristic":
        return TileDecision(mode, "heuristic", "solver.tiles: heuristic (the evaluator's default tiles)")
    if has_systems(spec):
        if mode == "cpsat":
            raise SpecError(f"{spec.path}: {system_problem()}")
        return TileDecision(mode, "heuristic", "auto: the study has systems of several chips, which the CP-SAT "
                                               "tile model does not build; the evaluator's default tiles")
    problems, designs, gemms, relevant = estimate(spec)
    shown = "unbounded (a continuous parameter changes them)" if not math.isfinite(problems) else f"{problems:,.0f}"
    if mode == "cpsat":
        return TileDecision(mode, "cpsat", f"solver.tiles: cpsat; estimated distinct tile problems: {shown}",
                            problems, designs, gemms, relevant)
    if problems <= AUTO_MAX_SOLVES:
        return TileDecision(mode, "cpsat", f"auto: {shown} distinct tile problems estimated (<= {AUTO_MAX_SOLVES}): "
                                           f"CP-SAT tiles are affordable", problems, designs, gemms, relevant)
    return TileDecision(mode, "heuristic", f"auto: {shown} distinct tile problems estimated (> {AUTO_MAX_SOLVES}): "
                                           f"the evaluator's default tiles; set solver.tiles: cpsat to solve them",
                        problems, designs, gemms, relevant)


# ------------------------------------------------------------------ what the tiles changed


def _front_hv(F: np.ndarray, feasible: np.ndarray, directions, ideal, nadir) -> float:
    from dse.pareto import hypervolume, normalize, to_minimization

    a = to_minimization(F, directions)[feasible]
    a = a[np.all(np.isfinite(a), axis=1)]
    if not len(a):
        return 0.0
    z = normalize(a, ideal, nadir)
    m = z.shape[1]
    return float(hypervolume(z, np.full(m, 1.1), ("minimize",) * m))


def front_effect(spec, table) -> dict:
    """How much the CP-SAT tiles changed the front: every design of ``table`` (evaluated on CP-SAT tiles)
    evaluated again on the evaluator's default tiles, both fronts compared on the same designs.

    ``hypervolume_cpsat`` / ``hypervolume_heuristic``: of each front, the objectives normalized by the union of
    both fronts (ideal 0, nadir 1, every objective minimized), reference point 1.1; ``ratio`` the first over
    the second. ``front_*``: front sizes, and how many designs are on both. ``objective_change`` per objective
    on the CP-SAT front: the heuristic value over the CP-SAT value (median, min, max; > 1 for a minimized
    objective means CP-SAT's tiles made it better). ``time_ratio``: heuristic / CP-SAT step time over the
    feasible designs (median, max).
    """
    from dse.pareto import pareto_mask, to_minimization
    from dse.solvers.base import feasible_mask

    names = design_space(spec).names
    if not len(table):
        return {}
    params = {n: table[f"p.{n}"].to_numpy() for n in names}
    heur = dataclasses.replace(spec, solver=dataclasses.replace(spec.solver, tiles="heuristic"))
    with np.errstate(all="ignore"):
        m = evaluate_points(heur, params)
        F_h = np.column_stack([t(m) for t in spec.objectives]).astype(float)
        G_h = (np.column_stack([t(m) for t in spec.constraints]).astype(float) if spec.constraints
               else np.zeros((len(F_h), 0)))
    F_c = table[[f"obj.{t.name}" for t in spec.objectives]].to_numpy(dtype=float)
    feas_c = table["feasible"].to_numpy(dtype=bool)
    feas_h = feasible_mask(F_h, G_h)
    dirs = tuple(t.direction for t in spec.objectives)
    front_c = pareto_mask(F_c, dirs, feas_c) if feas_c.any() else np.zeros(len(F_c), bool)
    front_h = pareto_mask(F_h, dirs, feas_h) if feas_h.any() else np.zeros(len(F_h), bool)
    out: dict = {"designs": int(len(table)), "feasible_cpsat": int(feas_c.sum()), "feasible_heuristic": int(feas_h.sum()),
                 "front_cpsat": int(front_c.sum()), "front_heuristic": int(front_h.sum()),
                 "front_both": int((front_c & front_h).sum())}
    both = np.vstack([to_minimization(F_c, dirs)[front_c], to_minimization(F_h, dirs)[front_h]])
    both = both[np.all(np.isfinite(both), axis=1)]
    if len(both):
        ideal, nadir = both.min(axis=0), both.max(axis=0)
        hv_c = _front_hv(F_c, front_c, dirs, ideal, nadir)
        hv_h = _front_hv(F_h, front_h, dirs, ideal, nadir)
        out.update(hypervolume_cpsat=hv_c, hypervolume_heuristic=hv_h,
                   hypervolume_ratio=(hv_c / hv_h) if hv_h > 0 else None)
    change = {}
    for j, t in enumerate(spec.objectives):
        with np.errstate(all="ignore"):
            r = F_h[front_c, j] / F_c[front_c, j]
        r = r[np.isfinite(r)]
        if len(r):
            change[t.name] = {"median": float(np.median(r)), "min": float(r.min()), "max": float(r.max())}
    out["objective_change"] = change
    if "m.time_s" in table:
        ok = feas_c & feas_h
        with np.errstate(all="ignore"):
            r = np.asarray(m["time_s"], dtype=float)[ok] / table["m.time_s"].to_numpy(dtype=float)[ok]
        r = r[np.isfinite(r)]
        if len(r):
            out["time_ratio"] = {"median": float(np.median(r)), "max": float(r.max())}
    return out


def tiles_meta(spec, decision: TileDecision, table, before: dict) -> dict:
    """The run's ``meta['tiles']``: the decision, the cache's work during the run, the change of the front."""
    out = decision.to_meta()
    if decision.used != "cpsat":
        return out
    after = study_cache(spec).snapshot()
    out["cache"] = {k: (round(after.get(k, 0) - before.get(k, 0), 6) if isinstance(after.get(k, 0), float)
                        else int(after.get(k, 0) - before.get(k, 0))) for k in sorted(after)}
    out["effect"] = front_effect(spec, table)
    return out
