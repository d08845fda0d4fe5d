"""Many workers, one study: worker processes and machines sharing an Optuna storage.

``dse run STUDY --workers N``, and any run on a shared ``--storage URL``, goes
through :func:`run_workers`: the coordinator opens the storage, creates the
study if needed, reads how many COMPLETE trials it already holds and starts
up to N worker processes (multiprocessing *spawn*). Each worker runs the
study's :class:`~dse.solvers.optuna_search.OptunaSolver` on the shared
storage with its own seed (the study's seed + a worker index unique in that
storage, so two workers never draw the same sequence) and appends every
finished batch through :class:`SharedBudget`, which makes the final count
exact:

* an append happens under a lock that every worker on every machine takes
  (a PostgreSQL advisory lock; an ``flock`` on a file next to a SQLite
  database or a journal file), after counting the COMPLETE trials the
  storage holds, and stores at most what is left of the budget. So the
  storage never holds more than the budget, however many processes or
  machines join, and whenever they join;
* a worker keeps going until the storage is full, not until "its share" is
  done: when a worker dies (SIGKILL, out of memory, a machine lost) the
  others finish its part. A batch counts once it is appended; a killed
  worker loses only the batch it was evaluating. If every worker dies, the
  coordinator says how many trials are stored, and running the same command
  again resumes to the exact budget.

Locks die with their holder: the kernel drops an ``flock`` when its process
dies and PostgreSQL drops an advisory lock when its session ends, so a killed
worker never blocks the others (journal files themselves are locked with
``flock`` and a torn last line is repaired, see
:func:`dse.solvers.optuna_search.open_storage`).

Each worker samples on its own in-memory study (vectorized batches,
ARCHITECTURE rule 2), seeded with what the storage held when it started; the
workers do not see each other's new trials until a rerun. Results with more
than one worker depend on timing, so they are not reproducible bit for bit;
with one process and no shared storage they are.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

from dse.errors import DseError, SolverError, SpecError, StorageError
from dse.fileio import open_no_follow
from dse.solvers import optuna_compat as compat
from dse.solvers.optuna_search import OptunaSolver, open_storage
from dse.spec.study import SolverSettings, load_study
from dse.storage import classify, mask, retry
from dse.study.problem import make_problem
from dse.study.tile_cache import evaluation_tag
import dse.errors as errors

WORKER_INDEX_ATTR = "dse:next_worker_index"
POLL_S = 0.25
#: The environment variable that hands a worker its job (study, settings, storage URL): not the command line,
#: which every user of the machine can read (`ps`), and a storage URL may hold a password (issue 21).
PAYLOAD_ENV = "DSE_WORKER_PAYLOAD"

# ------------------------------------------------------------ what a storage URL names


def storage_kind(url: str) -> tuple[str, str | None]:
    """('journal', path) | ('sqlite', path) | ('postgresql', None) | ('other', None), as open_storage reads it."""
    s = str(url)
    if s.startswith("journal:"):
        return "journal", str(Path(s[len("journal:"):]).resolve())
    if s.endswith((".journal", ".log")) and "://" not in s:
        return "journal", str(Path(s).resolve())
    if s.endswith(".db") and "://" not in s:
        return "sqlite", str(Path(s).resolve())
    if s.startswith("sqlite"):
        from sqlalchemy.engine import make_url

        db = make_url(s).database
        if not db or db == ":memory:":
            return "other", None  # an in-memory SQLite database cannot be shared
        return "sqlite", str(Path(db).resolve())
    if s.startswith(("postgresql", "postgres")):
        return "postgresql", None
    return "other", None


def _advisory_key(study_name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"dse:{study_name}".encode()).digest()[:8], "big", signed=True)


class SharedBudget:
    """Counts and appends trials of one study in a shared storage, never past ``budget``.

    :meth:`room` holds :meth:`lock` (the storage-wide lock of this study) and
    says how many trials may still be appended; :func:`shared_solver` appends
    inside it. ``budget(study, trials)`` does the same for a list of trials
    and returns how many it stored (fewer than given: the budget is reached).
    A worker passes its coordinator's pid as ``parent_pid``: once that
    process is gone, the room is 0 and the worker stops without writing.
    """

    def __init__(self, storage_url: str, study_name: str, budget: int, *, parent_pid: int | None = None):
        self.url = str(storage_url)
        self.study_name = study_name
        self.budget = int(budget)
        self.parent_pid = parent_pid
        self.kind, self.path = storage_kind(self.url)
        if self.kind == "other":
            raise SpecError(f"storage {mask(self.url)!r}: several workers or machines need PostgreSQL "
                            f"(postgresql+psycopg2://user:pass@host/db), a SQLite file or a journal file")
        if self.kind == "journal":  # refuse a file that is not a journal before its lock files are made beside it
            compat.check_journal(self.path)
        self._engine = None
        self._study_id: int | None = None

        def opened():
            with self.lock(key="dse:open-storage"):  # Optuna's first open creates the schema: one at a time
                return open_storage(self.url)

        self.storage = self._retry("opening the storage", opened)

    def _retry(self, what: str, fn):
        return retry(what, fn, url=self.url)

    # -- the storage-wide lock

    @contextlib.contextmanager
    def lock(self, key: str | None = None):
        """Exclusive across processes and machines, per study (or per ``key``); dies with its holder."""
        if self.kind == "postgresql":
            from sqlalchemy import text

            with self._pg_engine().connect() as conn:
                # a transaction-level advisory lock: released at commit, or when the session dies
                # (a killed worker); a vanished machine's idle transaction is ended by the server
                conn.execute(text("SET LOCAL idle_in_transaction_session_timeout = '300s'"))
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _advisory_key(key or self.study_name)})
                try:
                    yield
                finally:
                    conn.rollback()
        else:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            with open_no_follow(f"{self.path}.budget.lock", "a") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh, fcntl.LOCK_UN)

    def _pg_engine(self):
        """The storage's engine, or before the storage is open a small engine of our own."""
        storage = getattr(self, "storage", None)
        if storage is not None:
            return compat.rdb_engine(storage)
        if self._engine is None:
            import sqlalchemy
            from sqlalchemy.pool import NullPool

            try:
                self._engine = sqlalchemy.create_engine(self.url, poolclass=NullPool, pool_pre_ping=True)
                self._engine.connect().close()
            except Exception as e:  # a server down (retried by the caller), a bad URL, a missing driver
                if classify(e) is not None:
                    raise
                self._engine = None
                raise SpecError(f"storage {mask(self.url)!r}: cannot open: {mask(e)}") from None
        return self._engine

    # -- reading

    def study_id(self) -> int:
        if self._study_id is None:
            self._study_id = self._retry("reading the study", lambda: self.storage.get_study_id_from_name(
                self.study_name))
        return self._study_id

    def complete(self) -> int:
        """How many COMPLETE trials the storage holds (a COUNT query on an RDB)."""
        return self._retry("counting the stored trials",
                           lambda: compat.count_complete(self.storage, self.study_id()))

    def next_worker_index(self) -> int:
        """The index the next worker will claim (how many have claimed one so far)."""
        return self._retry("reading the worker index", lambda: int(compat.study_system_attr(
            self.storage, self.study_id(), WORKER_INDEX_ATTR, 0)))

    def claim_worker_index(self) -> int:
        """A worker index unique in this storage (0, 1, 2, ... over every machine and rerun)."""
        def claim():
            with self.lock():
                index = self.next_worker_index()
                compat.set_study_system_attr(self.storage, self.study_id(), WORKER_INDEX_ATTR, index + 1)
            return index

        return self._retry("claiming a worker index", claim)

    # -- writing

    @contextlib.contextmanager
    def room(self):
        """Hold the lock and yield how many trials may still be appended (0 once the coordinator is gone)."""
        if self.parent_pid is not None and os.getppid() != self.parent_pid:
            yield 0  # orphaned: stop without writing
            return
        with self.lock():
            yield max(self.budget - self.complete(), 0)

    def __call__(self, study, trials) -> int:
        """Append ``trials`` (finished, in order) to ``study`` up to the budget; return how many."""
        trials = list(trials)

        def append():
            with self.room() as room:
                take = trials[:room]
                compat.add_trials(study, take)  # (one transaction on an RDB)
            return len(take)

        return self._retry("appending trials", append)


