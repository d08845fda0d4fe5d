"""`dse run`, `dse report`, `dse pareto` (argument parsing only)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dse.errors import StorageError
from dse.report import regenerate
from dse.spec.study import load_study
from dse.storage import mask
from dse.study import run_study
from dse.study.results import format_table, objective_points, pareto_table, read_results


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (``--trials 0`` or ``--workers -1`` is an error, not a default)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {n}")
    return n


def seed_int(text: str) -> int:
    """argparse type: a seed in [0, 2**32) (numpy's and Optuna's range)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {text!r}") from None
    if not 0 <= n < 2**32:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**32), got {n}")
    return n


def resume_command(args) -> str:
    """The `dse run` command line of ``args`` (what resumes the study), with any password masked."""
    words = ["dse", "run", args.study]
    for flag in ("trials", "workers", "storage", "seed", "out"):
        value = getattr(args, flag)
        if value is not None:
            words += [f"--{flag}", str(value)]
    if args.quiet:
        words.append("--quiet")
    text = shlex.join(words)
    masked = mask(text)
    if masked != text:
        masked += "   (with the password as before, or in PGPASSWORD / ~/.pgpass and left out of the URL)"
    return masked


def _run(args) -> int:
    spec0 = load_study(args.study, out_given=args.out is not None)
    journal = Path(args.out or spec0.output) / "study.journal"
    if spec0.solver.method not in ("grid", "cpsat_tiles", "cpsat_split") and args.storage is None \
            and not journal.is_symlink() and journal.exists() and journal.stat().st_size > 0:  # a link: refused below
        print(f"resuming the study stored in {journal} (its trials count towards the budget; delete the folder "
              f"or pass --out to start afresh)", file=sys.stderr)
    try:
        table = run_study(args.study, trials=args.trials, workers=args.workers, storage=args.storage,
                          seed=args.seed, out=args.out, progress=not args.quiet)
    except StorageError as e:  # say exactly what to run to resume (the password masked: give it as before)
        raise StorageError(f"{e}\nto resume: {resume_command(args)}") from None

    spec = load_study(args.study, out_given=args.out is not None)
    out = args.out or spec.output
    if spec.solver.method == "cpsat_split":  # the chosen die, as any study's design, and how it was found
        trials, meta, _ = read_results(out)
        print(format_table(trials, meta))
        print(f"\n{meta['split']['summary']}" if isinstance(meta.get("split"), dict) else "")
        print(f"\nResults in {out}/ (split.csv: the die and CP-SAT's own optimum)")
        return 0
    if spec.solver.method.startswith("cpsat"):  # exact sub-problem: its table is the answer
        print(table.to_string(index=False))
        print(f"\nResults in {out}/")
        return 0
    if spec.scenarios:  # every design on every scenario: a front per scenario and for the mix
        from dse.study.run import _slug

        for name, _, _ in spec.scenarios:
            _, meta, _ = read_results(Path(out) / _slug(name))
            front = pareto_table(table[table["scenario"] == name].drop(columns=["scenario", "weight"]), meta)
            print(f"\nscenario {name!r}: {meta['n_trials']} designs, {meta['n_feasible']} feasible, {len(front)} on "
                  f"its front (showing {min(len(front), 20)} of {len(front)})")
            print(format_table(front.head(20), meta))
        mix = table[(table["scenario"] == "mix") & (table["pareto_rank"] == 0)]
        print(f"\nweighted mix of the scenarios (weighted means per design): {len(mix)} designs on its front")
        print(format_table(mix.drop(columns=["scenario", "weight"]).assign(trial=mix.index), meta))
        print(f"\nResults in {out}/ (scenarios.csv: every design x scenario; one folder per scenario)")
        return 0
    _, meta, _ = read_results(out)
    budget = args.trials or spec.solver.trials
    copies = meta.get("stored_copies") or 0
    if spec.solver.method != "grid" and (meta["n_trials"] > budget or copies):
        why = (f"{copies} of them are copies of other stored trials: a journal appended twice?" if copies else
               "a journal copied or appended twice, or an earlier run with a larger budget")
        more = f"more than the budget of {budget}" if meta["n_trials"] > budget else f"the budget is {budget}"
        print(f"note: the storage holds {meta['n_trials']} trials, {more} ({why}); all of them are in the results",
              file=sys.stderr)
    front = pareto_table(table, meta)
    print(f"\n{meta['n_trials']} designs evaluated, {meta['n_feasible']} feasible, {len(front)} on the Pareto front"
          f"{_ties(front)} ({meta['elapsed_s']:.1f} s). Results in {out}/")
    print(format_table(front.head(20), meta))
    if len(front) > 20:
        print(f"(showing 20 of the {len(front)} designs on the front: all of them in {out}/pareto.csv)")
    return 0


def _ties(front) -> str:
    """Where designs of the front tie on every objective (a clock a memory-bound step does not feel, at a cost that
    does not depend on it): how many distinct points the front has, so that its length is not read as choices."""
    distinct = objective_points(front)
    return (f" ({distinct} distinct in the objectives: the others tie with one of them, differing only in what no "
            f"objective sees)" if distinct < len(front) else "")


def _report(args) -> int:
    regenerate(args.dir)
    print(f"reports written to {args.dir}/")
    return 0


def _pareto(args) -> int:
    table, meta, _ = read_results(args.dir)
    front = pareto_table(table, meta, x=args.x, y=args.y)
    print(format_table(front, meta))
    return 0


def register(sub) -> None:
    r = sub.add_parser("run", help="run a study (YAML) end to end: search, results, reports",
                       description="Run a study file: search its design space (Optuna, grid or CP-SAT, as its "
                                   "solver says), write the results folder (trials, Pareto front, report.md, "
                                   "report.html, plots) and print the front. A rerun on the same folder resumes. "
                                   "Keys of the file: dse schema study. Example: dse run "
                                   "studies/qwen3-8b-decode-chip.yaml --trials 200")
    r.add_argument("study", help="study YAML file")
    r.add_argument("--trials", type=positive_int, help="number of designs to evaluate (the budget)")
    r.add_argument("--workers", type=positive_int, help="worker processes")
    r.add_argument("--storage", help="Optuna storage URL (default: a journal file in the output folder)")
    r.add_argument("--seed", type=seed_int, help="random seed of the search, in [0, 2**32)")
    r.add_argument("--out", help="output folder (default: the study's output)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=_run)

    p = sub.add_parser("report", help="regenerate report.md, plots and report.html of a results folder",
                       description="Regenerate report.md, report.html and plots/*.png of a results folder from "
                                   "its stored results (no design is evaluated again). Example: dse report "
                                   "results/qwen3-8b-decode-chip")
    p.add_argument("dir", help="a results folder written by dse run")
    p.set_defaults(func=_report)

    q = sub.add_parser("pareto", help="print the Pareto front of a results folder over two objectives",
                       description="Print the feasible designs of a results folder that no other design beats on "
                                   "both of two objectives, with units. Example: dse pareto "
                                   "results/qwen3-8b-decode-chip --x tpot --y die_area")
    q.add_argument("dir", help="a results folder written by dse run")
    q.add_argument("--x", help="first objective (default: the study's first)")
    q.add_argument("--y", help="second objective (default: the study's second)")
    q.set_defaults(func=_pareto)
