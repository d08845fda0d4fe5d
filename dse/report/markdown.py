"""report.md: title, question, counts, "what the front says", the front, constraint rejections, plots, settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dse.report.findings import _findings
from dse.report.sections import (
    _REJ_HEAD,
    _constraint_rows,
    _objective_rows,
    _rejection_rows,
    _sensitivity_table,
    _settings_lines,
    _space_rows,
    _split_lines,
    _tiles_lines,
)
from dse.report.convergence import summary
from dse.report.sensitivity import NOTE as SENSITIVITY_NOTE
from dse.report.sensitivity import summary as sensitivity_summary
from dse.report.view import REPORT_HTML, _Study, _distinct, _distinct_note, _pct
from dse.study.results import format_table


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(s: Any) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")
    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _md(st: _Study, top: int) -> str:
    meta = st.meta
    name = str(meta.get("name") or "study")
    L: list[str] = [f"# {name}", ""]
    if meta.get("question"):
        L += ["> " + str(meta["question"]).strip().replace("\n", "\n> "), ""]
    L += ["## Results", "",
          f"- evaluated: **{st.n}** designs",
          f"- feasible: **{st.n_feasible}** ({_pct(st.n_feasible, st.n)})",
          f"- Pareto front (all objectives): **{len(st.front)}** designs{_distinct_note(st)}"]
    if st.convergence is not None:
        L += [f"- {summary(st.convergence)}"]
    L += [f"- {line}" for line in _tiles_lines(meta) + _split_lines(meta)] + [""]
    L += ["## What the front says" if st.n_feasible else "## Why nothing is feasible", ""]
    L += [" ".join(_findings(st)), ""]
    if len(st.front):
        first = st.objectives[0]
        fr = _distinct(st)
        L += [f"## Pareto front (best {min(top, len(fr))} of {len(fr)} distinct designs by {first})", "",
              format_table(fr, meta, fmt="markdown", max_rows=top), "",
              "The whole front is in `pareto.csv`; every trial in `trials.csv` / `trials.parquet`.", ""]
    if st.sensitivity is not None:
        head, rows = _sensitivity_table(st)
        L += ["## Sensitivity of the front", "",
              f"{sensitivity_summary(st.sensitivity)}. " + SENSITIVITY_NOTE, "",
              _md_table(head, rows), ""]
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
