"""Search quality and speed of the Optuna solver, against an exhaustive grid.

    .venv/bin/python benchmarks/bench_search.py            # 3 seeds, every space and method
    .venv/bin/python benchmarks/bench_search.py --quick    # 1 seed, no TPE (~1 min)

Three discrete benchmark spaces, each small enough for GridSolver to give the
exact Pareto front (the ground truth):

- ``qwen3-8b-decode``: studies/qwen3-8b-decode-chip.yaml (latency x energy x
  die area, reticle / shoreline / TDP / memory constraints) with its space
  discretized: units 16..192 step 8, clock 1.0..2.2 GHz step 0.1, the three
  local buffers, L2 8..128 MB step 8 MB, 1..8 HBM stacks = 114,816 points.
- ``mix-prefill-decode``: the same chip serving a 1:3 mix of Qwen3-8B prefill
  (4,096 tokens) and decode (batch 16, 4K context); throughput (maximized) x
  energy per token x chip cost; same discretized space.
- ``prefill-2obj``: a GEMM-bound Qwen3-8B prefill (8,192 tokens): time to first
  token x die area, over compute units, L2 and HBM stacks (three clocks, two
  buffers): 2 objectives, 138,240 points.

Quality is the hypervolume ratio: the hypervolume of a run's feasible points
over the grid front's, both in the objective space normalized by the grid
front (ideal -> 0, nadir -> 1, every objective minimized) with the common
reference point 1.1 in every objective. A ratio of 1 means the run found the
whole front (as far as the hypervolume can tell).

Then the persisted run: ``run_study`` of the default study (its own continuous
space), 5,000 NSGA-II trials to a journal file, timed end to end, and the
journal checked to hold exactly 5,000 completed trials.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dse.pareto import hypervolume, normalize, pareto_mask, to_minimization  # noqa: E402
from dse.solvers.base import Problem  # noqa: E402
from dse.solvers.grid import GridSolver  # noqa: E402
from dse.solvers.optuna_search import OptunaSolver  # noqa: E402
from dse.space import ChoiceParam, DesignSpace, IntParam  # noqa: E402
from dse.study import make_problem  # noqa: E402
from dse.spec.study import load_study  # noqa: E402

DEFAULT_STUDY = ROOT / "studies" / "qwen3-8b-decode-chip.yaml"
KIB = 1024
MARGIN = 0.1  # reference point = nadir + 10% of the front's range, in every objective

MIX_STUDY = """\
name: bench-mix-prefill-decode
workloads:
  - {model: qwen3-8b, phase: prefill, batch: 1, tokens: 4096, weight: 1}
  - {model: qwen3-8b, phase: decode, batch: 16, context: 4096, weight: 3}
base: h100-sxm
overrides: {hbm.generation: hbm3e}
space:
  units: {int: [16, 192], step: 8}
constraints:
  reticle: null
  hbm_shoreline: null
  tdp: {max: 1000 W}
  fits_memory: null
objectives: [throughput, energy_per_token, chip_cost]
"""

PREFILL_STUDY = """\
name: bench-prefill-2obj
workloads:
  - {model: qwen3-8b, phase: prefill, batch: 1, tokens: 8192}
base: h100-sxm
overrides: {hbm.generation: hbm3e}
space:
  units: {int: [16, 192], step: 8}
constraints:
  reticle: null
  hbm_shoreline: null
  tdp: {max: 700 W}
  fits_memory: null
objectives: [time_to_first_token, die_area]
"""


def chip_space() -> DesignSpace:
    """The default study's space, discretized: 23 x 13 x 3 x 16 x 8 = 114,816 points."""
    return DesignSpace([
        IntParam("units", 16, 192, step=8),
        IntParam("clock", 1_000_000_000, 2_200_000_000, step=100_000_000),
        ChoiceParam("local_buffer", (128.0 * KIB, 228.0 * KIB, 512.0 * KIB)),
        IntParam("l2", 8_000_000, 128_000_000, step=8_000_000),
        IntParam("hbm.stacks", 1, 8),
    ])


