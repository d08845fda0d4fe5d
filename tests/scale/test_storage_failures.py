"""Storage outages and contention (issue 21 item 4): retried with bounded backoff, then one clear StorageError.

A 30 s PostgreSQL outage killed every worker with a traceback, SQLite with 4 workers intermittently exited 2
("cannot open study ... exception during the commit") as if the study file were wrong, and the password of a
PostgreSQL URL was in every worker's command line and in connection errors. Now every storage operation goes
through dse.storage.retry: transient failures are retried (counted here in attempts: ``dse.storage.sleep`` is
replaced, nothing waits), a storage that keeps failing is a StorageError (exit code 3, its own kind), and a
password is masked in every message and kept off the command line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import subprocess
import types

import optuna
import pytest
from sqlalchemy import exc as sa_exc

import dse.storage as storage_mod
from dse.cli import main
from dse.errors import EXIT_STORAGE, SpecError, StorageError
from dse.solvers import optuna_compat as compat
from dse.solvers.optuna_search import OptunaSolver
from dse.spec.study import load_study
from dse.storage import ATTEMPTS, classify, mask, retry
from dse.study import distributed, run_study
from dse.study.problem import make_problem
from tests.scale.helpers import DEFAULT, assert_exact, small_study, stored


@pytest.fixture
def waits(monkeypatch):
    """The waits between attempts, recorded instead of slept."""
    calls: list[float] = []
    monkeypatch.setattr(storage_mod, "sleep", calls.append)
    return calls


def _outage(message: str = "server closed the connection unexpectedly") -> Exception:
    """What Optuna's RDBStorage raises when the database goes away during a commit."""
    try:
        try:
            raise sa_exc.OperationalError("INSERT ...", {}, sqlite3.OperationalError(message))
        except sa_exc.OperationalError as e:
            raise optuna.exceptions.StorageInternalError(
                "An exception is raised during the commit. This typically happens due to invalid data in the "
                "commit, e.g. exceeding max length.") from e
    except optuna.exceptions.StorageInternalError as e:
        return e


class Flaky:
    """A callable that raises ``error()`` on its first ``fails`` calls, then does what ``real`` does."""

    def __init__(self, real, fails: int, error=_outage):
        self.real, self.fails, self.error, self.calls = real, fails, error, 0

    def __call__(self, *args, **kw):
        self.calls += 1
        if self.calls <= self.fails:
            raise self.error()
        return self.real(*args, **kw)


# ------------------------------------------------------------ the policy


def test_a_transient_failure_is_retried_until_it_works(waits):
    op = Flaky(lambda: "stored", fails=3)
    assert retry("appending trials", op, url="sqlite:///x.db", quiet=True) == "stored"
    assert op.calls == 4 and len(waits) == 3
    assert all(0 < w <= storage_mod.MAX_DELAY_S for w in waits)  # backoff, bounded


def test_a_storage_that_keeps_failing_is_one_storage_error(waits):
    op = Flaky(lambda: None, fails=10**9)
    url = "postgresql+psycopg2://dse:hunter22@db.example/dse"
    with pytest.raises(StorageError) as e:
        retry("counting the stored trials", op, url=url, quiet=True)
    assert op.calls == ATTEMPTS and len(waits) == ATTEMPTS - 1  # bounded: this many attempts, no more
    msg = str(e.value)
    assert "hunter22" not in msg and "postgresql+psycopg2://dse:***@db.example/dse" in msg, msg
    assert f"after {ATTEMPTS} attempts" in msg and "counting the stored trials" in msg, msg
    assert "server closed the connection unexpectedly" in msg and "run the same command again" in msg, msg
    assert e.value.__cause__ is None and e.value.__suppress_context__  # no chained traceback to print


def test_only_storage_failures_are_retried(waits):
    bug = Flaky(lambda: None, fails=1, error=lambda: ZeroDivisionError("a bug"))
    with pytest.raises(ZeroDivisionError):  # a bug stays a bug, not retried
        retry("x", bug, url="sqlite:///x.db", quiet=True)
    spec = Flaky(lambda: None, fails=1, error=lambda: SpecError("a user mistake"))
    with pytest.raises(SpecError):
        retry("x", spec, url="sqlite:///x.db", quiet=True)
    full = Flaky(lambda: None, fails=1, error=lambda: OSError(28, "No space left on device"))
    with pytest.raises(StorageError, match="No space left on device"):  # not transient: not retried
        retry("appending trials", full, url="results/x/study.journal", quiet=True)
    assert bug.calls == spec.calls == full.calls == 1 and waits == []


