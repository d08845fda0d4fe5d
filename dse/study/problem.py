"""A study as an optimization problem: its design space and the evaluation of a batch of design points.

The evaluation of a batch (:func:`evaluate_points`) builds the chips (base +
overrides + the batch's parameters) and calls the one join,
:func:`dse.evaluate.evaluate_design`, on the study's workload mix. Rows are
grouped by their categorical values (an HBM generation, a process node, a
number format), so each group is one vectorized call. :func:`make_problem`
keeps the metrics of every batch it evaluates, so the results table reuses
them and each design is evaluated once per run (trials other workers stored
are evaluated once, when the table is built).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from dse.errors import SpecError
from dse.evaluate import BOUND_NAMES, evaluate_design
from dse.hardware import Chips, catalog, load_chip, with_overrides
from dse.solvers.base import Problem
from dse.space import ChoiceParam, DesignSpace, FloatParam, IntParam, LogParam
from dse.spec.study import StudySpec, WORKLOAD_PARAM_PREFIX
from dse.study.tile_cache import study_cache
from dse.workload import build


def design_space(spec: StudySpec) -> DesignSpace:
    params = []
    for e in spec.space:
        if e.kind == "choice":
            params.append(ChoiceParam(e.name, tuple(e.choices)))
        elif e.kind == "int":
            if e.dimension is None:
                params.append(IntParam(e.name, int(e.low), int(e.high), int(e.step)))
            else:
                params.append(FloatParam(e.name, float(e.low), float(e.high)))
        elif e.kind == "float":
            params.append(FloatParam(e.name, float(e.low), float(e.high)))
        else:
            params.append(LogParam(e.name, float(e.low), float(e.high), integer=e.dimension is None))
    if not params:
        raise SpecError(f"{spec.path}: the study has no design space (add a 'space:' section)")
    return DesignSpace(tuple(params))


@functools.lru_cache(maxsize=256)
def _workload(key: tuple):
    return build(_thaw(key))


def _freeze(d):
    """A hashable, order-independent key for a (nested) workload mapping."""
    def one(v):
        if isinstance(v, dict):
            return ("__map__", _freeze(v))
        if isinstance(v, list):
            return ("__list__", tuple(one(x) for x in v))
        return v
    return tuple(sorted((k, one(v)) for k, v in d.items()))


def _thaw(key):
    def one(v):
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "__map__":
            return _thaw(v[1])
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "__list__":
            return [one(x) for x in v[1]]
        return v
    return {k: one(v) for k, v in key}


def group_workloads(spec: StudySpec, wparams: dict[str, object]):
    out = []
    for body, weight in spec.workloads:
        b = {k: v for k, v in body.items()}
        for name, value in wparams.items():
            sub = name[len(WORKLOAD_PARAM_PREFIX):]
            if sub.startswith("formats."):
                f = dict(b.get("formats") or {})
                f[sub.split(".", 1)[1]] = value
                b["formats"] = f
            elif "model" in b:
                b[sub] = int(value)
        out.append((_workload(_freeze(b)), weight))
    return out


_VARIANTS: dict = {}
_BASES: dict = {}


def _base_of(spec: StudySpec, chip_cat: tuple):
    """The study's base chip, or the catalog chip a ``base`` choice names (then the study's overrides apply)."""
    name = dict(chip_cat).get("base")
    if name is None:
        return spec.base
    key = (str(name), tuple(sorted((k, str(v)) for k, v in spec.overrides.items())))
    if key not in _BASES:
        chip = load_chip(str(name))
        _BASES[key] = with_overrides(chip, spec.overrides) if spec.overrides else chip
    return _BASES[key]


def _variant(base, items: tuple):
    """The base chip with categorical values applied (cached: a few variants per study)."""
    if not items:
        return base
    key = (id(base), tuple((k, str(v)) for k, v in items))
    if key not in _VARIANTS:
        _VARIANTS[key] = with_overrides(base, {k: (v.item() if hasattr(v, "item") else v) for k, v in items})
    return _VARIANTS[key]


def design_groups(spec: StudySpec, params: dict[str, np.ndarray]):
    """The batch as groups of one vectorized evaluation each: ``(indices, chips, workload mix)``.

    Rows are grouped by their categorical values (a base chip, an HBM generation, a number format): each group
    is the base chip with those values applied, broadcast over its rows with their numeric values.
    """
    n = len(next(iter(params.values()))) if params else 1
    cat_keys = [k for k, v in params.items()
                if k.startswith(WORKLOAD_PARAM_PREFIX) or np.asarray(v).dtype.kind in "OUS"]
    num_keys = [k for k in params if k not in cat_keys]
    if cat_keys:
        combos = pd.DataFrame({k: np.asarray(params[k]) for k in cat_keys}).astype(str)
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(combos))
    else:
        codes, uniques = np.zeros(n, dtype=int), [()]
    for g in range(len(uniques)):
        idx = np.nonzero(codes == g)[0]
        first = idx[0]
        chip_cat = tuple((k, params[k][first]) for k in cat_keys if not k.startswith(WORKLOAD_PARAM_PREFIX))
        wl_cat = {k: params[k][first] for k in cat_keys if k.startswith(WORKLOAD_PARAM_PREFIX)}
        base = _variant(_base_of(spec, chip_cat), tuple((k, v) for k, v in chip_cat if k != "base"))
        chips = Chips.from_base(base, len(idx), {k: np.asarray(params[k], dtype=float)[idx] for k in num_keys})
        yield idx, chips, group_workloads(spec, wl_cat)


def evaluate_points(spec: StudySpec, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Metrics (N,) for a batch of design points: evaluator + area + cost, mixed over workloads.

    With ``solver.tiles: cpsat`` every GEMM-like operator of every point runs on its CP-SAT tiles
    (:mod:`dse.study.tile_cache`, cached by what determines them); otherwise on the evaluator's default tiles.
    """
    n = len(next(iter(params.values()))) if params else 1
    tile_fn = study_cache(spec).workload_tiles if getattr(spec.solver, "tiles", "heuristic") == "cpsat" else None
    out: dict[str, np.ndarray] = {}
    for idx, chips, mix in design_groups(spec, params):
        m = evaluate_design(chips, mix, tiles_for=tile_fn).columns
        if len(idx) == n:  # (one group, every point in order: each metric copied as it is, not scattered)
            return {k: np.array(v) for k, v in m.items()}
        for k, v in m.items():
            if k not in out:
                out[k] = np.empty(n, dtype=v.dtype if v.dtype != bool else bool)
            out[k][idx] = v
    return out


