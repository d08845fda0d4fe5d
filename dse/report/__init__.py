"""Reports of a study for people: report.md, PNG plots, one self-contained interactive report.html.

Inputs are the results contract of :mod:`dse.study.results` (the trials ``table``,
the study's ``meta`` and the optional ``catalog`` of reference chips). Files
written into the output folder, each atomically (:func:`dse.study.results.atomic_write`):

    report.md                       title, question, settings, counts, the front, constraint
                                    rejections, "what the front says", links to the plots
    plots/pareto_<x>__<y>.png       one Pareto scatter per pair of objectives (matplotlib, Agg)
    plots/bound.png                 where the front designs are bound (m.bound, each one's time split)
    plots/convergence.png           the front's hypervolume vs trials (convergence.py)
    sensitivity.csv                 each parameter's share of each objective's variance along the front
                                    (sensitivity.py; also a table on both pages)
    report.html                     one page that works offline: plotly.js inline, a Pareto
                                    scatter per pair with the parameters on hover, the catalog
                                    chips as their own trace, parallel coordinates of the
                                    feasible designs, the front as a table

:func:`regenerate` rebuilds the reports from a results folder (``dse report DIR``).
Everything shown is computed from the table: nothing here evaluates a chip.

One concept per module: view.py (the prepared table, constraint rejections),
findings.py ("what the front says"), axes.py (what both kinds of plot share),
plots.py (PNG), sections.py (settings and constraint tables), markdown.py
(report.md), html.py (report.html); convergence.py (hypervolume and its curve), sensitivity.py (the front's
sensitivity to each parameter); labels.py (point labels without overlap on the PNGs); exact.py (the
pages of a CP-SAT tile study); catalog.py (chip tables for `dse catalog`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from dse.report.findings import findings
from dse.report.html import _html
from dse.report.markdown import _md
from dse.report.plots import _write_plots
from dse.report.sensitivity import SENSITIVITY_CSV
from dse.report.view import REPORT_HTML, REPORT_MD, _study, constraint_rejections
from dse.study.results import atomic_write, read_results

__all__ = ["write_reports", "regenerate", "constraint_rejections", "findings", "REPORT_MD", "REPORT_HTML"]


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
    if st.sensitivity is not None:
        written[SENSITIVITY_CSV] = atomic_write(SENSITIVITY_CSV, st.sensitivity.to_csv(index=False), root=root)
    else:  # an earlier report's shares would mislead
        (root / SENSITIVITY_CSV).unlink(missing_ok=True)
    written[REPORT_MD] = atomic_write(REPORT_MD, _md(st, top), root=root)
    written[REPORT_HTML] = atomic_write(REPORT_HTML, _html(st, top, max_html_points), root=root)
    return written


def regenerate(out_dir: str | os.PathLike, **kwargs: Any) -> dict[str, Path]:
    """Read the results in ``out_dir`` and rewrite its reports (``dse report DIR``)."""
    table, meta, catalog = read_results(out_dir)
    return write_reports(out_dir, table, meta, catalog, **kwargs)
