"""The study as the reports see it: the prepared table and what every section needs from it.

Inputs are the results contract of :mod:`dse.study.results` (the trials ``table``,
the study's ``meta`` and the optional ``catalog`` of reference chips). Everything
shown is computed from the table: nothing here evaluates a chip.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from dse.study.results import format_value, front, objective_directions, objective_names, prepare_table

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
_BOUND_ORDER = ("compute", "matrix", "vector", "memory")
_TIME_SPLIT = re.compile(r"^m\.time_([a-z0-9]+)_bound_s$")


@dataclass
class _Study:
    """The prepared table and what every section needs from it."""

    t: pd.DataFrame
    meta: Mapping
    catalog: pd.DataFrame | None
    objectives: list[str]
    directions: dict[str, str]
    units: dict[str, str]
    params: list[str]
    front: pd.DataFrame
    rejections: pd.DataFrame
    plots: list[tuple[str, str]] = field(default_factory=list)  # (relative path, caption)
    convergence: Any = None  # dse.report.convergence.Convergence (None: fewer than 2 objectives, nothing feasible)
    sensitivity: Any = None  # dse.report.sensitivity's table (None: fewer than MIN_DESIGNS distinct front designs)

    @property
    def n(self) -> int:
        return len(self.t)

    @property
    def n_feasible(self) -> int:
        return int(self.t["feasible"].sum())

    def obj_col(self, name: str) -> str:
        return f"obj.{name}"


def _study(table: pd.DataFrame, meta: Mapping, catalog: pd.DataFrame | None) -> _Study:
    t = prepare_table(table, meta)
    names = objective_names(meta)
    units = {str(o["name"]): str(o.get("unit") or "") for o in meta["objectives"]}
    params = [c for c in t.columns if isinstance(c, str) and c.startswith("p.")]
    cat = catalog if catalog is not None and len(catalog) else None
    from dse.report.convergence import convergence
    from dse.report.sensitivity import sensitivity

    dirs = objective_directions(meta)
    fr = front(t, meta)
    return _Study(t=t, meta=meta, catalog=cat, objectives=names, directions=dirs,
                  units=units, params=params, front=fr, rejections=constraint_rejections(t, meta),
                  convergence=convergence(t, names, dirs), sensitivity=sensitivity(fr, params, names))


def _num(s: pd.Series) -> np.ndarray:
    return pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)


def _constraint_units(meta: Mapping) -> dict[str, str]:
    return {str(c["name"]): str(c.get("unit") or "") for c in meta.get("constraints") or [] if "name" in c}


def constraint_rejections(table: pd.DataFrame, meta: Mapping) -> pd.DataFrame:
    """One row per constraint column: how many designs it rejected and by how much.

    Columns: ``constraint``, ``unit``, ``rejected`` (value > 0), ``alone``
    (rejected by this constraint and no other), ``worst`` (largest violation),
    ``closest`` (smallest violation among the rejected), ``nan`` (not
    evaluated). Sorted by ``rejected``, most first.
    """
    cols = [c for c in table.columns if isinstance(c, str) and c.startswith("con.")]
    units = _constraint_units(meta)
    if not cols:
        return pd.DataFrame(columns=["constraint", "unit", "rejected", "alone", "worst", "closest", "nan"])
    V = np.column_stack([_num(table[c]) for c in cols])
    with np.errstate(invalid="ignore"):
        bad = V > 0
    n_bad = bad.sum(axis=1)
    rows = []
    for j, c in enumerate(cols):
        v = V[bad[:, j], j]
        rows.append({
            "constraint": c[4:], "unit": units.get(c[4:], ""), "rejected": int(bad[:, j].sum()),
            "alone": int((bad[:, j] & (n_bad == 1)).sum()),
            "worst": float(v.max()) if v.size else float("nan"),
            "closest": float(v.min()) if v.size else float("nan"),
            "nan": int(np.isnan(V[:, j]).sum()),
        })
    out = pd.DataFrame(rows)
    return out.sort_values(["rejected", "constraint"], ascending=[False, True], kind="mergesort").reset_index(drop=True)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _pct(k: int, n: int) -> str:
    return f"{100.0 * k / n:.0f}%" if n else "-"


def _obj_value(st: _Study, name: str, v: Any) -> str:
    return format_value(v, st.units.get(name, ""))


def _param_value(st: _Study, col: str, v: Any) -> str:
    unit = next((s.get("unit") or "" for s in st.meta.get("space") or [] if s.get("name") == col[2:]), "")
    return format_value(v, unit)


def _space_entry(meta: Mapping, col: str) -> Mapping:
    return next((s for s in meta.get("space") or [] if isinstance(s, Mapping) and s.get("name") == col[2:]), {})


def _same(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    except (TypeError, ValueError):
        return a == b


def _as_number(v: Any) -> Any:
    """'131072.0' -> 131072.0 (choices are stored as text); other values unchanged."""
    try:
        return float(v) if isinstance(v, str) else v
    except ValueError:
        return v


def _to_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _time_split_columns(t: pd.DataFrame) -> list[tuple[str, str]]:
    found = [(c, m.group(1)) for c in t.columns if isinstance(c, str) and (m := _TIME_SPLIT.match(c))]
    order = {n: i for i, n in enumerate(_BOUND_ORDER)}
    return sorted(found, key=lambda x: (order.get(x[1], 99), x[1]))


def _distinct(st: _Study) -> pd.DataFrame:
    """The front without repeats of the same design (a solver may evaluate one point several times)."""
    if not st.params or st.front.empty:
        return st.front
    return st.front.drop_duplicates(subset=st.params, keep="first")


def _distinct_note(st: _Study) -> str:
    k = len(_distinct(st))
    return f" ({k} distinct)" if k != len(st.front) else ""
