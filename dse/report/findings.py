"""What the front says: sentences (markdown) computed from the data, for report.md and report.html."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from dse.pareto import MAXIMIZE, to_minimization
from dse.report.view import (
    _Study,
    _num,
    _obj_value,
    _param_value,
    _pct,
    _plural,
    _same,
    _space_entry,
    _study,
    _time_split_columns,
    _to_float,
)
from dse.study.results import format_value, objective_points


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
    points = objective_points(fr)
    ties = (f" ({points} distinct in the objectives: the others tie with one of them on every objective)"
            if points < k else "")
    out.append(feas_line + f". The front holds {_plural(k, 'design')}{ties}.")
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
    beaten, standing, skipped, infeasible = [], [], [], []
    for _, row in cat.iterrows():
        if "feasible" in cat.columns and str(row["feasible"]).lower() in ("false", "0", "0.0"):
            infeasible.append(f"{row['chip']} ({row.get('violations') or 'a constraint'})")
            continue
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
    if infeasible:
        out.append("Not compared (they break the study's constraints as they are): " + ", ".join(infeasible) + ".")
    return out
