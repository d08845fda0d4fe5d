"""Reports of a study for people: report.md, PNG plots, one self-contained interactive report.html.

Inputs are the results contract of :mod:`dse.study.results` (the trials ``table``,
the study's ``meta`` and the optional ``catalog`` of reference chips). Files
written into the output folder, each atomically (:func:`dse.study.results.atomic_write`):

    report.md                       title, question, settings, counts, the front, constraint
                                    rejections, "what the front says", links to the plots
    plots/pareto_<x>__<y>.png       one Pareto scatter per pair of objectives (matplotlib, Agg)
    plots/bound.png                 where the front designs are bound (m.bound, time split)
    report.html                     one page that works offline: plotly.js inline, a Pareto
                                    scatter per pair with the parameters on hover, the catalog
                                    chips as their own trace, parallel coordinates of the
                                    feasible designs, the front as a table

:func:`regenerate` rebuilds the reports from a results folder (``dse report DIR``).
Everything shown is computed from the table: nothing here evaluates a chip.
"""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.pareto import MAXIMIZE, to_minimization
from dse.study.results import (
    _CANONICAL,
    _SCALED,
    atomic_write,
    column_label,
    format_table,
    format_value,
    front,
    front_mask,
    objective_directions,
    objective_names,
    prepare_table,
    read_results,
)

__all__ = ["write_reports", "regenerate", "constraint_rejections", "findings", "REPORT_MD", "REPORT_HTML"]

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
PLOTS = "plots"
BOUND_PNG = f"{PLOTS}/bound.png"
_BOUND_ORDER = ("compute", "matrix", "vector", "memory")
_TIME_SPLIT = re.compile(r"^m\.time_([a-z0-9]+)_bound_s$")


# ------------------------------------------------------------ data for both renderers


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
    return _Study(t=t, meta=meta, catalog=cat, objectives=names, directions=objective_directions(meta),
                  units=units, params=params, front=front(t, meta), rejections=constraint_rejections(t, meta))


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


# ------------------------------------------------------------ "what the front says"


def _no_feasible_text(st: _Study) -> list[str]:
    out = [f"No feasible design among {_plural(st.n, 'evaluated design')}."]
    rej = st.rejections
    if rej.empty or rej["rejected"].iloc[0] == 0:
        out.append("No constraint column reports a violation; the designs were marked infeasible by the study.")
        return out
    top = rej.iloc[0]
    out.append(
        f"The constraint that rejected the most is **{top['constraint']}**: {top['rejected']} of {st.n} designs"
        f" ({_pct(top['rejected'], st.n)}), by up to {format_value(top['worst'], top['unit'])}"
        f" (the closest miss was {format_value(top['closest'], top['unit'])} over its limit).")
    others = rej.iloc[1:][rej.iloc[1:]["rejected"] > 0]
    if len(others):
        out.append("Also binding: " + "; ".join(
            f"{r['constraint']} rejected {r['rejected']} (up to {format_value(r['worst'], r['unit'])})"
            for _, r in others.head(4).iterrows()) + ".")
    near = _closest_miss(st)
    if near:
        out.append(near)
    return out


def _closest_miss(st: _Study) -> str:
    """The design nearest to feasible: fewest violated constraints, then smallest violation relative to the worst."""
    cols = [f"con.{c}" for c in st.rejections["constraint"]]
    if not cols or st.n == 0:
        return ""
    V = np.column_stack([_num(st.t[c]) for c in cols])
    V = np.where(np.isnan(V), np.inf, V)
    pos = np.clip(V, 0, None)
    worst = np.array([w if w > 0 and np.isfinite(w) else 1.0 for w in st.rejections["worst"]])
    count = (pos > 0).sum(axis=1)
    rel = (pos / worst).sum(axis=1)
    i = int(np.lexsort((rel, count))[0])
    viol = [f"{cols[j][4:]} over by {format_value(V[i, j], st.rejections['unit'].iloc[j])}"
            for j in range(len(cols)) if V[i, j] > 0]
    trial = st.t["trial"].iloc[i]
    return f"Closest to feasible: trial {trial} ({', '.join(viol)})." if viol else ""


def _dominates(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all(a <= b) and np.any(a < b))


def findings(table: pd.DataFrame, meta: Mapping, catalog: pd.DataFrame | None = None) -> list[str]:
    """Sentences (markdown) on what the front says, computed from the data."""
    return _findings(_study(table, meta, catalog))