def prefill_space() -> DesignSpace:
    """Compute units, L2 and HBM stacks (3 clocks, 2 buffers): 45 x 64 x 8 x 3 x 2 = 138,240 points."""
    return DesignSpace([
        IntParam("units", 16, 192, step=4),
        IntParam("l2", 2_000_000, 128_000_000, step=2_000_000),
        IntParam("hbm.stacks", 1, 8),
        ChoiceParam("clock", (1.4e9, 1.8e9, 2.2e9)),
        ChoiceParam("local_buffer", (228.0 * KIB, 512.0 * KIB)),
    ])


def problem_from_study(path: Path, space: DesignSpace) -> Problem:
    """The study's evaluation (workloads, chip, constraints, objectives) over another space."""
    base = make_problem(load_study(path))
    return replace(base, space=space)


def problem_from_text(text: str, space: DesignSpace, tmp: Path) -> Problem:
    path = tmp / (text.split("\n", 1)[0].split(":", 1)[1].strip() + ".yaml")
    path.write_text(text)
    return problem_from_study(path, space)


@dataclass
class Truth:
    """The grid's exact front, the normalization it defines, and its hypervolume."""

    grid_size: int
    n_feasible: int
    front_size: int
    ideal: np.ndarray
    nadir: np.ndarray
    hv: float
    wall_s: float

    def hv_of(self, F: np.ndarray, directions, feasible: np.ndarray) -> float:
        a = to_minimization(F, directions)[feasible]
        if len(a) == 0:
            return 0.0
        z = normalize(a, self.ideal, self.nadir)
        m = z.shape[1]
        return hypervolume(z, np.full(m, 1.0 + MARGIN), ("minimize",) * m)


def ground_truth(problem: Problem) -> Truth:
    t0 = time.perf_counter()
    size = problem.space.grid_size()
    res = GridSolver(problem, budget=size).run()
    wall = time.perf_counter() - t0
    assert res.status == "optimal", res.message
    F = res.objectives()
    feas = res.table["feasible"].to_numpy()
    a = to_minimization(F, problem.directions)
    front = a[pareto_mask(F, problem.directions, feas)]
    ideal, nadir = front.min(axis=0), front.max(axis=0)
    z = normalize(front, ideal, nadir)
    m = z.shape[1]
    hv = hypervolume(z, np.full(m, 1.0 + MARGIN), ("minimize",) * m)
    return Truth(size, int(feas.sum()), len(front), ideal, nadir, hv, wall)


def run_one(problem: Problem, truth: Truth, method: str, budget: int, seed: int, **options) -> dict:
    t0 = time.perf_counter()
    res = OptunaSolver(problem, seed=seed, budget=budget, method=method, **options).run()
    wall = time.perf_counter() - t0
    feas = res.table["feasible"].to_numpy()
    ratio = truth.hv_of(res.objectives(), problem.directions, feas) / truth.hv
    return {"ratio": ratio, "evals": res.n_evaluated, "wall_s": wall,
            "unique": len(res.table.drop_duplicates(subset=list(problem.space.names)))}


