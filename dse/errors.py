"""The one exception tree of dse.

Every mistake a user can make ends in a :class:`DseError` whose message names
where it happened (file, line, key) and what was expected. The CLI turns it
into one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations


class DseError(Exception):
    """Root of every error dse raises on purpose."""


#: A problem's text is cut to this many characters (a value quoted in a message may be huge: an alias bomb,
#: a pasted list); the cut says how much was left out.
MAX_PROBLEM_CHARS = 2000
#: At most this many problems are listed (the rest are counted).
MAX_PROBLEMS = 100


#: Characters str.splitlines() breaks a line at: inside one problem (a key or a value quoted from the file) they
#: are shown escaped, so every problem stays one line of the message (the fuzzer of issue 21 found a YAML key
#: with a vertical tab splitting its problem in two, the second half without its file:line:col).
_LINE_BREAKS = {c: repr(c)[1:-1] for c in "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"}
_ONE_LINE = str.maketrans(_LINE_BREAKS)


def _clip(text: str) -> str:
    text = text.translate(_ONE_LINE)
    if len(text) <= MAX_PROBLEM_CHARS:
        return text
    return f"{text[:MAX_PROBLEM_CHARS]}... ({len(text) - MAX_PROBLEM_CHARS:,} more characters)"


class SpecError(DseError):
    """A YAML file, a command-line value or an API argument is wrong.

    ``problems`` holds every problem found (validation reports all at once);
    ``str(err)`` lists them one per line.
    """

    def __init__(self, problems: str | list[str]):
        if isinstance(problems, str):
            problems = [problems]
        problems = [_clip(str(p)) for p in problems]
        if len(problems) > MAX_PROBLEMS:
            problems = problems[:MAX_PROBLEMS] + [f"... and {len(problems) - MAX_PROBLEMS} more problems"]
        self.problems = problems
        super().__init__("\n".join(self.problems))


class UnitError(SpecError):
    """A quantity has no unit, an unknown unit, or the wrong dimension."""


class InfeasibleError(DseError):
    """No design point satisfies the constraints."""


class SolverError(DseError):
    """A solver could not produce an answer (status, budget, empty space)."""


class StorageError(DseError):
    """The study's storage failed: a PostgreSQL or SQLite database unreachable, locked or refusing a write, a
    journal file that cannot be written (disk full).

    Not the user's file being wrong (that is a :class:`SpecError`): the same command may well work later.
    Transient failures are retried with bounded backoff first (:mod:`dse.storage`); the trials already stored
    are kept, and the same command resumes. The CLI exits with :data:`EXIT_STORAGE`, and the message never
    holds a password (``postgresql://user:***@host/db``).
    """


#: Exit codes of the `dse` command (README: "Errors and exit codes").
EXIT_OK = 0
EXIT_CRASH = 1  # a bug: Python's own exit code for an uncaught exception, with its traceback
EXIT_USER_ERROR = 2  # SpecError, UnitError, InfeasibleError, SolverError, and argparse's usage errors
EXIT_STORAGE = 3  # StorageError
EXIT_INTERRUPTED = 130


def did_you_mean(name: str, choices, aliases=None) -> str:
    """' (did you mean 'x'?)' for the closest of ``choices``, or '' if none is close. ``aliases``: other names
    (a deprecated one) -> the choice to suggest where one of them is the closest."""
    import difflib

    aliases = dict(aliases or {})
    choices = [str(c) for c in choices] + list(aliases)
    close = difflib.get_close_matches(str(name), choices, n=1, cutoff=0.6)
    if not close:
        low = {c.lower(): c for c in choices}
        close = difflib.get_close_matches(str(name).lower(), list(low), n=1, cutoff=0.6)
        close = [low[c] for c in close]
    return f" (did you mean '{aliases.get(close[0], close[0])}'?)" if close else ""


def unknown_name(kind: str, name: str, choices, aliases=None) -> str:
    """Message for an unknown name: what was given, the closest match (``aliases``: see :func:`did_you_mean`), the
    valid ones."""
    choices = sorted(str(c) for c in choices)
    listed = ", ".join(choices) if len(choices) <= 40 else ", ".join(choices[:40]) + ", ..."
    return f"unknown {kind} '{name}'{did_you_mean(name, choices, aliases)}; known: {listed}"
