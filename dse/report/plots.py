"""PNG plots (matplotlib, Agg, imported when drawing): the Pareto scatters and where the front is bound.

    plots/pareto_<x>__<y>.png       one Pareto scatter per pair of objectives
    plots/bound.png                 where the front designs are bound (m.bound, time split)
    plots/convergence.png           the front's hypervolume vs trials (dse.report.convergence)
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd

from dse.pareto import MAXIMIZE
from dse.report.axes import _axis_label, _catalog_points, _eng_unit, _pairs, _wide, unit_ticks
from dse.report.labels import Label, place_labels
from dse.report.view import _BOUND_ORDER, _plural, _space_entry, _Study, _num, _time_split_columns
from dse.study.results import atomic_write, front_mask
from dse.units import format_percent

PLOTS = "plots"
BOUND_PNG = f"{PLOTS}/bound.png"
CONVERGENCE_PNG = f"{PLOTS}/convergence.png"


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


def _format_axis(axis, st: _Study, name: str, log: bool = False) -> None:
    unit = st.units.get(name, "")
    if _eng_unit(unit):
        unit_ticks(axis, unit, log)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("._") or "x"


_CAT_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive",
               "tab:cyan", "0.35", "gold")


def _text_params(st: _Study) -> list[str]:
    """The parameters whose values are names (number formats, HBM generations) and that vary in the table."""
    out = []
    for c in st.params:
        s = st.t[c]
        if not pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) and s.astype(str).nunique() > 1:
            out.append(c)
    return out


def _colour_param(st: _Study, cols: list[str]) -> str | None:
    """The name-valued parameter the points are coloured by: the one with the most values (at most 10)."""
    fits = [c for c in cols if st.t[c].astype(str).nunique() <= len(_CAT_COLORS)]
    return max(fits, key=lambda c: st.t[c].astype(str).nunique()) if fits else None


def _short(col: str) -> str:
    return col[2:].rsplit(".", 1)[-1]


def _names_of(row: pd.Series, cols: list[str]) -> str:
    """What a front point is, by its name-valued parameters: 'mxfp6' or 'weights mxfp6, kv fp8_e4m3'."""
    if len(cols) == 1:
        return str(row[cols[0]])
    return ", ".join(f"{_short(c)} {row[c]}" for c in cols)


#: label the front points by their name-valued parameters when the 2-D front has at most this many
MAX_FRONT_LABELS = 12


def _pair_figure(st: _Study, xn: str, yn: str):
    """The Pareto scatter of two objectives (matplotlib Figure): designs, the 2-D front, catalog chips.

    Points are coloured by a parameter whose values are names (the number format of the weights, say; legend
    on the right) and the front's points carry their names; labels never overlap (dse.report.labels)."""
    t, xc, yc = st.t, st.obj_col(xn), st.obj_col(yn)
    x, y = _num(t[xc]), _num(t[yc])
    fin = np.isfinite(x) & np.isfinite(y)
    feas = t["feasible"].to_numpy(dtype=bool)
    f2 = front_mask(t, st.meta, xn, yn) & fin
    fall = (t["feasible"] & (t["pareto_rank"] == 0)).to_numpy(dtype=bool) & fin & ~f2
    named = _text_params(st)
    ccol = _colour_param(st, named)
    fig = _new_figure(7.2 if ccol is None else 8.4, 5.2)
    ax = fig.add_subplot()
    handles = []
    if ccol is None:
        m = ~feas & fin
        if m.any():
            ax.scatter(x[m], y[m], marker="x", s=14, linewidths=0.8, color="0.65",
                       label=f"infeasible ({m.sum()})", zorder=1)
        m = feas & fin & ~f2
        if m.any():
            ax.scatter(x[m], y[m], s=12, color="tab:blue", alpha=0.25, linewidths=0,
                       label=f"feasible ({int((feas & fin).sum())})", zorder=2)
    else:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        vals = t[ccol].astype(str).to_numpy()
        order = [str(c) for c in (_space_entry(st.meta, ccol).get("choices") or [])]
        cats = [c for c in order if c in set(vals)] + sorted(set(vals) - set(order))
        for k, v in enumerate(cats):
            col = _CAT_COLORS[k]
            m = (vals == v) & ~feas & fin
            if m.any():
                ax.scatter(x[m], y[m], marker="x", s=16, linewidths=0.9, color=col, alpha=0.55, zorder=1)
            m = (vals == v) & feas & fin & ~f2
            if m.any():
                ax.scatter(x[m], y[m], s=14, color=col, alpha=0.6, linewidths=0, zorder=2)
            handles.append(Patch(color=col, label=v))
        n_bad, n_ok = int((~feas & fin).sum()), int((feas & fin).sum())
        if n_bad:
            ax.scatter([], [], marker="x", s=16, color="0.4", label=f"infeasible ({n_bad})")
        if n_ok:
            ax.add_line(Line2D([], [], marker="o", ls="none", ms=4, color="0.4", label=f"feasible ({n_ok})"))
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
        xs.append(cx)
        ys.append(cy)
    note = None
    if off:
        note = ax.text(0.99, 0.01, "catalog chips off this scale: " + ", ".join(off), transform=ax.transAxes,
                       ha="right", va="bottom", fontsize=7, color="0.35", wrap=True)
    if not fin.any() and len(xs) == 1:
        ax.text(0.5, 0.5, "no design with finite values", ha="center", va="center", transform=ax.transAxes)
    xlog, ylog = _wide(np.concatenate(xs)), _wide(np.concatenate(ys))
    if xlog:
        ax.set_xscale("log")
    if ylog:
        ax.set_yscale("log")
    ax.set_xlabel(_axis_label(st, xn, with_unit=not _eng_unit(st.units.get(xn, ""))))
    ax.set_ylabel(_axis_label(st, yn, with_unit=not _eng_unit(st.units.get(yn, ""))))
    _format_axis(ax.xaxis, st, xn, xlog)
    _format_axis(ax.yaxis, st, yn, ylog)
    ax.set_title(f"{yn} vs {xn}", fontsize=11)
    ax.grid(True, alpha=0.3, which="both", lw=0.5)
    if handles:
        title = ccol[2:]  # the parameter as the study file names it (workload.formats.weights)
        fig.legend(handles=handles, title=title, fontsize=8, title_fontsize=8, loc="outside right upper",
                   frameon=False)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.85)
    labels = [Label(float(a), float(b), n, dict(fontsize=7.5), marker_pt=10.5) for n, a, b in zip(names, cx, cy)]
    if named and f2.any():
        front = t[f2].drop_duplicates(subset=st.params) if st.params else t[f2]
        if len(front) <= MAX_FRONT_LABELS:
            labels += [Label(float(r[xc]), float(r[yc]), _names_of(r, named), dict(fontsize=7, color="darkred"),
                             marker_pt=5.0) for _, r in front.iterrows()]
    place_labels(ax, labels, avoid=[ax.get_legend(), note], points=(x[fin], y[fin]))
    return fig


