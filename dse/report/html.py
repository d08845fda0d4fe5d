"""report.html: one page that works offline (plotly.js inline; plotly imported when drawing).

A Pareto scatter per pair with the parameters on hover, the catalog chips as
their own trace, parallel coordinates of the feasible designs, the front as a table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape

import numpy as np
import pandas as pd

from dse.pareto import MAXIMIZE
from dse.report.axes import _axis_label, _catalog_points, _eng_unit, _pairs, _wide, tick_texts
from dse.report.findings import _findings
from dse.report.convergence import summary
from dse.report.sensitivity import NOTE as SENSITIVITY_NOTE
from dse.report.sensitivity import summary as sensitivity_summary
from dse.report.sections import (
    _REJ_HEAD,
    _split_lines,
    _tiles_lines,
    _constraint_rows,
    _objective_rows,
    _rejection_rows,
    _sensitivity_table,
    _settings_lines,
    _space_rows,
)
from dse.report.view import (
    _Study,
    _constraint_units,
    _distinct,
    _distinct_note,
    _num,
    _obj_value,
    _param_value,
    _pct,
    _space_entry,
    _to_float,
)
from dse.study.results import _SCALED, _dimension, column_label, format_table, format_value, front_mask


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
            x=cx, y=cy, mode="markers", name="catalog chips", text=names,
            marker=dict(symbol="star", size=13, color="black"), customdata=custom,
            hovertemplate=(f"<b>%{{customdata[0]}}</b> (catalog)<br>{escape(xn)}: %{{customdata[1]}}"
                           f"<br>{escape(yn)}: %{{customdata[2]}}<extra></extra>")))
        xs.append(cx)
        ys.append(cy)
    title = f"{yn} vs {xn}"
    if off:
        title += "<br><sup>catalog chips off this scale: " + ", ".join(escape(o) for o in off) + "</sup>"
    xaxis, yaxis = _plotly_axis(st, xn, np.concatenate(xs)), _plotly_axis(st, yn, np.concatenate(ys))
    fig.update_layout(
        template="plotly_white", title=title, height=PLOT_HEIGHT, hovermode="closest", xaxis=xaxis, yaxis=yaxis,
        legend=dict(orientation="h", y=-0.2), margin=dict(l=70, r=20, t=50, b=40),
        annotations=_catalog_annotations(names, cx, cy, xaxis, yaxis, np.column_stack([x[thin], y[thin]])))
    return fig


#: the scatter's height and the plot area the labels are placed for: the page's 1200 px column less the
#: margins and the legend below, taken a little small (a narrower window brings points closer)
PLOT_HEIGHT = 520
_AREA_PX = (1000.0, 360.0)
_FONT_PX = 10


def _axis_px(values: np.ndarray, axis: dict, length: float) -> np.ndarray:
    lo, hi = axis["range"]
    v = np.log10(np.where(values > 0, values, np.nan)) if axis["type"] == "log" else values
    return (v - lo) / (hi - lo) * length


def _catalog_annotations(names, cx, cy, xaxis: dict, yaxis: dict, dots: np.ndarray) -> list[dict]:
    """The catalog chips' names as annotations placed without overlap (dse.report.labels.greedy_places, on the
    nominal plot area with each text's box estimated from its length); a name moved off its star gets a line."""
    from dse.report.labels import greedy_places

    if not names:
        return []
    w, h = _AREA_PX
    pts = np.column_stack([_axis_px(np.asarray(cx, float), xaxis, w), _axis_px(np.asarray(cy, float), yaxis, h)])
    near = np.column_stack([_axis_px(dots[:, 0], xaxis, w), _axis_px(dots[:, 1], yaxis, h)])
    sizes = [(0.62 * _FONT_PX * len(n) + 6, _FONT_PX * 1.4 + 4) for n in names]
    places = greedy_places(pts, sizes, [16.0] * len(names), (0.0, 0.0, w, h), dots=near)
    out = []
    for n, a, b, p, pl in zip(names, cx, cy, pts, places):
        dx, dy = pl.x - p[0], pl.y - p[1]
        ann = dict(text=escape(n), x=float(np.log10(a)) if xaxis["type"] == "log" else float(a),
                   y=float(np.log10(b)) if yaxis["type"] == "log" else float(b), xref="x", yref="y",
                   xanchor=pl.ha, yanchor="middle" if pl.va == "center" else pl.va, font=dict(size=_FONT_PX))
        if pl.far:  # off its star: a thin line back to it
            ann.update(showarrow=True, ax=dx, ay=-dy, arrowhead=0, arrowwidth=0.8, arrowcolor="#777", standoff=6)
        else:
            ann.update(showarrow=False, xshift=dx, yshift=dy)
        out.append(ann)
    return out


def _plotly_axis(st: _Study, name: str, values: np.ndarray) -> dict:
    """Axis title, log or linear, and SI ticks with the unit (2ms, 80GB) where the unit scales."""
    sym = _eng_unit(st.units.get(name, ""))
    log = _wide(values)
    axis: dict = dict(title=_axis_label(st, name, with_unit=not sym), type="log" if log else "linear",
                      range=_range(values, log))
    if sym:
        axis.update(tickformat="~s", ticksuffix=sym)  # 500µs, 1.5ms, 80GB
    return axis


