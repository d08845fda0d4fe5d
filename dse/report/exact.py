"""Reports of a CP-SAT tile-shape study (`solver: {method: cpsat_tiles}`): report.md, report.html, plots/tiles.png.

Its answer is a table of operators, not of designs, so it has its own page, laid out as every study's
report.html (same style, the question, the counts, what the result says, the plot, the table, the settings)
and self-contained (the PNG inline). The resource split (`cpsat_split`) answers with one design and gets the
report every study gets (dse.study.cpsat). Numbers are written by dse's one formatting (dse.units).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from dse.report.axes import _wide, unit_ticks
from dse.report.html import _CSS, _html_table
from dse.report.markdown import _md_table
from dse.report.plots import PLOTS, _new_figure, _png
from dse.report.sections import _settings_lines
from dse.report.view import REPORT_HTML, REPORT_MD, _plural
from dse.study.results import atomic_write, format_value

TILES_PNG = f"{PLOTS}/tiles.png"

_HEAD = ["chip", "workload", "op", "T_M", "T_N", "T_K", "split-K", "slots", "time", "traffic", "working set",
         "status"]


def _rows(table: pd.DataFrame) -> list[list[str]]:
    return [[str(r.chip), str(r.workload), str(r.op), str(r.t_m), str(r.t_n), str(r.t_k), str(r.split_k),
             str(r.slots), format_value(r.time_s, "s"), format_value(r.traffic_bytes, "bytes"),
             format_value(r.working_set_bytes, "bytes"), str(r.status)] for r in table.itertuples()]


def _workloads(table: pd.DataFrame) -> pd.DataFrame:
    """One row per chip and workload: its time with the CP-SAT tiles and with the heuristic's."""
    return (table.groupby(["chip", "workload"], sort=False, as_index=False)
            [["workload_time_s", "workload_time_heuristic_s"]].first())


def tiles_figure(table: pd.DataFrame):
    """Per chip, each workload's time with the proven-optimal tiles against the buffer-filling heuristic's."""
    w = _workloads(table)
    chips = list(dict.fromkeys(w["chip"]))
    names = list(dict.fromkeys(w["workload"]))
    fig = _new_figure(max(6.0, 1.2 * len(names) + 2.5), 3.2 * len(chips) + 0.8)
    axes = fig.subplots(len(chips), 1, squeeze=False)[:, 0]
    x = np.arange(len(names))
    for ax, chip in zip(axes, chips):
        sub = w[w["chip"] == chip].set_index("workload").reindex(names)
        solved, heur = sub["workload_time_s"].to_numpy(float), sub["workload_time_heuristic_s"].to_numpy(float)
        ax.bar(x - 0.2, heur, 0.4, color="0.65", label="heuristic tiles")
        ax.bar(x + 0.2, solved, 0.4, color="tab:blue", label="CP-SAT tiles (proven optimal)")
        log = _wide(np.concatenate([solved, heur]))
        if log:
            ax.set_yscale("log")
        for xi, (a, b) in enumerate(zip(solved, heur)):
            if np.isfinite(a) and np.isfinite(b) and a > 0 and b - a > 1e-9 * b:  # only what differs
                ax.text(xi + 0.2, a, f"{b / a:.3g}x faster", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x)
        ax.set_xticklabels(names, rotation=15, ha="right", fontsize=8)
        unit_ticks(ax.yaxis, "s", log)
        ax.set_ylabel("time of the workload")
        ax.set_title(chip, fontsize=9)
        ax.grid(axis="y", alpha=0.3, which="both", lw=0.5)
        ax.margins(y=0.15)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("Tile shapes: each workload's time with the optimal tiles and with the heuristic's\n"
                 "(a pair without a label: the heuristic's tiles are as fast)", fontsize=10)
    return fig


