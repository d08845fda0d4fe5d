"""The four calibration knobs: names, ideal values, and their values as people write and read them.

The evaluator predicts the *bound*: every resource at its ideal rate. Real
software adds kernel launches, submission, synchronization and runs below the
peak rate (seed 004 §4.8.3: vLLM eager decode on an RTX PRO 6000 takes 25.83 ms
where the read bound is 9.12 ms). :class:`dse.hardware.Calibration` carries four
knobs the evaluator applies (dse.model.evaluator, seed 004 §4.8.1: independent resources take the max)::

    per operator  t_matrix / compute_efficiency                compute_efficiency   in (0, 1]
                  bytes / (bandwidth x bandwidth_efficiency)   bandwidth_efficiency in (0, 1]
    per step      max(sum over operators of count x device time,
                      sum over operators of count x kernel_overhead)   kernel_overhead >= 0
                  + step_overhead                                      step_overhead   >= 0

(the host launches kernels while the device works: the step takes the longer
of the two, plus a fixed per-step cost). dse.calibrate.fit fits them to measurements.
"""

from __future__ import annotations

from dse.errors import SpecError, unknown_name
from dse.units import format_quantity, parse_quantity

KNOBS = ("compute_efficiency", "bandwidth_efficiency", "kernel_overhead", "step_overhead")
FRACTIONS = KNOBS[:2]
OVERHEADS = KNOBS[2:]
IDEAL = {"compute_efficiency": 1.0, "bandwidth_efficiency": 1.0, "kernel_overhead": 0.0, "step_overhead": 0.0}
RESIDUAL_KIND = "relative residuals, (predicted - measured) / measured"


def format_knob(knob: str, v: float | None) -> str:
    """A knob value for people: a fraction as a number, an overhead as a time ('16.05 us')."""

    if v is None:
        return "?"
    if knob in FRACTIONS:
        return f"{v:.4g}"
    return format_quantity(v, "time") if v != 0 else "0 s"


def _fix_text(knob: str, v: float) -> str:
    """A knob value as --fix reads it back: a fraction as a number, an overhead as '0' or with a unit."""
    if knob in FRACTIONS:
        return f"{v:.4g}"
    if v == 0:
        return "0"
    return format_knob(knob, v).replace(" ", "")


def parse_fix(items) -> dict[str, float]:
    """``['step_overhead=0', 'kernel_overhead=5 us', 'compute_efficiency=0.8']`` -> knob values (SI).

    Fractions are numbers in (0, 1]; overheads are times with a unit ('5 us') or 0.
    """

    out: dict[str, float] = {}
    problems = []
    for item in items or ():
        key, eq, value = str(item).partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            problems.append(f"--fix {item!r}: expected knob=value, e.g. --fix step_overhead=0")
            continue
        if key not in KNOBS:
            problems.append(f"--fix {item!r}: " + unknown_name("calibration knob", key, KNOBS))
            continue
        if key in out:
            problems.append(f"--fix {item!r}: '{key}' fixed twice")
            continue
        try:
            if key in FRACTIONS:
                v = float(value)
                if not 0 < v <= 1:
                    raise ValueError
            else:
                v = 0.0 if value in ("0", "0.0") else parse_quantity(value, "time")
                if v < 0:
                    raise ValueError
        except (ValueError, SpecError):
            want = "a number in (0, 1]" if key in FRACTIONS else "a time >= 0 with a unit ('5 us') or 0"
            problems.append(f"--fix {item!r}: {key} must be {want}, got {value!r}")
            continue
        out[key] = v
    if problems:
        raise SpecError(problems)
    return out
