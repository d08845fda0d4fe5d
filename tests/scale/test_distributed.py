"""Several workers, processes and machines on one study: the stored count is the budget, exactly.

PostgreSQL tests use ``$DSE_TEST_POSTGRES_URL`` (``.ci/run`` starts a local
server) or a throw-away server started here; without either they are skipped
with the reason shown (tests/scale/pgserver.py).
"""

from __future__ import annotations

import pytest

from dse.study.distributed import SharedBudget, storage_kind
from dse.errors import SpecError
from dse.study import run_study
from tests.scale.helpers import (KINDS, NAME, assert_exact, dse_run, finish, small_study, storage_for, stored,
                                 storage_url)


@pytest.mark.parametrize("kind", KINDS)
def test_four_workers_store_the_budget_exactly(tmp_path, kind):
    budget = 430 if kind == "journal" else 230  # not a multiple of the batch: the last append is cut
    study = small_study(tmp_path, trials=budget, batch=50 if kind == "journal" else 25)
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    table = run_study(study, workers=4, storage=storage, out=out, write=False)
    assert len(table) == budget
    trials = stored(storage, out)
    assert_exact(trials, budget)
    # each worker drew its own sequence: a seed index unique in the storage
    st = SharedBudget(storage_url(storage, out), NAME, budget)
    assert st.next_worker_index() == 4


@pytest.mark.parametrize("kind", KINDS)
def test_rerun_with_a_larger_budget_tops_up_exactly(tmp_path, kind):
    study = small_study(tmp_path, trials=100, batch=25)
    storage = storage_for(kind, tmp_path)
    out = tmp_path / "out"
    run_study(study, workers=2, storage=storage, out=out, write=False)
    table = run_study(study, trials=180, workers=3, storage=storage, out=out, write=False)
    assert len(table) == 180
    assert_exact(stored(storage, out), 180)
    # a full storage: nothing is started, nothing added
    again = run_study(study, trials=180, workers=4, storage=storage, out=out, write=False)
    assert len(again) == 180
    assert_exact(stored(storage, out), 180)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_machines_join_one_study_without_overshoot(tmp_path, kind):
    """Two coordinators (as on two machines) on one storage, each with its own output folder."""
    budget = 200
    study = small_study(tmp_path, trials=budget, batch=20)
    storage = storage_for(kind, tmp_path)
    a = dse_run(study, "--storage", storage, "--workers", "2", "--out", str(tmp_path / "a"))
    b = dse_run(study, "--storage", storage, "--workers", "2", "--out", str(tmp_path / "b"))
    for proc in (a, b):
        code, out, err = finish(proc)
        assert code == 0, err[-2000:]
        assert f"{budget} designs evaluated" in out
    assert_exact(stored(storage, tmp_path / "a"), budget)


def test_single_process_run_on_a_shared_storage_is_guarded(tmp_path):
    """--storage without --workers also appends through the shared budget (one worker process)."""
    study = small_study(tmp_path, trials=120, batch=40)
    storage = f"sqlite:///{tmp_path / 's.db'}"
    table = run_study(study, storage=storage, out=tmp_path / "out", write=False)
    assert len(table) == 120
    assert_exact(stored(storage, tmp_path / "out"), 120)


def test_workers_stop_without_error_where_the_space_is_smaller_than_the_budget(tmp_path):
    """A discrete space of 2 x 4 = 8 designs and a budget of 40: one process evaluates the 8 and stops; two
    workers stopped too and the run failed ("the storage holds 28 of the 40 trials; the workers stopped. Run the
    same command again to resume", on a space of 28, and the rerun said the same). They end as one process does."""
    import yaml

    study = small_study(tmp_path, trials=40, batch=10)
    data = yaml.safe_load(study.read_text())
    data["space"] = {"hbm.stacks": {"int": [5, 6]}, "units": {"int": [120, 150], "step": 10}}
    study.write_text(yaml.safe_dump(data, sort_keys=False))
    table = run_study(study, workers=2, out=tmp_path / "w2", write=False)
    # every design of the space, each evaluated once per worker at most (the workers draw at once: their draws of
    # a small space can repeat each other's), within the budget
    designs = {(int(a), int(b)) for a, b in zip(table["p.hbm.stacks"], table["p.units"])}
    assert designs == {(a, b) for a in (5, 6) for b in (120, 130, 140, 150)}
    assert len(table) <= 2 * 8
    assert len(run_study(study, out=tmp_path / "w1", write=False)) == 8


def test_worker_errors_reach_the_user(tmp_path):
    """A worker's own DseError (here: the stored study has other objectives) is the run's error."""
    storage = f"sqlite:///{tmp_path / 's.db'}"
    study = small_study(tmp_path, trials=60, batch=30)
    run_study(study, workers=2, storage=storage, out=tmp_path / "o1", write=False)
    other = tmp_path / "other.yaml"
    other.write_text(study.read_text().replace("objectives: [tpot, energy_per_token, die_area]",
                                               "objectives: [tpot, die_area]")
                     .replace("- tpot\n- energy_per_token\n- die_area", "- tpot\n- die_area"))
    with pytest.raises(SpecError, match="already holds study"):
        run_study(other, trials=120, workers=2, storage=storage, out=tmp_path / "o2", write=False)


def test_storage_kinds():
    assert storage_kind("results/x/study.journal")[0] == "journal"
    assert storage_kind("journal:/tmp/anything")[0] == "journal"
    assert storage_kind("runs/x.db")[0] == "sqlite"
    assert storage_kind("sqlite:////tmp/x.db") == ("sqlite", "/tmp/x.db")
    assert storage_kind("postgresql+psycopg2://u:p@h/db")[0] == "postgresql"
    assert storage_kind("sqlite:///:memory:")[0] == "other"
    with pytest.raises(SpecError, match="need PostgreSQL"):
        SharedBudget("mysql://u@h/db", NAME, 10)


def test_a_crash_in_a_worker_is_not_turned_into_a_user_error(tmp_path):
    """An exception that is not a DseError (a bug) stays a crash: RuntimeError, the traceback on stderr."""
    (tmp_path / "boom.py").write_text(
        "NAME = 'boom'\nUNIT = '1'\nFORMULA = '1/0'\nSOURCE = 'test'\nDIRECTION = 'minimize'\nPARAMS = {}\n"
        "def objective(metrics):\n    raise ZeroDivisionError('a bug')\n")
    study = small_study(tmp_path, trials=60, batch=30)
    study.write_text(study.read_text().replace("- die_area", "- boom") + "modules: [boom.py]\n")
    with pytest.raises(RuntimeError, match="ZeroDivisionError: a bug"):
        run_study(study, workers=2, out=tmp_path / "out", write=False)
