"""Studies solved exactly by CP-SAT: tile shapes per operator, and the resource split of one die.

`solver: {method: cpsat_tiles}`: for every base chip (the study's base, or each
of a `base: {choice: [...]}` space entry) and every workload, the tile shape of
each GEMM-like operator that minimizes its time (tie-break: off-chip traffic),
proven optimal (dse.solvers.cpsat_tiles). Writes `tiles.csv`, `report.md`, `report.html` and
`plots/tiles.png` (dse.report.exact: each workload's time with these tiles against the heuristic's).

`solver: {method: cpsat_split}`: the units, local buffer, L2, HBM stacks and
clock of one die (the study's space) that minimize the workload mix's time
under reticle, shoreline, TDP and capacity: the study's own evaluator's
optimum over the space (its objective and constraints on every design that
CP-SAT's roofline bound cannot rule out), proven (dse.solvers.cpsat_split). Writes `split.csv` and, for the chosen die evaluated as any study's design,
the results and reports every study writes (trials, pareto.csv, catalog.csv, report.md, report.html,
plots/*.png).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.fileio import atomic_write
from dse.hardware import Chips, load_chip, with_overrides
from dse.report.exact import write_tiles_report
from dse.solvers.cpsat_split import solve_split
from dse.solvers.cpsat_tiles import solve_workload_tiles
from dse.study.problem import (MetricsLog, catalog_points, design_space, evaluate_points, group_workloads,
                               make_problem, results_table)
from dse.units import format_quantity


def _bases(spec) -> list:
    entry = next((e for e in spec.space if e.name == "base"), None)
    if entry is None:
        return [spec.base]
    return [with_overrides(load_chip(c), spec.overrides) if spec.overrides else load_chip(c) for c in entry.choices]


def _workloads(spec) -> list:
    return group_workloads(spec, {})


def run_tiles(spec, out_dir: Path, write: bool = True) -> pd.DataFrame:
    """Optimal tiles of every GEMM-like operator, per base chip and workload."""

    rows = []
    t0 = time.perf_counter()
    for chip in _bases(spec):
        chips = Chips.from_specs([chip])
        for wl, _ in _workloads(spec):
            tiles = solve_workload_tiles(wl, chip, seed=spec.solver.seed)
            solved = evaluate_design(chips, wl, tiles=tiles)["time_s"][0]
            heuristic = evaluate_design(chips, wl)["time_s"][0]
            for name, c in tiles.choices.items():
                rows.append({"chip": chip.name, "workload": wl.name, "op": name, "t_m": c.tm, "t_n": c.tn,
                             "t_k": c.tk, "split_k": c.split_k, "slots": c.slots, "time_s": c.time_s,
                             "traffic_bytes": c.traffic_bytes, "working_set_bytes": c.working_set_bytes,
                             "clock_ratio": c.clock_ratio, "status": c.status, "solve_cpu_s": c.cpu_time_s,
                             "workload_time_s": solved, "workload_time_heuristic_s": heuristic})
    table = pd.DataFrame(rows)
    if write:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / "tiles.csv", table.to_csv(index=False))
        meta = {"name": spec.name, "question": spec.question, "base_chip": ", ".join(c.name for c in _bases(spec)),
                "workloads": [w.name for w, _ in _workloads(spec)],
                "solver": {"method": "cpsat_tiles", "seed": spec.solver.seed},
                "elapsed_s": round(time.perf_counter() - t0, 3)}
        write_tiles_report(out_dir, table, meta)
    return table


def run_split(spec, out_dir: Path, write: bool = True) -> pd.DataFrame:
    """The resource split of one die for the study's workload mix: the study evaluator's optimum over the space."""
    t0 = time.perf_counter()

    tdp = next((t.params.get("max") for t in spec.constraints if t.name == "tdp"), None)
    reticle = next((t.params.get("max") for t in spec.constraints if t.name == "reticle"), None)
    unknown = [t.name for t in spec.constraints if t.name not in ("tdp", "reticle", "hbm_shoreline", "fits_memory")]
    if unknown:
        raise SpecError(f"{spec.path}: the CP-SAT split models reticle, hbm_shoreline, tdp and fits_memory; "
                        f"it cannot take {', '.join(unknown)} (use an Optuna method for those)")
    space = design_space(spec)
    choice = solve_split(spec.base, _workloads(spec), space, tdp=tdp, reticle=reticle, seed=spec.solver.seed,
                         evaluate=study_evaluator(spec, space.names), limits=[t.name for t in spec.constraints])
    sur = choice.info.get("surrogate") or {}
    table = pd.DataFrame([{**{f"p.{k}": v for k, v in choice.params.items()}, "time_s": choice.time_s,
                           "model_time_s": choice.model_time_s, "die_area_mm2": choice.die_area_mm2,
                           "power_w": choice.power_w, "status": choice.status, "designs": choice.info.get("designs"),
                           "evaluated": choice.info.get("evaluated"),
                           **{f"surrogate.p.{k}": sur.get("params", {}).get(k, np.nan) for k in choice.params},
                           "surrogate.time_s": sur.get("time_s", np.nan),
                           "surrogate.model_time_s": sur.get("model_time_s", np.nan),
                           "surrogate_gap": choice.info.get("surrogate_gap", np.nan),
                           "solve_s": choice.solve_time_s}])
    if write:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / "split.csv", table.to_csv(index=False))
        _write_split_report(spec, out_dir, choice, time.perf_counter() - t0)
    return table


def split_summary(choice) -> str:
    """One line: the evaluator's answer against the split model's own optimum (the surrogate)."""
    info = choice.info
    sur = info.get("surrogate")
    head = (f"the evaluator re-evaluated {info.get('evaluated', 0):,} designs whose roofline time is within the best "
            f"found ({'proven optimal' if choice.status == 'OPTIMAL' else 'not proven'}): "
            f"{format_quantity(choice.time_s, 'time')} (model {format_quantity(choice.model_time_s, 'time')})")
    if not sur:
        return head + "; the split model had no design holding the peak clock within the limits"
    if sur["params"] == {k: float(v) for k, v in choice.params.items()}:
        return head + "; the split model's own optimum is the same design"
    diff = ", ".join(f"{k} {_value(k, sur['params'][k])} -> {_value(k, v)}" for k, v in choice.params.items()
                     if float(v) != sur["params"][k])
    return (head + f"; the split model's own optimum ({diff}) takes {format_quantity(sur['time_s'], 'time')} by the "
            f"evaluator, {info['surrogate_gap']:+.2%}")


def _value(name: str, v: float) -> str:
    kind = {"local_buffer": "bytes", "l2": "bytes", "clock": "frequency"}.get(name)
    return format_quantity(v, kind) if kind else f"{v:g}"


def study_evaluator(spec, names):
    """The study's own judgement of split designs, for :func:`dse.solvers.cpsat_split.solve_split`: every design
    evaluated as the study's designs are (:func:`dse.study.problem.evaluate_points`: its base chip with its
    overrides), its (one) objective, feasible where every one of its constraints is <= 0. ``names``: the
    space's parameters (the others stay at the base chip's values)."""
    if len(spec.objectives) != 1:
        raise SpecError(f"{spec.path}: the CP-SAT split minimizes one objective, the mix's time; the study has "
                        f"{len(spec.objectives)}")
    objective = spec.objectives[0]

    def evaluate(params):
        m = evaluate_points(spec, {n: np.asarray(params[n]) for n in names})
        F = np.asarray(objective(m), dtype=float)
        G = np.column_stack([t(m) for t in spec.constraints]) if spec.constraints else np.zeros((len(F), 0))
        return F, np.all(G <= 0, axis=1), m

    return evaluate


def _write_split_report(spec, out_dir: Path, choice, elapsed: float) -> None:
    """The chosen die as a study of one design: evaluated as every study's designs are (objectives, constraints,
    metrics), written as every study's results (trials, front, catalog) and reports (report.md, report.html,
    plots: the objective and where the design's time goes)."""
    from types import SimpleNamespace

    from dse.report import write_reports
    from dse.study.results import write_results
    from dse.study.meta import meta_of

    log = MetricsLog(design_space(spec).names)
    problem = make_problem(spec, log)
    point = {n: np.array([choice.params[n]]) for n in problem.space.names}
    F, G = problem.evaluate_batch(point)
    ok = bool(np.all(G <= 0))
    found = pd.DataFrame({**{n: v for n, v in point.items()},
                          **{c: F[:, j] for j, c in enumerate(problem.objective_names)},
                          **{c: G[:, j] for j, c in enumerate(problem.constraint_names)},
                          "feasible": [ok], "pareto_rank": [0 if ok else -1]})
    designs = choice.info.get("designs")
    message = (f"CP-SAT: status {choice.status} over {designs:,} designs in "
               f"{format_quantity(choice.solve_time_s, 'time')}" if designs else f"CP-SAT: status {choice.status}")
    message += "; " + split_summary(choice)
    split = {"summary": split_summary(choice), "time_s": choice.time_s, "model_time_s": choice.model_time_s,
             "evaluated": choice.info.get("evaluated"), "surrogate": choice.info.get("surrogate"),
             "surrogate_gap": choice.info.get("surrogate_gap"), "model_gap": choice.info.get("model_gap")}
    result = SimpleNamespace(table=found, n_evaluated=1, n_feasible=int(ok), status=choice.status.lower(),
                             message=message, info={})
    table = results_table(spec, result, problem, log)
    meta = meta_of(spec, problem, result, elapsed)
    sur = choice.info.get("surrogate") or {}
    meta["solver"] = {"method": "cpsat_split", "status": choice.status, "designs": designs,
                      "evaluated": choice.info.get("evaluated"),
                      "surrogate": ", ".join(f"{k} {_value(k, v)}" for k, v in sur.get("params", {}).items()) or None,
                      "surrogate time": format_quantity(sur["time_s"], "time") if sur else None,
                      "surrogate gap": f"{choice.info['surrogate_gap']:+.2%}" if sur else None,
                      "model time": format_quantity(choice.model_time_s, "time"),
                      "solve time": format_quantity(choice.solve_time_s, "time"), "seed": spec.solver.seed}
    meta["split"] = split
    cat = catalog_points(spec)
    write_results(out_dir, table, meta, cat)
    write_reports(out_dir, table, meta, cat)
