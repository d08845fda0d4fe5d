"""The plots of a study, what-if and CP-SAT study, as a user reads them (issue 19 item 8).

Checked on the drawn matplotlib figures (Agg): the boxes of the labels as the renderer measures them
(``get_window_extent``), the texts a figure carries, the tick labels of the parallel-coordinates chart in
report.html. Studies run with a reduced budget in tmp_path; every number compared is taken from the results
table of the same run (or, for the what-if, from its markdown table), as the test says.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402

from dse.report import write_reports  # noqa: E402
from dse.report.axes import tick_texts  # noqa: E402
from dse.report.labels import text_boxes  # noqa: E402
from dse.report.plots import _bound_figure, _pair_figure  # noqa: E402
from dse.report.view import _study  # noqa: E402
from dse.study import run_study  # noqa: E402
from dse.study.results import read_results  # noqa: E402
from dse.units import format_percent  # noqa: E402
from tests.test_report import make_study  # noqa: E402

STUDIES = Path(__file__).resolve().parents[1] / "studies"
DEFAULT = STUDIES / "qwen3-8b-decode-chip.yaml"
PRECISION = STUDIES / "precision-vs-error.yaml"
RAW_SI = re.compile(r"^-?[\d.]+\s?[yzafpnµumkKMGTPE]$")  # plotly's '~s' ticks: '1.4G', '500µ', '80k'


@pytest.fixture(scope="module")
def default_study(tmp_path_factory):
    """The README's default study, 200 trials, written (catalog.csv: the catalog chips on its workload)."""
    out = tmp_path_factory.mktemp("default")
    run_study(DEFAULT, trials=200, out=out)
    table, meta, catalog = read_results(out)
    return out, _study(table, meta, catalog)


def _labels(fig) -> list[Annotation]:
    return [t for ax in fig.axes for t in ax.texts if isinstance(t, Annotation)]


def _overlap(a, b) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _assert_no_overlap(fig):
    anns = _labels(fig)
    fig.savefig(io.BytesIO(), format="png")  # the layout as written
    boxes = text_boxes(fig, anns)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert _overlap(boxes[i], boxes[j]) == 0.0, (anns[i].get_text(), anns[j].get_text())
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        leg = ax.get_legend()
        for a, b in zip(anns, boxes):
            if a.axes is not ax:
                continue
            assert frame.x0 - 0.5 <= b.x0 and b.x1 <= frame.x1 + 0.5 and frame.y0 - 0.5 <= b.y0 \
                and b.y1 <= frame.y1 + 0.5, a.get_text()
            if leg is not None:
                assert _overlap(b, leg.get_window_extent(renderer)) == 0.0, a.get_text()
    return anns, boxes


# ------------------------------------------------------------------ catalog labels


def test_default_study_catalog_labels_do_not_overlap(default_study):
    """Each catalog chip near the designs is labelled once, and no two labels (nor a label and the legend)
    overlap in any Pareto plot of the default study (before: rtx-pro-6000 over rtx-5090, mi355x over b200)."""
    out, st = default_study
    cat = pd.read_csv(out / "catalog.csv")
    for xn, yn in [("latency_per_token", "energy_per_token"), ("latency_per_token", "die_area"),
                   ("energy_per_token", "die_area")]:
        fig = _pair_figure(st, xn, yn)
        anns, _ = _assert_no_overlap(fig)
        texts = [a.get_text() for a in anns]
        assert len(texts) == len(set(texts)) >= 8
        assert set(texts) <= set(cat["chip"])
        # a chip breaking the study's constraints (catalog.csv: feasible False) is not labelled (issue 19 item 2)
        assert not set(texts) & set(cat.loc[~cat["feasible"].astype(bool), "chip"])


def test_crowded_catalog_labels_do_not_overlap():
    """Twelve chips within 2% of one point: every label still gets a free place (with a leader line)."""
    table, meta, _ = make_study()
    names = [f"chip-{k:02d}" for k in range(12)]
    rng = np.random.default_rng(1)
    catalog = pd.DataFrame({
        "chip": names,
        "obj.latency_per_token": 2.0e-3 * (1 + 0.02 * rng.random(12)),
        "obj.energy_per_token": 0.6 * (1 + 0.02 * rng.random(12)),
        "obj.die_area": 700.0 * (1 + 0.02 * rng.random(12)),
    })
    st = _study(table, meta, catalog)
    fig = _pair_figure(st, "latency_per_token", "energy_per_token")
    anns, _ = _assert_no_overlap(fig)
    assert sorted(a.get_text() for a in anns if a.get_text().startswith("chip-")) == names
    assert any(a.arrow_patch is not None for a in anns)  # moved away from its star: a line leads back


