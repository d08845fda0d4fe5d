"""Studies solved exactly by CP-SAT: tile shapes per operator, and the resource split of one die.

`solver: {method: cpsat_tiles}`: for every base chip (the study's base, or each
of a `base: {choice: [...]}` space entry) and every workload, the tile shape of
each GEMM-like operator that minimizes its time (tie-break: off-chip traffic),
proven optimal (dse.solvers.cpsat_tiles). Writes `tiles.csv` and `report.md`.

`solver: {method: cpsat_split}`: the units, local buffer, L2, HBM stacks and
clock of one die (the study's space) that minimize the workload mix's time
under reticle, shoreline, TDP and capacity, proven optimal
(dse.solvers.cpsat_split). Writes `split.csv` and `report.md`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.fileio import atomic_write
from dse.hardware import Chips, load_chip, with_overrides
from dse.solvers.cpsat_split import solve_split
from dse.solvers.cpsat_tiles import solve_workload_tiles
from dse.study.problem import design_space, group_workloads
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
        lines = [f"# {spec.name}", "", spec.question or "", "",
                 f"CP-SAT tile shapes, {len(table)} operators, solved in {time.perf_counter() - t0:.1f} s; "
                 f"every status OPTIMAL: {bool((table.status == 'OPTIMAL').all())}.", "",
                 "| chip | workload | op | T_M | T_N | T_K | split-K | time | traffic | working set |",
                 "|---|---|---|---|---|---|---|---|---|---|"]
        for r in table.itertuples():
            lines.append(f"| {r.chip} | {r.workload} | {r.op} | {r.t_m} | {r.t_n} | {r.t_k} | {r.split_k} | "
                         f"{format_quantity(r.time_s, 'time')} | {format_quantity(r.traffic_bytes, 'bytes')} | "
                         f"{format_quantity(r.working_set_bytes, 'bytes')} |")
        atomic_write(out_dir / "report.md", "\n".join(lines) + "\n")
    return table


def run_split(spec, out_dir: Path, write: bool = True) -> pd.DataFrame:
    """The proven-optimal resource split of one die for the study's workload mix."""

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
        p = choice.params
        lines = [f"# {spec.name}", "", spec.question or "", "",
                 f"CP-SAT split of one {spec.base.process} die over {choice.info.get('designs'):,} designs: "
                 f"status {choice.status} in {choice.solve_time_s:.2f} s.", "",
                 f"- units: {p['units']}", f"- local buffer: {format_quantity(p['local_buffer'], 'bytes')}",
                 f"- L2: {format_quantity(p['l2'], 'bytes')}", f"- HBM stacks: {p['hbm.stacks']}",
                 f"- clock: {format_quantity(p['clock'], 'frequency')}",
                 f"- mix time: {format_quantity(choice.time_s, 'time')}, die area {choice.die_area_mm2:.1f} mm^2, "
                 f"power {choice.power_w:.0f} W"]
        atomic_write(out_dir / "report.md", "\n".join(lines) + "\n")
    return table