def _findings(st: _Study) -> list[str]:
    if st.n == 0:
        return ["No design was evaluated."]
    if st.n_feasible == 0:
        return _no_feasible_text(st)
    fr = st.front
    k = len(fr)
    out: list[str] = []
    feas_line = f"{st.n_feasible} of {st.n} evaluated designs are feasible ({_pct(st.n_feasible, st.n)})"
    rej = st.rejections
    if len(rej) and rej["rejected"].iloc[0] > 0:
        top = rej.iloc[0]
        feas_line += (f"; **{top['constraint']}** rejected the most ({top['rejected']},"
                      f" by up to {format_value(top['worst'], top['unit'])})")
    out.append(feas_line + f". The front holds {_plural(k, 'design')}.")
    # extent of the front along each objective
    if k >= 2:
        parts = []
        for name in st.objectives:
            c = st.obj_col(name)
            v = _num(fr[c])
            if not np.isfinite(v).any():
                continue
            best = int(np.nanargmax(v) if st.directions[name] == MAXIMIZE else np.nanargmin(v))
            worst = int(np.nanargmin(v) if st.directions[name] == MAXIMIZE else np.nanargmax(v))
            parts.append(f"{name} from {_obj_value(st, name, v[best])} (trial {fr['trial'].iloc[best]})"
                         f" to {_obj_value(st, name, v[worst])} (trial {fr['trial'].iloc[worst]})")
        if parts:
            out.append("Along the front: " + "; ".join(parts) + ".")
    elif k == 1:
        row = fr.iloc[0]
        out.append(f"One design (trial {row['trial']}) is best in every objective: " + ", ".join(
            f"{n} {_obj_value(st, n, row[st.obj_col(n)])}" for n in st.objectives) + ".")
    out += _param_findings(st)
    out += _bound_findings(st)
    out += _catalog_findings(st)
    return out