def test_png_ticks_are_dse_units(default_study):
    """The PNG axes read '5 ms', '200 mJ' (dse.units, as the tables), not matplotlib's 'µs' engineering ticks."""
    _, st = default_study
    fig = _pair_figure(st, "latency_per_token", "energy_per_token")
    fig.canvas.draw()
    ax = fig.axes[0]
    xt = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    yt = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert xt and all(re.fullmatch(r"[\d.]+ (ms|us|s)", t) or t == "0" for t in xt), xt
    assert yt and all(re.fullmatch(r"[\d.]+ (mJ|J)", t) or t == "0" for t in yt), yt
    assert xt == tick_texts([v for v, t in zip(ax.get_xticks(), ax.get_xticklabels()) if t.get_text()], "s")


# ------------------------------------------------------------------ bound.png


def _texts(fig) -> list[str]:
    out = [t.get_text() for t in fig.texts]  # the suptitle is one of them
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]


def test_bound_plot_says_a_shared_bound_once_and_shows_each_designs_mix(default_study):
    """Every feasible design of the default study is memory-bound (its stated conclusion): bound.png says so
    once, draws no bar per design with '100% memory' in it, and shows each front design's time split, with
    the spread of the shares (from the table's m.time_*_bound_s / m.time_s) in the title."""
    _, st = default_study
    feas = st.t[st.t["feasible"]]
    assert set(feas["m.bound"]) == {"memory"}
    fig = _bound_figure(st)
    texts = _texts(fig)
    assert [t for t in texts if "memory-bound (m.bound)" in t] == [
        f"Every feasible design is memory-bound (m.bound): the {len(st.front)} designs on the front and all "
        f"{len(feas)} feasible"]
    assert not [t for t in texts if "100%" in t]
    assert not [t for ax in fig.axes for t in ax.texts]  # no text inside the bars
    assert len(fig.axes) == 1  # no panel of one-colour bars
    shown = st.front.head(25)
    mem = (shown["m.time_memory_bound_s"] / shown["m.time_s"]).to_numpy()
    vec = (shown["m.time_vector_bound_s"] / shown["m.time_s"]).to_numpy()
    title = fig.axes[0].get_title()
    for name, v in (("memory", mem), ("vector", vec)):
        lo, hi = format_percent(v.min()), format_percent(v.max())
        assert f"{name} {lo if lo == hi else lo[:-1] + '-' + hi}" in title, title
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == ["vector-bound", "memory-bound"]  # matrix-bound: no operator of these designs, not listed
    # bars: one per shown design, the memory segment as long as its time (x axis in seconds)
    widths = sorted(p.get_width() for p in fig.axes[0].patches if p.get_facecolor()[:3] == (
        matplotlib.colors.to_rgb("tab:blue")))
    assert widths == pytest.approx(sorted(shown["m.time_memory_bound_s"]), rel=1e-9)


def test_bound_plot_labels_a_mix_with_counts():
    """A mix of bounds (tests.test_report.make_study: memory- and compute-bound designs) gets its panel, each
    part of a bar labelled with its count and share, counted from the table's m.bound."""
    table, meta, catalog = make_study()
    st = _study(table, meta, catalog)
    fig = _bound_figure(st)
    assert len(fig.axes) == 2
    in_bars = {t.get_text() for t in fig.axes[0].texts}
    for group in (st.front, st.t[st.t["feasible"]]):
        counts = group["m.bound"].value_counts()
        if len(counts) < 2:
            continue
        for b, n in counts.items():
            if n / len(group) >= 0.08:
                assert f"{n} ({format_percent(n / len(group))})" in in_bars


# ------------------------------------------------------------------ precision-vs-error


@pytest.fixture(scope="module")
def precision(tmp_path_factory):
    out = tmp_path_factory.mktemp("prec")
    run_study(PRECISION, out=out)
    table, meta, catalog = read_results(out)
    return out, _study(table, meta, catalog)


