"""A results folder is one complete set or it is refused (issue 21 item 5).

Before: a SIGKILL while the results were written left trials.parquet with 60,200 rows beside trials.csv,
meta.json and pareto.csv with 60,000, which `dse report` and `dse pareto` read without a word, plus temp
files; a journal appended twice was taken as 5,399 trials of a 5,000 budget. Now manifest.json (size,
SHA-256 and rows of every result file) is written last and checked by every reader, a rerun removes the
temp files of a killed write, and copies of stored trials are reported.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dse.cli import main
from dse.errors import SpecError
from dse.fileio import remove_stale_temps
from dse.study import results, run_study
from dse.study.results import MANIFEST_JSON, RESULT_FILES, read_results, write_results
from tests.test_results import hand_meta, hand_table

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"


def _two_sets(tmp_path):
    """The same study written twice with different tables (8 rows, then 6 others and a catalog): a and b."""
    a, b = tmp_path / "a", tmp_path / "b"
    write_results(a, hand_table(), hand_meta())
    other = hand_table().iloc[1:7].drop(columns=["pareto_rank"])  # another front
    write_results(b, other, dict(hand_meta(), n_trials=6), pd.DataFrame({"chip": ["h100-sxm"]}))
    for name in RESULT_FILES:
        assert (a / name).read_bytes() != (b / name).read_bytes(), name
    return a, b


def test_a_complete_set_reads_back(tmp_path):
    a, _ = _two_sets(tmp_path)
    manifest = json.loads((a / MANIFEST_JSON).read_text())
    assert set(manifest["files"]) == set(RESULT_FILES) - {MANIFEST_JSON}
    assert manifest["files"]["trials.parquet"]["rows"] == manifest["files"]["trials.csv"]["rows"] == 8
    assert len(read_results(a)[0]) == 8


@pytest.mark.parametrize("name", ["trials.parquet", "trials.csv", "pareto.csv", "meta.json", "catalog.csv"])
def test_a_file_from_another_write_is_refused(tmp_path, name):
    a, b = _two_sets(tmp_path)
    shutil.copy(b / name, a / name)
    if name == "trials.csv":
        (a / "trials.parquet").unlink()  # the csv is what is read
    with pytest.raises(SpecError) as e:
        read_results(a)
    msg = str(e.value)
    assert "not one complete set" in msg and name in msg and "run the study again" in msg, msg
    if name.startswith("trials."):
        assert "6 rows, the manifest 8" in msg, msg


def test_a_folder_without_its_manifest_is_refused(tmp_path):
    a, _ = _two_sets(tmp_path)
    (a / MANIFEST_JSON).unlink()
    with pytest.raises(SpecError, match="manifest.json is missing"):
        read_results(a)
    (a / MANIFEST_JSON).write_text("{not json")
    with pytest.raises(SpecError, match="cannot be read as a dse results manifest"):
        read_results(a)


def test_a_file_removed_on_purpose_is_not_an_error(tmp_path):
    a, _ = _two_sets(tmp_path)
    (a / "trials.parquet").unlink()  # a big file deleted to save space: the csv stays and matches
    assert len(read_results(a)[0]) == 8


def test_a_write_stopped_half_way_is_refused(tmp_path, monkeypatch):
    """The old set, then a write that fails after trials.parquet, trials.csv and pareto.csv are new."""
    a = tmp_path / "a"
    write_results(a, hand_table(), hand_meta())
    real = results.atomic_write

    def fail_at_catalog(name, data, **kw):
        if name == results.CATALOG_CSV:
            raise KeyboardInterrupt  # what SIGINT (or, below, SIGKILL) does half-way
        return real(name, data, **kw)

    monkeypatch.setattr(results, "atomic_write", fail_at_catalog)
    with pytest.raises(KeyboardInterrupt):
        write_results(a, hand_table().head(6), hand_meta())
    monkeypatch.undo()
    with pytest.raises(SpecError, match=r"trials.parquet \(6 rows, the manifest 8\)"):
        read_results(a)


def _readers_refuse(folder: Path, capsys) -> None:
    for argv in (["report", str(folder)], ["pareto", str(folder)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "not" in err and "complete" in err and "Traceback" not in err, err


def test_sigkill_while_writing_results_then_rerun(tmp_path, capsys):
    """A `dse run` killed (SIGKILL, no clean-up at all) after writing trials.parquet: the readers refuse the
    folder, the temp file it left is there; the next run removes it and writes a complete set again."""
    study = tmp_path / "s.yaml"
    shutil.copy(STUDIES / "qwen3-8b-decode-chip.yaml", study)
    out = tmp_path / "out"
    assert main(["run", str(study), "--trials", "20", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    script = textwrap.dedent(f"""
        import os, signal
        from dse.study import results, run_study
        real = results.atomic_write
        def killing(name, data, **kw):
            if name == results.TRIALS_CSV:  # trials.parquet is new; die inside the csv's write
                def half(f):
                    f.write(b"trial,p.units\\n0,1")
                    f.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
                return real(name, half, **kw)
            return real(name, data, **kw)
        results.atomic_write = killing
        run_study({str(study)!r}, trials=30, out={str(out)!r})
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    temps = sorted(p.name for p in out.glob(".*.tmp"))
    assert temps and temps[0].startswith(".trials.csv."), temps
    _readers_refuse(out, capsys)
    assert main(["run", str(study), "--trials", "30", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    assert not list(out.glob(".*.tmp")) and not list((out / "plots").glob(".*.tmp"))
    table, meta, _ = read_results(out)
    assert len(table) == meta["n_trials"] == 30
    assert main(["pareto", str(out)]) == 0


def test_only_temp_files_of_atomic_write_are_removed(tmp_path):
    (tmp_path / "plots").mkdir()
    stale = [tmp_path / ".trials.parquet.k2j_8x0a.tmp", tmp_path / "plots" / ".front.png.abcdefgh.tmp"]
    kept = [tmp_path / "notes.tmp", tmp_path / ".hidden", tmp_path / ".x.short.tmp", tmp_path / "trials.csv"]
    for p in stale + kept:
        p.write_text("x")
    target = tmp_path / "precious.txt"
    target.write_text("keep")
    (tmp_path / ".link.abcdefgh.tmp").symlink_to(target)
    assert sorted(remove_stale_temps(tmp_path)) == sorted(stale)
    assert all(p.exists() for p in kept) and target.read_text() == "keep"
    assert (tmp_path / ".link.abcdefgh.tmp").is_symlink()


def test_a_journal_appended_twice_is_reported(tmp_path, capsys):
    """The journal's second half appended again (a copy gone wrong): the rerun says how many are copies."""
    study = tmp_path / "s.yaml"
    shutil.copy(STUDIES / "qwen3-8b-decode-chip.yaml", study)
    out = tmp_path / "out"
    assert main(["run", str(study), "--trials", "20", "--out", str(out), "--quiet"]) == 0
    journal = out / "study.journal"
    lines = journal.read_bytes().splitlines(keepends=True)
    tail = [line for line in lines[len(lines) // 2:] if b'"op_code":4' in line]  # whole trials (create_trial)
    assert tail
    with open(journal, "ab") as f:
        f.writelines(tail)
    capsys.readouterr()
    assert main(["run", str(study), "--trials", "20", "--out", str(out), "--quiet"]) == 0
    err = capsys.readouterr().err
    n = 20 + len(tail)
    assert f"the storage holds {n} trials, more than the budget of 20 ({len(tail)} of them are copies" in err, err
    assert read_results(out)[1]["stored_copies"] == len(tail)


def test_run_study_writes_a_manifest(tmp_path):
    run_study(STUDIES / "qwen3-8b-decode-chip.yaml", trials=10, out=tmp_path / "o")
    assert (tmp_path / "o" / MANIFEST_JSON).is_file()
    read_results(tmp_path / "o")