def _pair_png(st: _Study, xn: str, yn: str) -> bytes:
    return _png(_pair_figure(st, xn, yn))


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
    log = _wide(v)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("trial")
    ax.set_ylabel(_axis_label(st, name, with_unit=not _eng_unit(st.units.get(name, ""))))
    _format_axis(ax.yaxis, st, name, log)
    ax.grid(True, alpha=0.3, lw=0.5)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _png(fig)


_BOUND_COLORS = {"compute": "tab:red", "matrix": "tab:red", "vector": "tab:orange", "memory": "tab:blue",
                 "l2": "tab:purple", "local": "tab:green",
                 "other": "0.6"}


def _range_pct(v: np.ndarray) -> str:
    """'94-99%' (the spread of a share over the designs), or '98%' when they all round alike."""
    lo, hi = format_percent(float(np.nanmin(v))), format_percent(float(np.nanmax(v)))
    return lo if lo == hi else f"{lo[:-1]}-{hi}"


def _bound_figure(st: _Study, max_designs: int = 25):
    """Where the front designs are bound (matplotlib Figure, or None without bound columns).

    Left: the designs by the resource that bounds them (m.bound), the front against all feasible designs;
    a bound that all of them share is said once, in the title, not in every bar. Right: each front design's
    time per step (best first by the first objective) split by the resource bounding each operator, so the
    bars differ by what differs (the time and the mix); the spread of the shares is in the title."""
    fr = st.front
    split = _time_split_columns(fr)
    has_bound = "m.bound" in fr.columns
    if fr.empty or not (has_bound or split):
        return None
    feas = st.t[st.t["feasible"]]
    cats = []
    if has_bound:
        cats = sorted(set(feas["m.bound"].astype(str)) | set(fr["m.bound"].astype(str)),
                      key=lambda b: (_BOUND_ORDER.index(b) if b in _BOUND_ORDER else 99, b))
    mixed = len(cats) > 1  # one bound for every design is a sentence, not a panel of one-colour bars
    panels = int(mixed) + int(bool(split))
    if panels == 0:
        panels = 1
    shown = fr.head(max_designs)
    fig = _new_figure(6.2 * panels if panels > 1 else 7.6, max(3.6, 1.4 + 0.22 * len(shown)))
    axes = fig.subplots(1, panels, squeeze=False, width_ratios=[1, 1.4] if panels > 1 else None)[0]
    if has_bound and not mixed:
        fig.suptitle(f"Every feasible design is {cats[0]}-bound (m.bound): the {_plural(len(fr), 'design')} on the"
                     f" front and all {len(feas)} feasible", fontsize=10)
    i = 0
    if mixed:
        ax = axes[i]
        i += 1
        groups = [(f"front\n({_plural(len(fr), 'design')})", fr),
                  (f"all feasible\n({_plural(len(feas), 'design')})", feas)]
        left = np.zeros(len(groups))
        for b in cats:
            share = np.array([(g["m.bound"].astype(str) == b).mean() if len(g) else 0.0 for _, g in groups])
            cnt = [int((g["m.bound"].astype(str) == b).sum()) for _, g in groups]
            ax.barh([g for g, _ in groups], share, left=left, height=0.5, color=_BOUND_COLORS.get(b),
                    label=f"{b}-bound")
            for yi, (w, x0, n) in enumerate(zip(share, left, cnt)):
                if 0.08 <= w < 1.0:  # a bar of one colour needs no number: its label says how many
                    ax.text(x0 + w / 2, yi, f"{n} ({format_percent(w)})", ha="center", va="center", fontsize=8,
                            color="white")
            left += share
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(_percent)
        ax.set_xlabel("share of designs")
        ax.set_title("what bounds the designs (m.bound)", fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)
        ax.invert_yaxis()
    if split:
        ax = axes[i]
        T = np.column_stack([_num(shown[c]) for c, _ in split])
        names = [n for _, n in split]
        if "m.time_s" in shown.columns:  # what the bounds do not cover (overheads), if anything
            rest = _num(shown["m.time_s"]) - np.nansum(T, axis=1)
            if np.nanmax(np.where(np.isfinite(rest), rest, 0.0) / np.maximum(np.nansum(T, axis=1), 1e-300)) > 1e-6:
                T = np.column_stack([T, np.clip(rest, 0.0, None)])
                names.append("other")
        T = np.nan_to_num(T)
        tot = T.sum(axis=1)
        frac = np.divide(T, tot[:, None], out=np.zeros_like(T), where=tot[:, None] > 0)
        labels = [f"trial {v}" for v in shown["trial"]]
        left = np.zeros(len(shown))
        parts = []
        for j, n in enumerate(names):
            if not T[:, j].any():  # a resource that bounds no operator of these designs: not drawn, not listed
                continue
            ax.barh(labels, T[:, j], left=left, color=_BOUND_COLORS.get(n), label=f"{n}-bound" if n != "other" else n)
            left += T[:, j]
            parts.append(f"{n} {_range_pct(frac[:, j])}")
        ax.invert_yaxis()
        ax.tick_params(axis="y", labelsize=7)
        unit_ticks(ax.xaxis, "s")
        ax.set_xlabel("time per step, split by the resource bounding each operator")
        more = f"best {len(shown)} of {len(fr)}" if len(fr) > len(shown) else f"{len(shown)}"
        ax.set_title(f"time of the front designs ({more}, by {st.objectives[0]})\nshare of time: "
                     + ", ".join(parts), fontsize=10)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4, frameon=False)
    return fig