def test_what_counts_as_transient():
    assert classify(_outage()) == "transient"  # Optuna's "exceeding max length" over a lost connection
    assert classify(sa_exc.OperationalError("s", {}, sqlite3.OperationalError("database is locked"))) == "transient"
    assert classify(sqlite3.OperationalError("database is locked")) == "transient"
    assert classify(sa_exc.IntegrityError("s", {}, Exception("duplicate key"))) == "storage"
    assert classify(sa_exc.OperationalError("s", {}, sqlite3.OperationalError("unable to open database file"))) \
        == "storage"
    assert classify(ValueError("x")) is None and classify(SpecError("x")) is None
    assert classify(KeyboardInterrupt()) is None


def test_nested_operations_do_not_multiply_the_attempts(waits):
    inner = Flaky(lambda: 1, fails=10**9)
    with pytest.raises(StorageError):
        retry("outer", lambda: retry("inner", inner, url="sqlite:///x.db", quiet=True), url="sqlite:///x.db",
              quiet=True)
    assert inner.calls == ATTEMPTS


@pytest.mark.parametrize("text, shown", [
    ("postgresql+psycopg2://dse:s3cret@db-host:5432/dse", "postgresql+psycopg2://dse:***@db-host:5432/dse"),
    ("postgresql://u:p%40ss@h/db", "postgresql://u:***@h/db"),
    ("postgresql://dse@h/db", "postgresql://dse@h/db"),  # no password: nothing to hide
    ("postgresql://h:5432/db failed for dse@localhost", "postgresql://h:5432/db failed for dse@localhost"),
    ("host=h password=s3cret dbname=x", "host=h password=*** dbname=x"),
    ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
])
def test_passwords_are_masked(text, shown):
    assert mask(text) == shown


def test_a_password_seen_once_is_masked_everywhere():
    mask("postgresql://dse:Tr0ub4dor@h/db")
    assert mask("FATAL: password authentication failed (Tr0ub4dor)") == "FATAL: password authentication failed (***)"


# ------------------------------------------------------------ in a study


def _problem(tmp_path):
    return make_problem(load_study(small_study(tmp_path, trials=60, batch=20)))


def test_appends_that_fail_then_work_store_the_budget_exactly(tmp_path, waits, monkeypatch):
    """The database drops three appends (a restart): each batch is appended again, no trial twice."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    flaky = Flaky(compat.add_trials, fails=3)  # (a batch's append: one transaction, optuna_compat.add_trials)
    monkeypatch.setattr(compat, "add_trials", flaky)
    res = OptunaSolver(_problem(tmp_path), seed=0, budget=60, batch=20, storage=url,
                       study_name="qwen3-8b-decode-chip").run()
    assert res.n_evaluated == 60 and len(waits) == 3
    assert_exact(stored(url, tmp_path), 60)


def test_reading_the_storage_is_retried(tmp_path, waits, monkeypatch):
    url = f"sqlite:///{tmp_path / 's.db'}"
    OptunaSolver(_problem(tmp_path), seed=0, budget=40, batch=20, storage=url, study_name="s").run()
    flaky = Flaky(optuna.storages.RDBStorage._get_trials, fails=2)
    monkeypatch.setattr(optuna.storages.RDBStorage, "_get_trials", lambda self, *a, **k: flaky(self, *a, **k))
    res = OptunaSolver(_problem(tmp_path), seed=0, budget=60, batch=20, storage=url, study_name="s").run()
    assert res.n_evaluated == 60 and flaky.calls >= 3 and len(waits) == 2


def test_an_append_that_keeps_failing_is_a_storage_error_and_the_rest_is_kept(tmp_path, waits, monkeypatch):
    url = f"sqlite:///{tmp_path / 's.db'}"
    OptunaSolver(_problem(tmp_path), seed=0, budget=40, batch=20, storage=url, study_name="s").run()
    flaky = Flaky(compat.add_trials, fails=10**9)
    monkeypatch.setattr(compat, "add_trials", flaky)
    with pytest.raises(StorageError, match="appending trials failed after"):
        OptunaSolver(_problem(tmp_path), seed=0, budget=80, batch=20, storage=url, study_name="s").run()
    assert flaky.calls == ATTEMPTS  # the final append of run() is not another round of attempts
    assert len(stored(url, tmp_path, "s")) == 40


def test_the_coordinator_retries_its_own_storage_operations(tmp_path, waits, monkeypatch):
    """Counting the stored trials fails twice in the coordinator; the workers (processes) fill the budget."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    flaky = Flaky(compat.count_complete, fails=2)
    monkeypatch.setattr(compat, "count_complete", flaky)
    table = run_study(small_study(tmp_path, trials=60, batch=30), workers=2, storage=url, out=tmp_path / "out",
                      write=False)
    assert len(table) == 60 and len(waits) == 2
    assert_exact(stored(url, tmp_path / "out"), 60)


