"""The records a calibration returns: the fit (CalibrationFit), each row (RowFit), each active bound (BoundNote)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.calibrate.knobs import FRACTIONS, RESIDUAL_KIND, format_knob
from dse.calibrate.measurements import Measurement


@dataclass(frozen=True)
class RowFit:
    """One measurement against the ideal bound, the fit, and the leave-one-out prediction."""

    measurement: Measurement
    bound_s: float
    predicted_s: float
    residual: float
    loo_predicted_s: float | None
    loo_error: float | None
    loo_note: str = ""
    loo_held: tuple = ()  # knobs the leave-one-out refit could not identify and held at the full fit's value


@dataclass(frozen=True)
class BoundNote:
    """A physical bound the data pushes against: the knob sits on ``bound``; freed alone (the other knobs
    refitted within their bounds) it would go to ``wanted``. ``edge``: where the cost stops improving, when
    every value from there to ``wanted`` (and beyond) fits the same (the fit only says "at least this")."""

    knob: str
    bound: float
    wanted: float
    edge: float | None = None

    def wants(self) -> str:
        if self.edge is not None:
            return f"{'>=' if self.knob in FRACTIONS else '<='} {format_knob(self.knob, self.edge)}"
        return f"= {format_knob(self.knob, self.wanted)}"

    def text(self) -> str:
        return (f"{self.knob} sits on its physical bound {format_knob(self.knob, self.bound)}; freed, the fit wants "
                f"{self.knob} {self.wants()}")


@dataclass(frozen=True)
class CalibrationFit:
    """The result of :func:`calibrate`. ``chip`` is the calibrated ChipSpec (its ``calibration`` filled)."""

    chip: object
    values: dict
    free: tuple
    fixed: dict
    rows: tuple
    active: tuple
    unconstrained: dict | None
    measurements_file: str | None
    chip_path: str | None
    residual_kind: str = RESIDUAL_KIND

    @property
    def residuals(self) -> np.ndarray:
        return np.array([r.residual for r in self.rows])

    @property
    def loo_errors(self) -> np.ndarray:
        return np.array([np.nan if r.loo_error is None else r.loo_error for r in self.rows])

    @property
    def rms(self) -> float:
        return float(np.sqrt(np.mean(self.residuals ** 2)))

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(self.residuals)))

    @property
    def loo_rms(self) -> float:
        e = self.loo_errors
        e = e[np.isfinite(e)]
        return float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan

    @property
    def loo_max(self) -> float:
        e = self.loo_errors
        e = e[np.isfinite(e)]
        return float(np.max(np.abs(e))) if e.size else math.nan

    @property
    def loo_held_count(self) -> int:
        """Rows whose leave-one-out refit held a knob at the full fit's value (their LOO numbers are partly fits)."""
        return sum(1 for r in self.rows if r.loo_held)

    def _loo_independent(self) -> np.ndarray:
        e = np.array([np.nan if (r.loo_error is None or r.loo_held) else r.loo_error for r in self.rows])
        return e[np.isfinite(e)]

    @property
    def loo_rms_independent(self) -> float:
        """Leave-one-out RMS over the rows whose refit held no knob (independent predictions only)."""
        e = self._loo_independent()
        return float(np.sqrt(np.mean(e ** 2))) if e.size else math.nan

    @property
    def loo_max_independent(self) -> float:
        e = self._loo_independent()
        return float(np.max(np.abs(e))) if e.size else math.nan

    def loo_text(self) -> str:
        """'RMS x%, max y%', with the independent-only figures where some refits held a knob."""
        text = f"RMS {self.loo_rms:.1%}, max {self.loo_max:.1%}"
        k = self.loo_held_count
        if k:
            rest = len(self.rows) - k
            text += (f" ({k} of {len(self.rows)} refits held a knob at the full fit's value; over the other "
                     f"{rest}: " + (f"RMS {self.loo_rms_independent:.1%}, max {self.loo_max_independent:.1%})"
                                    if rest else "none)"))
        return text

    def summary(self) -> str:
        """One line for a chip file's ``calibration.source``."""
        where = self.measurements_file or "measurements"
        fixed = (", fixed " + ", ".join(f"{k}={format_knob(k, v)}" for k, v in self.fixed.items())
                 if self.fixed else "")
        act = ("; bound active: " + ", ".join(f"{b.knob} (wants {b.wants()})" for b in self.active)
               if self.active else "")
        return (f"fitted by `dse calibrate` to {where} ({len(self.rows)} measurements of {self.chip.name}; "
                f"least squares on relative residuals, fractions in (0, 1], overheads >= 0{fixed}); "
                f"RMS residual {self.rms:.1%}, max {self.max_abs:.1%}; leave-one-out {self.loo_text()}{act}")
