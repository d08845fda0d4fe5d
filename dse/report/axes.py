"""What the PNG and the interactive plots share: log or linear axes, units on ticks, labels, catalog points."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from dse.pareto import MAXIMIZE
from dse.report.view import _Study, _num
from dse.study.results import _CANONICAL, _SCALED, _dimension, format_value
from dse.units import format_ticks


def _wide(values: np.ndarray) -> bool:
    """Use a log axis: every value positive and finite, spanning 100x or more."""
    v = values[np.isfinite(values)]
    return bool(v.size >= 2 and np.all(v > 0) and v.max() / v.min() >= 100)


def _eng_unit(unit: str) -> str | None:
    """The unit symbol to put on engineering-notation ticks (2 ms, 80 GB), or None to print plain numbers."""
    return unit if _CANONICAL.get(unit) in _SCALED else None


def tick_texts(values, unit: str, digits: int = 3) -> list[str]:
    """Tick labels for values of ``unit`` (a unit symbol or a dimension name), written by dse's one formatting:
    a scaled quantity with its unit in one prefix family (:func:`dse.units.format_ticks`: '2 ms', '80 GB'),
    anything else as a plain number (the unit, if any, belongs in the axis title)."""
    dim, _ = _dimension(unit)
    if dim in _SCALED:
        return format_ticks(values, dim, digits)
    return ["0" if float(v) == 0 else format_value(float(v), None, digits) for v in values]


def unit_ticks(axis, unit: str, log: bool = False) -> None:
    """Tick labels of a matplotlib axis written by :func:`tick_texts` ('2 ms', '80 GB', '228 KiB'), instead of
    matplotlib's own prefixes.

    On a log axis the minor ticks are labelled (2 and 5 of each decade) only when it spans a decade or less,
    as matplotlib does, so that a short log axis still has numbers on it."""
    from matplotlib.ticker import Formatter

    class _Units(Formatter):
        def __call__(self, v, pos=None):
            return tick_texts([v], unit)[0]

        def format_ticks(self, values):
            return tick_texts(values, unit)

    axis.set_major_formatter(_Units())
    if not log:
        return

    class _Minor(Formatter):
        def __call__(self, v, pos=None):
            return self.format_ticks([v])[0]

        def format_ticks(self, values):
            lo, hi = sorted(axis.get_view_interval())
            if not lo > 0 or np.log10(hi / lo) > 1.0:
                return [""] * len(values)
            keep = [v > 0 and (np.log10(hi / lo) < 0.4
                               or round(v / 10 ** np.floor(np.log10(v) + 1e-9), 6) in (2.0, 5.0)) for v in values]
            texts = tick_texts([v for v, k in zip(values, keep) if k], unit)
            it = iter(texts)
            return [next(it) if k else "" for k in keep]

    axis.set_minor_formatter(_Minor())


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