def _percent(v, pos=None) -> str:
    return format_percent(v)


def _bound_png(st: _Study, max_designs: int = 25) -> bytes | None:
    fig = _bound_figure(st, max_designs)
    return None if fig is None else _png(fig)


def _convergence_png(st: _Study) -> bytes | None:
    """Hypervolume of the feasible designs among the first k trials, in the final front's normalization."""
    c = st.convergence
    if c is None or len(c.trials) < 2:
        return None
    fig = _new_figure(6.4, 3.6)
    ax = fig.add_subplot()
    ax.plot(c.trials, c.curve, color="#1f77b4", lw=1.8, marker="o", ms=2.5)
    ax.axhline(c.hypervolume, color="#888888", lw=0.8, ls="--")
    ninety = c.reached(0.9)
    if ninety is not None:
        ax.axvline(ninety, color="#d62728", lw=0.8, ls=":", label=f"90% of the final after {ninety:,} trials")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("trials evaluated")
    ax.set_ylabel("hypervolume (normalized by the front)")
    ax.set_title(f"Convergence: hypervolume of the front vs trials (final {c.hypervolume:.4g})", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
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
    png = _convergence_png(st)
    if png is not None:
        written[CONVERGENCE_PNG] = atomic_write(CONVERGENCE_PNG, png, root=root)
        st.plots.append((CONVERGENCE_PNG, "hypervolume of the front vs trials (convergence)"))
        wanted.add(CONVERGENCE_PNG)
    # plots of an earlier report that this one does not make (other objectives) would mislead
    folder = root / PLOTS
    for old in folder.glob("pareto_*.png"):
        if f"{PLOTS}/{old.name}" not in wanted:
            old.unlink(missing_ok=True)
    for rel in (BOUND_PNG, CONVERGENCE_PNG):
        if rel not in wanted:
            (root / rel).unlink(missing_ok=True)
    return written
