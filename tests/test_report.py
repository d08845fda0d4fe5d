"""Tests of dse.report on a synthetic study: every file written, counts in report.md, an offline
report.html (plotly inline, no remote scripts, parameters on hover), the no-feasible case."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from dse import report
from dse.errors import SpecError
from dse.pareto import non_dominated_sort
from dse.study.results import format_value, read_results, write_results

OBJECTIVES = ["latency_per_token", "energy_per_token", "die_area"]
PARAMS = ["p.hbm.stacks", "p.precision", "p.clock"]


def make_study(n: int = 80, seed: int = 0, feasible: bool = True):
    """(table, meta, catalog) of a toy chip study: 3 objectives, 3 parameters (one a choice),
    2 constraints that reject some designs (all of them with ``feasible=False``), 3 catalog chips."""
    rng = np.random.default_rng(seed)
    stacks = rng.integers(1, 9, n)
    prec = rng.choice(["bf16", "fp8"], n)
    clock = rng.uniform(1e9, 2e9, n)
    t_matrix = 2e-3 / (clock / 1e9) * np.where(prec == "fp8", 0.5, 1.0)
    t_memory = 8e-3 / stacks
    lat = np.maximum(t_matrix, t_memory) + 1e-4
    energy = 0.05 * stacks + 0.2 * clock / 1e9 + np.where(prec == "fp8", 0.0, 0.1)
    area = 400 + 45.0 * stacks + 100 * (clock / 1e9)
    tdp = 350 * clock / 1e9 + 40 * stacks - 900  # W over a 900 W limit
    reticle = area - 800  # mm^2 over the reticle
    if not feasible:
        tdp = tdp + 1000
    table = pd.DataFrame({
        "trial": np.arange(n), "p.hbm.stacks": stacks, "p.precision": prec, "p.clock": clock,
        "obj.latency_per_token": lat, "obj.energy_per_token": energy, "obj.die_area": area,
        "con.tdp": tdp, "con.reticle": reticle,
        "m.bound": np.where(t_memory > t_matrix, "memory", "compute"),
        "m.time_matrix_bound_s": np.where(t_matrix >= t_memory, lat, 0.0),
        "m.time_vector_bound_s": np.full(n, 1e-4),
        "m.time_memory_bound_s": np.where(t_memory > t_matrix, lat, 0.0),
        "m.power_w": 350 * clock / 1e9 + 40 * stacks,
    })
    table["feasible"] = (table["con.tdp"] <= 0) & (table["con.reticle"] <= 0)
    F = table[[f"obj.{o}" for o in OBJECTIVES]].to_numpy()
    table["pareto_rank"] = non_dominated_sort(F, ["minimize"] * 3, table["feasible"].to_numpy())
    meta = {
        "name": "toy-decode-chip",
        "question": "Which HBM stack count and clock give the fastest decode per joule?",
        "objectives": [{"name": "latency_per_token", "direction": "minimize", "unit": "s"},
                       {"name": "energy_per_token", "direction": "minimize", "unit": "J"},
                       {"name": "die_area", "direction": "minimize", "unit": "mm^2"}],
        "constraints": [{"name": "tdp", "unit": "W", "params": {"limit": 900.0}},
                        {"name": "reticle", "unit": "mm^2", "params": {}}],
        "space": [{"name": "hbm.stacks", "kind": "int", "low": 1, "high": 8, "choices": None, "unit": ""},
                  {"name": "precision", "kind": "choice", "low": None, "high": None, "choices": ["bf16", "fp8"],
                   "unit": ""},
                  {"name": "clock", "kind": "float", "low": 1e9, "high": 2e9, "choices": None, "unit": "Hz"}],
        "solver": {"name": "nsga2", "population": 16},
        "workloads": ["qwen3-8b decode"],
        "base_chip": "h100-sxm",
        "n_trials": n,
        "seed": seed,
        "elapsed_s": 1.5,
    }
    catalog = pd.DataFrame({
        "chip": ["h100-sxm", "mi355x", "groq-tsp"],
        "obj.latency_per_token": [2.5e-3, 1.8e-3, np.nan],  # groq-tsp: no finite latency (does not fit)
        "obj.energy_per_token": [0.6, 0.7, 0.3],
        "obj.die_area": [814.0, 900.0, 725.0],
        "m.bound": ["memory", "memory", "memory"],
    })
    return table, meta, catalog


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    table, meta, catalog = make_study()
    write_results(out, table, meta, catalog)
    files = report.write_reports(out, table, meta, catalog)
    return out, files, (table, meta, catalog)


def _plotly_calls(html: str) -> dict[str, list]:
    """div id -> the trace list passed to Plotly.newPlot."""
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\]),\s*\{"template"', html, re.S):
        out[m.group(1)] = json.loads(m.group(2))
    return out


def test_all_files_written(written):
    out, files, _ = written
    pairs = ["latency_per_token__energy_per_token", "latency_per_token__die_area", "energy_per_token__die_area"]
    expected = ({"report.md", "report.html", "plots/bound.png", "plots/convergence.png"}
                | {f"plots/pareto_{p}.png" for p in pairs})
    assert set(files) == expected
    for rel in expected:
        assert (out / rel).is_file() and (out / rel).stat().st_size > 0
    for rel in expected - {"report.md", "report.html"}:
        assert (out / rel).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]


def test_report_md_counts_front_constraints_and_links(written):
    out, _, (table, meta, _) = written
    md = (out / "report.md").read_text()
    n, n_feas = len(table), int(table["feasible"].sum())
    n_front = int(((table["pareto_rank"] == 0) & table["feasible"]).sum())
    assert 0 < n_feas < n and n_front > 1
    assert md.startswith("# toy-decode-chip\n")
    assert meta["question"] in md
    assert f"evaluated: **{n}** designs" in md
    assert f"feasible: **{n_feas}**" in md
    assert f"Pareto front (all objectives): **{n_front}** designs" in md
    assert "## What the front says" in md
    # per-constraint rejections: count and worst violation, in the constraint's unit
    for name, unit in (("tdp", "W"), ("reticle", "mm^2")):
        v = table[f"con.{name}"]
        row = next(ln for ln in md.splitlines() if ln.startswith(f"| {name} |") and "%" in ln)
        assert f"| {int((v > 0).sum())} (" in row
        assert unit in row
    # the front table: best first by latency, with units in the cells
    best = table[(table["pareto_rank"] == 0) & table["feasible"]].sort_values("obj.latency_per_token").iloc[0]
    assert f"| {best['trial']} |" in md and " ms |" in md and " GHz |" in md
    for rel in ("plots/pareto_latency_per_token__energy_per_token.png", "plots/bound.png", "report.html"):
        assert f"({rel})" in md
    # settings
    assert "nsga2" in md and "h100-sxm" in md and "qwen3-8b decode" in md


def test_findings_come_from_the_data(written):
    out, _, (table, meta, catalog) = written
    text = " ".join(report.findings(table, meta, catalog))
    fr = table[(table["pareto_rank"] == 0) & table["feasible"]]
    for bound, k in fr["m.bound"].value_counts().items():
        assert f"{k} {bound}-bound" in text
    assert "groq-tsp" in text and "Not compared" in text  # NaN latency: not placed, not compared
    assert "h100-sxm" in text
    assert "share precision" not in text and set(fr["p.precision"]) == {"bf16", "fp8"}
    # a value every front design shares is named; one at the edge of its range is flagged
    t2 = table.copy()
    t2.loc[t2["pareto_rank"] == 0, "p.precision"] = "fp8"
    t2.loc[t2["pareto_rank"] == 0, "p.clock"] = 2e9
    text = " ".join(report.findings(t2, meta, catalog))
    assert f"All {len(fr)} front designs share precision = fp8, clock = 2 GHz." in text
    assert f"clock sits at the top of its range (2 GHz) in {len(fr)} of {len(fr)} front designs" in text


def test_report_html_is_self_contained(written):
    from plotly.offline import get_plotlyjs

    out, _, _ = written
    html = (out / "report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>")
    assert get_plotlyjs() in html  # the whole plotly.js bundle, inline
    assert html.count(get_plotlyjs()[:2000]) == 1  # once
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.I)  # no external script at all
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']?https?:", html, re.I)
    assert not re.search(r"<(img|iframe)[^>]*\bsrc\s*=\s*[\"']?https?:", html, re.I)


def test_report_html_hover_lists_every_parameter_and_catalog_is_its_own_trace(written):
    out, _, (table, _, _) = written
    html = (out / "report.html").read_text(encoding="utf-8")
    calls = _plotly_calls(html)
    assert set(calls) == {"pareto-0", "pareto-1", "pareto-2", "parcoords", "convergence"}
    traces = calls["pareto-0"]
    names = [t["name"] for t in traces]
    front = next(t for t in traces if t["name"].startswith("Pareto front"))
    for p in PARAMS:
        assert f"{p[2:]} = %{{customdata[" in front["hovertemplate"]
    assert front["mode"] == "lines+markers"
    assert len(front["customdata"][0]) == 1 + len(PARAMS) + 2  # trial, params, x, y
    assert any(v.endswith("GHz") for v in front["customdata"][0])
    assert any(n.startswith("infeasible") for n in names)
    cat = next(t for t in traces if t["name"] == "catalog chips")
    assert cat["text"] == ["h100-sxm", "mi355x"]  # groq-tsp has no finite latency: left out
    cat_ea = next(t for t in calls["pareto-2"] if t["name"] == "catalog chips")  # energy vs area: all finite
    assert cat_ea["text"] == ["h100-sxm", "mi355x", "groq-tsp"]
    infeasible = next(t for t in traces if t["name"].startswith("infeasible"))
    assert any(row[-1].startswith("violates: ") for row in infeasible["customdata"])
    pc = calls["parcoords"][0]
    assert pc["type"] == "parcoords"
    labels = [d["label"] for d in pc["dimensions"]]
    # a unit that scales is on every tick (1.5 GHz, 3 ms: tests/test_plots.py); one that does not, in the label
    assert labels[:3] == ["hbm.stacks", "precision", "clock"]
    assert {"latency_per_token", "energy_per_token", "die_area [mm^2]"} <= set(labels)
    assert "<table class=\"results\">" in html  # the Pareto table


def test_no_feasible_design_names_the_worst_constraint(tmp_path):
    table, meta, catalog = make_study(n=40, seed=3, feasible=False)
    assert not table["feasible"].any()
    files = report.write_reports(tmp_path, table, meta, catalog)
    md = (tmp_path / "report.md").read_text()
    assert "## Why nothing is feasible" in md
    assert "No feasible design among 40 evaluated designs" in md
    worst = table["con.tdp"].max()
    assert "constraint that rejected the most is **tdp**: 40 of 40 designs (100%)" in md
    assert f"by up to {format_value(worst, 'W')}" in md
    assert "Closest to feasible: trial" in md
    assert "feasible: **0** (0%)" in md
    assert "report.html" in files and (tmp_path / "plots" / "pareto_latency_per_token__die_area.png").exists()
    assert "plots/bound.png" not in files  # no front: nothing to split


def test_regenerate_reads_the_folder(tmp_path):
    table, meta, catalog = make_study(n=30, seed=1)
    write_results(tmp_path, table, meta, catalog)
    files = report.regenerate(tmp_path)
    assert {"report.md", "report.html"} <= set(files)
    t2, _, c2 = read_results(tmp_path)
    assert c2 is not None and len(c2) == 3 and len(t2) == 30
    with pytest.raises(SpecError, match="not a dse results folder"):
        report.regenerate(tmp_path / "plots")


def test_stale_plots_of_other_objectives_are_removed(tmp_path):
    table, meta, _ = make_study(n=30, seed=2)
    report.write_reports(tmp_path, table, meta)
    assert len(list((tmp_path / "plots").glob("pareto_*.png"))) == 3
    meta2 = dict(meta, objectives=meta["objectives"][:2])
    (tmp_path / "plots" / "notes.txt").write_text("mine")
    report.write_reports(tmp_path, table, meta2)
    assert [p.name for p in (tmp_path / "plots").glob("pareto_*.png")] == [
        "pareto_latency_per_token__energy_per_token.png"]
    assert (tmp_path / "plots" / "notes.txt").read_text() == "mine"


def test_one_objective_and_empty_table(tmp_path):
    table, meta, _ = make_study(n=20, seed=4)
    one = dict(meta, objectives=meta["objectives"][:1])
    one_table = table.drop(columns=["obj.energy_per_token", "obj.die_area", "pareto_rank"])
    files = report.write_reports(tmp_path / "one", one_table, one)
    assert "plots/pareto_latency_per_token.png" in files
    empty = table.iloc[:0]
    files = report.write_reports(tmp_path / "empty", empty, meta)
    md = (tmp_path / "empty" / "report.md").read_text()
    assert "evaluated: **0** designs" in md and "No design was evaluated." in md


def test_a_crash_while_writing_the_html_keeps_the_previous_report(tmp_path, monkeypatch):
    table, meta, _ = make_study(n=20, seed=5)
    report.write_reports(tmp_path, table, meta)
    before = (tmp_path / "report.html").read_bytes()

    def broken(*args, **kwargs):
        raise RuntimeError("plotly exploded")

    monkeypatch.setattr(report, "_html", broken)
    with pytest.raises(RuntimeError, match="plotly exploded"):
        report.write_reports(tmp_path, table, meta)
    assert (tmp_path / "report.html").read_bytes() == before
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_hostile_names_stay_inside_the_folder_and_are_escaped(tmp_path):
    table, meta, catalog = make_study(n=20, seed=6)
    meta = json.loads(json.dumps(meta))
    meta["name"] = "<script>alert(1)</script>"
    meta["objectives"][0]["name"] = "../../lat"
    table = table.rename(columns={"obj.latency_per_token": "obj.../../lat"})
    catalog = catalog.rename(columns={"obj.latency_per_token": "obj.../../lat"})
    catalog.loc[0, "chip"] = "</script><script>alert(2)</script>"
    files = report.write_reports(tmp_path / "out", table, meta, catalog)
    assert all((tmp_path / "out") in p.parents for p in files.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<script>alert(" not in html


def test_hypervolume_and_its_convergence_by_hand(tmp_path):
    """Four trials, two minimized objectives: (1, 4), (3, 3), (2, 2), (4, 1) in that order. The front is
    (1, 4), (2, 2), (4, 1): ideal (1, 1), nadir (4, 4), normalized (0, 1), (1/3, 1/3), (1, 0), reference 1.1.
    By hand (strips left to right): after all four 1/3 x 0.1 + 2/3 x (1.1 - 1/3) + 0.1 x 1.1 = 0.654444;
    after the first, 1.1 x 0.1 = 0.11; after two, (0, 1) and (2/3, 2/3): 2/3 x 0.1 + (1.1 - 2/3)^2 = 0.254444;
    after three, (2/3, 2/3) is dominated: 1/3 x 0.1 + (1.1 - 1/3)^2 = 0.621111."""
    from dse.report.convergence import convergence

    table = pd.DataFrame({"trial": [0, 1, 2, 3], "p.x": [1, 2, 3, 4],
                          "obj.a": [1.0, 3.0, 2.0, 4.0], "obj.b": [4.0, 3.0, 2.0, 1.0], "feasible": True})
    table["pareto_rank"] = non_dominated_sort(table[["obj.a", "obj.b"]].to_numpy(), ["minimize"] * 2)
    meta = {"name": "hv", "objectives": [{"name": "a", "direction": "minimize", "unit": ""},
                                         {"name": "b", "direction": "minimize", "unit": ""}]}
    c = convergence(table, ["a", "b"], {"a": "minimize", "b": "minimize"})
    assert c.hypervolume == pytest.approx(0.654444, abs=1e-6)
    assert list(c.trials) == [1, 2, 3, 4]
    assert c.curve == pytest.approx([0.11, 0.254444, 0.621111, 0.654444], abs=1e-6)
    assert c.reached(0.9) == 3 and c.reached(0.1) == 1
    files = report.write_reports(tmp_path, table, meta)
    md = (tmp_path / "report.md").read_text()
    assert "hypervolume of the front: **0.6544**" in md and "90% of it reached after 3 of 4 trials" in md
    assert "plots/convergence.png" in files and "(plots/convergence.png)" in md
    assert 'id="convergence"' in (tmp_path / "report.html").read_text()
    # a maximized objective counts as its negative: the same front mirrored gives the same hypervolume
    mirrored = table.assign(**{"obj.b": -table["obj.b"]})
    c2 = convergence(mirrored, ["a", "b"], {"a": "minimize", "b": "maximize"})
    assert c2.hypervolume == pytest.approx(c.hypervolume, rel=1e-12)
