"""One test per touch point of dse.solvers.optuna_compat, on real Optuna studies.

Every function of the compat module gets its own test that exercises what
Optuna really does (in memory, a temp journal file or a temp SQLite file), so
an Optuna upgrade that breaks one touch point fails exactly one named test.
The last tests pin Optuna behaviour that dse relies on without a function of
its own (why every constraint is set on every trial, why non-finite values are
replaced before ``tell``).
"""

from __future__ import annotations

import fcntl
import re
import tomllib
import warnings
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from dse.solvers import optuna_compat as compat

ROOT = Path(__file__).resolve().parents[2]
DISTS = {"b": IntDistribution(0, 9), "a": FloatDistribution(0.0, 1.0), "one": IntDistribution(3, 3),
         "k": CategoricalDistribution(["x", "y"])}


def _tell_some(study, n: int, *, values=(1.0, 2.0), state=TrialState.COMPLETE):
    for _ in range(n):
        t = study.ask(DISTS)
        if state == TrialState.COMPLETE:
            study.tell(t, list(values))
        else:
            study.tell(t, state=state)


def _journal(tmp_path, name="s.journal") -> tuple[JournalStorage, Path]:
    path = tmp_path / name
    return JournalStorage(JournalFileBackend(str(path))), path


def _plain_reader(path: Path) -> JournalStorage:
    """Optuna's own journal reader (what optuna-dashboard and ``optuna.load_study`` use)."""
    return JournalStorage(JournalFileBackend(str(path)))


def test_optuna_floor_is_the_installed_version_and_pyproject_floor():
    installed = tuple(int(x) for x in re.findall(r"\d+", optuna.__version__)[:2])
    floor = tuple(int(x) for x in compat.OPTUNA_FLOOR.split("."))
    assert installed >= floor
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"optuna>={compat.OPTUNA_FLOOR}" in deps


# ------------------------------------------------------------ study and trial identity


def test_study_key():
    storage = optuna.storages.InMemoryStorage()
    one = optuna.create_study(storage=storage, study_name="one")
    two = optuna.create_study(storage=storage, study_name="two")
    assert compat.study_key(one) == compat.study_key(one)
    assert compat.study_key(one) != compat.study_key(two)
    assert compat.study_key(one)[1] == storage.get_study_id_from_name("one")
    assert compat.study_key(optuna.create_study()) != compat.study_key(optuna.create_study())


def test_trial_id(tmp_path):
    storage, _ = _journal(tmp_path)
    study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
    _tell_some(study, 3)
    ids = [compat.trial_id(t) for t in study.get_trials(deepcopy=False)]
    assert ids == sorted(ids) and len(set(ids)) == 3  # increasing in creation order
    for t in study.trials:
        assert storage.get_trial(compat.trial_id(t)).number == t.number


def test_complete_trials():
    study = optuna.create_study(directions=["minimize", "minimize"])
    _tell_some(study, 2)
    _tell_some(study, 1, state=TrialState.FAIL)
    running = study.ask(DISTS)
    got = compat.complete_trials(study)
    assert [t.number for t in got] == [0, 1]
    assert all(t.state == TrialState.COMPLETE for t in got)
    study.tell(running, [0.5, 0.5])  # the cache follows new trials
    assert [t.number for t in compat.complete_trials(study)] == [0, 1, 3]
    assert [t.number for t in compat.complete_trials(study)] == [
        t.number for t in study.get_trials(states=(TrialState.COMPLETE,))]


# ------------------------------------------------------------ system attributes


