"""What-if reports: the result as markdown, JSON-ready records and a PNG chart (no evaluation here).

Every function takes a :class:`dse.whatif.run.WhatIfResult` (``res``); this
module does not import it (run imports render, for the result's output methods).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dse.study.results import format_value
from dse.units import format_quantity
from dse.whatif.spec import BASELINE, EVALUATION_OPTIONS, Design

#: resource classes of the time decomposition (the evaluator's bound index 0 .. 4: dse.model.evaluator.RESOURCES),
#: then the rest
RESOURCES = ("matrix", "vector", "memory", "l2", "local")
CLASSES = RESOURCES + ("overhead",)

#: rows of the side-by-side table: (metric, label, unit)
METRICS = (
    ("time_s", "step time", "s"),
    ("time_per_token_s", "step time / tokens (1 / throughput)", "s"),
    ("tokens_per_s", "throughput", "tokens/s"),
    ("ttft_s", "time to first token", "s"),
    ("energy_per_token_j", "energy per token", "J"),
    ("power_w", "average power", "W"),
    ("peak_power_w", "peak power", "W"),
    ("sustained_clock_hz", "sustained clock", "Hz"),
    ("clock_ratio", "sustained / peak clock", ""),
    ("t_matrix_s", "matrix time", "s"),
    ("t_matrix_ideal_s", "matrix time, ideal (FLOPs / peak)", "s"),
    ("t_memory_s", "memory time", "s"),
    ("t_read_s", "read lower bound (weights + KV)", "s"),
    ("t_vector_s", "vector time", "s"),
    ("bytes_memory", "main-memory traffic", "bytes"),
    ("resident_bytes", "resident bytes", "bytes"),
    ("capacity_bytes", "memory capacity", "bytes"),
    ("memory_bandwidth_bytes_per_s", "memory bandwidth", "B/s"),
    ("tdp", "TDP", "W"),
    ("max_batch", "max requests at this context", ""),
    ("die_area_mm2", "die area", "mm^2"),
    ("total_silicon_area_mm2", "total silicon area", "mm^2"),
    ("chip_cost_usd", "chip cost", "$"),
)


def _pct(new: float, ref: float) -> float:
    if not (math.isfinite(new) and math.isfinite(ref)) or ref == 0:
        return 0.0 if new == ref and math.isfinite(new) else math.nan
    return (new - ref) / abs(ref) * 100.0


def _time_by_resource(row) -> dict[str, float]:
    """The design's time split by the resource bounding each of its own operators (plus overhead)."""
    out = {r: float(row.get(f"time_{r}_bound_s", math.nan)) for r in RESOURCES}
    total = float(row.get("time_s", math.nan))
    rest = total - sum(out.values())
    out["overhead"] = (rest if rest > 1e-9 * total else 0.0) if math.isfinite(total) else math.nan
    return out


def _fmt(v, unit: str = "") -> str:
    if isinstance(v, float) and math.isnan(v):
        return "-"
    return format_value(v, unit)


#: a change smaller than this share of the reference is the rounding of the model's sums, not a change (a
#: clock raised on a memory-bound step moved it by one unit in the last place: "-1.7e-14%")
ROUNDING = 1e-9


