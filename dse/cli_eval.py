"""`dse eval --chip NAME --workload model:phase:key=value...` (argument parsing and printing only)."""

from __future__ import annotations

from dse.units import format_quantity

_SHOWN = [("time_s", "step time", "time"), ("time_per_token_s", "time per token", "time"),
          ("tokens_per_s", "tokens/s", None), ("t_matrix_s", "matrix time", "time"),
          ("t_memory_s", "memory time", "time"), ("t_vector_s", "vector time", "time"),
          ("bytes_memory", "memory traffic", "bytes"), ("flops", "useful FLOPs", "flops"),
          ("energy_j", "energy per step", "energy"), ("energy_per_token_j", "energy per token", "energy"),
          ("power_w", "average power", "power"), ("peak_power_w", "peak power", "power"),
          ("clock_ratio", "sustained clock / peak", None), ("mfu", "MFU", None), ("mbu", "MBU", None),
          ("resident_bytes", "resident bytes", "bytes"), ("capacity_bytes", "capacity", "bytes"),
          ("max_batch", "max requests at this context", None), ("bound", "bound", None)]


def _eval(args) -> int:
    from dse.evaluate import evaluate
    from dse.hardware import Chips, load_chip
    from dse.workload import build, parse_workload

    chips = [load_chip(c) for c in args.chip]
    workload = build(parse_workload(args.workload))
    df = evaluate(Chips.from_specs(chips), workload, breakdown=args.breakdown)
    print(f"workload: {workload.name}")
    head = f"{'':32s}" + "".join(f"{c.name:>18s}" for c in chips)
    print(head)
    for key, label, dim in _SHOWN:
        cells = []
        for v in df[key]:
            if isinstance(v, str):
                cells.append(f"{v:>18s}")
            elif dim:
                cells.append(f"{format_quantity(float(v), dim):>18s}")
            else:
                cells.append(f"{float(v):>18.4g}")
        print(f"{label:32s}" + "".join(cells))
    if args.breakdown:
        ops = df.attrs["operators"]
        cols = ["chip", "op", "count", "t_op_s", "t_matrix_s", "t_memory_s", "t_vector_s", "bound"]
        print()
        print(ops[cols].to_string(index=False))
    return 0


def register(sub) -> None:
    e = sub.add_parser("eval", help="evaluate catalog chips on one workload (bound time, energy, capacity)")
    e.add_argument("--chip", action="append", required=True, help="catalog name or chip file (repeatable)")
    e.add_argument("--workload", required=True, help="e.g. qwen3-8b:decode:batch=1:context=8192")
    e.add_argument("--breakdown", action="store_true", help="per-operator table")
    e.set_defaults(func=_eval)
