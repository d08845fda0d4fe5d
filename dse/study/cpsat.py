"""Studies solved exactly by CP-SAT: tile shapes per operator, and the resource split of one die.

`solver: {method: cpsat_tiles}`: for every base chip (the study's base, or each
of a `base: {choice: [...]}` space entry) and every workload, the tile shape of
each GEMM-like operator that minimizes its time (tie-break: off-chip traffic),
proven optimal (dse.solvers.cpsat_tiles). Writes `tiles.csv`, `report.md`, `report.html` and
`plots/tiles.png` (dse.report.exact: each workload's time with these tiles against the heuristic's).

`solver: {method: cpsat_split}`: the units, local buffer, L2, HBM stacks and
clock of one die (the study's space) that minimize the workload mix's time
under reticle, shoreline, TDP and capacity, proven optimal
(dse.solvers.cpsat_split). Writes `split.csv` and, for the chosen die evaluated as any study's design,
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
from dse.study.problem import MetricsLog, catalog_points, design_space, group_workloads, make_problem, results_table
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
    """The proven-optimal resource split of one die for the study's workload mix."""
    t0 = time.perf_counter()

    tdp = next((t.params.get("max") for t in spec.constraints if t.name == "tdp"), None)
    reticle = next((t.params.get("max") for t in spec.constraints if t.name == "reticle"), None)
    unknown = [t.name for t in spec.constraints if t.name not in ("tdp", "reticle", "hbm_shoreline", "fits_memory")]
    if unknown:
        raise SpecError(f"{spec.path}: the CP-SAT split models reticle, hbm_shoreline, tdp and fits_memory; "
                        f"it cannot take {', '.join(unknown)} (use an Optuna method for those)")
    choice = solve_split(spec.base, _workloads(spec), design_space(spec), tdp=tdp, reticle=reticle,
                         seed=spec.solver.seed)
    table = pd.DataFrame([{**{f"p.{k}": v for k, v in choice.params.items()}, "time_s": choice.time_s,
                           "die_area_mm2": choice.die_area_mm2, "power_w": choice.power_w,
                           "status": choice.status, "designs": choice.info.get("designs"),
                           "solve_s": choice.solve_time_s}])
    if write:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(out_dir / "split.csv", table.to_csv(index=False))
        _write_split_report(spec, out_dir, choice, time.perf_counter() - t0)
    return table


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
    result = SimpleNamespace(table=found, n_evaluated=1, n_feasible=int(ok), status=choice.status.lower(),
                             message=message, info={})
    table = results_table(spec, result, problem, log)
    meta = meta_of(spec, problem, result, elapsed)
    meta["solver"] = {"method": "cpsat_split", "status": choice.status, "designs": designs,
                      "solve time": format_quantity(choice.solve_time_s, "time"), "seed": spec.solver.seed}
    cat = catalog_points(spec)
    write_results(out_dir, table, meta, cat)
    write_reports(out_dir, table, meta, cat)
