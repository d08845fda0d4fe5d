"""One study, end to end: spec -> space -> solver -> results files and reports.

The study's evaluation of a batch of design points (:func:`evaluate_points`)
is the join of the chip (base + overrides + the batch's parameters), the
workload mix, the evaluator, the area/cost model and the constraint and
objective catalogs. Rows are grouped by their categorical values (an HBM
generation, a process node, a number format), so each group is one
vectorized evaluator call.

Workload mix: each workload's metrics are combined with the study's weights
(normalized): weighted means for times, energies, throughputs and powers;
the worst case for what must hold for every workload (resident bytes, peak
power, quantization error, fits, and the smallest max batch).
"""

from __future__ import annotations

import fcntl
import functools
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import DseError, SpecError
from dse.evaluate import BOUND_NAMES, evaluate_arrays
from dse.hardware import Chips, catalog, with_overrides
from dse.space import ChoiceParam, DesignSpace, FloatParam, IntParam, LogParam
from dse.study_spec import WORKLOAD_PARAM_PREFIX, StudySpec, load_study

WORST = {"resident_bytes": np.max, "peak_power_w": np.max, "quant_error": np.max, "max_batch": np.min,
         "fits": np.min, "capacity_bytes": np.min, "tdp": np.min}
NON_NUMERIC = ("bound_code",)


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
    from dse.workload import build

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


def _group_workloads(spec: StudySpec, wparams: dict[str, object]):
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
        from dse.hardware import load_chip

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


