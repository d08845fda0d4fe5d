"""Every use of Optuna's private API or version-specific behaviour, in one place (Optuna 5.0).

dse drives Optuna through its public API (``create_study``, ``ask``/``tell``,
``add_trial``, ``enqueue_trial``, samplers, ``RDBStorage``) everywhere else;
what the public API does not offer, or offers only in a recent or
experimental form, goes through a function here. Each function says what it
touches, and ``tests/solvers/test_optuna_compat.py`` has one test per
function, run on real Optuna studies (in memory or a temp journal file), so
an Optuna upgrade that breaks one of them fails exactly one named test.

Touch points (Optuna 5.0.0):

- study and trial identity: ``Study._storage``, ``Study._study_id``,
  ``FrozenTrial._trial_id`` (:func:`study_key`, :func:`trial_id`);
- the cached trial list of a study, ``Study._get_trials(use_cache=True)``
  (:func:`complete_trials`);
- trial and study system attributes, which only storages can set
  (:func:`trial_system_attr`, :func:`set_trial_system_attr`,
  :func:`study_system_attr`, :func:`set_study_system_attr`);
- the genetic-algorithm bookkeeping of NSGA-II: the generation key
  (``BaseGASampler._get_generation_key``), the per-class keys that
  ``__init_subclass__`` renames (:func:`ga_generation_key`,
  :func:`keep_ga_keys`), the search space NSGA-II infers
  (:func:`intersection_search_space`) and the polynomial mutation
  (experimental in 5.0; :func:`polynomial_mutation`);
- telling a trial without the deep copy of it that ``Study.tell`` returns: Optuna's own optimize loop's
  ``optuna.study._tell._tell_with_warning`` (:func:`tell`);
- constraints: ``Trial.set_constraint`` and ``FrozenTrial.constraints`` (Optuna
  5.0 stores each under the trial system attribute ``constraints:<name>``;
  :func:`set_constraints`, :func:`constraints_of`);
- objective names: ``Study.set_metric_names`` (experimental since 3.2) and
  ``Study.metric_names`` (:func:`set_metric_names`, :func:`metric_names`);
- the journal file backend (``optuna.storages.journal``, Optuna >= 4.0): its
  line format, its lock interface and its reader's handling of a torn line
  (:class:`JournalFile`, :class:`FlockLock`, :func:`repair_journal_tail`,
  :func:`journal_storage`);
- RDB storages: ``RDBStorage(heartbeat_interval=None)``, its ``engine`` and the
  private table models in ``optuna.storages._rdb.models`` (:func:`rdb_storage`,
  :func:`rdb_engine`, :func:`count_complete`); finished trials written in one
  transaction through those models, ``RDBStorage.scoped_session``, the
  storage's session helper and ``FrozenTrial._validate`` (:func:`add_trials`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import optuna
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.study._tell import _tell_with_warning
from optuna.trial import TrialState

from dse.fileio import open_no_follow

_log = logging.getLogger(__name__)

__all__ = [
    "OPTUNA_FLOOR",
    "study_key",
    "trial_id",
    "complete_trials",
    "trial_system_attr",
    "set_trial_system_attr",
    "study_system_attr",
    "set_study_system_attr",
    "tell",
    "ga_generation_key",
    "keep_ga_keys",
    "intersection_search_space",
    "polynomial_mutation",
    "set_constraints",
    "constraints_of",
    "set_metric_names",
    "metric_names",
    "FlockLock",
    "repair_journal_tail",
    "JournalFile",
    "journal_storage",
    "rdb_storage",
    "rdb_engine",
    "count_complete",
    "add_trials",
]

#: The oldest Optuna this module is written for (pyproject's floor): ``PolynomialMutation`` and the
#: ``mutation`` argument of NSGA-II are new in 5.0, and 5.0 deprecates ``constraints_func`` in favour
#: of ``Trial.set_constraint``.
OPTUNA_FLOOR = "5.0"


# ------------------------------------------------------------ study and trial identity


def study_key(study) -> tuple:
    """A key naming ``study`` while it lives: its storage object and its id in that storage (private both)."""
    return (id(study._storage), study._study_id)


def trial_id(trial) -> int:
    """The storage's id of a trial (``_trial_id``; unique in the storage, increasing in creation order)."""
    return trial._trial_id


def complete_trials(study) -> list:
    """The study's COMPLETE trials, not copied, from Optuna's per-study cache (``_get_trials(use_cache=True)``).

    What Optuna's own GA samplers read; the public ``get_trials`` skips the cache.
    """
    return study._get_trials(deepcopy=False, states=[TrialState.COMPLETE], use_cache=True)


# ------------------------------------------------------------ system attributes


