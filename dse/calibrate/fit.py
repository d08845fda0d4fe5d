"""calibrate(): fit a chip's knobs to its measurements, report active bounds, and predict by leave-one-out.

Fit: least squares on *relative* residuals ``r = (predicted - measured) /
measured`` (each measurement weighs the same whatever its size), with bounds
that keep the knobs physical. Predictions always come from
:func:`dse.model.evaluator.evaluate_arrays` (the one evaluator), so a written chip
evaluates to exactly the fitted predictions. Solver (numpy only): variable
projection. An overhead the time is exactly linear in (checked numerically, not
assumed: today step_overhead) follows, for any setting of the other knobs, from
a bounded linear least squares; the other knobs (the fractions, and
kernel_overhead, which enters through max(device, launches)) are searched on a
coarse grid (log grid over [1e-4, 1e4] for the fractions), then by zooming
around the best points down to steps of 1e-6. The grid is indifferent to the
kinks the max()es put in the cost. Every grid point of every refit is one column
of a vectorized evaluator call.

Honesty rules:

* A knob the bounded fit leaves on a physical bound (a fraction at 1, an
  overhead at 0) is refitted freed of that bound (fractions up to 1e4,
  overheads of any sign). If it then leaves the physical range and the fit
  improves, the bound is *active*: it is reported with the value the knob
  wants (">= x" where every value past x fits the same), never silently
  clipped; ``strict=True`` refuses with a DseError naming the knob and value.
  The fully unconstrained optimum is kept too (``CalibrationFit.unconstrained``).
* Fewer measurements than free knobs, or measurements that do not determine
  them, are refused with the knobs named and a ``--fix knob=value``
  suggestion. Because of the max()es a knob can be felt on one side of a kink
  and not on the other, so this is checked with one-sided differences and
  confirmed by evaluating the move: a knob whose own move changes no measured
  time (e.g. compute_efficiency when every step is launch- or memory-bound) is
  refused with the range of values that fit the same; knobs whose joint move
  changes none (e.g. kernel and step overhead when every step launches the same
  number of kernels: on each row kernel_overhead has no effect or adds exactly
  as step_overhead does) are refused as entangled.
* Leave-one-out: each measurement is predicted by a refit without it, so the
  residuals (a fit) are shown next to errors of predictions. Where the refit
  without a row cannot identify a knob (the row was the only one that felt
  it), the knob is held at the full fit's value and the row's note says so:
  that number is partly a fit, and the summary gives the leave-one-out figures
  over the other rows as well.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dse.calibrate.identify import _identify, _not_identified_message
from dse.calibrate.knobs import FRACTIONS, IDEAL, KNOBS, OVERHEADS, format_knob
from dse.calibrate.measurements import Measurement, load_measurements, parse_measured_workload
from dse.calibrate.problem import _Problem
from dse.calibrate.result import BoundNote, CalibrationFit, RowFit
from dse.calibrate.solve import _solve, _vp
from dse.errors import DseError, SpecError, did_you_mean, unknown_name
from dse.evaluate import evaluate_design
from dse.hardware import ChipSpec, Chips, load_chip, resolve_name, with_overrides


def calibrate(measurements, chip, *, fix: dict | None = None, strict: bool = False, variant: str | None = None,
              measurements_file: str | None = None, loo: bool = True) -> CalibrationFit:
    """Fit ``chip``'s calibration knobs to its rows of ``measurements`` (a list or a CSV path).

    ``fix``: knob -> value held fixed (SI). ``variant``: only rows with that
    variant label. ``strict``: refuse (DseError) when a physical bound is
    active instead of reporting it. See the module docstring for the method.
    """

    if isinstance(measurements, (str, Path)):
        measurements_file = measurements_file or str(measurements)
        measurements = load_measurements(measurements)
    fix = dict(fix or {})
    for k in fix:
        if k not in KNOBS:
            raise SpecError(unknown_name("calibration knob", k, KNOBS))
    spec, chip_path = _resolve_chip(chip)
    base = with_overrides(spec, {f"calibration.{k}": (v if k in FRACTIONS else f"{v!r} s")
                                 for k, v in IDEAL.items()})
    rows = _select(measurements, spec, variant)
    free = tuple(k for k in KNOBS if k not in fix)
    if not free:
        raise SpecError("every knob is fixed (--fix): nothing to fit")
    prob = _Problem(base, rows, free, fix)
    n = len(rows)
    if n < len(free):
        info = _identify(prob, prob.z_of({**IDEAL, **fix}))
        raise SpecError(_not_identified_message(prob, info, spec.name, n, few=True))

    z, cost = _solve(prob)
    info = _identify(prob, z)
    if info["to_fix"]:
        raise SpecError(_not_identified_message(prob, info, spec.name, n, few=False))
    theta = prob.theta(z)[0]
    values = {k: float(v) for k, v in zip(KNOBS, theta)}
    for k in FRACTIONS:  # exactly 1 where the search stopped on the bound
        values[k] = min(values[k], 1.0)

    # the unconstrained optimum, and the physical bounds the data pushes against
    zu, _ = _solve(prob, unbounded=free, extra=[z])
    unconstrained = {k: float(v) for k, v in zip(KNOBS, prob.theta(zu)[0]) if k in free}
    active = _active_bounds(prob, z, cost)
    if strict and active:
        b = active[0]
        what = ("above its physical bound 1 (a fraction of the peak rate cannot exceed 1)" if b.knob in FRACTIONS
                else "below its physical bound 0 (an overhead cannot be negative)")
        others = "".join(f"; also {x.knob} {x.wants()}" for x in active[1:])
        raise DseError(
            f"calibration of {spec.name} refused (--strict): the least-squares fit wants {b.knob} {b.wants()}, "
            f"{what}{others}. The model cannot represent these {n} measurements with physical knobs "
            f"(the clipped fit leaves residuals up to {_max_res(prob, values):.1%}). Drop --strict to accept "
            f"the clipped fit with the bound reported, or fix the knob with --fix {b.knob}=VALUE.")

    bound_t = prob.times(np.array([[IDEAL[k] for k in KNOBS]]))[0]
    fit_t = prob.times(np.array([[values[k] for k in KNOBS]]))[0]
    loo_pred, loo_note, loo_held = _leave_one_out(prob, z, values) if loo else ([None] * n, [""] * n, [()] * n)
    rowfits = []
    for i, m in enumerate(rows):
        lp = loo_pred[i]
        rowfits.append(RowFit(m, float(bound_t[i]), float(fit_t[i]), float(fit_t[i] / m.time_s - 1.0),
                              lp, None if lp is None else float(lp / m.time_s - 1.0), loo_note[i], loo_held[i]))
    result = CalibrationFit(chip=spec, values=values, free=free, fixed=fix, rows=tuple(rowfits),
                            active=tuple(active), unconstrained=unconstrained,
                            measurements_file=measurements_file, chip_path=chip_path)
    calibrated = with_overrides(spec, {
        **{f"calibration.{k}": (values[k] if k in FRACTIONS else f"{values[k]!r} s") for k in KNOBS},
        "calibration.source": result.summary(),
    })
    return CalibrationFit(**{**result.__dict__, "chip": calibrated})


def _max_res(prob: _Problem, values: dict) -> float:
    t = prob.times(np.array([[values[k] for k in KNOBS]]))[0]
    return float(np.max(np.abs(t / prob.meas - 1.0)))


def _active_bounds(prob: _Problem, z: np.ndarray, cost: float) -> list[BoundNote]:
    """Knobs on a physical bound (fraction 1, overhead 0) that, freed alone, leave it and lower the cost."""
    out = []
    for j, k in enumerate(prob.free):
        on = (k in FRACTIONS and z[j] >= -1e-12) or (k in OVERHEADS and z[j] <= 1e-12)
        if not on:
            continue
        zk, ck = _solve(prob, unbounded={k}, extra=[z])
        c = KNOBS.index(k)
        v = float(prob.theta(zk)[0][c])
        past = v > 1.0 + 1e-6 if k in FRACTIONS else v < -1e-6 * prob.scale
        if not past or ck >= cost * (1 - 1e-9):
            continue
        # a flat stretch: the first value (from the bound towards v) that reaches the freed cost
        sweep = np.geomspace(1.0, v, 201) if k in FRACTIONS else np.linspace(0.0, v, 201)
        zs = np.repeat(zk[None], len(sweep), axis=0)
        zs[:, j] = np.log(sweep) if k in FRACTIONS else sweep / prob.scale
        r = prob.residuals(zs)
        cs = 0.5 * np.einsum("gi,gi->g", r, r)
        first = int(np.argmax(cs <= ck + 1e-6 * (cost - ck)))
        edge = float(sweep[first])
        flat = (edge < v * (1 - 1e-3)) if k in FRACTIONS else (edge > v * (1 - 1e-3))
        out.append(BoundNote(k, IDEAL[k], v, edge if flat else None))
    return out


def _leave_one_out(prob: _Problem, z: np.ndarray, values: dict) -> tuple[list, list, list]:
    """For each row: refit (physical bounds) without it and predict it.

    Where the refit without a row cannot identify a knob (often: the row was the only one sensitive to it), that
    knob is held at the full fit's value for this refit (the knobs the other rows cannot determine near the full
    fit; then again until the refit is identified) and the note says so: that number is then partly a fit (the
    held value used the row), not an independent prediction.
    Returns the predictions, the notes and the held knobs per row.
    """
    n = len(prob.rows)
    preds: list = [None] * n
    notes: list = [""] * n
    held: list = [()] * n
    if n == 1:
        return preds, ["no other measurement to refit on"], held
    masks = [np.arange(n) != i for i in range(n)]
    fits = _vp(prob, frozenset(), masks, [[z]] * n)
    for i, (m, (zi, _)) in enumerate(zip(masks, fits)):
        sub = prob.subset(m)
        info = _identify(sub, zi)
        if info["to_fix"]:
            # the refit may have stopped anywhere along what it cannot see: hold what the remaining rows cannot
            # determine near the full fit, where that is known
            near = _identify(sub, z)
            info = near if near["to_fix"] else info
        theta = sub.theta(zi)[0]
        hold: dict[str, float] = {}
        while info["to_fix"]:
            hold.update({k: values[k] for k in info["to_fix"]})
            free = tuple(k for k in prob.free if k not in hold)
            fixed = {**prob.fixed, **hold}
            if not free:
                theta = np.array([fixed[k] for k in KNOBS])
                break
            p2 = _Problem(prob.base, sub.rows, free, fixed)
            z2, _ = _solve(p2, extra=[p2.z_of(values)])
            info = _identify(p2, z2)
            theta = p2.theta(z2)[0]
        theta[:2] = np.minimum(theta[:2], 1.0)
        preds[i] = float(prob.times(theta[None])[0][i])
        if hold:
            held[i] = tuple(k for k in KNOBS if k in hold)
            what = ", ".join(f"{k} at {format_knob(k, values[k])}" for k in held[i])
            notes[i] = (f"without it {', '.join(held[i])} cannot be identified: held at the full fit's value ({what}), "
                        "which used this row, so this is partly a fit")
    return preds, notes, held


def _resolve_chip(chip):
    if isinstance(chip, ChipSpec):
        return chip, None
    p = Path(str(chip))
    if p.suffix in (".yaml", ".yml") or p.exists():
        return load_chip(p), str(p)
    spec = load_chip(str(chip))
    return spec, str(resolve_name(str(chip)))


def predict(chip, measurements) -> np.ndarray:
    """Predicted step time (s) of each measurement's workload on ``chip`` (a spec, a name or a file)."""
    spec, _ = _resolve_chip(chip)
    chips = Chips.from_specs([spec])
    return np.array([float(evaluate_design(chips, parse_measured_workload(m.workload))["time_s"][0])
                     for m in measurements])


def _select(measurements, spec, variant) -> list[Measurement]:
    rows = [m for m in measurements if m.chip == spec.name]
    if not rows:
        have: dict[str, int] = {}
        for m in measurements:
            have[m.chip] = have.get(m.chip, 0) + 1
        listed = ", ".join(f"{c} ({k} rows)" for c, k in sorted(have.items()))
        raise SpecError(f"no measurements of chip '{spec.name}'{did_you_mean(spec.name, have)}; "
                        f"the measurements cover: {listed}")
    if variant is not None:
        variants = sorted({m.variant for m in rows})
        rows = [m for m in rows if m.variant == variant]
        if not rows:
            raise SpecError(f"no measurements of {spec.name} with variant '{variant}'"
                            f"{did_you_mean(variant, variants)}; its variants: {', '.join(variants) or '(none)'}")
    return rows
