"""Crashes: SIGKILL a worker, the coordinator or everything mid-study, rerun; two runs on one folder; torn writes.

After every crash and rerun the storage holds exactly the budget of COMPLETE
trials, numbered 0..budget-1 once each, none stored twice (tests.scale.helpers.assert_exact).

No test here depends on the machine's speed (issue 21 item 7): a run is paused at a known batch by a
tests.gate.Gate and signalled there (or released and killed before its next stop), so "mid-study" holds on
an idle or a loaded machine; waits are on files and processes, with a generous cap for a hang only. One test
runs its crash and resume beside a CPU hog.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tests.gate import Gate
from tests.scale.helpers import (KINDS, ROOT, alive, assert_exact, complete_count, dse_run, finish, small_study,
                                 storage_for, stored, wait_for, workers_of)

# The gate, not the budget, makes a crash land mid-study: the budget only has to stay far from done at every stop,
# and small batches keep it small. 250 trials instead of 500-2,000 (each run here starts up to five interpreters,
# evaluates, appends and writes its reports, twice or more a test) took this file from ~290 to ~205 s of a test
# worker in CI's clean clone (CI's 10 minutes).
BUDGET = 250
BATCH = 10  # NSGA-II's batch is its population: both set
WORKERS = 4
STOP = 3  # each process pauses at its 3rd batch, once its first 2 are stored: at most 4 x 2 batches stored
assert WORKERS * (STOP + 2) * BATCH < BUDGET  # far from done at any stop below


def _args(storage):
    return ["--workers", str(WORKERS)] + (["--storage", storage] if storage else [])


def _mid_study(gate, proc, storage, out, budget):
    """Wait until a process is paused at the gate's first stop: batches stored, the study far from done."""
    pids = gate.wait(proc, 0)
    n = complete_count(storage, out)
    assert 0 < n < budget
    return pids


@pytest.mark.parametrize("kind", KINDS)
def test_sigkill_one_worker_then_rerun(tmp_path, kind):
    budget = BUDGET
    study = small_study(tmp_path, trials=budget, batch=BATCH, population=BATCH)
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate", [STOP])
    proc = dse_run(study, *_args(storage), gate=gate)
    victim = _mid_study(gate, proc, storage, out, budget)[0]
    assert victim in workers_of(proc.pid)
    os.kill(victim, signal.SIGKILL)
    gate.release()
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
    """The coordinator and all its workers die at once (a machine's power cut); the rerun resumes.

    The kill lands anywhere (an evaluation, a tell, an append) between two stops of the gate."""
    budget = BUDGET
    study = small_study(tmp_path, trials=budget, batch=BATCH, population=BATCH)
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate", [STOP, STOP + 2])
    proc = dse_run(study, *_args(storage), gate=gate)
    _mid_study(gate, proc, storage, out, budget)
    gate.release(0)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = complete_count(storage, out)
    assert (STOP - 1) * BATCH <= before <= WORKERS * (STOP + 1) * BATCH < budget
    code, text, err = finish(dse_run(study, *_args(storage)))
    assert code == 0, err[-3000:]
    assert_exact(stored(storage, out), budget)


def test_orphaned_workers_stop_when_the_coordinator_dies(tmp_path):
    """SIGKILL the coordinator alone: its workers stop at their next append, without writing it."""
    budget = BUDGET
    study = small_study(tmp_path, trials=budget, batch=BATCH, population=BATCH)
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate", [STOP])
    proc = dse_run(study, "--workers", "3", gate=gate)
    _mid_study(gate, proc, None, out, budget)
    workers = wait_for(lambda: workers_of(proc.pid), "the worker processes", proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    gate.release()
    wait_for(lambda: not any(alive(w) for w in workers), "the orphaned workers to stop")
    assert complete_count(None, out) <= 3 * (STOP - 1) * BATCH  # what each had stored when it was orphaned
    code, _, err = finish(dse_run(study, "--workers", "3"))
    assert code == 0, err[-3000:]
    assert_exact(stored(None, out), budget)


def test_second_run_on_the_same_folder_is_refused(tmp_path):
    """Two real `dse run` processes on one output folder without a shared storage: the second refuses."""
    study = small_study(tmp_path, trials=200_000, batch=100, population=100)
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate", [STOP])
    first = dse_run(study, gate=gate)
    gate.wait(first)  # paused holding the folder, its first batches stored
    assert complete_count(None, out) == (STOP - 1) * 100
    code, text, err = finish(dse_run(study))
    assert code == 2
    assert "another `dse run` is using this output folder" in err
    assert "--storage" in err  # says how to share instead
    assert "Traceback" not in err
    assert first.poll() is None  # the first run is untouched
    first.send_signal(signal.SIGINT)  # while it waits at the gate: Ctrl-C mid-study
    code, _, err = finish(first)
    assert code == 130, err[-2000:]
    assert complete_count(None, out) == (STOP - 1) * 100  # the batches before the stop, the one in flight not
    assert_exact(stored(None, out), (STOP - 1) * 100)  # the interrupted journal is whole


HOG = "while True: pass"


@pytest.mark.load
def test_sigkill_and_resume_beside_a_cpu_hog(tmp_path):
    """issue 21 item 7: a crash and its resume pass with a busy loop hogging a CPU beside them (cheap: 300
    trials). SIGKILL lands anywhere between two stops of the gate; the rerun completes the budget exactly and
    keeps every trial stored before the kill."""
    budget, batch = 300, 30
    study = small_study(tmp_path, trials=budget, batch=batch, population=batch)
    out = tmp_path / "out"
    hog = subprocess.Popen([sys.executable, "-c", HOG])
    try:
        gate = Gate(tmp_path / "gate", [3, 5])
        proc = dse_run(study, gate=gate)
        gate.wait(proc, 0)
        assert complete_count(None, out) == 2 * batch
        gate.release(0)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = {t.number: (t.datetime_start, t.params) for t in stored(None, out) if t.state.name == "COMPLETE"}
        assert 2 * batch <= len(before) <= 4 * batch  # at most up to the next stop
        assert hog.poll() is None  # the hog ran all along
        code, text, err = finish(dse_run(study))
        assert code == 0, err[-3000:]
        assert f"{budget} designs evaluated" in text
        trials = stored(None, out)
        assert_exact(trials, budget)
        assert all((t.datetime_start, t.params) == before[t.number] for t in trials if t.number in before)
        assert len(pd.read_parquet(out / "trials.parquet")) == budget
    finally:
        hog.kill()
        hog.wait()


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