def test_precision_plot_names_the_formats(precision):
    """Which point is which format: the points are coloured by the weights' format with a legend of every
    format of the study file, and the front's point says its formats (the fastest feasible design, mxfp6
    weights: tests/studies/test_worked_studies.py)."""
    _, st = precision
    fig = _pair_figure(st, "latency_per_token", "energy_per_token")
    assert len(fig.legends) == 1
    leg = fig.legends[0]
    assert leg.get_title().get_text() == "workload.formats.weights"
    assert [t.get_text() for t in leg.get_texts()] == ["bf16", "fp8_e4m3", "mxfp6", "mxfp4", "nvfp4", "int4_g128"]
    front = st.t[st.t["feasible"] & (st.t["pareto_rank"] == 0)]
    labels = {a.get_text() for a in _labels(fig)}
    for _, r in front.iterrows():
        text = (f"weights {r['p.workload.formats.weights']}, kv {r['p.workload.formats.kv']}, "
                f"activations {r['p.workload.formats.activations']}")
        assert text in labels
    assert "weights mxfp6" in " ".join(labels)
    _assert_no_overlap(fig)
    # each format's points drawn in its legend colour: as many points of that colour as designs of that format
    colours = {t.get_text(): h.get_facecolor() for t, h in zip(leg.get_texts(), leg.legend_handles)}
    ax = fig.axes[0]
    for fmt, col in colours.items():
        n = sum(len(c.get_offsets()) for c in ax.collections
                if len(c.get_offsets()) and np.allclose(c.get_facecolor()[0][:3], col[:3])
                or len(c.get_offsets()) and np.allclose(c.get_edgecolor()[0][:3], col[:3]))
        on_front = front["p.workload.formats.weights"].eq(fmt).sum()
        assert n == (st.t["p.workload.formats.weights"] == fmt).sum() - on_front, fmt


# ------------------------------------------------------------------ parallel coordinates


def _parcoords(html: str) -> dict:
    m = re.search(r'Plotly\.newPlot\(\s*"parcoords",\s*(\[.*?\]),\s*\{"template"', html, re.S)
    return json.loads(m.group(1))[0]


def test_parcoords_ticks_carry_units_not_raw_si(default_study):
    """Every numeric axis of the parallel-coordinates chart has its ticks written by dse's formatting
    (tick_texts, dse.units), none of plotly's bare SI ('1.4G'); the choice local_buffer shows the study
    file's values (128 KiB, 228 KiB, 512 KiB) and the clock reads in GHz."""
    out, st = default_study
    pc = _parcoords((out / "report.html").read_text(encoding="utf-8"))
    dims = {d["label"]: d for d in pc["dimensions"]}
    for label, d in dims.items():
        assert d.get("ticktext"), label
        assert "tickformat" not in d, label
        assert not [t for t in d["ticktext"] if RAW_SI.match(t)], (label, d["ticktext"])
    assert dims["local_buffer"]["ticktext"] == ["128 KiB", "228 KiB", "512 KiB"]
    assert all(t.endswith(" GHz") for t in dims["clock"]["ticktext"])
    assert all(t.endswith(("ms", "us")) for t in dims["latency_per_token"]["ticktext"])
    assert all(t.endswith("mJ") for t in dims["energy_per_token"]["ticktext"])
    assert "die_area [mm^2]" in dims  # a unit that does not scale: once, in the label
    for label, unit in (("clock", "frequency"), ("local_buffer", "bytes"), ("l2", "bytes"),
                        ("latency_per_token", "s")):
        d = dims[label]
        vals = [10 ** v for v in d["tickvals"]] if label.endswith("(log)") else d["tickvals"]
        assert d["ticktext"] == tick_texts(vals, unit)
    bar = pc["line"]["colorbar"]
    assert bar["ticktext"] and not [t for t in bar["ticktext"] if RAW_SI.match(t)]


def test_parcoords_log_axis_ticks_are_values(tmp_path):
    """A wide axis is drawn in log10 but its ticks read the values ('1 ms', '10 ms'), not 'log10 ...'."""
    table, meta, catalog = make_study()
    table["obj.latency_per_token"] = np.geomspace(1e-4, 1e-1, len(table))
    write_reports(tmp_path, table, meta, catalog)
    pc = _parcoords((tmp_path / "report.html").read_text(encoding="utf-8"))
    d = next(d for d in pc["dimensions"] if d["label"].startswith("latency_per_token"))
    assert d["label"] == "latency_per_token (log)"
    assert d["ticktext"] == tick_texts([10 ** v for v in d["tickvals"]], "s")
    assert {"1 ms", "10 ms"} <= set(d["ticktext"])


# ------------------------------------------------------------------ what-if chart


