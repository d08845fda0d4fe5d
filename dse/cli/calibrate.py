"""`dse calibrate MEASUREMENTS.csv --chip NAME [--out chip.yaml]` (argument parsing and printing only).

The fit lives in dse.calibrate; this prints the fitted knobs, the residual of
every measurement next to its leave-one-out prediction error (and which knob a
leave-one-out refit had to hold at the full fit's value), and any active
physical bound, and writes the calibrated chip file.
"""

from __future__ import annotations
from dse.calibrate import (
    FRACTIONS,
    KNOBS,
    RESIDUAL_KIND,
    calibrate,
    format_knob,
    load_measurements,
    parse_fix,
    write_calibrated_chip,
)
from dse.units import format_quantity


def _pct(x) -> str:
    return "-" if x is None else f"{x:+.1%}"


def _time(x) -> str:
    return "-" if x is None else format_quantity(float(x), "time")


def report(fit) -> str:
    """The calibration report as text (also used by `dse eval --calibrated MEASUREMENTS.csv`)."""

    out = []
    src = fit.measurements_file or "measurements"
    out.append(f"calibrated {fit.chip.name} on {len(fit.rows)} measurements from {src}")
    out.append(f"least squares on {RESIDUAL_KIND}; physical bounds: fractions in (0, 1], overheads >= 0")
    out.append("")
    active = {b.knob: b for b in fit.active}
    out.append(f"{'knob':24s}{'fitted':>14s}  status")
    for k in KNOBS:
        if k in fit.fixed:
            status = "fixed (--fix)"
        else:
            status = "fitted"
            if k in active:
                status += f"; BOUND ACTIVE (freed, the fit wants {k} {active[k].wants()})"
        v = fit.values[k]
        cell = f"{v:.4g}" if k in FRACTIONS else format_knob(k, v)
        out.append(f"{k:24s}{cell:>14s}  {status}")
    out.append("")
    w = max(34, max(len(r.measurement.workload) for r in fit.rows) + 2)
    head = (f"{'line':>5s}  {'workload':{w}s}{'variant':12s}{'measured':>11s}{'bound':>11s}{'fitted':>11s}"
            f"{'residual':>10s}{'LOO pred':>11s}{'LOO err':>9s}")
    out.append(head)
    for r in fit.rows:
        m = r.measurement
        out.append(f"{m.line:>5d}  {m.workload:{w}s}{m.variant[:11]:12s}{_time(m.time_s):>11s}{_time(r.bound_s):>11s}"
                   f"{_time(r.predicted_s):>11s}{_pct(r.residual):>10s}{_time(r.loo_predicted_s):>11s}"
                   f"{_pct(r.loo_error):>9s}" + (f"  ({r.loo_note})" if r.loo_note else ""))
    out.append("")
    out.append(f"fit        (residuals, these measurements set the knobs):      RMS {fit.rms:.1%}, "
               f"max {fit.max_abs:.1%}")
    out.append(f"prediction (leave-one-out: each predicted by a fit without it): {fit.loo_text()}")
    if fit.active:
        out.append("")
        out.append(f"warning: {len(fit.active)} physical bound{'s are' if len(fit.active) > 1 else ' is'} active: "
                   "the model cannot represent these measurements with physical knobs, and the clipped")
        out.append("  fit is what was kept (--strict refuses such a fit):")
        for b in fit.active:
            out.append(f"  - {b.text()}")
    return "\n".join(out)


def _calibrate(args) -> int:
    fix = parse_fix(args.fix)
    rows = load_measurements(args.measurements)
    fit = calibrate(rows, args.chip, fix=fix, strict=args.strict, variant=args.variant,
                    measurements_file=args.measurements)
    print(report(fit))
    if args.out:
        path = write_calibrated_chip(fit, args.out)
        print(f"\nwrote {path} (`dse eval --chip {args.chip} --calibrated {path} --workload ...` compares it "
              "with the bound)")
    else:
        print("\n(no file written: --out FILE writes the calibrated chip)")
    return 0


def register(sub) -> None:
    c = sub.add_parser(
        "calibrate",
        help="fit a chip's calibration knobs (efficiencies, overheads) to measured times",
        description="Fit compute_efficiency, bandwidth_efficiency (in (0, 1]), kernel_overhead and step_overhead "
                    "(>= 0) of one chip to the measured times in a CSV (columns: chip, workload, variant, "
                    "measured_time_s, measured_energy_j, n_samples, source), by least squares on relative "
                    "residuals; report residuals and leave-one-out errors; write the calibrated chip YAML. A step "
                    "takes max(device work, launches x kernel_overhead) + step_overhead; a knob no measurement "
                    "depends on (or two the measurements cannot tell apart) is refused with a --fix suggestion.")
    c.add_argument("measurements", help="measurements CSV (e.g. dse/data/measurements/seed004.csv)")
    c.add_argument("--chip", required=True, help="catalog name or chip file whose rows to fit")
    c.add_argument("--out", help="write the calibrated chip YAML here")
    c.add_argument("--fix", action="append", default=[], metavar="KNOB=VALUE",
                   help="hold a knob fixed, e.g. --fix step_overhead=0 or --fix compute_efficiency=0.8 (repeatable)")
    c.add_argument("--variant", help="fit only the rows with this variant label (e.g. rotate)")
    c.add_argument("--strict", action="store_true",
                   help="refuse a fit whose optimum lies outside the physical bounds instead of clipping it")
    c.set_defaults(func=_calibrate)