class _Limited:
    """A study whose ``add_trial`` stores at most ``room`` trials and counts the ones refused."""

    def __init__(self, study, room: int):
        self._study, self.room, self.refused = study, room, 0

    def add_trial(self, trial) -> None:
        if self.room > 0:
            self._study.add_trial(trial)
            self.room -= 1
        else:
            self.refused += 1

    def add_trials(self, trials) -> None:
        """The first ``room`` of ``trials`` in one call (optuna_compat.add_trials: one transaction on an RDB)."""
        trials = list(trials)
        take = trials[:max(self.room, 0)]
        compat.add_trials(self._study, take)
        self.room -= len(take)
        self.refused += len(trials) - len(take)

    def __getattr__(self, name):
        return getattr(self._study, name)


# ------------------------------------------------------------ the worker process


def shared_solver(problem, shared: SharedBudget, **options):
    """The study's OptunaSolver, appending through ``shared`` (never past its budget; stops once it is full).

    OptunaSolver stores told trials in ``_append(disk, mem)`` with
    ``disk.add_trial``; here each such append runs holding the storage-wide
    lock, on a ``disk`` that takes no more than the room left. When a trial
    is refused, the storage is full: the search ends (its own budget is
    lowered to what it has evaluated).
    """

    class SharedOptunaSolver(OptunaSolver):
        def _append(self, disk, mem) -> None:
            with shared.room() as room:
                limited = _Limited(disk, room)
                super()._append(limited, mem)
            if limited.refused:
                self.budget = self.n_evaluated

    return SharedOptunaSolver(problem, **options)


