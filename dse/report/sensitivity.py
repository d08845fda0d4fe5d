"""The front's sensitivity to each parameter: how much of each objective's spread along the front each
parameter accounts for. A variance-based measure, computed from the results table only (no evaluation).

Over the front's distinct designs (feasible, ``pareto_rank`` 0; repeats of one design counted once), per
objective y -- its logarithm where y > 0 on every front design, so that a 2x change counts alike at every
scale, else y itself -- and per parameter x: the designs are put in groups by x, by value where x has at most
:data:`BINS` distinct values on the front (choices, booleans, small integer ranges), else in :data:`BINS`
groups of (nearly) equal size by rank. The share is epsilon-squared (Kelley 1935), the between-group share of
the variance corrected for the number of groups k among the n designs:

    share = max(0, 1 - (SS_within / (n - k)) / (SS_total / (n - 1)))

A parameter unrelated to y scores about 0 (the plain ratio SS_between / SS_total would score about
(k - 1) / (n - 1) by chance); 1 means that x alone sets y along the front. The measure is first order (one
parameter at a time) and taken along the front, not a derivative at one design: parameters that move
together on the front (a trade the front makes) share the credit, and one that is constant on the front
scores 0 however much it mattered to reach it. No randomness: the same table gives the same numbers.

Written by the reports to ``sensitivity.csv`` (one row per parameter and objective: ``parameter``,
``objective``, ``share``, ``designs``, ``groups``, ``distinct`` values, the one ``value`` where there is one) and shown in report.md / report.html; none where the
front has fewer than :data:`MIN_DESIGNS` distinct designs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from dse.units import format_percent

#: Groups of a numeric parameter with more distinct values than this on the front (equal-size, by rank).
BINS = 8
#: Fewest distinct front designs for which the shares are computed.
MIN_DESIGNS = 5
SENSITIVITY_CSV = "sensitivity.csv"
#: What the reports say the numbers are.
NOTE = ("Each cell: the share of the objective's variance along the front (its logarithm where positive) that "
        "the parameter accounts for, one parameter at a time (epsilon-squared over the parameter's values, or 8 "
        "equal groups by rank); 0: the objective moves as much within the parameter's groups as across them. "
        "Parameters that the front trades together share the credit; one the whole front agrees on scores 0, "
        "however much it mattered to get there.")


def groups(values: pd.Series, bins: int = BINS) -> tuple[np.ndarray, int]:
    """Group codes (0 .. k - 1) of one parameter's values and the number of groups k: by value where there
    are at most ``bins`` distinct values, else ``bins`` groups of equal size by rank (ties share a group)."""
    v = values.reset_index(drop=True)
    codes, uniques = pd.factorize(v.astype(str) if v.dtype == object or v.dtype == bool else v, sort=True)
    if len(uniques) <= bins:
        return codes.astype(int), len(uniques)
    x = pd.to_numeric(v, errors="coerce")
    if x.isna().any():  # a non-numeric parameter with many values: by value
        return codes.astype(int), len(uniques)
    r = x.rank(method="average").to_numpy()  # 1 .. n
    g = np.minimum(np.floor((r - 0.5) * bins / len(r)).astype(int), bins - 1)
    used, g = np.unique(g, return_inverse=True)
    return g.astype(int), len(used)


def epsilon_squared(y: np.ndarray, codes: np.ndarray, k: int) -> float:
    """max(0, 1 - (SS_within / (n - k)) / (SS_total / (n - 1))); nan where y does not vary or n <= k."""
    y = np.asarray(y, dtype=float)
    n = len(y)
    total = float(((y - y.mean()) ** 2).sum())
    if n < 2 or n <= k or not total > 0:
        return float("nan")
    if k == 1:  # one group: nothing between groups (exactly 0, not a rounding residue)
        return 0.0
    sums = np.bincount(codes, weights=y, minlength=k)
    counts = np.bincount(codes, minlength=k)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), 0.0)
    within = float(((y - means[codes]) ** 2).sum())
    return min(1.0, max(0.0, 1.0 - (within / (n - k)) / (total / (n - 1))))


def sensitivity(front: pd.DataFrame, params: list[str], objectives: list[str]) -> pd.DataFrame | None:
    """The shares of every parameter (``p.*`` columns) in every objective along the front (module doc), as a
    long table sorted by parameter in the order given; None below MIN_DESIGNS distinct designs."""
    if not params or front is None or front.empty:
        return None
    fr = front.drop_duplicates(subset=params, keep="first").reset_index(drop=True)
    if len(fr) < MIN_DESIGNS:
        return None
    rows = []
    for o in objectives:
        y = pd.to_numeric(fr[f"obj.{o}"], errors="coerce").to_numpy(dtype=float)
        if not np.all(np.isfinite(y)):
            continue
        if np.all(y > 0):
            y = np.log(y)
        for p in params:
            codes, k = groups(fr[p])
            rows.append({"parameter": p[2:] if p.startswith("p.") else p, "objective": o,
                         "share": epsilon_squared(y, codes, k), "designs": len(fr), "groups": k,
                         "distinct": int(fr[p].nunique()), "value": fr[p].iloc[0] if k == 1 else None})
    return pd.DataFrame(rows) if rows else None


def table_rows(s: pd.DataFrame, objectives: list[str], value_text=str) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the reports' table: one row per parameter (the largest share first), a column per
    objective (shares as percentages), then what the parameter does on the front: its one value
    (``value_text(parameter, value)``) or how many distinct values it takes."""
    wide = s.pivot(index="parameter", columns="objective", values="share")
    wide = wide[[o for o in objectives if o in wide.columns]]
    order = wide.max(axis=1).fillna(-1).sort_values(ascending=False, kind="stable").index
    first = s.drop_duplicates("parameter").set_index("parameter")
    rows = []
    for p in order:
        on = (f"one value: {value_text(p, first.loc[p, 'value'])}" if int(first.loc[p, "groups"]) == 1
              else f"{int(first.loc[p, 'distinct']):,} values")
        rows.append([str(p)] + [format_percent(wide.loc[p, o]) for o in wide.columns] + [on])
    return ["parameter"] + [f"{o}" for o in wide.columns] + ["on the front"], rows


def summary(s: pd.DataFrame) -> str:
    """One line: per objective, the parameter with the largest share."""
    parts = []
    for o, g in s.groupby("objective", sort=False):
        g = g.dropna(subset=["share"])
        if len(g):
            top = g.loc[g["share"].idxmax()]
            parts.append(f"{o}: {top['parameter']} ({format_percent(top['share'])})")
    designs = int(s["designs"].iloc[0])
    return (f"what moves each objective along the front ({designs} distinct designs; share of its variance, "
            f"in {SENSITIVITY_CSV}): " + ", ".join(parts))