def _summary(table: pd.DataFrame) -> list[str]:
    w = _workloads(table)
    n_opt = int((table["status"] == "OPTIMAL").sum())
    out = [f"{_plural(len(table), 'operator')} on {_plural(w['chip'].nunique(), 'chip')} and "
           f"{_plural(w['workload'].nunique(), 'workload')}; {n_opt} of {len(table)} proven optimal."]
    gain = w["workload_time_heuristic_s"] / w["workload_time_s"]
    better = w[gain > 1 + 1e-9]
    if len(better):
        best = better.loc[gain[better.index].idxmax()]
        out.append(f"The optimal tiles beat the heuristic's on {len(better)} of {len(w)} chip and workload pairs, "
                   f"most on {best['workload']} on {best['chip']}: {format_value(best['workload_time_s'], 's')} "
                   f"against {format_value(best['workload_time_heuristic_s'], 's')}.")
    else:
        out.append("The heuristic's tiles are as fast as the optimal ones on every chip and workload.")
    return out


def write_tiles_report(out_dir: str | Path, table: pd.DataFrame, meta: Mapping) -> dict[str, Path]:
    """report.md, report.html and plots/tiles.png of a tile-shape study in ``out_dir``; {relative name: path}.

    ``meta``: name, question, and what the settings list shows (base chips, workloads, solver, elapsed)."""
    root = Path(out_dir)
    written: dict[str, Path] = {}
    png = _png(tiles_figure(table)) if len(table) else None
    if png is not None:
        written[TILES_PNG] = atomic_write(TILES_PNG, png, root=root)
    name = str(meta.get("name") or "study")
    summary = _summary(table) if len(table) else ["No operator was solved."]
    L = [f"# {name}", ""]
    if meta.get("question"):
        L += ["> " + str(meta["question"]).strip().replace("\n", "\n> "), ""]
    L += ["## What the tiles say", "", " ".join(summary), ""]
    L += ["## Tiles", "", _md_table(_HEAD, _rows(table)), "", "Every operator is in `tiles.csv`.", ""]
    L += ["## Plots", ""] + ([f"![tile shapes: optimal against heuristic]({TILES_PNG})", ""] if png else [])
    L += [f"The same report as one page: [{REPORT_HTML}]({REPORT_HTML})", ""]
    L += ["## Settings", ""] + [f"- {k}: {v}" for k, v in _settings_lines(meta)] + [""]
    written[REPORT_MD] = atomic_write(REPORT_MD, "\n".join(L), root=root)
    P = []
    if meta.get("question"):
        P.append(f"<blockquote>{escape(str(meta['question']).strip())}</blockquote>")
    w = _workloads(table) if len(table) else pd.DataFrame(columns=["chip", "workload"])
    n_opt = int((table["status"] == "OPTIMAL").sum()) if len(table) else 0
    P.append('<div class="counts">'
             f"<span>operators <b>{len(table)}</b></span>"
             f"<span>proven optimal <b>{n_opt}</b></span>"
             f"<span>chips <b>{w['chip'].nunique()}</b></span>"
             f"<span>workloads <b>{w['workload'].nunique()}</b></span></div>")
    P.append("<h2>What the tiles say</h2>")
    P.append("<p>" + escape(" ".join(summary)) + "</p>")
    if png is not None:
        P.append("<h2>Plots</h2>")
        data = base64.b64encode(png).decode("ascii")
        P.append(f'<div class="plot"><img alt="tile shapes: optimal against heuristic" style="max-width:100%" '
                 f'src="data:image/png;base64,{data}"></div>')
    P.append(f"<h2>Tiles ({_plural(len(table), 'operator')})</h2>")
    P.append(_html_table(_HEAD, _rows(table)))
    P.append("<h2>Settings</h2>")
    P.append("<ul>" + "".join(f"<li>{escape(k)}: {escape(v)}</li>" for k, v in _settings_lines(meta)) + "</ul>")
    page = ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(name)} — dse report</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            f"<h1>{escape(name)}</h1>\n" + "\n".join(P) + "\n</body>\n</html>\n")
    written[REPORT_HTML] = atomic_write(REPORT_HTML, page, root=root)
    return written

