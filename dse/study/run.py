"""One study, end to end: spec -> space -> solver -> results files and reports."""

from __future__ import annotations

import dataclasses
import fcntl
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import DseError, InfeasibleError, SpecError
from dse.fileio import open_no_follow, output_folder, remove_stale_temps
from dse.report import write_reports
from dse.solvers.grid import GridSolver
from dse.solvers.optuna_search import OptunaSolver
from dse.spec.study import StudySpec, load_study
from dse.study.meta import meta_of  # noqa: F401 (re-exported: dse.study.run.meta_of)
from dse.study import cpsat as study_cpsat, tiles as study_tiles
from dse.study.distributed import run_workers
from dse.study.problem import MetricsLog, catalog_points, design_space, make_problem, results_table
from dse.study.results import write_results


class OutputLock:
    """Refuses a second `dse run` on the same output folder without a shared storage (flock on .lock)."""

    def __init__(self, out: Path):
        self.path = out / ".lock"
        self.fh = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open_no_follow(self.path, "w")
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


def run_study(path, *, trials: int | None = None, workers: int | None = None, storage: str | None = None,
              seed: int | None = None, out: str | Path | None = None, progress: bool = False,
              write: bool = True) -> pd.DataFrame:
    """Run a study file; returns the results table (and writes the results folder)."""
    for label, v in (("trials", trials), ("workers", workers)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
            raise SpecError(f"run_study: {label} must be an integer >= 1 (or None for the study's own), got {v!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                             or not 0 <= seed < 2**32):
        raise SpecError(f"run_study: seed must be an integer in [0, 2**32), got {seed!r}")
    spec = load_study(path, out_given=out is not None)
    s = spec.solver
    s = dataclasses.replace(s, trials=trials or s.trials, workers=workers or s.workers,
                            storage=storage if storage is not None else s.storage,
                            seed=seed if seed is not None else s.seed)
    spec = dataclasses.replace(spec, solver=s, output=Path(out) if out else spec.output)
    if write:
        _output_folder(spec.output)
    if spec.scenarios:
        return _run_scenarios(spec, progress=progress, write=write)
    return _run(spec, progress=progress, write=write)


def _output_folder(out: Path) -> None:
    """Create the output folder, or say in one line why it cannot be (dse.fileio.output_folder)."""
    output_folder(out)


def _slug(name: str) -> str:
    """A scenario's folder name: its name with anything but letters, digits, '-' and '_' as '-'."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-") or "scenario"


def _run_scenarios(spec: StudySpec, *, progress: bool, write: bool) -> pd.DataFrame:
    """Every design of the space on every scenario (issue 17: scenarios kept apart from design variables).

    Each scenario is the study with its own workloads, run into ``<output>/<scenario>/`` (its results and
    report, ``pareto_rank`` its own front); the table stacks them with ``scenario`` and ``weight`` columns and
    adds the weighted mix (scenario ``mix``: per design the weighted means of the objectives, feasible only
    where every scenario is, ranked by its own front). ``<output>/scenarios.csv`` holds the whole table.
    """
    from dse.fileio import atomic_write
    from dse.pareto import non_dominated_sort

    tables = []
    for name, weight, wls in spec.scenarios:
        sub = dataclasses.replace(spec, workloads=wls, scenarios=(), output=spec.output / _slug(name))
        t = _run(sub, progress=progress, write=write, require_feasible=False)
        t.insert(1, "scenario", name)
        t.insert(2, "weight", weight)
        tables.append(t)
    table = pd.concat(tables, ignore_index=True)
    pcols = [c for c in table.columns if c.startswith("p.")]
    ocols = [f"obj.{t.name}" for t in spec.objectives]
    key = table[pcols].astype(str).agg("|".join, axis=1)
    share = table["weight"] / table.groupby(key)["weight"].transform("sum")
    counts = key.map(key.value_counts())
    common = counts == len(spec.scenarios)  # designs every scenario evaluated (all of them on a grid)
    mixed = table[common][ocols].mul(share[common], axis=0).groupby(key[common], sort=False).sum()
    first = table[common].groupby(key[common], sort=False).first()
    mix = first[pcols].assign(**{c: mixed[c] for c in ocols})
    mix["feasible"] = table[common].groupby(key[common], sort=False)["feasible"].all()
    mix = mix.reset_index(drop=True)
    F = mix[ocols].to_numpy(dtype=float)
    ok = mix["feasible"].to_numpy(dtype=bool) & np.all(np.isfinite(F), axis=1)
    mix["pareto_rank"] = non_dominated_sort(F, [t.direction for t in spec.objectives], ok) if len(mix) else []
    mix.insert(0, "scenario", "mix")
    mix.insert(1, "weight", float(sum(w for _, w, _ in spec.scenarios)))
    table = pd.concat([table, mix], ignore_index=True)
    if write:
        spec.output.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(spec.output, subfolders=())
        atomic_write(spec.output / "scenarios.csv", table.to_csv(index=False))
    if not table["feasible"].any():
        causes = []
        for name, _, _ in spec.scenarios:
            t = table[table["scenario"] == name]
            counts = {c[4:]: int((t[c] > 0).sum()) for c in t.columns if c.startswith("con.")}
            worst = max(counts, key=counts.get) if counts else None
            causes.append(f"{name}: {worst} rejects {counts[worst]} of {len(t)}" if worst else f"{name}: -")
        raise InfeasibleError(f"{spec.path}: no design of the space is feasible in any scenario ("
                              + "; ".join(causes) + ")")
    return table


def _run(spec: StudySpec, *, progress: bool, write: bool, require_feasible: bool = True) -> pd.DataFrame:
    """One study (one scenario): the solver, the results table, the results folder."""
    s = spec.solver
    if s.method in ("cpsat_tiles", "cpsat_split"):  # exact sub-problems: their own tables and reports
        run = study_cpsat.run_tiles if s.method == "cpsat_tiles" else study_cpsat.run_split
        try:
            return run(spec, Path(spec.output), write=write)
        except DseError as e:  # name the study: the solver's message is about its data, not a file position
            msg = str(e)
            raise type(e)(msg if msg.startswith(str(spec.path)) else f"{spec.path}: {msg}") from None
    t0 = time.perf_counter()
    decision = study_tiles.decide(spec)  # solver.tiles: auto / heuristic / cpsat -> what this run uses
    spec = dataclasses.replace(spec, solver=dataclasses.replace(s, tiles=decision.used))
    s = spec.solver
    cache_before = study_tiles.study_cache(spec).snapshot() if decision.used == "cpsat" else {}
    log = MetricsLog(design_space(spec).names)
    problem = make_problem(spec, log)
    out_dir = spec.output
    lock = OutputLock(out_dir) if s.storage is None else _NoLock()
    with lock:
        if write:  # a write killed half-way left temp files: gone now (this folder is ours while locked)
            remove_stale_temps(out_dir)
        storage_url = s.storage or str(out_dir / "study.journal")
        bar = _Progress(s.trials, problem) if progress else None
        if s.method == "grid":
            solver = GridSolver(problem, seed=s.seed, budget=s.trials, resolution=s.resolution)
        else:
            solver = OptunaSolver(problem, seed=s.seed, budget=s.trials, method=s.method, batch=s.batch,
                                  storage=storage_url, study_name=spec.name, population=s.population,
                                  prescreen=s.prescreen,
                                  progress=bar.update if bar else None, evaluation=study_tiles.evaluation_tag(s))
        try:
            if s.method != "grid" and (s.workers > 1 or s.storage is not None):  # shared storage: dse.study.distributed
                run_workers(spec, storage_url, bar=bar.bar if bar else None)
            result = solver.run()
        finally:
            if bar:
                bar.close()
        table = results_table(spec, result, problem, log)
        meta = meta_of(spec, problem, result, time.perf_counter() - t0)
        meta["tiles"] = study_tiles.tiles_meta(spec, decision, table, cache_before)
        if write:
            cat = catalog_points(spec)
            write_results(out_dir, table, meta, cat)
            write_reports(out_dir, table, meta, cat)
        if require_feasible:
            result.require_feasible()  # no feasible point: the report is written, the CLI exits 2 naming the cause
    return table


class _NoLock:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Lines:
    """The progress outside a terminal (a log, a pipe, CI): one plain line per tenth of the budget, instead of a
    bar's carriage returns (issue 19). The interface of the tqdm bar that dse uses: n, refresh, close."""

    def __init__(self, total: int, stream=None):
        self.total, self.n, self.postfix = max(int(total), 1), 0, ""
        self.stream = stream if stream is not None else sys.stderr
        self._shown = 0

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def refresh(self) -> None:
        step = self.n * 10 // self.total
        if step > self._shown:
            self._shown = step
            print(f"dse: {self.n:,} of {self.total:,} designs evaluated"
                  + (f"; best so far: {self.postfix}" if self.postfix else ""), file=self.stream, flush=True)

    def close(self) -> None:
        if self._shown < 10 and self.n:
            self._shown = 9
            self.refresh()


class _Progress:
    """tqdm bar (plain lines outside a terminal) with the best value so far of each objective among feasible
    points."""

    def __init__(self, total: int, problem):
        from tqdm import tqdm

        self.bar = (tqdm(total=total, unit="design", dynamic_ncols=True) if sys.stderr.isatty()
                    else _Lines(total))
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