class MetricsLog:
    """The metrics of every batch a problem evaluated, found again by the points' parameter values.

    The results table takes a trial's metrics from here instead of evaluating it a
    second time; a trial evaluated elsewhere (another worker) is not here and is
    evaluated once when the table is built.
    """

    def __init__(self, names: tuple[str, ...]):
        self.names = tuple(names)
        self._batches: list[dict[str, np.ndarray]] = []
        self._where: dict[tuple, tuple[int, int]] = {}

    def _keys(self, params) -> list[tuple]:
        cols = [np.asarray(params[n]).tolist() for n in self.names]
        return list(zip(*cols)) if cols else []

    def add(self, params, metrics: dict[str, np.ndarray]) -> None:
        b = len(self._batches)
        self._batches.append(metrics)
        for i, key in enumerate(self._keys(params)):
            self._where.setdefault(key, (b, i))

    def metrics(self, spec: StudySpec, params) -> dict[str, np.ndarray]:
        """Metrics (N,) of the points ``params``: logged ones reused, the others evaluated now."""
        keys = self._keys(params)
        n = len(keys)
        found = [self._where.get(k) for k in keys]
        missing = np.array([i for i, f in enumerate(found) if f is None], dtype=int)
        fresh = evaluate_points(spec, {k: np.asarray(v)[missing] for k, v in params.items()}) if len(missing) else {}
        names = list(self._batches[0]) if self._batches else list(fresh)
        out: dict[str, np.ndarray] = {}
        for k in names:
            ref = self._batches[0][k] if self._batches else fresh[k]
            col = np.empty(n, dtype=ref.dtype)
            for i, f in enumerate(found):
                if f is not None:
                    col[i] = self._batches[f[0]][k][f[1]]
            if len(missing):
                col[missing] = fresh[k]
            out[k] = col
        return out