def test_whatif_chart_shows_each_designs_total_time():
    """whatif.png: each design's time per step is one stacked bar with its total on top, as whatif.md's
    'step time' row writes it, and the change against the design it is compared with, as that table's Δ."""
    from dse.whatif import run_whatif
    from dse.whatif.render import _chart_figure

    res = run_whatif(STUDIES / "whatif-h100-upgrades.yaml")
    md = res.to_markdown()
    fig = _chart_figure(res)
    sections = md.split("\n## `")[1:]
    assert len(sections) == len(fig.axes) == len(res.spec.workloads)
    for ax, sec in zip(fig.axes, sections):
        row = next(line for line in sec.splitlines() if line.startswith("| step time |"))
        cells = [c.strip() for c in row.strip("|").split("|")][1:]
        totals = [cells[0]] + cells[1::2]  # baseline, then each proposal (value, Δ)
        deltas = cells[2::2]
        texts = [t.get_text() for t in ax.texts]
        assert texts[0] == totals[0]  # the baseline: its total only
        for d, total, delta, text in zip(res.spec.proposals, totals[1:], deltas, texts[1:]):
            assert text == f"{total}\n{delta} vs {d.compare_to}"
        # the bar is as tall as the total: the segments of each design add up to its time_s
        m = res.metrics[res.metrics.workload == ax.get_title()].set_index("design")
        heights = {}
        for p in ax.patches:
            heights[round(p.get_x() + p.get_width() / 2)] = max(heights.get(round(p.get_x() + p.get_width() / 2), 0),
                                                                 p.get_y() + p.get_height())
        for k, d in enumerate(res.spec.designs):
            assert heights[k] == pytest.approx(float(m.loc[d.name, "time_s"]), rel=1e-9)
        fig.canvas.draw()
        assert all(t.get_text().endswith(" ms") or t.get_text() == "0" for t in ax.get_yticklabels())


# ------------------------------------------------------------------ CP-SAT studies

TILES_STUDY = """\
name: tiny-tiles
question: Which tiles run a 64 x 2048 x 2048 GEMM fastest on an H100 and on an MI355X?
workloads:
  - {name: gemm-m64, ops: [{gemm: {name: up, m: 64, k: 2048, n: 2048}}]}
  - {name: gemm-m2048, ops: [{gemm: {name: up, m: 2048, k: 2048, n: 2048}}]}
base: h100-sxm
space:
  base: {choice: [h100-sxm, mi355x]}
objectives: [latency_per_token]
solver: {method: cpsat_tiles}
output: out
"""

SPLIT_STUDY = """\
name: tiny-split
question: How many units and HBM stacks for Qwen3-8B decode on one die?
workloads:
  - {model: qwen3-8b, phase: decode, batch: 8, context: 8192}
base: h100-sxm
space:
  units: {int: [64, 128], step: 32}
  hbm.stacks: {int: [4, 6]}
constraints: {reticle: null, hbm_shoreline: null, tdp: {max: 1000 W}, fits_memory: null}
objectives: [latency_per_token]
solver: {method: cpsat_split}
output: out
"""


def _page_like_a_study(html: str, name: str, question: str) -> None:
    from dse.report.html import _CSS

    assert html.startswith("<!DOCTYPE html>") and f"<style>{_CSS}</style>" in html  # every report's page style
    assert f"<h1>{name}</h1>" in html and question in html
    assert "<h2>Settings</h2>" in html
    assert not re.search(r"<(script|img|link)[^>]+(src|href)=\"https?:", html)  # nothing fetched: works offline


