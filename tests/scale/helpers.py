"""Shared by the scale tests: a small copy of the default study, storages, process helpers, exactness checks."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.scale.pgserver import fresh_database, server_url

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "studies" / "qwen3-8b-decode-chip.yaml"
NAME = "qwen3-8b-decode-chip"
DSE = [sys.executable, "-m", "dse.cli"]
KINDS = ("journal", "sqlite", "postgresql")


def small_study(tmp_path: Path, *, trials: int, batch: int = 50, name: str = "study.yaml",
                population: int | None = None) -> Path:
    """The default study with another budget and batch (NSGA-II's batch is its population: ``population``,
    by default dse's own for the budget), written next to the test's files."""
    data = yaml.safe_load(DEFAULT.read_text())
    data["solver"] = {"method": "nsga2", "trials": trials, "batch": batch, "seed": 0}
    if population is not None:
        data["solver"]["population"] = population
    data["output"] = str(tmp_path / "out")
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def storage_for(kind: str, tmp_path: Path) -> str | None:
    """None for the default journal in the output folder; a SQLite URL; a fresh PostgreSQL database (or skip)."""
    if kind == "journal":
        return None
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'shared.db'}"
    url, reason = server_url()
    if url is None:  # a warning too, so that a plain `pytest -q` shows why
        warnings.warn(f"PostgreSQL tests skipped: {reason}", stacklevel=2)
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    return fresh_database(url)


def storage_url(storage: str | None, out: Path) -> str:
    return storage or str(out / "study.journal")


def stored(storage: str | None, out: Path, name: str = NAME) -> list:
    """Every trial the storage holds for the study (any state)."""
    import optuna

    from dse.solvers.optuna_search import open_storage

    st = open_storage(storage_url(storage, out))
    return optuna.load_study(study_name=name, storage=st).get_trials(deepcopy=False)


def complete_count(storage: str | None, out: Path, name: str = NAME) -> int:
    from dse.study.distributed import SharedBudget

    try:
        return SharedBudget(storage_url(storage, out), name, 1).complete()
    except Exception:  # not created yet
        return 0


def assert_exact(trials, budget: int) -> None:
    """COMPLETE == budget, nothing else stored, trial numbers 0..budget-1 once each, no trial stored twice."""
    states = Counter(t.state.name for t in trials)
    assert states == {"COMPLETE": budget}, states
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(budget)), "trial numbers are not 0..budget-1 exactly once"
    keys = Counter((tuple(sorted(t.params.items())), t.datetime_start) for t in trials)
    dup = [k for k, c in keys.items() if c > 1]
    assert not dup, f"{len(dup)} trials stored twice, e.g. {dup[0]}"
    assert all(t.values is not None and len(t.values) == 3 for t in trials)


def dse_run(study: Path, *args, gate=None, **popen) -> subprocess.Popen:
    """`dse run STUDY ARGS --quiet` as a child in its own session (so a test can signal it alone); ``gate``: a
    tests.gate.Gate that pauses it (and its workers) at known points."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if gate is not None:
        env = gate.env(env)
    return subprocess.Popen([*DSE, "run", str(study), "--quiet", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env, cwd=ROOT, **popen)


#: The cap on waiting for a child: generous, for a hung child only. No test decides by speed (issue 21 item 7).
CAP_S = 900.0


def finish(proc: subprocess.Popen, timeout: float = CAP_S) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"dse run did not finish in {timeout} s:\n{err[-3000:]}") from None
    return proc.returncode, out, err


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid``."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            out.append(int(entry))
    return out


def workers_of(pid: int) -> list[int]:
    found = []
    for c in children(pid):
        try:
            if b"worker_cli" in Path("/proc", str(c), "cmdline").read_bytes():
                found.append(c)
        except OSError:
            pass
    return found


def alive(pid: int) -> bool:
    try:
        state = Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_for(cond, what: str, proc: subprocess.Popen | None = None, every: float = 0.05, timeout: float = CAP_S):
    """Poll ``cond`` until it holds; fail at once if ``proc`` ends first; ``timeout`` only stops a hung test."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        value = cond()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            _, err = proc.communicate()
            raise AssertionError(f"dse run ended (code {proc.returncode}) before {what}:\n{err[-3000:]}")
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
