"""Crashes: SIGKILL a worker, the coordinator or everything mid-study, rerun; two runs on one folder; torn writes.

After every crash and rerun the storage holds exactly the budget of COMPLETE
trials, numbered 0..budget-1 once each, none stored twice (tests.scale.helpers.assert_exact).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tests.scale.helpers import (KINDS, ROOT, alive, assert_exact, complete_count, dse_run, finish, small_study,
                                 storage_for, stored, wait_for, workers_of)

BUDGET = {"journal": 2000, "sqlite": 500, "postgresql": 500}  # long enough to be killed mid-study
BATCH = {"journal": 50, "sqlite": 20, "postgresql": 20}


def _args(storage):
    return ["--workers", "4"] + (["--storage", storage] if storage else [])


def _mid_study(proc, storage, out, budget):
    """Wait until some batches are stored and the study is still far from done."""
    wait_for(lambda: complete_count(storage, out) >= 60, 240, "the first stored batches", proc)
    n = complete_count(storage, out)
    assert n < budget, "the study finished before it could be killed; raise BUDGET"
    return n


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_one_worker_then_rerun(tmp_path, kind):
    budget = BUDGET[kind]
    study = small_study(tmp_path, trials=budget, batch=BATCH[kind])
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    proc = dse_run(study, *_args(storage))
    _mid_study(proc, storage, out, budget)
    victims = wait_for(lambda: workers_of(proc.pid), 60, "the worker processes", proc)
    os.kill(victims[0], signal.SIGKILL)
    code, text, err = finish(proc)
    # the other workers finish the killed worker's part; the run says what happened
    assert code == 0, err[-3000:]
    assert "was killed by SIGKILL" in err
    assert f"{budget} designs evaluated" in text
    code, text, err = finish(dse_run(study, *_args(storage)))
    assert code == 0, err[-3000:]
    assert_exact(stored(storage, out), budget)
    assert len(pd.read_parquet(out / "trials.parquet")) == budget


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_everything_then_rerun(tmp_path, kind):
    """The coordinator and all its workers die at once (a machine's power cut); the rerun resumes."""
    budget = BUDGET[kind]
    study = small_study(tmp_path, trials=budget, batch=BATCH[kind])
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    proc = dse_run(study, *_args(storage))
    _mid_study(proc, storage, out, budget)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = complete_count(storage, out)
    assert 0 < before < budget
    code, text, err = finish(dse_run(study, *_args(storage)))
    assert code == 0, err[-3000:]
    assert_exact(stored(storage, out), budget)


def test_orphaned_workers_stop_when_the_coordinator_dies(tmp_path):
    """SIGKILL the coordinator alone: its workers stop at their next append, without writing it."""
    budget = 2000
    study = small_study(tmp_path, trials=budget, batch=50)
    out = tmp_path / "out"
    proc = dse_run(study, "--workers", "3")
    _mid_study(proc, None, out, budget)
    workers = wait_for(lambda: workers_of(proc.pid), 60, "the worker processes", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_for(lambda: not any(alive(w) for w in workers), 120, "the orphaned workers to stop")
    assert complete_count(None, out) < budget
    code, _, err = finish(dse_run(study, "--workers", "3"))
    assert code == 0, err[-3000:]
    assert_exact(stored(None, out), budget)


def test_second_run_on_the_same_folder_is_refused(tmp_path):
    """Two real `dse run` processes on one output folder without a shared storage: the second refuses."""
    study = small_study(tmp_path, trials=200_000, batch=100)
    out = tmp_path / "out"
    first = dse_run(study)
    wait_for(lambda: complete_count(None, out) >= 100, 240, "the first run's first batch", first)
    code, text, err = finish(dse_run(study), timeout=120)
    assert code == 2
    assert "another `dse run` is using this output folder" in err
    assert "--storage" in err  # says how to share instead
    assert "Traceback" not in err
    assert first.poll() is None  # the first run is untouched
    first.send_signal(signal.SIGINT)
    code, _, err = finish(first, timeout=120)
    assert code == 130, err[-2000:]
    n = complete_count(None, out)
    assert 0 < n < 200_000
    assert_exact(stored(None, out), n)  # the interrupted journal is whole


# ------------------------------------------------------------ atomic result files


def _table_and_meta(tmp_path):
    from dse.study import run_study

    study = small_study(tmp_path, trials=60, batch=30)
    out = tmp_path / "out"
    table = run_study(study, out=out)
    return out, table


def test_killed_mid_write_leaves_the_old_csv(tmp_path):
    """A process SIGKILLed half-way through writing trials.csv leaves the previous file, byte for byte."""
    out, _ = _table_and_meta(tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    script = textwrap.dedent(f"""
        import os, signal
        from dse.study.results import atomic_write
        def half(f):
            f.write(b"trial,p.units\\n0,1")
            f.flush()
            os.fsync(f.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        atomic_write("trials.csv", half, root={str(out)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    after = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.endswith(".tmp")}
    assert after["trials.csv"] == before["trials.csv"]
    assert len(pd.read_csv(out / "trials.csv")) == 60


@pytest.mark.parametrize("fail_at", ["csv", "fsync", "replace"])
def test_failed_write_leaves_old_results_and_no_temp_file(tmp_path, monkeypatch, fail_at):
    """An error mid-write (disk full, a kill turned exception) keeps every old file and leaves no temp file."""
    from dse.study import results

    out, table = _table_and_meta(tmp_path)
    meta = results.read_results(out)[1]
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    real_fsync, real_replace = os.fsync, os.replace

    def flaky_fsync(fd):
        if ".trials.csv." in os.readlink(f"/proc/self/fd/{fd}"):  # trials.csv: written, not yet renamed
            raise OSError(28, "No space left on device")
        return real_fsync(fd)

    def flaky_replace(a, b):
        if str(b).endswith("pareto.csv"):
            raise OSError(5, "Input/output error")
        return real_replace(a, b)

    if fail_at == "csv":
        real = results._csv_bytes

        def half_then_fail(df):
            data = real(df)
            raise OSError(28, f"No space left on device after {len(data) // 2} bytes")

        monkeypatch.setattr(results, "_csv_bytes", half_then_fail)
    elif fail_at == "fsync":
        monkeypatch.setattr(results.os, "fsync", flaky_fsync)
    else:
        monkeypatch.setattr(results.os, "replace", flaky_replace)
    changed = table.assign(**{"obj.die_area": table["obj.die_area"] * 2})
    with pytest.raises(OSError):
        results.write_results(out, changed, meta)
    monkeypatch.undo()
    results.write_results(tmp_path / "new", changed, meta)
    new = {p.name: p.read_bytes() for p in (tmp_path / "new").iterdir() if p.is_file()}
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    assert not [n for n in files if n.endswith(".tmp")], "a temp file was left behind"
    for name in results.RESULT_FILES:  # each file whole: the old one or the new one
        assert files[name] in (before[name], new[name]), name
    failed = {"csv": "trials.csv", "fsync": "trials.csv", "replace": "pareto.csv"}[fail_at]
    assert files[failed] == before[failed] != new[failed]
    assert files["meta.json"] == before["meta.json"]  # written last: never new over a failed write
    assert len(pd.read_csv(out / "trials.csv")) == 60


def test_failed_report_write_leaves_the_old_report(tmp_path, monkeypatch):
    from dse import report
    from dse.study.results import read_results

    out, _ = _table_and_meta(tmp_path)
    old_md, old_html = (out / "report.md").read_bytes(), (out / "report.html").read_bytes()

    def boom(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report, "_html", boom)
    table, meta, cat = read_results(out)
    with pytest.raises(OSError):
        report.write_reports(out, table, meta, cat)
    assert (out / "report.html").read_bytes() == old_html
    assert (out / "report.md").exists() and (out / "report.md").read_bytes()[:20] == old_md[:20]
    assert not list(out.glob(".*.tmp"))


# Files dse writes that are not results or reports: locks and the Optuna journal (appended under its own lock).
NOT_RESULTS = {
    "dse/study/run.py": ['open(self.path, "w")'],  # OutputLock's .lock file
    "dse/solvers/optuna_compat.py": ['open(self.path, "a")', 'open(path, "r+b")', 'open(self.path, "ab")'],
    # ^ the journal's lock, tail repair and appends
    "dse/study/distributed.py": ['open(f"{self.path}.budget.lock", "a")',  # the shared-budget lock
                           'os.fdopen(payload["result_fd"], "w")'],  # a worker's answer, on a pipe
    "dse/fileio.py": ['os.fdopen(fd, "wb")'],  # atomic_write's own temp file
}
WRITES = __import__("re").compile(
    r"""open\([^)]*["'][^"']*[wax+][^"']*["']|\.write_text\(|\.write_bytes\(|\.to_csv\(\s*[^)\s]|"""
    r"""\.to_parquet\(\s*(?!f\b)[^)\s]|\.savefig\(\s*(?!buf\b)[^)\s]|\.write_html\(|\.write_image\(|json\.dump\(""")


def test_every_results_and_report_file_goes_through_atomic_write():
    """grep: no module of dse writes a file directly, except the lock and journal files listed above."""
    found = []
    for path in sorted((ROOT / "dse").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if WRITES.search(code) and not any(ok in code for ok in NOT_RESULTS.get(rel, [])):
                if ".to_csv(index=False)" in code:  # to a string, then atomic_write
                    continue
                found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "files written without dse.fileio.atomic_write:\n" + "\n".join(found)
