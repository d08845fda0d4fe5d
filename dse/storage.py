"""A study's storage under outages and contention: bounded retries, one clear error, no passwords shown.

A shared Optuna storage (PostgreSQL, SQLite) can fail while a study runs: the
server restarts, the network drops, four workers contend for one SQLite
file ("database is locked", which Optuna reports as "exception during the
commit ... e.g. exceeding max length"). Every storage operation of a study
(opening it, loading the study, counting, appending a batch, claiming a
worker index) goes through :func:`retry`:

* a *transient* failure (connection refused or lost, a timeout, a locked
  database) is retried up to :data:`ATTEMPTS` times, waiting
  :data:`BASE_DELAY_S`, twice that, ... up to :data:`MAX_DELAY_S` between
  attempts (with jitter, so many workers do not return at once): 38 to 48 s
  in all, enough for a database restart;
* any other failure of the storage layer (a refused statement, a journal
  file that cannot be written) is not retried;
* either way the end is one :class:`~dse.errors.StorageError` (exit code 3):
  what failed, on which storage (masked), after how many attempts, and that
  the stored trials are kept and the same command resumes. No traceback.

What is retried is idempotent: opening and reading are; an append of a
batch is retried as a whole (the lock is taken again, the room recounted, and
the appends resume after the last trial stored), so a retry never stores a
trial twice, except when the server committed a write whose acknowledgement
was lost with the connection (then that one trial is stored twice and the
count is one over the budget, as a rerun would report).

Passwords: :func:`mask` replaces the password of every URL
(``postgresql://user:***@host/db``), ``password=...`` pairs and every
password seen in a storage URL so far, in any text. Everything dse prints
or writes about a storage goes through it. Worker processes get the URL
through their environment, not their command line (which ``ps`` shows to
every user).
"""

from __future__ import annotations

import random
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import unquote

from dse.errors import DseError, StorageError

T = TypeVar("T")

#: Attempts per storage operation (the first and the retries).
ATTEMPTS = 10
#: Wait before the first retry, doubled each retry up to MAX_DELAY_S (times a jitter in [0.8, 1]).
BASE_DELAY_S = 0.5
MAX_DELAY_S = 8.0

#: time.sleep, called between attempts (tests replace it to count attempts without waiting).
sleep: Callable[[float], None] = time.sleep

_SECRETS: set[str] = set()
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@'\"]*):(?P<pw>[^@\s'\"]*)@")
_KEY_PASSWORD = re.compile(r"(?P<head>\b(?:password|passwd|pwd)\s*=\s*)(?P<pw>'[^']*'|\"[^\"]*\"|[^&\s'\";]+)",
                           re.IGNORECASE)
_local = threading.local()


# ------------------------------------------------------------ masking


def remember(url) -> None:
    """Note the password of ``url`` (if any), so that :func:`mask` hides it wherever it appears later."""
    for m in _URL_PASSWORD.finditer(str(url)):
        pw = m.group("pw")
        if pw:
            _SECRETS.add(pw)
            _SECRETS.add(unquote(pw))


def mask(text) -> str:
    """``text`` (a URL, a message, an exception) with every password replaced by ``***``."""
    s = str(text)
    remember(s)
    s = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@" if m.group("pw") else m.group(0), s)
    s = _KEY_PASSWORD.sub(lambda m: f"{m.group('head')}***", s)
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if len(secret) >= 3:  # ('ab' would mask half the message; a password that short is not a secret)
            s = s.replace(secret, "***")
    return s