def trial_system_attr(trial, key: str, default=None):
    """A system attribute of a (frozen) trial, or ``default``."""
    return trial.system_attrs.get(key, default)


def set_trial_system_attr(study, trial, key: str, value) -> None:
    """Set a system attribute of a trial of ``study``, even a frozen one (through the study's storage)."""
    study._storage.set_trial_system_attr(trial._trial_id, key, value)


def study_system_attr(storage, study_id: int, key: str, default=None):
    """A system attribute of a study, read from its storage (``BaseStorage.get_study_system_attrs``)."""
    return storage.get_study_system_attrs(study_id).get(key, default)


def set_study_system_attr(storage, study_id: int, key: str, value) -> None:
    """Set a system attribute of a study in its storage (``BaseStorage.set_study_system_attr``)."""
    storage.set_study_system_attr(study_id, key, value)


# ------------------------------------------------------------ NSGA-II bookkeeping


def ga_generation_key(sampler) -> str:
    """The trial system attribute a GA sampler stores a trial's generation under."""
    return type(sampler)._get_generation_key()


def keep_ga_keys(cls, base=optuna.samplers.NSGAIISampler):
    """Class decorator: a subclass of a GA sampler keeps its base's generation and parent-cache keys.

    ``BaseGASampler.__init_subclass__`` renames the keys after the subclass
    (``<Class>:generation``); keeping the base's means the trials a subclass
    stores read as the base's, and the other way round.
    """
    cls._GENERATION_KEY = base._GENERATION_KEY
    cls._PARENT_CACHE_KEY_PREFIX = base._PARENT_CACHE_KEY_PREFIX
    return cls


def intersection_search_space(distributions: Mapping) -> dict:
    """What NSGA-II infers as its relative search space when every trial uses ``distributions``.

    Optuna's ``IntersectionSearchSpace`` (the space of every COMPLETE trial):
    sorted by name, parameters with a single value left out.
    """
    return {k: d for k, d in sorted(distributions.items()) if not d.single()}


def polynomial_mutation(eta: float):
    """NSGA-II's polynomial mutation (Deb et al. 2002), whose ExperimentalWarning (Optuna 5.0) is silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.nsgaii.PolynomialMutation(eta=eta)


# ------------------------------------------------------------ telling a trial


def tell(study, trial, values=None, state=None) -> None:
    """``study.tell(trial, values, state)`` without its return value, a deep copy of the finished trial (its
    params, distributions, attributes) that dse never reads: the same private function Optuna's own optimize
    loop tells with (``optuna.study._tell._tell_with_warning``, warnings included). The default study tells
    8,685 trials (its pre-screened candidates too): 0.87 -> 0.17 s CPU of its ~10 s."""
    _tell_with_warning(study=study, trial=trial, value_or_values=values, state=state)


# ------------------------------------------------------------ constraints and objective names


def set_constraints(trial, values: Mapping[str, float]) -> None:
    """``trial.set_constraint(name, value)`` for each item (Optuna >= 5.0; NaN is refused by Optuna).

    Where Optuna itself keeps constraints: samplers, ``best_trials`` and
    optuna-dashboard read them back; a value ``<= 0`` is feasible.
    """
    for name, value in values.items():
        trial.set_constraint(name, value)


def constraints_of(trial) -> dict[str, float]:
    """``{name: value}`` of the constraints set on a (frozen) trial; empty when none was set."""
    return dict(trial.constraints)


def set_metric_names(study, names: Iterable[str]) -> None:
    """Name the study's objectives (``Study.set_metric_names``, experimental: its warning is silenced).

    Shown by ``study.metric_names``, ``trials_dataframe`` and optuna-dashboard.
    Written only when the stored names differ, so workers opening one study do not rewrite it.
    """
    names = [str(n) for n in names]
    if metric_names(study) == names:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names(names)


def metric_names(study) -> list[str] | None:
    """The study's objective names, or None when none were set."""
    return study.metric_names


# ------------------------------------------------------------ journal files