def persisted_run(trials: int) -> dict:
    """The default study (continuous space), ``trials`` NSGA-II trials to a journal, via run_study."""
    import optuna

    from dse.study import run_study

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        t0 = time.perf_counter()
        table = run_study(DEFAULT_STUDY, trials=trials, out=out, write=False)
        wall = time.perf_counter() - t0
        journal = out / "study.journal"
        from dse.solvers.optuna_search import open_storage

        study = optuna.load_study(study_name=load_study(DEFAULT_STUDY).name, storage=open_storage(journal))
        stored = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        return {"trials": len(table), "stored": len(stored), "wall_s": wall,
                "journal_mb": journal.stat().st_size / 1e6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one seed, no TPE (TPE costs ~30-70 s per 1,000 trials)")
    ap.add_argument("--seeds", type=int, default=None, help="seeds per run (default 3, --quick 1)")
    ap.add_argument("--spaces", default=None, help="comma-separated subset of the spaces")
    ap.add_argument("--population", type=int, default=None, help="NSGA-II population (default: the solver's)")
    ap.add_argument("--init", default=None, help="NSGA-II first generation: lhs or random")
    ap.add_argument("--mutation", default=None, help="NSGA-II mutation: polynomial or uniform")
    ap.add_argument("--mutation-prob", type=float, default=None)
    ap.add_argument("--no-unique", action="store_true", help="evaluate duplicate points instead of re-asking")
    ap.add_argument("--no-persisted", action="store_true", help="skip the 5,000-trial journal run")
    args = ap.parse_args(argv)
    seeds = list(range(args.seeds if args.seeds is not None else (1 if args.quick else 3)))

    options: dict = {}
    if args.population is not None:
        options["population"] = args.population
    if args.init is not None:
        options["init"] = args.init
    if args.mutation is not None:
        options["mutation"] = args.mutation
    if args.mutation_prob is not None:
        options["mutation_prob"] = args.mutation_prob
    if args.no_unique:
        options["unique"] = False

    t_start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        spaces = {
            "qwen3-8b-decode": lambda: problem_from_study(DEFAULT_STUDY, chip_space()),
            "mix-prefill-decode": lambda: problem_from_text(MIX_STUDY, chip_space(), tmp),
            "prefill-2obj": lambda: problem_from_text(PREFILL_STUDY, prefill_space(), tmp),
        }
        chosen = list(spaces) if not args.spaces else args.spaces.split(",")
        runs = [("nsga2", 1000), ("nsga2", 5000), ("tpe", 1000), ("random", 1000), ("random", 5000)]
        for name in chosen:
            problem = spaces[name]()
            truth = ground_truth(problem)
            print(f"\n{name}: grid {truth.grid_size:,} points ({truth.wall_s:.1f} s), {truth.n_feasible:,} feasible, "
                  f"front {truth.front_size:,} points; objectives {', '.join(problem.objective_names)}", flush=True)
            for method, budget in runs:
                if method == "tpe" and args.quick:
                    continue
                res = [run_one(problem, truth, method, budget, s, **(options if method == "nsga2" else {}))
                       for s in seeds]
                row = {
                    "space": name, "method": method, "evals": budget,
                    "pct_grid": 100.0 * budget / truth.grid_size,
                    "ratio": statistics.mean(r["ratio"] for r in res), "ratio_min": min(r["ratio"] for r in res),
                    "unique": statistics.mean(r["unique"] for r in res),
                    "wall_s": statistics.mean(r["wall_s"] for r in res),
                }
                rows.append(row)
                print(f"  {method:>6} {budget:>6,} evals ({row['pct_grid']:4.1f}% of grid): "
                      f"HV ratio {row['ratio']:.4f} (min {row['ratio_min']:.4f} over {len(seeds)} seed(s)), "
                      f"{row['unique']:,.0f} distinct points, {row['wall_s']:.1f} s", flush=True)

    print("\n| space | method | evaluations | % of grid | HV ratio (mean) | HV ratio (min) | wall s |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['space']} | {r['method']} | {r['evals']:,} | {r['pct_grid']:.1f} | {r['ratio']:.4f} | "
              f"{r['ratio_min']:.4f} | {r['wall_s']:.1f} |")
    ok = True
    for r in rows:
        if r["method"] == "nsga2" and r["pct_grid"] <= 5.0 and r["evals"] >= 5000:
            hit = r["ratio_min"] >= 0.99
            ok &= hit
            print(f"target: {r['space']} NSGA-II {r['evals']:,} evals ({r['pct_grid']:.1f}% of grid): "
                  f"HV ratio {r['ratio_min']:.4f} {'>=' if hit else '<'} 0.99")

    if not args.no_persisted:
        p = persisted_run(5000)
        hit = p["wall_s"] < 30 and p["stored"] == p["trials"] == 5000
        ok &= hit
        print(f"\npersisted: run_study({DEFAULT_STUDY.name}, trials=5000) to a journal: {p['wall_s']:.1f} s "
              f"({'<' if p['wall_s'] < 30 else '>='} 30 s), {p['stored']:,} COMPLETE trials stored, "
              f"journal {p['journal_mb']:.1f} MB")
    print(f"\ntotal {time.perf_counter() - t_start:.0f} s; targets {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
