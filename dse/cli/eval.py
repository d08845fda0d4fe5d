"""`dse eval --chip NAME --workload model:phase:key=value... [--workload ...] [--calibrated FILE]` (argument parsing
and printing only; one table per workload).

With ``--calibrated`` (a chip YAML written by `dse calibrate`, or a measurements
CSV fitted on the spot, with ``--fix KNOB=VALUE`` as in `dse calibrate`) the
table has two columns: the bound (the chip with ideal calibration knobs) and the
calibrated chip.
"""

from __future__ import annotations

from dse.calibrate import (
    IDEAL,
    calibrate,
    canonical_workload,
    format_knob,
    load_measurements,
    parse_fix,
    parse_measured_workload,
)
from dse.errors import SpecError
from dse.evaluate import evaluate
from dse.hardware import Chips, load_chip, with_overrides
from dse.study.results import format_value
from dse.units import format_quantity

_SHOWN = [("time_s", "step time", "time"), ("time_per_token_s", "step time / tokens", "time"),
          ("tokens_per_s", "tokens/s", None), ("t_matrix_s", "matrix time", "time"),
          ("t_memory_s", "memory time", "time"), ("t_vector_s", "vector time", "time"),
          ("bytes_memory", "memory traffic", "bytes"), ("flops", "useful FLOPs", "flops"),
          ("energy_j", "energy per step", "energy"), ("energy_per_token_j", "energy per token", "energy"),
          ("power_w", "average power", "power"), ("peak_power_w", "peak power", "power"),
          ("tdp", "TDP", "power"), ("static_power_w", "leakage at the design clock", "power"),
          ("clock_power_w", "clock tree at the design clock", "power"), ("idle_power_w", "idle (leakage at V_min)", "power"),
          ("sustained_clock_hz", "sustained clock", "frequency"), ("voltage_v", "voltage (FLOP-weighted)", "voltage"),
          ("clock_ratio", "sustained clock / peak", None), ("mfu", "MFU", None), ("mbu", "MBU", None),
          ("resident_bytes", "resident bytes", "bytes"), ("capacity_bytes", "capacity", "bytes"),
          ("max_batch", "max requests at this context", None), ("bound", "bound", None)]


def _eval(args) -> int:
    workloads = [(text, parse_measured_workload(text)) for text in args.workload]  # (every mistake before output)
    for i, (text, workload) in enumerate(workloads):
        if i:
            print()
        _eval_one(args, text, workload)
    return 0


def _eval_one(args, text: str, workload) -> None:
    """The table of one workload (and its breakdown)."""
    if args.calibrated:
        chips, labels, notes = _with_calibrated(args, text)
    else:
        chips = [load_chip(c) for c in args.chip]
        labels, notes = [c.name for c in chips], []
    df = evaluate(Chips.from_specs(chips), workload, breakdown=args.breakdown)
    print(f"workload: {workload.name}")
    width = max(18, *(len(x) + 2 for x in labels))
    head = f"{'':32s}" + "".join(f"{x:>{width}s}" for x in labels)
    print(head)
    for key, label, dim in _SHOWN:
        cells = []
        for v in df[key]:
            if isinstance(v, str):
                cells.append(f"{v:>{width}s}")
            elif dim:
                cells.append(f"{format_quantity(float(v), dim):>{width}s}")
            else:  # (a count or a ratio: thousands separated, no exponent for a rate of 125,700 tokens/s)
                cells.append(f"{format_value(float(v)):>{width}s}")
        if key == "tdp" and "tdp_estimated" in df and df["tdp_estimated"].any():
            cells = [c + ("*" if est else " ") for c, est in zip(cells, df["tdp_estimated"])]
        print(f"{label:32s}" + "".join(cells))
    if "tdp_estimated" in df and df["tdp_estimated"].any():
        print("* the model's estimate (the chip publishes no TDP): the most it can draw; reported, not imposed")
    if "memory_throttled" in df and df["memory_throttled"].any():
        names = [x for x, t in zip(labels, df["memory_throttled"]) if t]
        print(f"memory throttled (its power alone is over the TDP at the lowest clock): {', '.join(names)}")
    if args.calibrated:
        t = df["time_s"].to_numpy()
        print(f"{'calibrated / bound time':32s}{'':>{width}s}{t[1] / t[0]:>{width}.4g}")
        for k in ("compute_efficiency", "bandwidth_efficiency", "kernel_overhead", "step_overhead"):
            vals = [getattr(c.calibration, k) for c in chips]
            dim = None if "efficiency" in k else "time"
            print(f"{k:32s}" + "".join(f"{(format_quantity(v, dim) if dim else f'{v:.4g}'):>{width}s}"
                                         for v in vals))
    for line in notes:
        print(line)
    if args.breakdown:
        ops = df.attrs["operators"]
        if args.calibrated:
            ops = ops.assign(chip=[labels[i] for i in ops["point"]])
        print()
        print(breakdown_table(ops))


def _time(v: float) -> str:
    return format_quantity(float(v), "time") if v else "0 s"


#: The breakdown's columns: header, cell of one operator row.
_BREAKDOWN = (
    ("chip", lambda r: str(r.chip)),
    ("operator", lambda r: str(r.op)),
    ("count", lambda r: f"{int(r.count)}"),
    ("time/call", lambda r: _time(r.t_op_s)),
    ("time/step", lambda r: _time(r.count * r.t_op_s)),
    ("share", lambda r: f"{r.share:.1%}"),
    ("matrix/call", lambda r: _time(r.t_matrix_s)),
    ("memory/call", lambda r: _time(r.t_memory_s)),
    ("vector/call", lambda r: _time(r.t_vector_s)),
    ("traffic/call", lambda r: format_quantity(float(r.bytes_memory), "bytes")),
    ("energy/call", lambda r: format_quantity(float(r.energy), "energy")),
    ("energy/step", lambda r: format_quantity(float(r.count * r.energy), "energy")),
    ("bound", lambda r: str(r.bound)),
)