def _fmt_pct(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "-"
    if abs(p) < ROUNDING * 100.0:
        return "0%"
    if abs(p) < 0.05:
        return f"{p:+.2g}%"
    if p >= 900:  # ten times or more: a factor reads better than a percentage
        return f"{1 + p / 100:.3g}x"
    return f"{p:+.1f}%"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[str]], left: int = 1) -> list[str]:
    """A markdown table; the first ``left`` columns are text (left-aligned), the rest numbers."""
    out = ["| " + " | ".join(_cell(h) for h in header) + " |",
           "|" + "|".join("---" if i < left else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows]
    return out


def _describe(d: Design) -> str:
    parts = []
    if d.name != BASELINE and d.source != BASELINE:
        parts.append(f"chip {d.source}")
    parts += [f"{k} = {v}" for k, v in d.overrides.items()]
    if d.die_area is not None:
        parts.append(f"die_area = {format_quantity(d.die_area, 'area')} (filled with {d.fill[0]})")
    parts += [f"evaluation.{k} = {_option_text(k, v)}" for k, v in d.evaluation.items()]
    parts += [f"attention_block.{k} = {'x' if op == 'x' else ''}{v:g}" for k, (op, v) in d.attention.items()]
    return ", ".join(parts)


def _option_text(key: str, value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if EVALUATION_OPTIONS.get(key) == "energy_per_byte":
        return f"{float(value) * 1e12:.4g} pJ/B"
    return format_quantity(float(value), EVALUATION_OPTIONS.get(key, ""))


def _markdown(res) -> str:
    spec = res.spec
    L = [f"# What-if: {spec.name}", ""]
    if spec.question:
        L += [f"**Question.** {spec.question}", ""]
    L += [f"Baseline: **{spec.baseline.chip.name}**" + (f" ({_describe(spec.baseline)})" if _describe(spec.baseline)
                                                         else ""), ""]
    L += _table(["proposal", "changes", "compared with", "note"],
                [[d.name, _describe(d) or "-", d.compare_to or "-", d.note or ""] for d in spec.proposals], left=4)
    L += ["", "Constraints (value <= 0 is feasible; a positive value is the violation): "
          + ", ".join(f"{t.name} ({t.unit}: {t.formula})" for t in spec.constraints), ""]
    m = res.metrics
    bad = m[~m.feasible.astype(bool) | m.error.notna()]
    if len(bad):
        L += ["**Violations**", ""]
        for _, r in bad.iterrows():
            what = r["error"] if isinstance(r["error"], str) else r["violations"]
            L.append(f"- {r.design} on `{r.workload}`: {what}")
        L.append("")
    units = {t.name: t.unit for t in spec.constraints}
    for wl in spec.workloads:
        L += [f"## `{wl.name}`", ""]
        sub = m[m.workload == wl.name].set_index("design")
        header = ["metric", f"baseline ({spec.baseline.chip.name})"]
        for d in spec.proposals:
            header += [d.name, f"Δ vs {d.compare_to}"]
        rows = []
        for key, label, unit in METRICS:
            if key not in sub.columns or sub[key].isna().all():
                continue
            r = [label, _fmt(sub.at[BASELINE, key], unit)]
            for d in spec.proposals:
                r += [_fmt(sub.at[d.name, key], unit), _fmt_pct(_pct(float(sub.at[d.name, key]),
                                                                     float(sub.at[d.compare_to, key])))]
            rows.append(r)
        r = ["bound", str(sub.at[BASELINE, "bound"])]
        for d in spec.proposals:
            a, b = sub.at[d.compare_to, "bound"], sub.at[d.name, "bound"]
            r += [str(b), "" if a == b else f"was {a}"]
        rows.append(r)
        for t in spec.constraints:
            col = f"con.{t.name}"
            r = [f"constraint {t.name} ({units[t.name]})", _con(sub.at[BASELINE, col], t.unit)]
            for d in spec.proposals:
                r += [_con(sub.at[d.name, col], t.unit), ""]
            rows.append(r)
        r = ["feasible", "yes" if sub.at[BASELINE, "feasible"] else "NO"]
        for d in spec.proposals:
            r += ["yes" if sub.at[d.name, "feasible"] else "NO", ""]
        rows.append(r)
        L += _table(header, rows) + [""]

        # time by resource (each design's own bounds)
        L += ["**Time by resource** (each operator counted under the resource that bounds it on that design)", ""]
        trows = []
        for d in spec.designs:
            tb = _time_by_resource(sub.loc[d.name])
            trows.append([d.name] + [_fmt(tb[c], "s") for c in CLASSES] + [_fmt(sub.at[d.name, "time_s"], "s")])
        L += _table(["design"] + [f"{c}-bound" if c in RESOURCES else c for c in CLASSES] + ["total"], trows) + [""]

        # operators that changed bound
        ch = res.bound_changes[res.bound_changes.workload == wl.name]
        L += ["**Operators whose bound changed**", ""]
        if ch.empty:
            L += ["None: every operator is bound by the same resource as on its reference design.", ""]
        else:
            crows = [[r.design, r.op, f"{r['count']:g}", r.before, r.after, _fmt(r.t_before_s, "s"),
                      _fmt(r.t_after_s, "s")] for _, r in ch.iterrows()]
            L += _table(["proposal", "operator", "count", "before", "after", "time before", "time after"], crows,
                        left=2) + [""]

        # Amdahl decomposition
        am = res.amdahl[res.amdahl.workload == wl.name]
        if not am.empty:
            L += ["**Where the time went** (operators grouped by the resource bounding them on the reference "
                  "design; T_ref / T_new = 1 / sum(f / s))", ""]
            arows = []
            for _, r in am.iterrows():
                arows.append([r.design, r.resource, f"{r.fraction * 100:.1f}%" if math.isfinite(r.fraction) else "-",
                              _fmt(r.base_time_s, "s"), _fmt(r.new_time_s, "s"),
                              f"{r.speedup:.3g}x" if math.isfinite(r.speedup) else "-",
                              _fmt(r.delta_s, "s"),
                              _share(r.share_of_change),
                              f"{r.step_speedup_alone:.3g}x" if math.isfinite(r.step_speedup_alone) else "-"])
            L += _table(["proposal", "resource (on reference)", "share f of reference time", "reference time",
                         "proposal time", "speed-up s", "Δ time", "share of the change",
                         "step speed-up from this alone (Amdahl)"], arows, left=2) + [""]
    if res.attention is not None:
        cfg = spec.attention_block
        L += ["## Attention block pipeline (seed 004 §4.2.3, Example 4-1)", "",
              f"One {cfg['rows']} x {cfg['cols']} block, head dim {cfg['head_dim']}, {cfg['format']} operands "
              f"on one compute unit; interval = max(matrix, exp, smem) cycles.", ""]
        arows = []
        for _, r in res.attention.iterrows():
            arows.append([r.design, r.chip, f"{r.matrix_flops_per_cycle:g}", f"{r.exp_per_cycle:g}",
                          f"{r.smem_bytes_per_cycle:g}", _fmt(r.matrix_cycles), _fmt(r.exp_cycles),
                          _fmt(r.smem_cycles), _fmt(r.interval_cycles), r.bottleneck,
                          f"{r.speedup:.3g}x vs {r.compare_to}" if isinstance(r.compare_to, str) else "-"])
        L += _table(["design", "chip", "matrix FLOP/cycle", "exp/cycle", "smem B/cycle", "matrix cycles",
                     "exp cycles", "smem cycles", "interval", "bottleneck", "throughput"], arows, left=2) + [""]
    if res.handoff is not None:
        L += ["## Attention handoff schedule (seed 004 §4.4.3)", "",
              "QK -> softmax -> PV over row groups of the same block, one tick a cycle of one compute unit: "
              "matrix and exp rates as above, the handoff interface at the smem bytes/cycle, ordinary vector "
              "operations at half the vector FLOPs/cycle; each group holds a handoff slot from its QK to its PV. "
              "Completion (vector start) in ticks.", ""]
        runs = list(dict.fromkeys(zip(res.handoff["mode"], res.handoff["group_rows"], res.handoff["slots"])))
        hrows = []
        for design, g in res.handoff.groupby("design", sort=False):
            by = {(r["mode"], r["group_rows"], r["slots"]): r for r in g.to_dict(orient="records")}
            hrows.append([design] + [f"{_fmt(by[k]['completion_ticks'])} ({_fmt(by[k]['vector_start_ticks'])})"
                                     for k in runs])
        L += _table(["design"] + [f"{m}, {gr} rows, {k} slot{'s' if k > 1 else ''}" for m, gr, k in runs], hrows,
                    left=1) + [""]
    return "\n".join(L).rstrip() + "\n"


def _share(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return "0.0%" if abs(x) < 5e-4 else f"{x * 100:.1f}%"


def _con(v, unit: str) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"

    text = format_value(float(v), unit)
    return f"+{text} VIOLATED" if v > 0 else f"{text} ok"


def _records(df: pd.DataFrame, drop=()) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in drop} for r in df.to_dict(orient="records")]


def _as_dict(res) -> dict:
    spec = res.spec
    out: dict[str, Any] = {
        "name": spec.name,
        "question": spec.question,
        "file": str(spec.path) if spec.path else None,
        "designs": [{"name": d.name, "chip": d.chip.name, "source": d.source,
                     "overrides": {k: str(v) for k, v in d.overrides.items()}, "compare_to": d.compare_to,
                     "evaluation": dict(d.evaluation),
                     "attention_block": {k: f"{'x' if op == 'x' else ''}{v:g}" for k, (op, v) in d.attention.items()},
                     "die_area_mm2": d.die_area,  # stated by the proposal (None: the area model's)
                     "fill": None if d.fill is None else {"parameter": d.fill[0], "bytes": d.fill[1]},
                     "note": d.note} for d in spec.designs],
        "constraints": [{"name": t.name, "unit": t.unit, "formula": t.formula, "params": dict(t.params)}
                        for t in spec.constraints],
        "workloads": [],
    }
    m = res.metrics
    for wl in spec.workloads:
        sub = m[m.workload == wl.name]
        entry: dict[str, Any] = {"name": wl.name, "phase": wl.phase, "designs": {}, "changes_pct": {},
                                 "bound_changes": {}, "amdahl": {}, "operators": {}}
        for _, r in sub.iterrows():
            metrics = {k: r[k] for k in r.index if k not in ("workload", "design", "chip", "compare_to", "error",
                                                             "violations", "feasible") and not k.startswith("con.")}
            entry["designs"][r.design] = {
                "chip": r.chip, "compare_to": r.compare_to,
                "feasible": bool(r.feasible) and not isinstance(r.error, str),
                "violations": [v for v in str(r.violations or "").split("; ") if v],
                "error": r.error,
                "constraints": {t.name: {"value": r[f"con.{t.name}"], "unit": t.unit,
                                         "ok": bool(r[f"con.{t.name}"] <= 0)} for t in spec.constraints
                                if f"con.{t.name}" in r.index},
                "time_by_resource_s": _time_by_resource(r),
                "metrics": metrics,
            }
        idx = sub.set_index("design")
        for d in spec.proposals:
            if d.name not in idx.index:
                continue
            entry["changes_pct"][d.name] = {
                k: _pct(float(idx.at[d.name, k]), float(idx.at[d.compare_to, k]))
                for k, _, _ in METRICS if k in idx.columns}
            ch = res.bound_changes
            entry["bound_changes"][d.name] = _records(ch[(ch.workload == wl.name) & (ch.design == d.name)],
                                                      drop=("workload", "design"))
            am = res.amdahl
            entry["amdahl"][d.name] = _records(am[(am.workload == wl.name) & (am.design == d.name)],
                                               drop=("workload", "design"))
        if not res.operators.empty:
            ops = res.operators[res.operators.workload == wl.name]
            for name, g in ops.groupby("design", sort=False):
                entry["operators"][name] = _records(g, drop=("workload", "design"))
        out["workloads"].append(entry)
    if res.attention is not None:
        out["attention_block"] = {"config": dict(spec.attention_block),
                                  "designs": {r["design"]: r for r in _records(res.attention)}}
    if res.handoff is not None:
        out["attention_handoff"] = _records(res.handoff)
    return out


def _clean(o):
    """JSON-ready: numpy scalars to Python, NaN and infinities to None."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.generic):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, Path):
        return str(o)
    return o


_COLORS = {"matrix": "#4C72B0", "vector": "#55A868", "memory": "#C44E52", "l2": "#DD8452", "local": "#937860",
           "overhead": "#8C8C8C"}


def _chart_figure(res):
    """Per workload, each design's time per step as one bar split by resource (matrix-, vector-, memory-bound,
    overhead), its total written on top with the change against the design it is compared with."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from dse.report.axes import unit_ticks

    spec = res.spec
    n = len(spec.workloads)
    names = [d.name for d in spec.designs]
    width = max(6.0, 1.1 * len(names) + 2.0)
    fig = Figure(figsize=(width, 3.4 * n + 0.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    m = res.metrics
    x = np.arange(len(names))
    for ax, wl in zip(axes, spec.workloads):
        sub = m[m.workload == wl.name].set_index("design")
        ok = [not isinstance(sub.loc[d, "error"], str) for d in names]
        split = [_time_by_resource(sub.loc[d]) if good else {c: math.nan for c in CLASSES}
                 for d, good in zip(names, ok)]
        bottom = np.zeros(len(names))
        for c in CLASSES:
            vals = np.nan_to_num(np.array([tb[c] for tb in split], dtype=float))
            if not vals.any():
                continue
            ax.bar(x, vals, 0.6, bottom=bottom, label=f"{c}-bound" if c != "overhead" else c, color=_COLORS[c])
            bottom += vals
        totals = [float(sub.loc[d, "time_s"]) if good else math.nan for d, good in zip(names, ok)]
        top = np.nanmax([t for t in totals if math.isfinite(t)] or [1.0])
        for xi, (d, good, tot) in enumerate(zip(names, ok, totals)):
            ref = spec.design(d).compare_to
            if not good or not math.isfinite(tot):
                ax.text(xi, 0.02 * top, "not evaluated", ha="center", va="bottom", fontsize=7, rotation=90)
                continue
            text = _fmt(tot, "s")
            if ref:
                text += f"\n{_fmt_pct(_pct(tot, float(sub.loc[ref, 'time_s'])))} vs {ref}"
            ax.text(xi, tot + 0.015 * top, text, ha="center", va="bottom", fontsize=7)
        ax.set_ylim(0, top * 1.22)
        bad = [not bool(sub.loc[d, "feasible"]) for d in names]
        ax.set_xticks(x)
        labels = ax.set_xticklabels([f"{d} *" if b else d for d, b in zip(names, bad)], rotation=20, ha="right",
                                    fontsize=8)
        for lab, b in zip(labels, bad):
            if b:
                lab.set_color("#C44E52")
        unit_ticks(ax.yaxis, "s")
        ax.set_ylabel("time per step")
        ax.set_title(wl.name, fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    order = [f"{c}-bound" if c != "overhead" else c for c in CLASSES]
    keys = [k for k in order if k in handles]
    fig.legend([handles[k] for k in keys], keys, fontsize=8, ncols=4, loc="outside lower center", frameon=False)
    fig.suptitle(f"What-if {spec.name}: time per step by resource, total on each bar (* violates a constraint)",
                 fontsize=10)
    return fig


def _chart(res) -> bytes:
    import io

    buf = io.BytesIO()
    _chart_figure(res).savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()