def _worker_main(payload: dict) -> tuple[str, str]:
    """One worker: the study's OptunaSolver on the shared storage until the budget is stored.

    Returns the outcome ``(kind, message)``: ('ok', ''), (DseError class name, message) or ('bug', line).
    """
    import dataclasses


    try:
        settings = SolverSettings(**payload["settings"])
        spec = load_study(payload["study"], out_given=True)  # the coordinator checked the output
        spec = dataclasses.replace(spec, solver=settings, output=Path(payload["output"]))
        problem = make_problem(spec)
        shared = SharedBudget(payload["storage"], spec.name, settings.trials, parent_pid=payload["parent"])
        index = shared.claim_worker_index()
        solver = shared_solver(problem, shared, seed=settings.seed + index, budget=settings.trials,
                               method=settings.method, batch=settings.batch, storage=payload["storage"],
                               study_name=spec.name, population=settings.population,
                               prescreen=settings.prescreen,
                               evaluation=evaluation_tag(settings))
        solver.run()
        return "ok", ""
    except DseError as e:
        return type(e).__name__, str(e)
    except BaseException as e:  # a bug: the traceback goes to stderr, one line to the coordinator
        traceback.print_exc()
        return "bug", f"{type(e).__name__}: {e}"


def worker_cli() -> None:
    """Entry of a worker process: ``python -P -c 'from dse.study.distributed import worker_cli; worker_cli()'``.

    A fresh interpreter (like multiprocessing's spawn, without re-importing
    the caller's ``__main__``, so ``run_study(workers=4)`` works from any
    script). The job comes in the environment variable :data:`PAYLOAD_ENV`
    (never on the command line: the storage URL may hold a password), the
    outcome goes back as one JSON line on the pipe ``result_fd``.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C goes to the coordinator, which stops the workers
    payload = json.loads(os.environ.pop(PAYLOAD_ENV))
    kind, message = _worker_main(payload)
    with os.fdopen(payload["result_fd"], "w") as f:
        f.write(json.dumps([kind, message]) + "\n")
    sys.exit(0 if kind == "ok" else 1)


def _start_worker(payload: dict) -> tuple[subprocess.Popen, int]:
    read, write = os.pipe()
    env = dict(os.environ)
    here = str(Path(__file__).resolve().parents[2])  # the folder holding dse/, objectives/, constraints/
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # -P: no current folder (or script folder) on sys.path, so a yaml.py or optuna.py where `dse run` was
    # started is never imported by a worker (issue 21); dse itself comes from PYTHONPATH above
    # the job (with the storage URL, which may hold a password) in the environment, readable only by this
    # user, not on the command line, which `ps` shows to everyone (issue 21)
    env[PAYLOAD_ENV] = json.dumps({**payload, "result_fd": write})
    cmd = [sys.executable, "-P", "-c", "from dse.study.distributed import worker_cli; worker_cli()"]
    try:
        proc = subprocess.Popen(cmd, pass_fds=(write,), env=env)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return proc, read


def _read_outcome(fd: int):
    with os.fdopen(fd, "r") as f:
        text = f.read()
    try:
        kind, message = json.loads(text.strip().splitlines()[-1])
        return str(kind), str(message)
    except (ValueError, IndexError, TypeError):
        return None  # the worker died before it could answer


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _every_design_stored(spec, done: int) -> bool:
    """Whether the study's design space is discrete and holds no more designs than the ``done`` stored: the
    workers then stop before the budget, each having found no design left (dse.solvers.optuna_search)."""
    from dse.study.problem import design_space

    space = design_space(spec)
    return bool(space.is_discrete) and space.grid_size() <= done


def run_workers(spec, storage_url: str, *, bar=None) -> int:
    """Fill the shared storage to the study's budget with ``spec.solver.workers`` processes.

    Returns how many COMPLETE trials the storage holds afterwards (>= the budget; or every design of a discrete
    space smaller than the budget, where the workers stop as one process does). Raises the workers' own DseError
    if they fail on one (a bad storage, another study under the same name) and SolverError if they all stopped
    before the budget was stored (killed), saying how many trials are stored and that the same command resumes.
    ``bar`` (tqdm) shows the stored count.
    """
    import dataclasses

    import optuna

    s = spec.solver
    budget = SharedBudget(storage_url, spec.name, s.trials)
    def create():
        try:  # made here, once, so that the workers only load it
            optuna.create_study(storage=budget.storage, study_name=spec.name,
                                directions=[t.direction for t in spec.objectives], load_if_exists=True)
        except Exception as e:
            if classify(e) is not None:
                raise  # the storage failed: retried
            raise SpecError(f"storage {mask(storage_url)}: cannot open study '{spec.name}': {mask(e)}") from None

    retry("opening the study", create, url=storage_url)
    done = budget.complete()
    remaining = s.trials - done
    if remaining <= 0:
        return done
    n = max(1, min(int(s.workers), -(-remaining // max(int(s.batch), 1))))
    payload = {"study": str(Path(spec.path).resolve()), "settings": dataclasses.asdict(s),
               "output": str(Path(spec.output).resolve()), "storage": storage_url, "parent": os.getpid()}
    procs: list[tuple[subprocess.Popen, int]] = []
    try:
        for _ in range(n):
            procs.append(_start_worker(payload))
        while any(p.poll() is None for p, _ in procs):
            time.sleep(POLL_S)
            if bar is not None:
                with contextlib.suppress(Exception):
                    bar.n = min(budget.complete(), s.trials)
                    bar.refresh()
    except BaseException:  # Ctrl-C or an error here: stop the workers; appended batches stay
        for p, fd in procs:
            if p.poll() is None:
                p.terminate()
        for p, fd in procs:
            with contextlib.suppress(Exception):
                p.wait(10)
            with contextlib.suppress(OSError):
                os.close(fd)
        raise
    outcomes = [(i, p.wait(), _read_outcome(fd)) for i, (p, fd) in enumerate(procs)]
    done = budget.complete()
    if bar is not None:
        bar.n = min(done, s.trials)
        bar.refresh()
    for i, code, msg in outcomes:
        if msg and msg[0] not in ("ok", "bug"):
            if msg[0] == StorageError.__name__ and done >= s.trials:
                continue  # its storage failed, the others completed the budget: a warning below
            cls = getattr(errors, msg[0], None)
            raise (cls if isinstance(cls, type) and issubclass(cls, DseError) else SolverError)(mask(msg[1]))
    died = [f"worker {i} " + (f"was killed by {_signal_name(code)}" if code < 0
                              else f"failed: {msg[1]}" if msg else f"exited with code {code}")
            for i, code, msg in outcomes if not (msg and msg[0] == "ok")]
    bugs = [f"worker {i}: {msg[1]}" for i, _, msg in outcomes if msg and msg[0] == "bug"]
    if bugs and done < s.trials:  # not a user mistake: no DseError, so the CLI shows it as a crash
        raise RuntimeError(mask(f"dse worker crashed (traceback above): {'; '.join(bugs)}"))
    if done < s.trials and not died and _every_design_stored(spec, done):
        return done  # (a discrete space smaller than the budget: every design is evaluated, as one process stops)
    if done < s.trials:
        raise SolverError(f"the storage holds {done:,} of the {s.trials:,} trials; {'; '.join(died) or 'the workers stopped'}. "
                          f"Run the same command again to resume (stored trials are kept)")
    if died:
        print(mask(f"dse: warning: {'; '.join(died)}; the other workers completed the budget"), file=sys.stderr)
    return done