def _param_findings(st: _Study) -> list[str]:
    fr = st.front
    k = len(fr)
    out: list[str] = []
    shared, edges, mostly, trends = [], [], [], []
    first = st.objectives[0]
    for col in st.params:
        name = col[2:]
        vals = fr[col]
        uniq = vals.dropna().unique()
        space = _space_entry(st.meta, col)
        if len(uniq) == 1 and k >= 2:
            shared.append(f"{name} = {_param_value(st, col, uniq[0])}")
        elif len(uniq) > 1:
            counts = vals.value_counts()
            if counts.iloc[0] >= 0.75 * k and k >= 4:
                mostly.append(f"{name} = {_param_value(st, col, counts.index[0])} in {counts.iloc[0]} of {k}")
        numeric = pd.api.types.is_numeric_dtype(vals) and not pd.api.types.is_bool_dtype(vals)
        fixed = _same(space.get("low"), space.get("high"))  # a parameter pinned by the space is no finding
        if numeric and k >= 1 and not fixed:
            for bound, where in (("high", "top"), ("low", "bottom")):
                lim = space.get(bound)
                if lim is None or not np.isfinite(_to_float(lim)):
                    continue
                at = int(sum(_same(v, lim) for v in vals))
                if at >= max(1, math.ceil(0.5 * k)):
                    edges.append(f"{name} sits at the {where} of its range ({_param_value(st, col, lim)})"
                                 f" in {at} of {k} front designs")
        if numeric and k >= 4 and len(uniq) > 1:
            rho = _spearman(_num(vals), _num(fr[st.obj_col(first)]))
            if rho == rho and abs(rho) >= 0.7:
                better_high = (rho > 0) if st.directions[first] == MAXIMIZE else (rho < 0)
                trends.append((abs(rho), f"better {first} comes with {'more' if better_high else 'less'} {name}"
                                         f" (rank correlation {rho:+.2f})"))
    if shared:
        out.append(f"All {k} front designs share " + ", ".join(shared) + ".")
    if mostly:
        out.append("Most front designs use " + "; ".join(mostly) + ".")
    if edges:
        out.append("; ".join(edges) + " — the best designs may lie beyond the explored range.")
    if trends:
        trends.sort(key=lambda x: -x[0])
        out.append("Trade-offs along the front: " + "; ".join(t for _, t in trends[:3]) + ".")
    return out


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (Pearson on average ranks) over the rows where both are finite; NaN if undefined."""
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return float("nan")
    ra = pd.Series(a[ok]).rank().to_numpy()
    rb = pd.Series(b[ok]).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


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


def _bound_findings(st: _Study) -> list[str]:
    fr = st.front
    k = len(fr)
    out = []
    if "m.bound" in fr.columns and k:
        counts = fr["m.bound"].astype(str).value_counts()
        if len(counts) == 1:
            out.append(f"All {_plural(k, 'front design')} are {counts.index[0]}-bound." if k > 1
                       else f"The front design is {counts.index[0]}-bound.")
        else:
            text = ", ".join(f"{n} {b}-bound" for b, n in counts.items())
            out.append(f"Of the {_plural(k, 'front design')}: {text}.")
    split = _time_split_columns(fr)
    if split and k:
        T = np.column_stack([_num(fr[c]) for c, _ in split])
        tot = np.nansum(T, axis=1)
        ok = tot > 0
        if ok.any():
            share = np.nanmean(T[ok] / tot[ok, None], axis=0)
            j = int(np.argmax(share))
            out.append(f"On average {100 * share[j]:.0f}% of a front design's time is in {split[j][1]}-bound"
                       " operators (" + ", ".join(f"{n} {100 * s:.0f}%" for (_, n), s in zip(split, share)) + ").")
    return out


def _catalog_findings(st: _Study, limit: int = 8) -> list[str]:
    cat = st.catalog
    if cat is None:
        return []
    cols = [st.obj_col(n) for n in st.objectives]
    if not all(c in cat.columns for c in cols) or st.front.empty:
        return []
    dirs = [st.directions[n] for n in st.objectives]
    F = to_minimization(np.column_stack([_num(st.front[c]) for c in cols]), dirs)
    beaten, standing, skipped = [], [], []
    for _, row in cat.iterrows():
        c = to_minimization(np.array([[_to_float(row[c]) for c in cols]]), dirs)[0]
        if not np.all(np.isfinite(c)):
            skipped.append(str(row["chip"]))
            continue
        dom = [i for i in range(len(F)) if _dominates(F[i], c)]
        if dom:
            beaten.append((len(dom), f"{row['chip']} by {len(dom)}"))
        else:
            standing.append(str(row["chip"]))
    out = []
    n = len(beaten) + len(standing)
    if n:
        text = f"Against the {_plural(n, 'catalog chip')} on the same workloads and objectives:"
        if beaten:
            beaten.sort(key=lambda b: -b[0])
            more = f", and {len(beaten) - limit} more" if len(beaten) > limit else ""
            text += (f" {len(beaten)} {'is' if len(beaten) == 1 else 'are'} dominated by front designs ("
                     + "; ".join(b for _, b in beaten[:limit]) + more + ")")
        if standing:
            text += ("," if beaten else "") + (
                f" {len(standing)} {'is' if len(standing) == 1 else 'are'} not dominated by any design found ("
                + ", ".join(standing) + ")")
        out.append(text + ".")
    if skipped:
        out.append("Not compared (an objective is undefined for them): " + ", ".join(skipped) + ".")
    return out


# ------------------------------------------------------------ PNG plots (matplotlib, Agg)


def _new_figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _wide(values: np.ndarray) -> bool:
    """Use a log axis: every value positive and finite, spanning 100x or more."""
    v = values[np.isfinite(values)]
    return bool(v.size >= 2 and np.all(v > 0) and v.max() / v.min() >= 100)


def _eng_unit(unit: str) -> str | None:
    """The unit symbol to put on engineering-notation ticks (2 ms, 80 GB), or None to print plain numbers."""
    return unit if _CANONICAL.get(unit) in _SCALED else None


def _format_axis(axis, st: _Study, name: str) -> None:
    sym = _eng_unit(st.units.get(name, ""))
    if sym:
        from matplotlib.ticker import EngFormatter

        axis.set_major_formatter(EngFormatter(unit=sym))


def _axis_label(st: _Study, name: str, with_unit: bool = True) -> str:
    unit = st.units.get(name, "") if with_unit else ""
    better = "higher" if st.directions[name] == MAXIMIZE else "lower"
    return f"{name}" + (f" [{unit}]" if unit and unit != "1" else "") + f" ({better} is better)"


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("._") or "x"


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
    near = fin & _near(cx, xd) & _near(cy, yd)
    return list(names[near]), cx[near], cy[near], list(names[fin & ~near])


def _pair_png(st: _Study, xn: str, yn: str) -> bytes:
    t, xc, yc = st.t, st.obj_col(xn), st.obj_col(yn)
    x, y = _num(t[xc]), _num(t[yc])
    fin = np.isfinite(x) & np.isfinite(y)
    feas = t["feasible"].to_numpy(dtype=bool)
    f2 = front_mask(t, st.meta, xn, yn) & fin
    fall = (t["feasible"] & (t["pareto_rank"] == 0)).to_numpy(dtype=bool) & fin & ~f2
    fig = _new_figure(7.2, 5.2)
    ax = fig.add_subplot()
    m = ~feas & fin
    if m.any():
        ax.scatter(x[m], y[m], marker="x", s=14, linewidths=0.8, color="0.65", label=f"infeasible ({m.sum()})",
                   zorder=1)
    m = feas & fin & ~f2
    if m.any():
        ax.scatter(x[m], y[m], s=12, color="tab:blue", alpha=0.25, linewidths=0,
                   label=f"feasible ({int((feas & fin).sum())})", zorder=2)
    if fall.any() and len(st.objectives) > 2:
        ax.scatter(x[fall], y[fall], s=26, facecolors="none", edgecolors="tab:blue", linewidths=0.9,
                   label="front over all objectives", zorder=3)
    if f2.any():
        order = np.argsort(x[f2], kind="stable")
        ax.plot(x[f2][order], y[f2][order], "-o", color="tab:red", ms=5, lw=1.4,
                label=f"Pareto front ({int(f2.sum())})", zorder=4)
    xs, ys = [x[fin]], [y[fin]]
    names, cx, cy, off = _catalog_points(st, xc, yc, x[fin], y[fin])
    if names:
        ax.scatter(cx, cy, marker="*", s=110, color="black", label="catalog chips", zorder=5)
        for name, a, b in zip(names, cx, cy):
            ax.annotate(name, (a, b), xytext=(4, 4), textcoords="offset points", fontsize=7.5)
        xs.append(cx)
        ys.append(cy)
    if off:
        ax.text(0.99, 0.01, "catalog chips off this scale: " + ", ".join(off), transform=ax.transAxes,
                ha="right", va="bottom", fontsize=7, color="0.35", wrap=True)
    if not fin.any() and len(xs) == 1:
        ax.text(0.5, 0.5, "no design with finite values", ha="center", va="center", transform=ax.transAxes)
    if _wide(np.concatenate(xs)):
        ax.set_xscale("log")
    if _wide(np.concatenate(ys)):
        ax.set_yscale("log")
    ax.set_xlabel(_axis_label(st, xn, with_unit=not _eng_unit(st.units.get(xn, ""))))
    ax.set_ylabel(_axis_label(st, yn, with_unit=not _eng_unit(st.units.get(yn, ""))))
    _format_axis(ax.xaxis, st, xn)
    _format_axis(ax.yaxis, st, yn)
    ax.set_title(f"{yn} vs {xn}", fontsize=11)
    ax.grid(True, alpha=0.3, which="both", lw=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.85)
    return _png(fig)


def _single_png(st: _Study, name: str) -> bytes:
    """One objective: its value per trial, the best-so-far line and the best point."""
    t = st.t
    c = st.obj_col(name)
    trial, v = _num(t["trial"]), _num(t[c])
    feas = t["feasible"].to_numpy(dtype=bool) & np.isfinite(v)
    fig = _new_figure(7.2, 4.8)
    ax = fig.add_subplot()
    m = ~t["feasible"].to_numpy(dtype=bool) & np.isfinite(v)
    if m.any():
        ax.scatter(trial[m], v[m], marker="x", s=14, color="0.65", label="infeasible")
    if feas.any():
        ax.scatter(trial[feas], v[feas], s=12, color="tab:blue", alpha=0.35, label="feasible")
        order = np.argsort(trial[feas], kind="stable")
        acc = np.maximum.accumulate if st.directions[name] == MAXIMIZE else np.minimum.accumulate
        ax.step(trial[feas][order], acc(v[feas][order]), where="post", color="tab:red", label="best so far")
    if _wide(v):
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel(_axis_label(st, name))
    ax.grid(True, alpha=0.3, lw=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _png(fig)


def _bound_png(st: _Study, max_designs: int = 25) -> bytes | None:
    fr = st.front
    split = _time_split_columns(fr)
    has_bound = "m.bound" in fr.columns
    if fr.empty or not (has_bound or split):
        return None
    panels = int(has_bound) + int(bool(split))
    shown = fr.head(max_designs)
    fig = _new_figure(6.0 * panels if panels > 1 else 7.0, max(3.6, 0.9 + 0.22 * len(shown)))
    axes = fig.subplots(1, panels, squeeze=False)[0]
    colors = {"compute": "tab:red", "matrix": "tab:red", "vector": "tab:orange", "memory": "tab:blue"}
    i = 0
    if has_bound:
        ax = axes[i]
        i += 1
        groups = [("front", fr), ("all feasible", st.t[st.t["feasible"]])]
        cats = sorted(set(st.t.loc[st.t["feasible"], "m.bound"].astype(str)) | set(fr["m.bound"].astype(str)),
                      key=lambda b: (_BOUND_ORDER.index(b) if b in _BOUND_ORDER else 99, b))
        left = np.zeros(len(groups))
        for b in cats:
            share = np.array([(g["m.bound"].astype(str) == b).mean() if len(g) else 0.0 for _, g in groups])
            cnt = [int((g["m.bound"].astype(str) == b).sum()) for _, g in groups]
            ax.barh([g for g, _ in groups], share, left=left, height=0.5, color=colors.get(b, None),
                    label=f"{b}-bound")
            for yi, (w, x0, n) in enumerate(zip(share, left, cnt)):
                if w >= 0.08:
                    ax.text(x0 + w / 2, yi, str(n), ha="center", va="center", fontsize=8, color="white")
            left += share
        ax.set_xlim(0, 1)
        ax.set_xlabel("share of designs (count in the bar)")
        ax.set_title("what bounds the designs (m.bound)", fontsize=10)
        ax.invert_yaxis()
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, frameon=False)
    if split:
        ax = axes[i]
        T = np.column_stack([_num(shown[c]) for c, _ in split])
        tot = np.nansum(T, axis=1)
        frac = np.divide(T, tot[:, None], out=np.zeros_like(T), where=tot[:, None] > 0)
        labels = [f"trial {v}" for v in shown["trial"]]
        left = np.zeros(len(shown))
        for j, (_, n) in enumerate(split):
            ax.barh(labels, np.nan_to_num(frac[:, j]), left=left, color=colors.get(n), label=f"{n}-bound")
            left += np.nan_to_num(frac[:, j])
        ax.set_xlim(0, 1)
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        ax.set_xlabel("share of time")
        more = f" (best {len(shown)} of {len(fr)})" if len(fr) > len(shown) else ""
        ax.set_title(f"time split of the front designs{more}", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=4, frameon=False)
    return _png(fig)


def _write_plots(root: Path, st: _Study) -> dict[str, Path]:
    written: dict[str, Path] = {}
    wanted: set[str] = set()
    if len(st.objectives) >= 2:
        for xn, yn in _pairs(st):
            rel = f"{PLOTS}/pareto_{_safe_name(xn)}__{_safe_name(yn)}.png"
            written[rel] = atomic_write(rel, _pair_png(st, xn, yn), root=root)
            st.plots.append((rel, f"{yn} vs {xn}"))
            wanted.add(rel)
    else:
        name = st.objectives[0]
        rel = f"{PLOTS}/pareto_{_safe_name(name)}.png"
        written[rel] = atomic_write(rel, _single_png(st, name), root=root)
        st.plots.append((rel, f"{name} per trial"))
        wanted.add(rel)
    png = _bound_png(st)
    if png is not None:
        written[BOUND_PNG] = atomic_write(BOUND_PNG, png, root=root)
        st.plots.append((BOUND_PNG, "where the front designs are bound"))
        wanted.add(BOUND_PNG)
    # plots of an earlier report that this one does not make (other objectives) would mislead
    folder = root / PLOTS
    for old in folder.glob("pareto_*.png"):
        if f"{PLOTS}/{old.name}" not in wanted:
            old.unlink(missing_ok=True)
    if BOUND_PNG not in wanted:
        (root / BOUND_PNG).unlink(missing_ok=True)
    return written


# ------------------------------------------------------------ report.md


def _settings_lines(meta: Mapping) -> list[tuple[str, str]]:
    def text(v: Any) -> str:
        if isinstance(v, Mapping):
            return ", ".join(f"{k}={text(x)}" for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return "; ".join(text(x) if not isinstance(x, Mapping) else (str(x.get("name")) if "name" in x
                                                                            else text(x))
                             for x in v)
        return str(v)

    out = []
    if meta.get("base_chip"):
        out.append(("base chip", str(meta["base_chip"])))
    if meta.get("workloads"):
        out.append(("workloads", text(meta["workloads"])))
    if meta.get("solver"):
        out.append(("solver", text(meta["solver"])))
    for key, label in (("n_trials", "trials requested"), ("seed", "seed")):
        if meta.get(key) is not None:
            out.append((label, str(meta[key])))
    if meta.get("elapsed_s") is not None:
        out.append(("elapsed", format_value(_to_float(meta["elapsed_s"]), "s")))
    return out


def _space_rows(meta: Mapping) -> list[list[str]]:
    rows = []
    for s in meta.get("space") or []:
        if not isinstance(s, Mapping):
            continue
        unit = s.get("unit") or ""
        if s.get("choices"):
            rng = "{" + ", ".join(format_value(_as_number(c) if unit else c, unit) for c in s["choices"]) + "}"
        else:
            rng = f"{format_value(s.get('low'), unit)} .. {format_value(s.get('high'), unit)}"
        rows.append([str(s.get("name")), str(s.get("kind") or ""), rng, str(unit)])
    return rows


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(s: Any) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _rejection_rows(st: _Study) -> list[list[str]]:
    rows = []
    for _, r in st.rejections.iterrows():
        rows.append([str(r["constraint"]), f"{r['rejected']} ({_pct(r['rejected'], st.n)})", str(r["alone"]),
                     format_value(r["worst"], r["unit"]) if r["rejected"] else "-",
                     format_value(r["closest"], r["unit"]) if r["rejected"] else "-"]
                    + ([str(r["nan"])] if st.rejections["nan"].any() else []))
    return rows


_REJ_HEAD = ["constraint", "rejected", "rejected by it alone", "worst violation", "closest miss"]


def _objective_rows(meta: Mapping) -> list[list[str]]:
    return [[str(o["name"]), str(o.get("direction", "")), str(o.get("unit") or "")] for o in meta["objectives"]]


def _constraint_rows(meta: Mapping) -> list[list[str]]:
    rows = []
    for c in meta.get("constraints") or []:
        params = c.get("params") or {}
        ptxt = ", ".join(f"{k}={v}" for k, v in params.items()) if isinstance(params, Mapping) else str(params)
        rows.append([str(c["name"]), str(c.get("unit") or ""), ptxt])
    return rows


def _distinct(st: _Study) -> pd.DataFrame:
    """The front without repeats of the same design (a solver may evaluate one point several times)."""
    if not st.params or st.front.empty:
        return st.front
    return st.front.drop_duplicates(subset=st.params, keep="first")


def _distinct_note(st: _Study) -> str:
    k = len(_distinct(st))
    return f" ({k} distinct)" if k != len(st.front) else ""


def _md(st: _Study, top: int) -> str:
    meta = st.meta
    name = str(meta.get("name") or "study")
    L: list[str] = [f"# {name}", ""]
    if meta.get("question"):
        L += ["> " + str(meta["question"]).strip().replace("\n", "\n> "), ""]
    L += ["## Results", "",
          f"- evaluated: **{st.n}** designs",
          f"- feasible: **{st.n_feasible}** ({_pct(st.n_feasible, st.n)})",
          f"- Pareto front (all objectives): **{len(st.front)}** designs{_distinct_note(st)}", ""]
    L += ["## What the front says" if st.n_feasible else "## Why nothing is feasible", ""]
    L += [" ".join(_findings(st)), ""]
    if len(st.front):
        first = st.objectives[0]
        fr = _distinct(st)
        L += [f"## Pareto front (best {min(top, len(fr))} of {len(fr)} distinct designs by {first})", "",
              format_table(fr, meta, fmt="markdown", max_rows=top), "",
              "The whole front is in `pareto.csv`; every trial in `trials.csv` / `trials.parquet`.", ""]
    L += ["## Constraints", ""]
    if len(st.rejections):
        head = _REJ_HEAD + (["not evaluated"] if st.rejections["nan"].any() else [])
        L += [_md_table(head, _rejection_rows(st)), ""]
    else:
        L += ["The study has no constraint columns.", ""]
    L += ["## Plots", ""]
    for rel, caption in st.plots:
        L += [f"![{caption}]({rel})", ""]
    L += [f"Interactive version (hover for each design's parameters, works offline): [{REPORT_HTML}]({REPORT_HTML})",
          ""]
    L += ["## Settings", ""]
    L += [f"- {k}: {v}" for k, v in _settings_lines(meta)] + [""]
    L += ["Objectives:", "", _md_table(["objective", "direction", "unit"], _objective_rows(meta)), ""]
    if meta.get("constraints"):
        L += ["Constraints:", "", _md_table(["constraint", "unit", "params"], _constraint_rows(meta)), ""]
    if _space_rows(meta):
        L += ["Design space:", "", _md_table(["parameter", "kind", "range", "unit"], _space_rows(meta)), ""]
    return "\n".join(L)


# ------------------------------------------------------------ report.html (plotly, offline)


def _subsample(mask: np.ndarray, keep: np.ndarray, cap: int) -> np.ndarray:
    """``mask`` thinned to at most ``cap`` rows, evenly over the table, always keeping ``keep`` rows."""
    idx = np.flatnonzero(mask & ~keep)
    room = max(0, cap - int((mask & keep).sum()))
    if len(idx) > room:
        idx = idx[np.linspace(0, len(idx) - 1, room).round().astype(int)] if room else idx[:0]
    out = mask & keep
    out[idx] = True
    return out


def _hover(st: _Study, rows: pd.DataFrame, xn: str, yn: str, extra: str | None = None) -> tuple[list, str]:
    """customdata (one list of strings per row) and the hovertemplate listing every parameter."""
    cols = [("trial", None)] + [(c, None) for c in st.params]
    data = [[str(v) for v in rows["trial"]]]
    data += [[_param_value(st, c, v) for v in rows[c]] for c in st.params]
    data.append([_obj_value(st, xn, v) for v in rows[st.obj_col(xn)]])
    data.append([_obj_value(st, yn, v) for v in rows[st.obj_col(yn)]])
    lines = ["<b>trial %{customdata[0]}</b>",
             f"{escape(xn)}: %{{customdata[{len(cols)}]}}", f"{escape(yn)}: %{{customdata[{len(cols) + 1}]}}"]
    lines += [f"{escape(c[2:])} = %{{customdata[{i}]}}" for i, (c, _) in enumerate(cols) if i > 0]
    if extra is not None:
        data.append(_violations(st, rows))
        lines.append(f"%{{customdata[{len(cols) + 2}]}}")
    custom = [list(r) for r in zip(*data)]
    return custom, "<br>".join(lines) + "<extra>%{fullData.name}</extra>"


def _violations(st: _Study, rows: pd.DataFrame) -> list[str]:
    units = _constraint_units(st.meta)
    cols = [c for c in rows.columns if isinstance(c, str) and c.startswith("con.")]
    out = []
    for _, r in rows[cols].iterrows():
        bad = [f"{c[4:]} +{format_value(r[c], units.get(c[4:], ''))}" for c in cols if _to_float(r[c]) > 0]
        out.append("violates: " + ", ".join(bad) if bad else "infeasible")
    return out


def _scatter_figure(st: _Study, xn: str, yn: str, cap: int):
    import plotly.graph_objects as go

    t, xc, yc = st.t, st.obj_col(xn), st.obj_col(yn)
    x, y = _num(t[xc]), _num(t[yc])
    fin = np.isfinite(x) & np.isfinite(y)
    feas = t["feasible"].to_numpy(dtype=bool)
    f2 = front_mask(t, st.meta, xn, yn) & fin
    fig = go.Figure()
    thin = _subsample(fin, f2, cap)
    groups = [
        ("infeasible", ~feas & fin & thin, dict(symbol="x", size=6, color="rgba(140,140,140,0.55)"), "markers"),
        ("feasible", feas & fin & ~f2 & thin, dict(size=6, color="rgba(31,119,180,0.35)"), "markers"),
    ]
    for name, m, marker, mode in groups:
        if not m.any():
            continue
        rows = t[m]
        custom, tmpl = _hover(st, rows, xn, yn, extra="violations" if name == "infeasible" else None)
        fig.add_trace(go.Scatter(x=x[m], y=y[m], mode=mode, name=f"{name} ({int(m.sum())})", marker=marker,
                                 customdata=custom, hovertemplate=tmpl))
    if f2.any():
        rows = t[f2]
        order = np.argsort(x[f2], kind="stable")
        rows = rows.iloc[order]
        custom, tmpl = _hover(st, rows, xn, yn)
        fig.add_trace(go.Scatter(x=x[f2][order], y=y[f2][order], mode="lines+markers",
                                 name=f"Pareto front ({int(f2.sum())})",
                                 marker=dict(size=8, color="#d62728"), line=dict(color="#d62728", width=1.5),
                                 customdata=custom, hovertemplate=tmpl))
    xs, ys = [x[fin]], [y[fin]]
    names, cx, cy, off = _catalog_points(st, xc, yc, x[fin], y[fin])
    if names:
        custom = [[n, _obj_value(st, xn, a), _obj_value(st, yn, b)] for n, a, b in zip(names, cx, cy)]
        fig.add_trace(go.Scatter(
            x=cx, y=cy, mode="markers+text", name="catalog chips", text=names,
            textposition="top center", textfont=dict(size=10),
            marker=dict(symbol="star", size=13, color="black"), customdata=custom,
            hovertemplate=(f"<b>%{{customdata[0]}}</b> (catalog)<br>{escape(xn)}: %{{customdata[1]}}"
                           f"<br>{escape(yn)}: %{{customdata[2]}}<extra></extra>")))
        xs.append(cx)
        ys.append(cy)
    title = f"{yn} vs {xn}"
    if off:
        title += "<br><sup>catalog chips off this scale: " + ", ".join(escape(o) for o in off) + "</sup>"
    fig.update_layout(
        template="plotly_white", title=title, height=520, hovermode="closest",
        xaxis=_plotly_axis(st, xn, np.concatenate(xs)), yaxis=_plotly_axis(st, yn, np.concatenate(ys)),
        legend=dict(orientation="h", y=-0.2), margin=dict(l=70, r=20, t=50, b=40))
    return fig


def _plotly_axis(st: _Study, name: str, values: np.ndarray) -> dict:
    """Axis title, log or linear, and SI ticks with the unit (2ms, 80GB) where the unit scales."""
    sym = _eng_unit(st.units.get(name, ""))
    axis: dict = dict(title=_axis_label(st, name, with_unit=not sym), type="log" if _wide(values) else "linear")
    if sym:
        axis.update(tickformat="~s", ticksuffix=sym)  # 500µs, 1.5ms, 80GB
    return axis


def _parcoords_figure(st: _Study, cap: int):
    import plotly.graph_objects as go

    t = st.t
    cols = [st.obj_col(n) for n in st.objectives]
    F = np.column_stack([_num(t[c]) for c in cols])
    m = t["feasible"].to_numpy(dtype=bool) & np.isfinite(F).all(axis=1)
    if not m.any():
        return None
    keep = (t["pareto_rank"] == 0).to_numpy(dtype=bool)
    m = _subsample(m, keep, cap)
    rows = t[m]
    dims = []
    for c in st.params + cols:
        s = rows[c]
        label = column_label(c)
        unit = st.units.get(label, "") if c.startswith("obj.") else str(_space_entry(st.meta, c).get("unit") or "")
        unit = "" if unit.strip() in ("1", "-") else unit
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            v = _num(s)
            if _wide(v):
                dims.append(dict(label=f"log10 {label}" + (f" [{unit}]" if unit else ""), values=np.log10(v)))
            else:
                dims.append(dict(label=label + (f" [{unit}]" if unit else ""), values=v, tickformat="~s"))
        else:
            cats = sorted(s.astype(str).unique())
            code = {c_: i for i, c_ in enumerate(cats)}
            dims.append(dict(label=label, values=[code[v] for v in s.astype(str)], tickvals=list(range(len(cats))),
                             ticktext=cats, range=[-0.5, len(cats) - 0.5] if len(cats) == 1 else None))
    for d in dims:
        if d.get("range") is None:
            d.pop("range", None)
    first = st.objectives[0]
    color = _num(rows[cols[0]])
    log = _wide(color)
    fig = go.Figure(go.Parcoords(
        dimensions=dims,
        line=dict(color=np.log10(color) if log else color, colorscale="Viridis",
                  reversescale=st.directions[first] != MAXIMIZE, showscale=True,
                  colorbar=dict(title=("log10 " if log else "") + first))))
    note = f" ({len(rows)} of {st.n_feasible} feasible shown)" if len(rows) < st.n_feasible else ""
    fig.update_layout(template="plotly_white", height=480, margin=dict(l=80, r=60, t=70, b=30),
                      title=f"Feasible designs: parameters and objectives{note}")
    return fig


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 1.5em auto; max-width: 1200px;
       padding: 0 1em; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 1.6em; }
blockquote { margin: 0.5em 0; padding: 0.3em 1em; border-left: 4px solid #9ab; color: #444; background: #f6f8fa; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 3px 8px; } th { background: #f0f3f6; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.counts span { display: inline-block; margin-right: 2em; font-size: 1.1em; } .counts b { font-size: 1.3em; }
.note { color: #666; font-size: 0.9em; } .plot { margin: 1em 0; }
"""


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _md_inline(text: str) -> str:
    """The findings' markdown (only **bold**) as HTML."""
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", escape(text))