def _range(values: np.ndarray, log: bool) -> list[float]:
    """The axis range over ``values`` with 6% room each side (log10 units on a log axis, as plotly takes it):
    fixed, so that the labels placed for it stay where they were placed."""
    v = values[np.isfinite(values) & (values > 0)] if log else values[np.isfinite(values)]
    if not v.size:
        return [0.0, 1.0]
    if log:
        v = np.log10(v)
    lo, hi = float(v.min()), float(v.max())
    span = (hi - lo) or (abs(hi) * 0.1 if hi else 1.0)
    return [lo - 0.06 * span, hi + 0.06 * span]


def _ticks(lo: float, hi: float, log: bool, integer: bool = False) -> list[float]:
    """A few round tick values within [lo, hi]: 1-2-5 per decade on a log axis, else 'nice' steps."""
    from matplotlib.ticker import LogLocator, MaxNLocator

    if not (np.isfinite(lo) and np.isfinite(hi)):
        return []
    if hi <= lo:
        return [float(lo)]
    if log:
        ticks = [t for t in LogLocator(base=10, subs=(1.0,)).tick_values(lo, hi) if lo <= t <= hi]
        if len(ticks) < 3:
            ticks = [t for t in LogLocator(base=10, subs=(1.0, 2.0, 5.0)).tick_values(lo, hi) if lo <= t <= hi]
    else:
        ticks = [t for t in MaxNLocator(nbins=5, integer=integer).tick_values(lo, hi) if lo <= t <= hi]
    if len(ticks) < 2:
        ticks = sorted(set(ticks) | {float(lo), float(hi)})
    return [float(t) for t in ticks]


def _numeric_dimension(label: str, unit: str, v: np.ndarray, integer: bool = False) -> dict:
    """A parallel-coordinates axis: values (log10 on a wide one) and ticks written as dse writes the quantity
    (dse.report.axes.tick_texts: '1.4 GHz', '128 KiB', '3.4 ms'), never plotly's bare SI ('1.4G'); a unit that
    does not scale (mm^2, $) goes in the label once. A few distinct values (a choice) are the ticks themselves."""
    log = _wide(v)
    fin = v[np.isfinite(v)]
    distinct = np.unique(fin)
    if 0 < distinct.size <= 6:
        ticks = [float(t) for t in distinct]
    else:
        ticks = _ticks(float(fin.min()), float(fin.max()), log, integer) if fin.size else []
    scaled = _dimension(unit)[0] in _SCALED
    name = label + (f" [{unit}]" if unit and not scaled else "") + (" (log)" if log else "")
    text = tick_texts(ticks, unit)
    if log:
        return dict(label=name, values=np.log10(v), tickvals=[float(np.log10(t)) for t in ticks], ticktext=text)
    return dict(label=name, values=v, tickvals=ticks, ticktext=text)


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
        unit = "" if unit.strip() in ("1", "-", "None") else unit
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            v = _num(s)
            dims.append(_numeric_dimension(label, unit, v, integer=pd.api.types.is_integer_dtype(s)))
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
    cdim = _numeric_dimension(first, st.units.get(first, ""), color)
    fig = go.Figure(go.Parcoords(
        dimensions=dims,
        line=dict(color=cdim["values"], colorscale="Viridis",
                  reversescale=st.directions[first] != MAXIMIZE, showscale=True,
                  colorbar=dict(title=cdim["label"], tickvals=cdim["tickvals"], ticktext=cdim["ticktext"]))))
    note = f" ({len(rows)} of {st.n_feasible} feasible shown)" if len(rows) < st.n_feasible else ""
    # the axis names sit above the plot area: the title goes above them, with room for both (a 70 px top
    # margin put the title on the first axes' names)
    fig.update_layout(template="plotly_white", height=520, margin=dict(l=80, r=60, t=130, b=30),
                      title=dict(text=f"Feasible designs: parameters and objectives{note}", y=0.98, yanchor="top"))
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


def _convergence_figure(st: _Study):
    """The hypervolume of the feasible designs among the first k trials (dse.report.convergence), interactive."""
    import plotly.graph_objects as go

    c = st.convergence
    fig = go.Figure(go.Scatter(x=c.trials.tolist(), y=c.curve.tolist(), mode="lines+markers", name="hypervolume",
                               hovertemplate="%{x} trials: %{y:.4g}<extra></extra>"))
    fig.add_hline(y=c.hypervolume, line_dash="dash", line_color="#888")
    fig.update_layout(title="Convergence: hypervolume of the front vs trials", xaxis_title="trials evaluated",
                      yaxis_title="hypervolume (normalized by the front)", height=360,
                      margin={"l": 60, "r": 20, "t": 50, "b": 50})
    return fig


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
    extra = (([summary(st.convergence)] if st.convergence is not None else []) + _tiles_lines(meta)
             + _split_lines(meta))
    if extra:
        P.append("<ul>" + "".join(f"<li>{_md_inline(x)}</li>" for x in extra) + "</ul>")
    if st.convergence is not None and len(st.convergence.trials) > 1:
        P.append('<div class="plot">' + _convergence_figure(st).to_html(
            full_html=False, include_plotlyjs=False, div_id="convergence", config=config) + "</div>")
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
    if st.sensitivity is not None:
        head, rows = _sensitivity_table(st)
        P.append("<h2>Sensitivity of the front</h2>")
        P.append(f"<p>{_md_inline(sensitivity_summary(st.sensitivity))}. {escape(SENSITIVITY_NOTE)}</p>")
        P.append(_html_table(head, rows))
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