def test_trial_system_attr(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
    _tell_some(study, 1)
    assert compat.trial_system_attr(study.trials[0], "dse:x") is None
    assert compat.trial_system_attr(study.trials[0], "dse:x", -1) == -1
    study.add_trial(optuna.trial.create_trial(params={"a": 0.5}, distributions={"a": DISTS["a"]}, values=[1.0, 1.0],
                                              system_attrs={"dse:x": 7}))
    stored = optuna.load_study(study_name=study.study_name, storage=_plain_reader(path)).trials
    assert compat.trial_system_attr(stored[1], "dse:x") == 7


def test_set_trial_system_attr(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
    trial = study.ask(DISTS)
    frozen = study.get_trials(deepcopy=False)[0]
    compat.set_trial_system_attr(study, frozen, "dse:generation", 3)  # on a frozen (read-only) trial
    study.tell(trial, [1.0, 1.0])
    again = optuna.load_study(study_name=study.study_name, storage=_plain_reader(path))
    assert again.trials[0].system_attrs["dse:generation"] == 3


def test_study_system_attr(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s")
    sid = storage.get_study_id_from_name("s")
    assert compat.study_system_attr(storage, sid, "dse:n") is None
    assert compat.study_system_attr(storage, sid, "dse:n", 0) == 0
    storage.set_study_system_attr(sid, "dse:n", 4)
    reader = _plain_reader(path)
    assert compat.study_system_attr(reader, reader.get_study_id_from_name("s"), "dse:n") == 4
    assert study.study_name == "s"


def test_set_study_system_attr(tmp_path):
    storage, path = _journal(tmp_path)
    optuna.create_study(storage=storage, study_name="s")
    sid = storage.get_study_id_from_name("s")
    compat.set_study_system_attr(storage, sid, "dse:n", 1)
    compat.set_study_system_attr(storage, sid, "dse:n", 2)
    reader = _plain_reader(path)
    assert reader.get_study_system_attrs(reader.get_study_id_from_name("s"))["dse:n"] == 2


# ------------------------------------------------------------ NSGA-II bookkeeping


def test_ga_generation_key():
    sampler = optuna.samplers.NSGAIISampler(population_size=4, seed=0)
    key = compat.ga_generation_key(sampler)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    _tell_some(study, 6)
    # Optuna's own NSGA-II stores each trial's generation under that key: 4 in generation 0, then 1
    assert [t.system_attrs[key] for t in study.trials] == [0, 0, 0, 0, 1, 1]


def test_keep_ga_keys():
    base = optuna.samplers.NSGAIISampler

    class Renamed(base):
        pass

    @compat.keep_ga_keys
    class Kept(base):
        pass

    assert compat.ga_generation_key(Renamed(population_size=2)) != compat.ga_generation_key(base(population_size=2))
    assert compat.ga_generation_key(Kept(population_size=2)) == compat.ga_generation_key(base(population_size=2))
    assert Kept._get_parent_cache_key_prefix() == base._get_parent_cache_key_prefix()
    # trials stored by Optuna's sampler are read by the kept subclass as the same generations
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=base(population_size=3, seed=1))
    _tell_some(study, 3)
    kept = Kept(population_size=3, seed=1)
    assert [kept.get_trial_generation(study, t) for t in study.trials] == [0, 0, 0]
    assert kept.get_parent_population(study, 1)  # the parent cache key is the base's


def test_intersection_search_space():
    sampler = optuna.samplers.NSGAIISampler(population_size=4, seed=0)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    _tell_some(study, 3)
    optunas = sampler.infer_relative_search_space(study, study.trials[-1])
    ours = compat.intersection_search_space(DISTS)
    assert list(ours) == list(optunas) == ["a", "b", "k"]  # sorted, the single-valued one left out
    assert ours == optunas


def test_polynomial_mutation():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mutation = compat.polynomial_mutation(20.0)
    assert not [w for w in caught if issubclass(w.category, optuna.exceptions.ExperimentalWarning)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.NSGAIISampler(population_size=4, seed=0, mutation=mutation, mutation_prob=1.0)
    study = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
    _tell_some(study, 12)
    assert all(0.0 <= t.params["a"] <= 1.0 and 0 <= t.params["b"] <= 9 for t in study.trials)


# ------------------------------------------------------------ telling a trial


def test_tell(monkeypatch):
    """compat.tell finishes trials as Study.tell does (states, values, params, best_trials), a NaN objective
    failed with Optuna's warning, a finished trial refused, and makes no deep copy (Study.tell makes one per
    trial: the patch point counts them)."""
    import optuna.study.study as study_module

    copies = []
    real = study_module.copy.deepcopy
    monkeypatch.setattr(study_module.copy, "deepcopy", lambda x, *a: copies.append(1) or real(x, *a))
    studies = []
    for tell in (lambda s, t, v=None, state=None: s.tell(t, v, state), compat.tell):
        study = optuna.create_study(directions=["minimize", "minimize"],
                                    sampler=optuna.samplers.RandomSampler(seed=3))
        told = [study.ask(DISTS) for _ in range(4)]
        before = len(copies)
        tell(study, told[0], [1.0, 2.0])
        tell(study, told[1], state=TrialState.FAIL)
        tell(study, told[2], [0.5, 3.0])
        with pytest.warns(UserWarning, match="not acceptable"):  # (Optuna's own check, kept: a NaN objective fails)
            tell(study, told[3], [float("nan"), 1.0])
        studies.append((study, len(copies) - before))
    (plain, plain_copies), (quiet, quiet_copies) = studies
    assert plain_copies == 4 and quiet_copies == 0
    assert [(t.state, t.values, t.params) for t in quiet.trials] == [(t.state, t.values, t.params)
                                                                   for t in plain.trials]
    assert [t.state for t in quiet.trials] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE,
                                               TrialState.FAIL]
    assert [t.number for t in quiet.best_trials] == [0, 2]
    with pytest.raises(ValueError, match="Cannot tell a COMPLETE trial"):  # a finished trial is refused, as by Study.tell
        compat.tell(quiet, quiet.trials[0].number, [1.0, 1.0])


# ------------------------------------------------------------ constraints and objective names


def test_set_constraints(tmp_path):
    study = optuna.create_study(directions=["minimize", "minimize"])
    good, bad = study.ask(DISTS), study.ask(DISTS)
    compat.set_constraints(good, {"area": -1.0, "tdp": 0.0})
    compat.set_constraints(bad, {"area": 2.5, "tdp": -3.0})
    study.tell(good, [1.0, 1.0])
    study.tell(bad, [0.0, 0.0])  # dominates `good`, but infeasible
    assert [t.number for t in study.best_trials] == [0]  # Optuna reads them where they are stored
    assert study.trials[1].constraints == {"area": 2.5, "tdp": -3.0}
    with pytest.raises(ValueError):
        compat.set_constraints(study.ask(DISTS), {"area": float("nan")})  # why dse stores +1e300 instead


def test_constraints_of(tmp_path):
    storage, path = _journal(tmp_path)
    disk = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    mem = optuna.create_study(directions=["minimize", "minimize"])
    t = mem.ask(DISTS)
    t.set_constraint("area", 1.5)
    t.set_constraint("tdp", -2.0)
    mem.tell(t, [1.0, 2.0])
    u = mem.ask(DISTS)
    mem.tell(u, [1.0, 2.0])
    for frozen in mem.get_trials(deepcopy=False):
        disk.add_trial(frozen)  # what OptunaSolver._append does: constraints travel with the trial
    stored = optuna.load_study(study_name="s", storage=_plain_reader(path)).trials
    assert compat.constraints_of(stored[0]) == {"area": 1.5, "tdp": -2.0}
    assert compat.constraints_of(stored[1]) == {}


def test_set_metric_names(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "maximize"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compat.set_metric_names(study, ("obj.latency", "obj.tokens_per_s"))
    assert not [w for w in caught if issubclass(w.category, optuna.exceptions.ExperimentalWarning)]
    size = path.stat().st_size
    compat.set_metric_names(study, ["obj.latency", "obj.tokens_per_s"])  # unchanged: nothing written
    assert path.stat().st_size == size
    _tell_some(study, 2)
    again = optuna.load_study(study_name="s", storage=_plain_reader(path))
    assert again.metric_names == ["obj.latency", "obj.tokens_per_s"]
    frame = again.trials_dataframe(multi_index=True)
    assert list(frame["values"].columns) == ["obj.latency", "obj.tokens_per_s"]
    with pytest.raises(ValueError):
        compat.set_metric_names(study, ["only_one"])


def test_metric_names(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    assert compat.metric_names(study) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(["f1", "f2"])
    assert compat.metric_names(optuna.load_study(study_name="s", storage=_plain_reader(path))) == ["f1", "f2"]


# ------------------------------------------------------------ journal files


def test_flock_lock(tmp_path):
    path = tmp_path / "s.journal"
    lock = compat.FlockLock(path)
    assert lock.acquire() is True
    try:
        with open(lock.path, "a") as f, pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held
    finally:
        lock.release()
    with open(lock.path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again
        fcntl.flock(f, fcntl.LOCK_UN)
    # Optuna's own journal backend takes it as its lock (duck-typed acquire/release)
    storage = JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    study = optuna.create_study(storage=storage, directions=["minimize", "minimize"])
    _tell_some(study, 2)
    assert len(optuna.load_study(study_name=study.study_name, storage=_plain_reader(path)).trials) == 2


def test_repair_journal_tail(tmp_path):
    storage, path = _journal(tmp_path)
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    _tell_some(study, 2)
    whole = path.read_bytes()
    torn = b'{"op_code": 4, "worker_id": "dead", "study_id": 0, "datetime_st'
    path.write_bytes(whole + torn)
    # Optuna's reader skips a torn last line ...
    assert len(optuna.load_study(study_name="s", storage=_plain_reader(path)).trials) == 2
    # ... but an append after it is glued to it (one bad line, the appended operation lost) and a
    # second append makes the reader fail: why the tail is cut before an append
    last = whole.splitlines(keepends=True)[-1]
    path.write_bytes(whole + torn + last + last)
    with pytest.raises(ValueError):
        optuna.load_study(study_name="s", storage=_plain_reader(path))
    path.write_bytes(whole + torn)
    assert compat.repair_journal_tail(path) == len(torn)
    assert path.read_bytes() == whole
    assert compat.repair_journal_tail(path) == 0
    assert compat.repair_journal_tail(tmp_path / "missing.journal") == 0


def test_journal_file(tmp_path):
    path = tmp_path / "s.journal"
    backend = compat.JournalFile(path)
    study = optuna.create_study(storage=JournalStorage(backend), study_name="s", directions=["minimize", "minimize"])
    with backend.batch_sync():
        _tell_some(study, 3, values=(1.0, 2.0))
    _tell_some(study, 1, values=(3.0, 4.0))
    # the lines it writes are Optuna's: Optuna's own reader sees the same study
    again = optuna.load_study(study_name="s", storage=_plain_reader(path))
    assert [t.values for t in again.trials] == [[1.0, 2.0]] * 3 + [[3.0, 4.0]]
    assert [t.params for t in again.trials] == [t.params for t in study.trials]
    assert path.read_bytes().endswith(b"\n") and not (tmp_path / "s.journal.lock").exists()


def test_journal_storage(tmp_path):
    path = tmp_path / "new" / "s.journal"
    storage, backend = compat.journal_storage(path)
    assert isinstance(storage, JournalStorage) and isinstance(backend, compat.JournalFile)
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    _tell_some(study, 2)
    path.write_bytes(path.read_bytes() + b'{"op_code": 4, "wor')  # a writer killed mid-line
    storage, _ = compat.journal_storage(path)  # cut before the storage reads the file
    study = optuna.load_study(study_name="s", storage=storage)
    _tell_some(study, 1)
    assert len(optuna.load_study(study_name="s", storage=_plain_reader(path)).trials) == 3


# ------------------------------------------------------------ RDB storages


def test_rdb_storage(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    storage = compat.rdb_storage(url)
    assert isinstance(storage, optuna.storages.RDBStorage) and storage.heartbeat_interval is None
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    _tell_some(study, 2)
    assert len(optuna.load_study(study_name="s", storage=url).trials) == 2


def test_rdb_engine(tmp_path):
    import sqlalchemy

    storage = compat.rdb_storage(f"sqlite:///{tmp_path / 's.db'}")
    engine = compat.rdb_engine(storage)
    assert isinstance(engine, sqlalchemy.engine.Engine)
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.text("SELECT 1")).scalar_one() == 1


def test_count_complete(tmp_path, monkeypatch):
    storage = compat.rdb_storage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "minimize"])
    other = optuna.create_study(storage=storage, study_name="other", directions=["minimize", "minimize"])
    _tell_some(study, 3)
    _tell_some(study, 2, state=TrialState.FAIL)
    study.ask(DISTS)  # RUNNING
    _tell_some(other, 4)
    sid = storage.get_study_id_from_name("s")

    def no_loading(*a, **k):
        raise AssertionError("an RDB is counted in SQL, not by loading its trials")

    with monkeypatch.context() as m:
        m.setattr(optuna.storages.RDBStorage, "get_n_trials", no_loading)
        m.setattr(optuna.storages.RDBStorage, "get_all_trials", no_loading)
        assert compat.count_complete(storage, sid) == 3
    journal, _ = _journal(tmp_path)
    js = optuna.create_study(storage=journal, study_name="s", directions=["minimize", "minimize"])
    _tell_some(js, 2)
    _tell_some(js, 1, state=TrialState.FAIL)
    assert compat.count_complete(journal, journal.get_study_id_from_name("s")) == 2


def _finished(n: int, first: int = 0) -> list:
    """Finished trials with every kind of field Optuna stores: params of four distributions (one of log scale),
    two values (infinities too), user and system attributes (nested JSON), intermediate values; a FAIL without
    values."""
    import datetime

    dists = {**DISTS, "lg": FloatDistribution(1e-3, 10.0, log=True)}
    out = []
    for i in range(first, first + n):
        start = datetime.datetime(2026, 12, 6, 5, 0, 0) + datetime.timedelta(seconds=i)
        params = {"b": i % 10, "a": (i % 7) / 7, "one": 3, "k": "xy"[i % 2], "lg": 10.0 ** (i % 4 - 3)}
        if i % 5 == 4:
            t = optuna.trial.create_trial(state=TrialState.FAIL, params=params, distributions=dists)
        else:
            values = [float("inf"), -1.0] if i % 5 == 3 else [i * 0.5, -float(i)]
            t = optuna.trial.create_trial(values=values, params=params, distributions=dists,
                                          user_attrs={"dse:params": {"row": i, "v": [1.5, None]}},
                                          system_attrs={"constraints:c": -0.25 * i, "gen": i // 3},
                                          intermediate_values={0: float(i), 2: float("-inf")})
        t.datetime_start, t.datetime_complete = start, start + datetime.timedelta(milliseconds=250)
        out.append(t)
    return out


def _stored(study) -> list:
    return [(t.number, t.state, t.values, t.params, t.distributions, t.user_attrs, t.system_attrs,
             t.intermediate_values, t.datetime_start, t.datetime_complete) for t in study.get_trials()]


def _rdb_url(kind: str, tmp_path, name: str) -> str:
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / name}"
    from tests.scale.pgserver import fresh_database, server_url

    url, reason = server_url()
    if url is None:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    return fresh_database(url)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_add_trials(tmp_path, kind):
    """The batch in one transaction stores what Optuna's own add_trials stores, field for field, numbered after
    the trials already there; a batch Optuna refuses (a param of another distribution, a wrong number of values, a
    param outside its distribution) is refused whole, nothing of it stored; a journal gets Optuna's add_trials."""
    studies = []
    for name, add in (("optuna.db", lambda s, ts: s.add_trials(ts)), ("dse.db", compat.add_trials)):
        storage = compat.rdb_storage(_rdb_url(kind, tmp_path, name))
        study = optuna.create_study(storage=storage, study_name="s", directions=["minimize", "maximize"])
        study.add_trials(_finished(3))  # (stored before, by Optuna: the batch's numbers follow them)
        add(study, _finished(12, first=3))
        add(study, [])
        studies.append(study)
    optunas, ours = (_stored(optuna.load_study(study_name="s", storage=s._storage._backend)) for s in studies)
    assert [r[0] for r in ours] == list(range(15))
    assert ours == optunas
    dse_study = studies[1]
    wrong = _finished(2, first=20)
    wrong[1].distributions["b"] = FloatDistribution(0.0, 9.0)  # (b was an integer)
    with pytest.raises(ValueError, match="Cannot set different distribution kind"):
        compat.add_trials(dse_study, wrong)
    with pytest.raises(ValueError, match="values"):
        compat.add_trials(dse_study, [*_finished(1, first=20), optuna.trial.create_trial(
            values=[1.0], params={"b": 1}, distributions={"b": DISTS["b"]})])
    outside = _finished(2, first=20)
    outside[1].params = {**outside[1].params, "b": 42}  # (b in 0 .. 9: FrozenTrial._validate refuses it)
    with pytest.raises(ValueError, match="isn't contained in the distribution"):
        compat.add_trials(dse_study, outside)
    assert len(optuna.load_study(study_name="s", storage=dse_study._storage._backend).trials) == 15
    journal, _ = _journal(tmp_path)
    js = optuna.create_study(storage=journal, study_name="s", directions=["minimize", "maximize"])
    compat.add_trials(js, _finished(4))
    assert _stored(js) == optunas[:4]


# ------------------------------------------------------------ Optuna behaviour dse relies on


def test_a_trial_without_constraints_counts_as_feasible():
    """Why OptunaSolver sets every constraint on every trial (a skipped one would read as feasible)."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    t = study.ask(DISTS)
    compat.set_constraints(t, {"g": 1.0})
    study.tell(t, [1.0, 1.0])
    _tell_some(study, 1, values=(2.0, 2.0))  # no constraint set
    assert [t.number for t in study.best_trials] == [1]


def test_non_finite_values_fail_the_trial():
    """Why OptunaSolver tells +-1e300 in place of NaN (and keeps the raw values in a user attribute)."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    t = study.ask(DISTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study.tell(t, [float("nan"), 1.0])
    assert study.trials[0].state == TrialState.FAIL
    t = study.ask(DISTS)
    study.tell(t, [1e300, -1e300])
    assert study.trials[1].state == TrialState.COMPLETE
