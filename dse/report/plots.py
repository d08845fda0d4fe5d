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

from dse.pareto import MAXIMIZE
from dse.report.axes import _axis_label, _catalog_points, _eng_unit, _pairs, _wide
from dse.report.view import _BOUND_ORDER, _Study, _num, _time_split_columns
from dse.study.results import atomic_write, front_mask

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


def _format_axis(axis, st: _Study, name: str) -> None:
    sym = _eng_unit(st.units.get(name, ""))
    if sym:
        from matplotlib.ticker import EngFormatter

        axis.set_major_formatter(EngFormatter(unit=sym))


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("._") or "x"


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
