"""Calibration: fit a chip's four time knobs to measured times (seed 004 §4.8.3).

The evaluator predicts the *bound*: every resource at its ideal rate; real
software adds launches and synchronization and runs below the peak rate.
:class:`dse.hardware.Calibration` carries four knobs the evaluator applies
(compute_efficiency, bandwidth_efficiency, kernel_overhead, step_overhead);
this package fits them, by least squares on relative residuals, to measured
times read from a CSV, and writes the calibrated chip.

One concept per module; every public name is importable from ``dse.calibrate``:

=============== ==============================================================
knobs.py        the four knobs (KNOBS, IDEAL, what each means), format_knob, parse_fix
measurements.py the measurements CSV (columns, file format), Measurement,
                load_measurements, parse_measured_workload, canonical_workload
problem.py      _Problem: knob values -> predicted times through the one evaluator
solve.py        the least-squares solver (variable projection)
identify.py     which knobs the measurements determine; the refusal message
result.py       CalibrationFit, RowFit, BoundNote
fit.py          calibrate (the method and its honesty rules), leave-one-out, predict
write.py        calibrated_yaml, write_calibrated_chip
=============== ==============================================================
"""

from __future__ import annotations

from dse.calibrate.fit import calibrate, predict
from dse.calibrate.knobs import FRACTIONS, IDEAL, KNOBS, OVERHEADS, RESIDUAL_KIND, format_knob, parse_fix
from dse.calibrate.measurements import (
    COLUMNS,
    OPTIONAL,
    REQUIRED,
    Measurement,
    canonical_workload,
    load_measurements,
    parse_measured_workload,
)
from dse.calibrate.result import BoundNote, CalibrationFit, RowFit
from dse.calibrate.write import calibrated_yaml, write_calibrated_chip

__all__ = [
    "KNOBS",
    "IDEAL",
    "COLUMNS",
    "Measurement",
    "RowFit",
    "BoundNote",
    "CalibrationFit",
    "parse_measured_workload",
    "load_measurements",
    "parse_fix",
    "calibrate",
    "canonical_workload",
    "format_knob",
    "predict",
    "calibrated_yaml",
    "write_calibrated_chip",
    "FRACTIONS",
    "OVERHEADS",
    "RESIDUAL_KIND",
    "REQUIRED",
    "OPTIONAL",
]