# ------------------------------------------------------------ what failed


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def classify(exc: BaseException) -> str | None:
    """'transient' (retry it), 'storage' (a storage failure not worth retrying) or None (not the storage's).

    Transient: SQLAlchemy's OperationalError, InterfaceError, TimeoutError and DisconnectionError, a
    connection SQLAlchemy invalidated, and the raw driver errors of those kinds (sqlite3, psycopg2),
    anywhere in the exception's chain (Optuna wraps them in StorageInternalError). A SQLite file that
    cannot be opened at all is not transient. Storage: any other SQLAlchemy or driver database error,
    Optuna's StorageInternalError, and an OSError (a journal file that cannot be written). None: dse's
    own errors, interrupts, and everything else (a bug stays a bug).
    """
    if isinstance(exc, (DseError, KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)):
        return None
    import sqlite3

    transient_types: list[type] = [sqlite3.OperationalError]
    storage_types: list[type] = [sqlite3.Error, OSError]
    try:
        from sqlalchemy import exc as sa
    except ImportError:  # pragma: no cover - sqlalchemy is a dependency
        sa = None
    if sa is not None:
        transient_types += [sa.OperationalError, sa.InterfaceError, sa.TimeoutError, sa.DisconnectionError]
        storage_types += [sa.DBAPIError, sa.PendingRollbackError, sa.ResourceClosedError]
    try:
        import psycopg2
    except ImportError:
        pass
    else:
        transient_types += [psycopg2.OperationalError, psycopg2.InterfaceError]
        storage_types += [psycopg2.Error]
    try:
        from optuna.exceptions import StorageInternalError
    except ImportError:  # pragma: no cover
        pass
    else:
        storage_types.append(StorageInternalError)
    kind = None
    for e in _chain(exc):
        if isinstance(e, DseError):
            return None
        text = str(e)
        if "unable to open database file" in text or "file is not a database" in text:
            return "storage"  # a SQLite path that cannot be a database: waiting does not help
        if isinstance(e, tuple(transient_types)) or getattr(e, "connection_invalidated", False):
            return "transient"
        if kind is None and isinstance(e, tuple(storage_types)):
            kind = "storage"
    return kind


def _cause(exc: BaseException) -> str:
    """The innermost database error's first line, masked and short."""
    root = exc
    for e in _chain(exc):
        root = e
    for e in _chain(exc):  # prefer the driver's own error (psycopg2, sqlite3) over the wrappers' text
        if type(e).__module__.split(".")[0] in ("psycopg2", "sqlite3", "psycopg"):
            root = e
            break
    text = str(root).strip().splitlines()
    line = next((t.strip() for t in text if t.strip() and not t.strip().startswith("(Background")), "")
    name = type(root).__name__
    out = f"{name}: {line}" if line else name
    return mask(out if len(out) <= 300 else out[:300] + "...")


# ------------------------------------------------------------ retrying


def delays(attempts: int | None = None, rng: random.Random | None = None) -> list[float]:
    """The waits between ``attempts`` attempts (one fewer than attempts), jittered."""
    n = ATTEMPTS if attempts is None else int(attempts)
    rng = rng or random.Random()
    return [min(BASE_DELAY_S * 2**i, MAX_DELAY_S) * (0.8 + 0.2 * rng.random()) for i in range(max(n - 1, 0))]


def retry(what: str, fn: Callable[[], T], *, url, attempts: int | None = None, quiet: bool = False) -> T:
    """``fn()``, retried on transient storage failures; a StorageError naming ``what`` and ``url`` (masked)
    when it keeps failing or fails otherwise. Other exceptions pass through unchanged.

    Nested calls (an operation made of retried operations) retry only at the outermost level, so the
    attempts do not multiply. The first retry of an operation says so on stderr, once.
    """
    if getattr(_local, "depth", 0):
        return fn()
    remember(url)
    waits = delays(attempts)
    t0 = time.monotonic()
    _local.depth = 1
    try:
        for attempt in range(1, len(waits) + 2):
            try:
                return fn()
            except BaseException as e:  # noqa: BLE001 - classified below; anything else is re-raised
                kind = classify(e)
                if kind is None:
                    raise
                if kind == "storage" or attempt > len(waits):
                    tries = f"after {attempt} attempts over {time.monotonic() - t0:.0f} s" if attempt > 1 else ""
                    raise StorageError(
                        f"storage {mask(url)}: {what} failed{' ' + tries if tries else ''} ({_cause(e)}); the "
                        f"trials stored so far are kept: run the same command again to resume once the storage "
                        f"works") from None
                if attempt == 1 and not quiet:
                    print(f"dse: storage {mask(url)}: {what} failed ({_cause(e)}); retrying for up to "
                          f"{sum(waits):.0f} s", file=sys.stderr, flush=True)
                sleep(waits[attempt - 1])
    finally:
        _local.depth = 0
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["ATTEMPTS", "BASE_DELAY_S", "MAX_DELAY_S", "classify", "delays", "mask", "remember", "retry"]