def breakdown_table(ops) -> str:
    """The per-operator table of `dse eval --breakdown` (``ops``: :meth:`OperatorBreakdown.frame` rows), with units.

    Each operator runs ``count`` times in one step (e.g. once per layer): the ``/call`` columns are one
    instance, the ``/step`` columns all of them (count x per call); ``share`` is the operator's part of the
    step's device time (the sum of time/step over the operators of its chip).
    """
    step = (ops["count"] * ops["t_op_s"]).groupby(ops["point"]).transform("sum")
    ops = ops.assign(share=(ops["count"] * ops["t_op_s"]) / step.where(step > 0, 1.0))
    rows = [[cell(r) for _, cell in _BREAKDOWN] for r in ops.itertuples(index=False)]
    heads = [h for h, _ in _BREAKDOWN]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    left = {"chip", "operator", "bound"}

    def line(cells):
        return "  ".join(c.ljust(w) if h in left else c.rjust(w) for c, w, h in zip(cells, widths, heads)).rstrip()

    note = ("per operator: /call is one instance of the operator, /step all `count` instances in one step "
            "(count x per call, e.g. one per layer); share: of the step's device time")
    return "\n".join([note, line(heads)] + [line(r) for r in rows])


def _with_calibrated(args, workload_text: str):
    """[ideal chip, calibrated chip], their column labels, and notes (measured value, fit vs prediction, for the
    workload ``workload_text``)."""
    from pathlib import Path


    if len(args.chip) != 1:
        raise SpecError(f"--calibrated compares one chip with its calibrated self: give exactly one --chip, "
                        f"got {len(args.chip)}")
    spec = load_chip(args.chip[0])
    ideal = with_overrides(spec, {f"calibration.{k}": (v if "efficiency" in k else f"{v!r} s")
                                  for k, v in IDEAL.items()})
    path = Path(args.calibrated)
    notes: list[str] = []
    fix = parse_fix(args.fix)
    if path.suffix.lower() == ".csv":
        rows = load_measurements(path)
        fit = calibrate(rows, args.chip[0], fix=fix, measurements_file=str(path))
        cal = fit.chip
        fixed = "".join(f", {k} fixed at {format_knob(k, v)}" for k, v in fit.fixed.items())
        notes.append(f"calibrated: fitted now to {len(fit.rows)} measurements in {path}{fixed} "
                     f"(fit RMS {fit.rms:.1%}; leave-one-out prediction {fit.loo_text()})")
        for b in fit.active:
            notes.append(f"  bound active: {b.text()}")
        here = canonical_workload(workload_text)
        for r in fit.rows:
            if r.measurement.workload == here:
                m = r.measurement
                notes.append(
                    f"measured ({m.where}{', ' + m.variant if m.variant else ''}): "
                    f"{format_quantity(m.time_s, 'time')}; this workload is one of the fitted measurements, so the "
                    f"calibrated time is a fit ({r.residual:+.1%}), not a prediction; without it the fit predicts "
                    + (f"{format_quantity(r.loo_predicted_s, 'time')} ({r.loo_error:+.1%})"
                       + (f" ({r.loo_note})" if r.loo_note else "")
                       if r.loo_predicted_s is not None else f"nothing ({r.loo_note})"))
    else:
        if fix:
            raise SpecError(f"--fix holds a knob of a fit: it applies to --calibrated MEASUREMENTS.csv, not to the "
                            f"chip file {path} (its calibration is already fixed)")
        cal = load_chip(path)
        if cal.name != spec.name:
            raise SpecError(f"--calibrated {path}: the file is chip '{cal.name}', not '{spec.name}' (--chip)")
        if cal.calibration.source:
            notes.append(f"calibration: {cal.calibration.source}")
    return [ideal, cal], [f"{spec.name} bound", f"{spec.name} calibrated"], notes


def register(sub) -> None:
    e = sub.add_parser("eval", help="evaluate catalog chips on workloads (bound time, energy, capacity)",
                       description="Evaluate chips on workloads (model phases or single GEMMs) with the evaluator: "
                                   "step time and its matrix / memory / vector parts, energy, power, sustained "
                                   "clock, MFU, capacity and max batch, one column per chip; --breakdown adds the "
                                   "per-operator table (per call and per step). Example: dse eval --chip h100-sxm "
                                   "--workload qwen3-8b:decode:batch=1:context=8192 --breakdown")
    e.add_argument("--chip", action="append", required=True, help="catalog name or chip file (repeatable)")
    e.add_argument("--workload", action="append", required=True,
                   help="e.g. qwen3-8b:decode:batch=1:context=8192, or one GEMM call gemm:m=1:k=4096:n=4096 "
                        "(repeatable: one table each)")
    e.add_argument("--breakdown", action="store_true", help="per-operator table")
    e.add_argument("--calibrated", metavar="FILE",
                   help="a calibrated chip YAML (`dse calibrate --out`) or a measurements CSV to fit now: shows the "
                        "bound (ideal) and the calibrated time side by side")
    e.add_argument("--fix", action="append", default=[], metavar="KNOB=VALUE",
                   help="with --calibrated MEASUREMENTS.csv: hold a calibration knob fixed in the fit, e.g. "
                        "--fix compute_efficiency=1 (repeatable; as in `dse calibrate`)")
    e.set_defaults(func=_eval)
