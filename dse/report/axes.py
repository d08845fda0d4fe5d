"""What the PNG and the interactive plots share: log or linear axes, units on ticks, labels, catalog points."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from dse.pareto import MAXIMIZE
from dse.report.view import _Study, _num
from dse.study.results import _CANONICAL, _SCALED


def _wide(values: np.ndarray) -> bool:
    """Use a log axis: every value positive and finite, spanning 100x or more."""
    v = values[np.isfinite(values)]
    return bool(v.size >= 2 and np.all(v > 0) and v.max() / v.min() >= 100)


def _eng_unit(unit: str) -> str | None:
    """The unit symbol to put on engineering-notation ticks (2 ms, 80 GB), or None to print plain numbers."""
    return unit if _CANONICAL.get(unit) in _SCALED else None


def _axis_label(st: _Study, name: str, with_unit: bool = True) -> str:
    unit = st.units.get(name, "") if with_unit else ""
    better = "higher" if st.directions[name] == MAXIMIZE else "lower"
    return f"{name}" + (f" [{unit}]" if unit and unit != "1" else "") + f" ({better} is better)"


def _pairs(st: _Study) -> list[tuple[str, str]]:
    return list(combinations(st.objectives, 2))


def _near(v: np.ndarray, designs: np.ndarray) -> np.ndarray:
    """Which values lie within one data span (one decade on a log axis) of the designs' range."""
    d = designs[np.isfinite(designs)]
    if d.size == 0:
        return np.isfinite(v)
    if _wide(d):
        with np.errstate(divide="ignore", invalid="ignore"):
            lv = np.where(v > 0, np.log10(np.where(v > 0, v, 1.0)), -np.inf)
        lo, hi = np.log10(d.min()), np.log10(d.max())
        span = max(hi - lo, 1.0)
        return (lv >= lo - span) & (lv <= hi + span)
    lo, hi = float(d.min()), float(d.max())
    span = (hi - lo) or abs(hi) or 1.0
    return np.isfinite(v) & (v >= lo - span) & (v <= hi + span)


def _catalog_points(st: _Study, xc: str, yc: str, xd: np.ndarray, yd: np.ndarray):
    """Catalog chips to place on these axes: (names, x, y) of the finite ones near the designs, and the
    names of the finite ones so far off that they would squash the designs into a corner."""
    cat = st.catalog
    if cat is None or xc not in cat.columns or yc not in cat.columns:
        return [], np.empty(0), np.empty(0), []
    cx, cy = _num(cat[xc]), _num(cat[yc])
    names = np.array([str(n) for n in cat["chip"]], dtype=object)
    fin = np.isfinite(cx) & np.isfinite(cy)
    if "feasible" in cat.columns:  # a chip that breaks the study's constraints is no reference point
        fin &= np.array([str(v).lower() not in ("false", "0", "0.0") for v in cat["feasible"]])
    near = fin & _near(cx, xd) & _near(cy, yd)
    return list(names[near]), cx[near], cy[near], list(names[fin & ~near])