def evaluate_points(spec: StudySpec, params: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Metrics (N,) for a batch of design points: evaluator + area + cost, mixed over workloads."""
    n = len(next(iter(params.values()))) if params else 1
    cat_keys = [k for k, v in params.items()
                if k.startswith(WORKLOAD_PARAM_PREFIX) or np.asarray(v).dtype.kind in "OUS"]
    num_keys = [k for k in params if k not in cat_keys]
    if cat_keys:
        combos = pd.DataFrame({k: np.asarray(params[k]) for k in cat_keys}).astype(str)
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(combos))
    else:
        codes, uniques = np.zeros(n, dtype=int), [()]
    out: dict[str, np.ndarray] = {}
    for g in range(len(uniques)):
        idx = np.nonzero(codes == g)[0]
        first = idx[0]
        chip_cat = tuple((k, params[k][first]) for k in cat_keys if not k.startswith(WORKLOAD_PARAM_PREFIX))
        wl_cat = {k: params[k][first] for k in cat_keys if k.startswith(WORKLOAD_PARAM_PREFIX)}
        base = _variant(_base_of(spec, chip_cat), tuple((k, v) for k, v in chip_cat if k != "base"))
        chips = Chips.from_base(base, len(idx), {k: np.asarray(params[k], dtype=float)[idx] for k in num_keys})
        m = _metrics_for(chips, base, _group_workloads(spec, wl_cat))
        for k, v in m.items():
            if k not in out:
                out[k] = np.empty(n, dtype=v.dtype if v.dtype != bool else bool)
            out[k][idx] = v
    return out


def _metrics_for(chips: Chips, base, workloads, **evaluate_options) -> dict[str, np.ndarray]:
    """Evaluator + area + cost for ``chips`` (built on ``base``); ``evaluate_options`` go to evaluate_arrays
    (e.g. weights_in_rom, as the what-if passes them)."""
    from dse.model import area as area_mod
    from dse.model import cost as cost_mod

    total_w = sum(w for _, w in workloads)
    per = [(evaluate_arrays(chips, wl, **evaluate_options), w / total_w) for wl, w in workloads]
    m: dict[str, np.ndarray] = {}
    for key in per[0][0]:
        if key.startswith("_"):
            continue
        vals = np.stack([np.asarray(a[key], dtype=float) for a, _ in per])
        if key in WORST:
            m[key] = WORST[key](vals, axis=0)
        elif key == "bound_code":
            m[key] = per[int(np.argmax([w for _, w in per]))][0][key]
        else:
            weights = np.array([w for _, w in per])[:, None]
            with np.errstate(invalid="ignore"):
                m[key] = np.nansum(vals * weights, axis=0) if not np.all(np.isnan(vals)) else vals[0]
    m["fits"] = m["fits"] > 0.5
    mem = base.hbm.generation if base.hbm else (base.dram.kind if base.dram else None)
    pa = area_mod.package_area(chips, process=base.process, memory=mem)
    m.update(pa.columns())
    cc = cost_mod.chip_cost(chips, pa, process=base.process, memory=mem)
    m.update(cc.columns())
    n_sys = chips.get("system.chips", 1.0)
    if np.any(n_sys != 1):  # a system of chips: its silicon and cost add up
        m["total_silicon_area_mm2"] = m["total_silicon_area_mm2"] * n_sys
        m["chip_cost_usd"] = m["chip_cost_usd"] * n_sys
    m["power_density_w_per_mm2"] = m["peak_power_w"] / np.maximum(pa.total_silicon_area_mm2, 1e-9)
    m["local_buffer_bytes"] = chips.get("local_buffer", 0.0) + 0.0
    return m


def make_problem(spec: StudySpec):
    from dse.solvers.base import Problem

    space = design_space(spec)
    obj_names = tuple(f"obj.{t.name}" for t in spec.objectives)
    con_names = tuple(f"con.{t.name}" for t in spec.constraints)

    def evaluate(params):
        m = evaluate_points(spec, params)
        F = np.column_stack([t(m) for t in spec.objectives]) if spec.objectives else np.zeros((len(m["time_s"]), 0))
        G = np.column_stack([t(m) for t in spec.constraints]) if spec.constraints else np.zeros((F.shape[0], 0))
        return F, G

    return Problem(space=space, evaluate=evaluate, objective_names=obj_names,
                   directions=tuple(t.direction for t in spec.objectives), constraint_names=con_names)


class OutputLock:
    """Refuses a second `dse run` on the same output folder without a shared storage (flock on .lock)."""

    def __init__(self, out: Path):
        self.path = out / ".lock"
        self.fh = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "w")
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.fh.close()
            raise SpecError(f"{self.path.parent}: another `dse run` is using this output folder; wait for it, "
                            f"use --out for another folder, or share a --storage URL between workers") from None
        self.fh.write(str(os.getpid()))
        self.fh.flush()
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fh, fcntl.LOCK_UN)
        self.fh.close()


def results_table(spec: StudySpec, result, problem) -> pd.DataFrame:
    """The solver's table in the results schema: trial, p.*, obj.*, con.*, m.*, feasible, pareto_rank."""
    t = result.table.reset_index(drop=True)
    params = {name: t[name].to_numpy() for name in problem.space.names}
    m = evaluate_points(spec, params) if len(t) else {}
    out = pd.DataFrame({"trial": np.arange(len(t))})
    for name in problem.space.names:
        out[f"p.{name}"] = t[name].to_numpy()
    for c in problem.objective_names + problem.constraint_names:
        out[c] = t[c].to_numpy()
    for k, v in m.items():
        if k == "bound_code":
            out["m.bound"] = BOUND_NAMES[np.asarray(v, dtype=int)]
        else:
            out[f"m.{k}"] = v
    out["feasible"] = t["feasible"].to_numpy()
    out["pareto_rank"] = t["pareto_rank"].to_numpy()
    return out


def catalog_points(spec: StudySpec) -> pd.DataFrame:
    """The catalog chips evaluated on the study's workloads and objectives (reference markers)."""
    rows = []
    for chip in catalog():
        try:
            chips = Chips.from_specs([chip])
            m = _metrics_for(chips, chip, _group_workloads(spec, {}))
        except Exception:  # a catalog chip the study's workload cannot run (e.g. no format): no marker
            continue
        row = {"chip": chip.name}
        for t in spec.objectives:
            try:
                row[f"obj.{t.name}"] = float(t(m)[0])
            except Exception:
                row[f"obj.{t.name}"] = np.nan
        for k, v in m.items():
            if k != "bound_code":
                row[f"m.{k}"] = float(np.asarray(v, dtype=float)[0])
        rows.append(row)
    return pd.DataFrame(rows)


def meta_of(spec: StudySpec, problem, result, elapsed: float) -> dict:
    return {
        "name": spec.name,
        "question": spec.question,
        "study_file": str(spec.path),
        "objectives": [{"name": t.name, "direction": t.direction, "unit": t.unit} for t in spec.objectives],
        "constraints": [{"name": t.name, "unit": t.unit, "params": dict(t.params)} for t in spec.constraints],
        "space": [{"name": e.name, "kind": e.kind, "low": e.low, "high": e.high,
                   "choices": [str(c) for c in e.choices], "unit": e.dimension} for e in spec.space],
        "solver": {k: getattr(spec.solver, k) for k in ("method", "trials", "batch", "seed", "workers", "storage")},
        "workloads": [{**{k: str(v) for k, v in body.items()}, "weight": w} for body, w in spec.workloads],
        "base_chip": spec.base_name,
        "n_trials": int(result.n_evaluated),
        "n_feasible": int(result.n_feasible),
        "status": result.status,
        "message": result.message,
        "seed": spec.solver.seed,
        "elapsed_s": round(elapsed, 3),
    }


def run_study(path, *, trials: int | None = None, workers: int | None = None, storage: str | None = None,
              seed: int | None = None, out: str | Path | None = None, progress: bool = False,
              write: bool = True) -> pd.DataFrame:
    """Run a study file; returns the results table (and writes the results folder)."""
    import dataclasses

    spec = load_study(path)
    s = spec.solver
    s = dataclasses.replace(s, trials=trials or s.trials, workers=workers or s.workers,
                            storage=storage if storage is not None else s.storage,
                            seed=seed if seed is not None else s.seed)
    spec = dataclasses.replace(spec, solver=s, output=Path(out) if out else spec.output)
    if s.method in ("cpsat_tiles", "cpsat_split"):  # exact sub-problems: their own tables and reports
        from dse import study_cpsat

        run = study_cpsat.run_tiles if s.method == "cpsat_tiles" else study_cpsat.run_split
        try:
            return run(spec, Path(spec.output), write=write)
        except DseError as e:  # name the study: the solver's message is about its data, not a file position
            msg = str(e)
            raise type(e)(msg if msg.startswith(str(spec.path)) else f"{spec.path}: {msg}") from None
    problem = make_problem(spec)
    t0 = time.perf_counter()
    out_dir = spec.output
    lock = OutputLock(out_dir) if s.storage is None else _NoLock()
    with lock:
        storage_url = s.storage or str(out_dir / "study.journal")
        bar = _Progress(s.trials, problem) if progress else None
        if s.method == "grid":
            from dse.solvers.grid import GridSolver

            solver = GridSolver(problem, seed=s.seed, budget=s.trials, resolution=s.resolution)
        else:
            from dse.solvers.optuna_search import OptunaSolver

            solver = OptunaSolver(problem, seed=s.seed, budget=s.trials, method=s.method, batch=s.batch,
                                  storage=storage_url, study_name=spec.name, population=s.population,
                                  progress=bar.update if bar else None)
        try:
            if s.method != "grid" and (s.workers > 1 or s.storage is not None):  # shared storage: dse.distributed
                from dse.distributed import run_workers
                run_workers(spec, storage_url, bar=bar.bar if bar else None)
            result = solver.run()
        finally:
            if bar:
                bar.close()
        table = results_table(spec, result, problem)
        meta = meta_of(spec, problem, result, time.perf_counter() - t0)
        if write:
            from dse.report import write_reports
            from dse.results import write_results

            cat = catalog_points(spec)
            write_results(out_dir, table, meta, cat)
            write_reports(out_dir, table, meta, cat)
        result.require_feasible()  # no feasible point: the report is written, the CLI exits 2 naming the cause
    return table


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Progress:
    """tqdm bar with the best value so far of each objective among feasible points."""

    def __init__(self, total: int, problem):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="design", dynamic_ncols=True)
        self.problem = problem

    def update(self, k: int, solver) -> None:
        best = []
        batches = solver._batches
        if batches:
            F = np.concatenate([b[1] for b in batches])
            G = np.concatenate([b[2] for b in batches])
            ok = np.all(G <= 0, axis=1) if G.size else np.ones(len(F), bool)
            if ok.any():
                for j, (name, d) in enumerate(zip(self.problem.objective_names, self.problem.directions)):
                    col = F[ok, j]
                    best.append(f"{name[4:]}={(col.min() if d == 'minimize' else col.max()):.4g}")
        self.bar.set_postfix_str(" ".join(best) or "no feasible design yet")
        self.bar.n = solver.n_evaluated
        self.bar.refresh()

    def close(self):
        self.bar.close()
