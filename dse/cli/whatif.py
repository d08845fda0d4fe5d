"""`dse whatif FILE` and `dse whatif --base CHIP --set KEY=VALUE ... --workload W ...` (parsing and printing only)."""

from __future__ import annotations

import sys
from pathlib import Path

from dse import whatif
from dse.errors import SpecError
from dse.workload import build, parse_workload


def _whatif(args) -> int:
    quick = bool(args.base or args.set or args.chip)
    if args.file and quick:
        raise SpecError("give a proposals file, or --base with --set/--chip, not both")
    if args.file:
        spec = whatif.load_proposals(args.file, out_given=args.out is not None)
        if args.workload:
            spec = _with_workloads(spec, args.workload)
    elif args.base:
        spec = whatif.quick_spec(args.base, args.set, args.workload, args.chip)
    else:
        raise SpecError("give a proposals file (dse whatif PROPOSALS.yaml) or --base CHIP with --set KEY=VALUE "
                        "and --workload MODEL:PHASE:...")
    result = whatif.run_whatif(spec)
    sys.stdout.write(result.to_markdown())
    out = Path(args.out) if args.out else spec.output
    if out is not None:
        written = result.write(out)
        print(f"written: {', '.join(str(p) for p in written.values())}", file=sys.stderr)
    return 0


def _with_workloads(spec, texts):
    import dataclasses


    workloads, seen = [], {}
    for t in texts:
        wl = build(parse_workload(t))
        if wl.name in seen:  # (the comparison table has one row per workload: a second one broke it, issue 21)
            raise SpecError(f"--workload {t}: the same workload as --workload {seen[wl.name]}; give each once")
        seen[wl.name] = t
        workloads.append(wl)
    return dataclasses.replace(spec, workloads=tuple(workloads))


def register(sub) -> None:
    w = sub.add_parser(
        "whatif",
        help="baseline chip vs proposals on every workload: time, energy, area, cost, constraints, bounds",
        description="Compare a baseline chip with proposals (changes to it, or other chips) on workloads. "
                    "Either a proposals file (its keys: dse schema whatif) or a quick question: "
                    "dse whatif --base h100 --set hbm.stacks=6 --workload qwen3-8b:decode:batch=1:context=8192",
    )
    w.add_argument("file", nargs="?", help="proposals YAML (baseline, proposals, workloads)")
    w.add_argument("--base", help="baseline chip (catalog name or chip file) for a quick question")
    w.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a change to the base chip, e.g. hbm.stacks=6, clock='2.0 GHz', "
                        "matrix.flops_per_cycle.fp8_e4m3=x2 (repeatable; all --set form one proposal)")
    w.add_argument("--chip", action="append", default=[], metavar="CHIP",
                   help="another chip to compare with the base (repeatable; one proposal each)")
    w.add_argument("--workload", action="append", default=[], metavar="MODEL:PHASE:KEY=VALUE",
                   help="e.g. qwen3-8b:decode:batch=1:context=8192 (repeatable; with a file: replaces its workloads)")
    w.add_argument("--out", help="folder for whatif.md, whatif.json and whatif.png (default: the file's output)")
    w.set_defaults(func=_whatif)