def test_an_unreachable_database_exits_with_the_storage_code(tmp_path, waits, capsys):
    """Nothing listens on port 1: every attempt is refused; one message, masked, with the resume command."""
    pytest.importorskip("psycopg2")
    study = small_study(tmp_path, trials=40, batch=20)
    url = "postgresql+psycopg2://dse:s3cr3t-pw@127.0.0.1:1/dse"
    code = main(["run", str(study), "--storage", url, "--workers", "2", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == EXIT_STORAGE == 3, err
    assert "s3cr3t-pw" not in err and "Traceback" not in err, err
    assert "dse: storage error: storage postgresql+psycopg2://dse:***@127.0.0.1:1/dse" in err, err
    assert f"after {ATTEMPTS} attempts" in err and len(waits) == ATTEMPTS - 1, err
    assert (f"to resume: dse run {study} --workers 2 --storage postgresql+psycopg2://dse:***@127.0.0.1:1/dse "
            f"--out {tmp_path / 'out'} --quiet") in err, err


def test_a_malformed_storage_url_stays_a_spec_error(tmp_path, waits, capsys):
    study = small_study(tmp_path, trials=40, batch=20)
    code = main(["run", str(study), "--storage", "postgresql+nosuchdriver://u:pw123@h/db", "--out",
                 str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "pw123" not in err and "Traceback" not in err and waits == [], err


# ------------------------------------------------------------ credentials off the command line


def test_the_worker_command_line_holds_no_storage_url(monkeypatch):
    seen = {}

    class FakePopen:
        def __init__(self, cmd, **kw):
            seen["cmd"], seen["env"] = cmd, kw["env"]

    monkeypatch.setattr(distributed.subprocess, "Popen", FakePopen)
    url = "postgresql+psycopg2://dse:pa55word@db/dse"
    payload = {"study": "s.yaml", "settings": {"storage": url}, "output": "out", "storage": url, "parent": 1}
    _, fd = distributed._start_worker(payload)
    os.close(fd)
    assert not any("pa55word" in a or "db/dse" in a for a in seen["cmd"]), seen["cmd"]
    assert seen["cmd"][1:3] == ["-P", "-c"]
    assert json.loads(seen["env"][distributed.PAYLOAD_ENV])["storage"] == url  # the environment: this user only


def test_real_workers_get_their_job_from_the_environment(tmp_path, monkeypatch):
    """A run with two worker processes: their argv (what `ps` shows every user) never names the storage."""
    cmds = []
    real = subprocess.Popen

    def recording(cmd, **kw):
        cmds.append(list(cmd))
        return real(cmd, **kw)

    monkeypatch.setattr(distributed.subprocess, "Popen", recording)
    url = f"sqlite:///{tmp_path / 'secret-name.db'}"
    table = run_study(small_study(tmp_path, trials=40, batch=20), workers=2, storage=url, out=tmp_path / "out",
                      write=False)
    assert len(table) == 40 and len(cmds) == 2
    assert not any("secret-name" in a for cmd in cmds for a in cmd), cmds


def test_meta_json_holds_no_password():
    from dse.study.run import meta_of

    spec = load_study(DEFAULT)
    spec = dataclasses.replace(spec, solver=dataclasses.replace(spec.solver, storage="postgresql://u:pw9876@h/db"))
    result = types.SimpleNamespace(n_evaluated=0, n_feasible=0, status="ok", message="")
    meta = meta_of(spec, None, result, 0.0)
    assert meta["solver"]["storage"] == "postgresql://u:***@h/db"
    assert "pw9876" not in json.dumps(meta)