def _html(st: _Study, top: int, cap: int) -> str:
    from plotly.offline import get_plotlyjs

    meta = st.meta
    config = {"displaylogo": False, "responsive": True}
    name = escape(str(meta.get("name") or "study"))
    P: list[str] = []
    if meta.get("question"):
        P.append(f"<blockquote>{escape(str(meta['question']).strip())}</blockquote>")
    P.append('<div class="counts">'
             f"<span>evaluated <b>{st.n}</b></span>"
             f"<span>feasible <b>{st.n_feasible}</b> ({_pct(st.n_feasible, st.n)})</span>"
             f"<span>Pareto front <b>{len(st.front)}</b>{escape(_distinct_note(st))}</span></div>")
    P.append(f"<h2>{'What the front says' if st.n_feasible else 'Why nothing is feasible'}</h2>")
    P.append("<p>" + " ".join(_md_inline(s) for s in _findings(st)) + "</p>")
    P.append("<h2>Pareto front</h2>")
    P.append('<p class="note">Hover a point for its parameters; click legend entries to hide a trace;'
             " drag to zoom, double-click to reset. Grey x: infeasible; stars: catalog chips on the same"
             " workloads.</p>")
    pairs = _pairs(st) if len(st.objectives) >= 2 else [(st.objectives[0], st.objectives[0])]
    for i, (xn, yn) in enumerate(pairs):
        fig = _scatter_figure(st, xn, yn, cap)
        P.append('<div class="plot">' + fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"pareto-{i}",
                                                    config=config) + "</div>")
    pc = _parcoords_figure(st, cap)
    P.append("<h2>Parameters and objectives of the feasible designs</h2>")
    if pc is not None:
        P.append('<p class="note">Drag along an axis to select a range; the lines are coloured by the first'
                 " objective.</p>")
        P.append('<div class="plot">' + pc.to_html(full_html=False, include_plotlyjs=False, div_id="parcoords",
                                                   config=config) + "</div>")
    else:
        P.append("<p>No feasible design to draw.</p>")
    if len(st.front):
        fr = _distinct(st)
        shown = min(len(fr), max(top, 200))
        P.append(f"<h2>Pareto front table ({shown} of {len(fr)} distinct designs, best first by"
                 f" {escape(st.objectives[0])})</h2>")
        P.append(format_table(fr, meta, fmt="html", max_rows=shown))
    P.append("<h2>Constraints</h2>")
    if len(st.rejections):
        head = _REJ_HEAD + (["not evaluated"] if st.rejections["nan"].any() else [])
        P.append(_html_table(head, _rejection_rows(st)))
    else:
        P.append("<p>The study has no constraint columns.</p>")
    P.append("<h2>Settings</h2>")
    P.append("<ul>" + "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in _settings_lines(meta)) + "</ul>")
    P.append(_html_table(["objective", "direction", "unit"], _objective_rows(meta)))
    if meta.get("constraints"):
        P.append(_html_table(["constraint", "unit", "params"], _constraint_rows(meta)))
    if _space_rows(meta):
        P.append(_html_table(["parameter", "kind", "range", "unit"], _space_rows(meta)))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{name} — dse report</title>\n<style>{_CSS}</style>\n"
            f'<script type="text/javascript">{get_plotlyjs()}</script>\n</head>\n<body>\n'
            f"<h1>{name}</h1>\n" + "\n".join(P) + "\n</body>\n</html>\n")