class FlockLock:
    """Journal lock held with ``flock(2)`` on ``<journal>.flock``; repairs a torn tail on acquire.

    Duck-types Optuna's journal file lock (``acquire``/``release``). The kernel
    releases an flock when its process dies, so a killed writer never leaves
    a stale lock. Holding the lock means no writer is inside ``append_logs``,
    so a journal that does not end with a newline was torn by a killed writer:
    its partial last line is cut off before the next append.
    """

    def __init__(self, journal: str | Path):
        self.journal = str(journal)
        self.path = self.journal + ".flock"
        self._fh = None

    def acquire(self) -> bool:
        fh = open_no_follow(self.path, "a")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX)
        except BaseException:
            fh.close()
            raise
        self._fh = fh
        try:
            repair_journal_tail(self.journal)
        except BaseException:
            self.release()
            raise
        return True

    def release(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()


def repair_journal_tail(path: str | Path) -> int:
    """Cut a partial last line off a journal file (call with the lock held); return the bytes cut.

    Optuna's reader skips a torn *last* line but fails on one that is followed
    by more lines, which is what the next append would make of it.
    """
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return 0
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        pos, keep = size, 0
        while pos > 0:
            start = max(0, pos - 65536)
            f.seek(start)
            chunk = f.read(pos - start)
            i = chunk.rfind(b"\n")
            if i >= 0:
                keep = start + i + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
    _log.warning("journal %s: cut a torn last line (%d bytes) left by an interrupted writer", path, size - keep)
    return size - keep


class JournalFile(JournalFileBackend):
    """Optuna's journal file backend, locked with :class:`FlockLock`, with one fsync per batch.

    ``append_logs`` writes the same JSON lines as Optuna's (``read_logs`` is
    Optuna's, unchanged). Optuna fsyncs after every operation, i.e. every
    trial: ~2 ms each on this machine under load, half the wall time of a
    5,000-trial run. Inside ``with backend.batch_sync():`` the lines are
    written (to the page cache, visible to every reader at once, and kept if
    the process is killed) and fsynced once when the block ends; only a
    machine crash could lose the batch, as it would lose a batch in flight.
    """

    def __init__(self, file_path: str | Path):
        self.path = str(file_path)
        self.lock = FlockLock(self.path)
        super().__init__(self.path, lock_obj=self.lock)
        self._defer = False
        self._unsynced = False

    def append_logs(self, logs) -> None:
        data = ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode("utf-8")
        self.lock.acquire()
        try:
            with open(self.path, "ab") as f:
                f.write(data)
                f.flush()
                if self._defer:
                    self._unsynced = True
                else:
                    os.fsync(f.fileno())
        finally:
            self.lock.release()

    @contextlib.contextmanager
    def batch_sync(self):
        """Appends in this block are fsynced once, at its end (also when it ends with an exception)."""
        if self._defer:
            yield
            return
        self._defer = True
        try:
            yield
        finally:
            self._defer = False
            if self._unsynced:
                self._unsynced = False
                with open(self.path, "ab") as f:
                    os.fsync(f.fileno())


def check_journal(path: str | Path) -> None:
    """Refuse a file at ``path`` that is not an Optuna journal (issue 21: `storage: 'journal:notes.txt'` cut the
    file's last line and appended JSON to it): empty or missing is fine (a new journal); otherwise its first
    line must be a JSON journal record (an ``op_code``). A link is refused (nothing is written through it)."""
    from dse.errors import SpecError

    p = Path(path)
    if p.is_symlink():
        raise SpecError(f"{p}: the journal is a symbolic link; dse does not write through links: remove it or give "
                        f"the real path")
    if not p.exists() or p.stat().st_size == 0:
        return
    if not p.is_file():
        raise SpecError(f"{p}: the journal path is not a regular file")
    with open(p, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if not line.endswith(b"\n"):
                break  # a torn last line (a killed writer): JournalFile cuts it
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or "op_code" not in record:
                if number == 1:
                    raise SpecError(f"{p}: is not an Optuna journal (its first line is not a journal record); dse "
                                    f"writes only journals it created: give a new path (a file ending in .journal) "
                                    f"or delete this one")
                raise SpecError(f"{p}:{number}: the journal is damaged (line {number} is not a journal record: "
                                f"{line[:80]!r}); the trials before it are intact: keep a copy, then cut the file "
                                f"at line {number - 1} to resume from there, or start afresh with another --out")


def journal_storage(path: str | Path) -> tuple:
    """``(JournalStorage, JournalFile)`` on ``path`` (created if missing); a torn tail is cut before reading."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    check_journal(path)
    backend = JournalFile(path)
    backend.lock.acquire()  # repairs a torn tail before the storage replays the file
    backend.lock.release()
    return JournalStorage(backend), backend


# ------------------------------------------------------------ RDB storages


def rdb_storage(url: str):
    """``RDBStorage(url)`` without heartbeat (dse never leaves a trial RUNNING in a shared storage).

    ``pool_pre_ping``: a pooled connection is checked before use, so after a database restart the pool
    reconnects instead of failing once per stale connection (dse.storage retries what still fails).
    """
    return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True}, heartbeat_interval=None)


def rdb_engine(storage):
    """The SQLAlchemy engine of an ``RDBStorage``."""
    return storage.engine


def count_complete(storage, study_id: int) -> int:
    """How many COMPLETE trials ``storage`` holds for the study: one COUNT query on an RDB.

    ``BaseStorage.get_n_trials`` loads every trial to count them; on an RDB
    this counts in SQL over Optuna's private table model instead.
    """
    if isinstance(storage, optuna.storages.RDBStorage):
        try:
            from optuna.storages._rdb import models
            from sqlalchemy import func, select
        except ImportError:  # pragma: no cover - Optuna moved its models
            pass
        else:
            q = (select(func.count()).select_from(models.TrialModel)
                 .where(models.TrialModel.study_id == study_id, models.TrialModel.state == TrialState.COMPLETE))
            with storage.engine.connect() as conn:
                return int(conn.execute(q).scalar_one())
    return storage.get_n_trials(study_id, state=TrialState.COMPLETE)


def add_trials(study, trials) -> None:
    """``study.add_trials(trials)``: finished trials stored in order, numbered after the study's last.

    On an RDB storage (SQLite, PostgreSQL) in one transaction: Optuna's ``add_trial`` writes a trial in its own
    transaction of ~27 queries (the trial, then each param, value and attribute with a lookup before it): a
    default study's trials appended 57-63 a second on SQLite, 32 on PostgreSQL, under dse's storage-wide lock,
    so that its runs made ~45 and ~30 trials/s whatever the number of workers (benchmarks/bench_scale.py); in one
    transaction 616-711 and 523 a second (batches of 200), the runs 131-165 and 99-125. Here: the study's row
    locked as Optuna locks it to number trials, one insert of the trials, one of their params, values, attributes
    and intermediate values; the same rows as Optuna's (its models' conversions: a param's internal value and its
    distribution's JSON, a value's stored form, an attribute's JSON), each param's distribution checked against
    the study's first of that name as Optuna checks it, every trial validated as ``Study.add_trial`` does. All
    or nothing: a failure leaves none of the batch stored. Other storages (the journal): ``Study.add_trials``.
    The trials are not put in the study's cache of trials (Optuna's ``_CachedStorage``): it reads them from the
    database when it next loads the trials, as it reads another process's."""
    trials = list(trials)
    storage = getattr(study._storage, "_backend", study._storage)
    if not trials:
        return
    if not isinstance(storage, optuna.storages.RDBStorage):
        study.add_trials(trials)
        return
    from optuna import distributions as dists
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session
    from sqlalchemy import func

    for t in trials:  # (Study.add_trial's checks)
        t._validate()
        if t.values is not None and len(t.values) != len(study.directions):
            raise ValueError(f"The added trial has {len(t.values)} values, which is different from the number of "
                             f"objectives {len(study.directions)} in the study (determined by Study.directions).")
    study_id = study._study_id
    with _create_scoped_session(storage.scoped_session) as session:
        models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)  # (numbers: one writer at a time)
        first = session.query(func.count(models.TrialModel.trial_id)).filter(
            models.TrialModel.study_id == study_id).scalar()
        rows = [models.TrialModel(study_id=study_id, number=first + i, state=t.state, datetime_start=t.datetime_start,
                                  datetime_complete=t.datetime_complete) for i, t in enumerate(trials)]
        session.add_all(rows)
        session.flush()  # (the trials' ids)
        known: dict = {}  # param name -> the study's distribution of it (its first stored, else this batch's first)
        children: list = []
        for row, t in zip(rows, trials):
            for k, v in enumerate(t.values or ()):
                stored, kind = models.TrialValueModel.value_to_stored_repr(v)
                children.append(models.TrialValueModel(trial_id=row.trial_id, objective=k, value=stored,
                                                       value_type=kind))
            for name, value in t.params.items():
                dist = t.distributions[name]
                if name not in known:
                    before = (session.query(models.TrialParamModel.distribution_json).join(models.TrialModel)
                              .filter(models.TrialModel.study_id == study_id,
                                      models.TrialParamModel.param_name == name,
                                      models.TrialModel.trial_id < rows[0].trial_id).first())
                    known[name] = dists.json_to_distribution(before[0]) if before is not None else dist
                dists.check_distribution_compatibility(known[name], dist)
                children.append(models.TrialParamModel(trial_id=row.trial_id, param_name=name,
                                                       param_value=dist.to_internal_repr(value),
                                                       distribution_json=dists.distribution_to_json(dist)))
            for cls, attrs in ((models.TrialUserAttributeModel, t.user_attrs),
                               (models.TrialSystemAttributeModel, t.system_attrs)):
                children += [cls(trial_id=row.trial_id, key=key, value_json=json.dumps(value))
                             for key, value in attrs.items()]
            for step, value in t.intermediate_values.items():
                stored, kind = models.TrialIntermediateValueModel.intermediate_value_to_stored_repr(value)
                children.append(models.TrialIntermediateValueModel(trial_id=row.trial_id, step=step,
                                                                   intermediate_value=stored,
                                                                   intermediate_value_type=kind))
        session.add_all(children)