def make_problem(spec: StudySpec, log: MetricsLog | None = None):
    """The study as a :class:`~dse.solvers.base.Problem`; ``log`` keeps the metrics of every evaluated batch."""
    space = design_space(spec)
    obj_names = tuple(f"obj.{t.name}" for t in spec.objectives)
    con_names = tuple(f"con.{t.name}" for t in spec.constraints)

    def evaluate(params):
        m = evaluate_points(spec, params)
        if log is not None:
            log.add(params, m)
        F = np.column_stack([t(m) for t in spec.objectives]) if spec.objectives else np.zeros((len(m["time_s"]), 0))
        G = np.column_stack([t(m) for t in spec.constraints]) if spec.constraints else np.zeros((F.shape[0], 0))
        return F, G

    units = {e.name: e.dimension for e in spec.space}

    def describe(params) -> str:  # what optuna-dashboard shows beside Optuna's raw SI parameters
        from dse.study.results import format_value

        return ", ".join(f"{k} = {format_value(v, units.get(k))}" for k, v in params.items())

    return Problem(space=space, evaluate=evaluate, objective_names=obj_names,
                   directions=tuple(t.direction for t in spec.objectives), constraint_names=con_names,
                   describe=describe)


def results_table(spec: StudySpec, result, problem, log: MetricsLog | None = None) -> pd.DataFrame:
    """The solver's table in the results schema: trial, p.*, obj.*, con.*, m.*, feasible, pareto_rank.

    Metrics come from ``log`` (the batches the solver evaluated) where it has them.
    """
    t = result.table.reset_index(drop=True)
    params = {name: t[name].to_numpy() for name in problem.space.names}
    if not len(t):
        m = {}
    elif log is not None:
        m = log.metrics(spec, params)
    else:
        m = evaluate_points(spec, params)
    # (the frame is built from all its columns at once: ~100 metric columns inserted one by one fragmented it,
    # and pandas warned on every such run)
    n = len(t)
    cols: dict[str, object] = {"trial": np.arange(n)}
    for name in problem.space.names:
        cols[f"p.{name}"] = t[name].to_numpy()
    for c in problem.objective_names + problem.constraint_names:
        cols[c] = t[c].to_numpy()
    for k, v in m.items():
        if k == "bound_code":
            cols["m.bound"] = BOUND_NAMES[np.asarray(v, dtype=int)]
        else:
            cols[f"m.{k}"] = np.broadcast_to(v, (n,)) if np.ndim(v) == 0 else v
    cols["feasible"] = t["feasible"].to_numpy()
    cols["pareto_rank"] = t["pareto_rank"].to_numpy()
    return pd.DataFrame(cols)


def catalog_points(spec: StudySpec) -> pd.DataFrame:
    """The catalog chips evaluated on the study's workloads and objectives (reference markers)."""
    rows = []
    for chip in catalog():
        try:
            chips = Chips.from_specs([chip])
            m = evaluate_design(chips, group_workloads(spec, {})).columns
        except Exception:  # a catalog chip the study's workload cannot run (e.g. no format): no marker
            continue
        row = {"chip": chip.name}
        for t in spec.objectives:
            try:
                row[f"obj.{t.name}"] = float(t(m)[0])
            except Exception:
                row[f"obj.{t.name}"] = np.nan
        # the study's constraints on the chip as it is (issue 19: a chip that cannot hold the model was plotted
        # and called "not dominated"); an uncomputable constraint counts as met
        violated = []
        for t in spec.constraints:
            try:
                v = float(t(m)[0])
            except Exception:
                v = np.nan
            row[f"con.{t.name}"] = v
            if v > 0:
                violated.append(t.name)
        row["feasible"] = not violated
        row["violations"] = ", ".join(violated)
        for k, v in m.items():
            if k != "bound_code":
                row[f"m.{k}"] = float(np.asarray(v, dtype=float)[0])
        rows.append(row)
    return pd.DataFrame(rows)


