"""Tests of dse.study.results: round trip, atomic writes, confinement, the front against hand arithmetic, tables."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.study import results
from dse.errors import SpecError
from dse.study.results import (
    atomic_write,
    confined_path,
    format_table,
    format_value,
    pareto_table,
    prepare_table,
    read_results,
    write_results,
)

# A hand-sized study: latency (minimize, s) and throughput (maximize, tokens/s), area (minimize).
#
#  trial  latency  tput  area  feasible   2-D front (latency, tput)      3-D front
#    0     1.0      10   100     yes      yes (fastest)                  yes
#    1     2.0      30   100     yes      yes                            yes
#    2     2.0      20   100     yes      no  (1 is as fast, more tput)   no
#    3     3.0      30    50     yes      no  (1 dominates)               yes (smallest area)
#    4     4.0      50   300     yes      yes (most tput)                 yes
#    5     0.5     100    10     NO       - infeasible never dominates    -
#    6     5.0      40   400     yes      no  (4 dominates)               no (4 dominates)
#    7     NaN      90   100     yes      - NaN objective: left out       -
LAT = [1.0, 2.0, 2.0, 3.0, 4.0, 0.5, 5.0, np.nan]
TPUT = [10.0, 30.0, 20.0, 30.0, 50.0, 100.0, 40.0, 90.0]
AREA = [100.0, 100.0, 100.0, 50.0, 300.0, 10.0, 400.0, 100.0]


def hand_meta() -> dict:
    return {
        "name": "hand",
        "question": "Which design is fastest for its throughput?",
        "objectives": [
            {"name": "latency", "direction": "minimize", "unit": "s"},
            {"name": "tput", "direction": "maximize", "unit": "tokens/s"},
            {"name": "area", "direction": "minimize", "unit": "mm^2"},
        ],
        "constraints": [{"name": "tdp", "unit": "W", "params": {"limit": 700.0}}],
        "space": [
            {"name": "units", "kind": "int", "low": 1, "high": 8, "choices": None, "unit": ""},
            {"name": "precision", "kind": "choice", "low": None, "high": None, "choices": ["bf16", "fp8"],
             "unit": ""},
            {"name": "clock", "kind": "float", "low": 1e9, "high": 2e9, "choices": None, "unit": "Hz"},
        ],
        "solver": {"name": "grid"},
        "workloads": ["toy"],
        "base_chip": "h100-sxm",
        "n_trials": 8,
        "seed": 1,
        "elapsed_s": 0.5,
    }


def hand_table(with_rank: bool = True) -> pd.DataFrame:
    n = len(LAT)
    t = pd.DataFrame({
        "trial": np.arange(n),
        "p.units": np.arange(1, n + 1),
        "p.precision": ["bf16", "fp8"] * (n // 2),
        "p.clock": np.linspace(1e9, 2e9, n),
        "obj.latency": LAT,
        "obj.tput": TPUT,
        "obj.area": AREA,
        "con.tdp": [-1.0, -2.0, -3.0, -4.0, -5.0, 50.0, -1.0, -1.0],
        "m.bound": ["compute", "memory"] * (n // 2),
        "m.power_w": np.linspace(100, 800, n),
        "feasible": [True, True, True, True, True, False, True, True],
    })
    if with_rank:
        # the study's rank over all three objectives (NaN row: ranked by nobody -> -1)
        t["pareto_rank"] = [0, 0, 1, 0, 0, -1, 1, -1]
    return t


def tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


# ------------------------------------------------------------ round trip


def test_round_trip(tmp_path):
    t, meta = hand_table(), hand_meta()
    cat = pd.DataFrame({"chip": ["h100-sxm", "mi355x"], "obj.latency": [1.5, np.nan], "obj.tput": [25.0, 60.0],
                        "obj.area": [814.0, 900.0], "m.bound": ["memory", "memory"]})
    written = write_results(tmp_path, t, meta, cat)
    assert set(written) == set(results.RESULT_FILES)
    assert tree(tmp_path) == sorted(results.RESULT_FILES)
    table, meta2, cat2 = read_results(tmp_path)
    pd.testing.assert_frame_equal(table, t, check_dtype=False)
    assert table["feasible"].dtype == bool
    assert table["p.precision"].tolist() == t["p.precision"].tolist()
    assert meta2 == meta
    pd.testing.assert_frame_equal(cat2, cat, check_dtype=False)
    # trials.csv holds the same rows; floats round-trip exactly
    csv = pd.read_csv(tmp_path / "trials.csv")
    np.testing.assert_array_equal(csv["p.clock"].to_numpy(), t["p.clock"].to_numpy())
    # pareto.csv: feasible rank-0 rows, sorted by the first objective (latency, ascending)
    front = pd.read_csv(tmp_path / "pareto.csv")
    assert front["trial"].tolist() == [0, 1, 3, 4]


def test_pareto_csv_sorted_best_first_for_maximized_first_objective(tmp_path):
    meta = hand_meta()
    meta["objectives"] = [meta["objectives"][1], meta["objectives"][0], meta["objectives"][2]]
    write_results(tmp_path, hand_table(), meta)
    assert pd.read_csv(tmp_path / "pareto.csv")["trial"].tolist() == [4, 1, 3, 0]  # tput 50, 30, 30, 10


def test_meta_with_numpy_values_is_written_as_plain_json(tmp_path):
    meta = hand_meta()
    meta["n_trials"] = np.int64(8)
    meta["elapsed_s"] = np.float64(0.25)
    meta["solver"] = {"population": np.int32(16), "weights": np.array([1.0, 2.0]), "dry": np.bool_(False)}
    write_results(tmp_path, hand_table(), meta)
    raw = json.loads((tmp_path / "meta.json").read_text())
    assert raw["n_trials"] == 8 and raw["elapsed_s"] == 0.25
    assert raw["solver"] == {"population": 16, "weights": [1.0, 2.0], "dry": False}


def test_no_catalog_writes_header_only_and_replaces_a_stale_one(tmp_path):
    cat = pd.DataFrame({"chip": ["h100-sxm"], "obj.latency": [1.0]})
    write_results(tmp_path, hand_table(), hand_meta(), cat)
    assert read_results(tmp_path)[2] is not None
    write_results(tmp_path, hand_table(), hand_meta())
    assert (tmp_path / "catalog.csv").read_text().strip() == "chip"
    assert read_results(tmp_path)[2] is None


def test_missing_feasible_and_rank_are_computed(tmp_path):
    t = hand_table(with_rank=False).drop(columns=["feasible"])
    p = prepare_table(t, hand_meta())
    assert p["feasible"].tolist() == [True] * 5 + [False] + [True] * 2
    assert p["pareto_rank"].tolist() == hand_table()["pareto_rank"].tolist()


def test_mixed_type_choice_column_is_stored_as_text(tmp_path):
    t = hand_table()
    t["p.mode"] = pd.Series([1, "auto", 2, "auto", 1, 2, "auto", 1], dtype=object)
    write_results(tmp_path, t, hand_meta())
    back = read_results(tmp_path)[0]
    assert back["p.mode"].tolist() == ["1", "auto", "2", "auto", "1", "2", "auto", "1"]


def test_reads_trials_csv_when_parquet_is_gone(tmp_path):
    write_results(tmp_path, hand_table(), hand_meta())
    (tmp_path / "trials.parquet").unlink()
    table, _, _ = read_results(tmp_path)
    assert table["trial"].tolist() == list(range(8))
    assert table["feasible"].dtype == bool


# ------------------------------------------------------------ not a results folder


def test_read_results_errors_say_what_is_wrong(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        read_results(tmp_path / "nowhere")
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(SpecError, match="not a folder"):
        read_results(f)
    with pytest.raises(SpecError, match=r"not a dse results folder: meta\.json is missing"):
        read_results(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(SpecError, match="cannot be read as JSON"):
        read_results(tmp_path)
    (tmp_path / "meta.json").write_text(json.dumps(hand_meta()))
    with pytest.raises(SpecError, match="neither trials.parquet nor trials.csv"):
        read_results(tmp_path)
    (tmp_path / "trials.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(SpecError, match="trials.parquet: cannot be read"):
        read_results(tmp_path)


def test_read_results_checks_meta_against_table(tmp_path):
    write_results(tmp_path, hand_table(), hand_meta())
    meta = hand_meta()
    meta["objectives"].append({"name": "cost", "direction": "minimize", "unit": "$"})
    meta["objectives"][0]["direction"] = "minimise"
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(SpecError) as e:
        read_results(tmp_path)
    text = str(e.value)
    assert "no column 'obj.cost'" in text
    assert "unknown direction 'minimise' (did you mean 'minimize'?)" in text


# ------------------------------------------------------------ atomic writes


def test_atomic_write_bytes_text_and_callable(tmp_path):
    assert atomic_write(tmp_path / "a.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    assert atomic_write(tmp_path / "b.txt", "héllo").read_text(encoding="utf-8") == "héllo"
    p = atomic_write(tmp_path / "sub" / "c.txt", lambda f: f.write(b"from callable"))
    assert p.read_bytes() == b"from callable"
    # same permissions as a file made by open() (mkstemp alone would give 0600)
    ref = tmp_path / "ref"
    ref.write_text("x")
    assert (p.stat().st_mode & 0o777) == (ref.stat().st_mode & 0o777)
    assert tree(tmp_path) == ["a.bin", "b.txt", "ref", "sub", "sub/c.txt"]


def test_crash_mid_write_keeps_the_previous_file_and_no_temp(tmp_path):
    target = tmp_path / "report.md"
    target.write_text("previous")

    def crash(f):
        f.write(b"half of the new cont")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        atomic_write(target, crash)
    assert target.read_text() == "previous"
    assert tree(tmp_path) == ["report.md"]


def test_interrupt_mid_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "x.csv"
    target.write_text("previous")

    def interrupted(f):
        f.write(b"partial")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, interrupted)
    assert target.read_text() == "previous"
    assert tree(tmp_path) == ["x.csv"]


def test_failed_rename_removes_the_temp(tmp_path, monkeypatch):
    target = tmp_path / "x.csv"
    target.write_text("previous")

    def no_replace(src, dst):
        raise OSError("read-only file system")

    monkeypatch.setattr(results.os, "replace", no_replace)
    with pytest.raises(OSError, match="read-only"):
        atomic_write(target, b"new")
    assert target.read_text() == "previous"
    assert tree(tmp_path) == ["x.csv"]


def test_write_results_crash_in_parquet_leaves_previous_results(tmp_path, monkeypatch):
    write_results(tmp_path, hand_table(), hand_meta())
    before = {p: (tmp_path / p).read_bytes() for p in results.RESULT_FILES}

    def broken_to_parquet(self, f, *args, **kwargs):
        f.write(b"PAR1 truncated")
        raise OSError("no space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", broken_to_parquet)
    t = hand_table()
    t["obj.latency"] = t["obj.latency"] * 2
    with pytest.raises(OSError, match="no space left"):
        write_results(tmp_path, t, hand_meta())
    assert {p: (tmp_path / p).read_bytes() for p in results.RESULT_FILES} == before
    assert tree(tmp_path) == sorted(results.RESULT_FILES)
    monkeypatch.undo()
    pd.testing.assert_frame_equal(read_results(tmp_path)[0], hand_table(), check_dtype=False)


# ------------------------------------------------------------ confinement


@pytest.mark.parametrize("name", [
    "../escape.txt", "plots/../../escape.txt", "/etc/passwd", "..", "a/..", "..\\escape.txt",
    "C:\\temp\\x.txt", "C:x.txt", "\\\\server\\share\\x", "", ".", "./",
])
def test_names_outside_the_output_folder_are_refused(tmp_path, name):
    with pytest.raises(SpecError, match="output"):
        atomic_write(name, b"x", root=tmp_path)
    assert tree(tmp_path) == []


def test_symlink_escape_is_refused(tmp_path):
    root, outside = tmp_path / "out", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    os.symlink(outside, root / "link")
    with pytest.raises(SpecError, match="outside the output folder"):
        atomic_write("link/x.txt", b"x", root=root)
    assert list(outside.iterdir()) == []


def test_names_inside_are_fine(tmp_path):
    assert confined_path(tmp_path, "plots/a.png") == (tmp_path / "plots" / "a.png").resolve()
    assert confined_path(tmp_path, "./report.md") == (tmp_path / "report.md").resolve()
    assert atomic_write("plots/a b.png", b"x", root=tmp_path).read_bytes() == b"x"


# ------------------------------------------------------------ the front


def test_pareto_table_default_is_the_study_front():
    f = pareto_table(hand_table(), hand_meta())
    assert f["trial"].tolist() == [0, 1, 3, 4]  # rank 0, feasible, by latency


def test_pareto_table_two_objectives_hand_computed():
    t, meta = hand_table(), hand_meta()
    f = pareto_table(t, meta, x="latency", y="tput")
    assert f["trial"].tolist() == [0, 1, 4]  # see the table at the top of this file
    # prefixes are optional; the same front either way
    assert pareto_table(t, meta, x="obj.latency", y="obj.tput")["trial"].tolist() == [0, 1, 4]
    # sorted best first by x: tput is maximized
    assert pareto_table(t, meta, x="tput", y="latency")["trial"].tolist() == [4, 1, 0]
    # area vs latency: 0 (1.0, 100), 3 (3.0, 50); 1 and 2 tie with 0 on area but are slower
    assert pareto_table(t, meta, x="latency", y="area")["trial"].tolist() == [0, 3]
    # only x given: y is the first other objective
    assert pareto_table(t, meta, x="area")["trial"].tolist() == [3, 0]


def test_pareto_table_ignores_a_stale_rank_when_axes_are_given():
    t = hand_table()
    t["pareto_rank"] = 7  # wrong on purpose: x/y recompute from the objective columns
    assert pareto_table(t, hand_meta(), x="latency", y="tput")["trial"].tolist() == [0, 1, 4]


def test_pareto_table_unknown_objective_suggests_the_closest():
    with pytest.raises(SpecError, match=r"unknown objective 'latncy' \(did you mean 'latency'\?\); known: area"):
        pareto_table(hand_table(), hand_meta(), x="latncy", y="tput")
    with pytest.raises(SpecError, match="did you mean 'tput'"):
        pareto_table(hand_table(), hand_meta(), y="obj.tpt")


def test_pareto_table_with_no_feasible_point_is_empty():
    t = hand_table()
    t["feasible"] = False
    t["pareto_rank"] = -1
    assert pareto_table(t, hand_meta()).empty
    assert pareto_table(t, hand_meta(), x="latency", y="area").empty


# ------------------------------------------------------------ tables for people


def test_format_value_units():
    assert format_value(2.5e-3, "s") == "2.5 ms"
    assert format_value(80e9, "bytes") == "80 GB"
    assert format_value(1.83e9, "Hz") == "1.83 GHz"
    assert format_value(814.0, "mm^2") == "814 mm^2"
    assert format_value(16000.0, "$") == "16,000 $"
    assert format_value(1234.0, "tokens/s") == "1234 tokens/s"
    assert format_value(8, "stacks") == "8 stacks"
    assert format_value(np.nan, "s") == "-"
    assert format_value("fp8", "") == "fp8"
    assert format_value(True) == "yes"


def test_format_table_text_markdown_html():
    t, meta = hand_table(), hand_meta()
    f = pareto_table(t, meta)
    text = format_table(f, meta)
    head = text.splitlines()[0].split()
    assert head == ["trial", "units", "precision", "clock", "latency", "tput", "[tokens/s]", "area", "[mm^2]", "bound"]
    assert "1 s" in text and "1.143 GHz" in text
    md = format_table(f, meta, fmt="markdown", max_rows=2)
    lines = md.splitlines()
    assert lines[0].startswith("| trial | units |") and lines[1].startswith("|---:|")
    assert len([ln for ln in lines if ln.startswith("| ")]) == 3 and "*... 2 more rows*" in md
    t.loc[0, "p.precision"] = "<b>bf16</b>"
    html = format_table(pareto_table(t, meta), meta, fmt="html")
    assert "&lt;b&gt;bf16&lt;/b&gt;" in html and "<b>bf16" not in html
    custom = format_table(f, meta, columns=["trial", "m.power_w", "con.tdp"])
    assert "100 W" in custom and "-1 W" in custom


def test_format_table_rejects_unknown_columns_and_formats():
    with pytest.raises(SpecError, match="unknown column 'obj.latncy' \\(did you mean 'obj.latency'\\?\\)"):
        format_table(hand_table(), hand_meta(), columns=["obj.latncy"])
    with pytest.raises(SpecError, match="unknown table format 'latex'"):
        format_table(hand_table(), hand_meta(), fmt="latex")


def test_objective_points_counts_ties_as_the_sort_does():
    """Three front designs: two whose times differ in the last bit (one unit in the last place, the model's sums
    on 100 and 120 units) at the same cost are one point, as dse.pareto compares them; a third is another."""
    t = 0.007484963358778627
    rows = pd.DataFrame({"trial": [1, 2, 3], "obj.tpot": [t, np.nextafter(t, 0.0), 0.005],
                         "obj.chip_cost": [1970.0, 1970.0, 2500.0], "p.units": [100, 120, 140]})
    assert results.objective_points(rows) == 2
    assert results.objective_points(rows.iloc[:0]) == 0