def test_cpsat_tiles_study_has_a_report_page_and_a_plot(tmp_path):
    """A CP-SAT tile study (issue 19 item 8: no HTML page, no plot) writes report.html, laid out as every
    study's, with its plot inline, and plots/tiles.png; the plot labels only the workloads where the optimal
    tiles beat the heuristic's, by the factor tiles.csv gives."""
    import base64

    from dse.report.exact import tiles_figure

    study = tmp_path / "tiles.yaml"
    study.write_text(TILES_STUDY)
    table = run_study(study, out=tmp_path / "out")
    out = tmp_path / "out"
    assert len(table) == 4 and (table["status"] == "OPTIMAL").all()
    for name in ("tiles.csv", "report.md", "report.html", "plots/tiles.png"):
        assert (out / name).is_file(), name
    png = (out / "plots/tiles.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    html = (out / "report.html").read_text(encoding="utf-8")
    _page_like_a_study(html, "tiny-tiles", "Which tiles run a 64 x 2048 x 2048 GEMM fastest")
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert m and base64.b64decode(m.group(1)) == png  # the plot, inline: the page works alone
    assert html.count("<td>OPTIMAL</td>") == len(table)
    md = (out / "report.md").read_text()
    assert "![tile shapes: optimal against heuristic](plots/tiles.png)" in md and "(report.html)" in md
    fig = tiles_figure(table)
    labels = sorted(t.get_text() for ax in fig.axes for t in ax.texts)
    gain = table["workload_time_heuristic_s"] / table["workload_time_s"]
    assert labels == sorted(f"{g:.3g}x faster" for g in gain if g > 1 + 1e-9)


def test_cpsat_split_study_writes_the_report_every_study_writes(tmp_path):
    """A CP-SAT split study: the chosen die, evaluated as any study's design, in the results folder and the
    report every study has (report.html with its plots, report.md, plots/*.png, trials, catalog); `dse report`
    rebuilds it. The design in trials.csv is the one in split.csv."""
    from dse.cli import main

    study = tmp_path / "split.yaml"
    study.write_text(SPLIT_STUDY)
    split = run_study(study, out=tmp_path / "out").iloc[0]
    out = tmp_path / "out"
    assert split["status"] == "OPTIMAL"
    for name in ("split.csv", "trials.csv", "pareto.csv", "catalog.csv", "report.md", "report.html",
                 "plots/pareto_latency_per_token.png", "plots/bound.png"):
        assert (out / name).is_file(), name
    table, meta, catalog = read_results(out)
    assert len(table) == 1 and bool(table["feasible"].iloc[0]) and len(catalog)
    for p in ("units", "hbm.stacks"):
        assert table[f"p.{p}"].iloc[0] == split[f"p.{p}"]
    assert meta["solver"]["method"] == "cpsat_split" and meta["solver"]["status"] == "OPTIMAL"
    html = (out / "report.html").read_text(encoding="utf-8")
    _page_like_a_study(html, "tiny-split", "How many units and HBM stacks")
    assert 'id="pareto-0"' in html and 'id="parcoords"' in html
    assert "method=cpsat_split, status=OPTIMAL" in html
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").is_file()


def _layout(html: str, div: str) -> dict:
    m = re.search(r'Plotly\.newPlot\(\s*"%s",\s*(\[.*?\]),\s*(?=\{"template")' % re.escape(div), html, re.S)
    layout, _ = json.JSONDecoder().raw_decode(html, m.end())
    return layout


def test_report_html_catalog_labels_are_placed_apart(default_study):
    """report.html: each catalog chip near the designs is named once, by an annotation placed by the same
    greedy pass as the PNGs (on the page's nominal plot area, text boxes estimated from the names' lengths):
    re-computing those boxes from the page's annotations, none overlaps another. (The real browser check is
    by eye, on a headless-Chromium screenshot: tests/browser.)"""
    from dse.report.html import _AREA_PX, _FONT_PX, _axis_px

    out, st = default_study
    html = (out / "report.html").read_text(encoding="utf-8")
    for div in ("pareto-0", "pareto-1", "pareto-2"):
        lay = _layout(html, div)
        anns = lay.get("annotations") or []
        assert len(anns) >= 8
        assert len({a["text"] for a in anns}) == len(anns)
        boxes = []
        w, h = _AREA_PX
        for a in anns:
            xa, ya = lay["xaxis"], lay["yaxis"]
            x = _axis_px(np.array([10 ** a["x"] if xa["type"] == "log" else a["x"]]), xa, w)[0]
            y = _axis_px(np.array([10 ** a["y"] if ya["type"] == "log" else a["y"]]), ya, h)[0]
            x += a.get("ax", 0) if a["showarrow"] else a.get("xshift", 0)
            y += -a.get("ay", 0) if a["showarrow"] else a.get("yshift", 0)
            bw, bh = 0.62 * _FONT_PX * len(a["text"]), _FONT_PX * 1.4
            x0 = x - {"left": 0, "center": bw / 2, "right": bw}[a["xanchor"]]
            y0 = y - {"bottom": 0, "middle": bh / 2, "top": bh}[a["yanchor"]]
            boxes.append((x0, y0, x0 + bw, y0 + bh))
            assert -1 <= x0 and x0 + bw <= w + 1 and -1 <= y0 and y0 + bh <= h + 1, a["text"]
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                a, b = boxes[i], boxes[j]
                assert min(a[2], b[2]) <= max(a[0], b[0]) or min(a[3], b[3]) <= max(a[1], b[1]), \
                    (anns[i]["text"], anns[j]["text"])