# ------------------------------------------------------------ entry points


def write_reports(out_dir: str | os.PathLike, table: pd.DataFrame, meta: Mapping,
                  catalog: pd.DataFrame | None = None, *, top: int = 20,
                  max_html_points: int = 5000) -> dict[str, Path]:
    """Write report.md, plots/*.png and report.html into ``out_dir``; return {relative name: path}.

    ``top`` rows of the front go into report.md's table (report.html shows up
    to 200). The interactive scatter and parallel-coordinates plots draw at
    most ``max_html_points`` points each (the front always, the rest evenly
    thinned) so that the page stays light; the PNGs draw every point.
    """
    root = Path(out_dir)
    root.mkdir(parents=True, exist_ok=True)
    st = _study(table, meta, catalog)
    written = _write_plots(root, st)
    written[REPORT_MD] = atomic_write(REPORT_MD, _md(st, top), root=root)
    written[REPORT_HTML] = atomic_write(REPORT_HTML, _html(st, top, max_html_points), root=root)
    return written


def regenerate(out_dir: str | os.PathLike, **kwargs: Any) -> dict[str, Path]:
    """Read the results in ``out_dir`` and rewrite its reports (``dse report DIR``)."""
    table, meta, catalog = read_results(out_dir)
    return write_reports(out_dir, table, meta, catalog, **kwargs)
