"""What the CP-SAT models share: the float -> integer conversion, status names, and the solver settings.

Determinism (ARCHITECTURE rule 6): every CP-SAT solve of dse runs one worker with the study's seed and is
limited in *deterministic* time (``max_deterministic_time``, CP-SAT's load-independent work measure), so
the same study gives the same answer on an idle or a loaded machine. A wall-clock limit stays as a
generous outer safety net only (:data:`WALL_LIMIT_S`, far above what the deterministic limit takes): should
it ever stop a solve that was not already proven (OPTIMAL or INFEASIBLE), the solve is an error
(:func:`wall_limit_error`, a SolverError naming the limit), never a different answer. Only the
deterministic limit may end a search with the best answer found so far (status FEASIBLE), since it ends it
at the same point on every machine.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dse.errors import SolverError, SpecError

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

__all__ = ["cp_sat", "to_int", "status_name", "new_solver", "wall_limit_error", "DETERMINISTIC_LIMIT", "WALL_LIMIT_S",
           "INT_LIMIT"]

#: Default work limit of one CP-SAT search, in CP-SAT's deterministic seconds (the load-independent limit).
DETERMINISTIC_LIMIT = 30.0
#: Default wall-clock safety net of one CP-SAT search, in seconds: far above what the deterministic limit
#: takes on a loaded machine, so that in practice the deterministic limit is the one that applies.
WALL_LIMIT_S = 300.0
#: The largest magnitude an integer coefficient or bound of the models may take (CP-SAT's int64, with room).
INT_LIMIT = 2**62


def to_int(x: float, unit: float = 1.0, rounding: str = "nearest") -> int:
    """``x / unit`` as a Python int: the one float -> integer conversion of the CP-SAT models.

    ``rounding``: 'nearest', 'down' (floor) or 'up' (ceil). A value a hair from an integer
    (relative 1e-12) is taken as that integer, so exact quantities stay exact whichever way is asked.
    """
    if rounding not in ("nearest", "down", "up"):
        raise SpecError(f"to_int: rounding must be 'nearest', 'down' or 'up', got {rounding!r}")
    v = float(x) / float(unit)
    if not math.isfinite(v):
        raise SolverError(f"cannot scale {x!r} / {unit!r} to an integer (not finite)")
    r = round(v)
    if abs(v - r) <= 1e-12 * max(1.0, abs(v)):
        out = int(r)
    elif rounding == "nearest":
        out = int(r)
    elif rounding == "down":
        out = math.floor(v)
    else:
        out = math.ceil(v)
    if abs(out) > INT_LIMIT:
        raise SolverError(f"cannot scale {x!r} / {unit!r} to a CP-SAT integer: {out:.3e} is beyond 2^62")
    return out


def status_name(status) -> str:
    """CP-SAT status by name: OPTIMAL, FEASIBLE, INFEASIBLE, MODEL_INVALID or UNKNOWN."""
    return getattr(status, "name", None) or str(status)


def cp_sat():
    """OR-Tools' CP-SAT module (``ortools.sat.python.cp_model``), imported at its first use: its import (~0.2 s:
    ``import dse.cli`` 0.83-0.86 -> 0.63-0.68 s without it) is paid only by what builds or solves a CP-SAT model,
    not by every `dse` command (a study Optuna searches, `dse validate`, `dse eval`) nor by each worker process."""
    from ortools.sat.python import cp_model
    return cp_model


def new_solver(*, deterministic_s: float, wall_s: float, seed: int, presolve: bool = True) -> cp_model.CpSolver:
    """A CP-SAT solver with dse's deterministic settings (module doc): one worker, ``seed``, a limit of
    ``deterministic_s`` deterministic seconds and ``wall_s`` wall seconds (the safety net); ``presolve=False``
    for a model CP-SAT's presolve gets wrong (dse.solvers.cpsat_split). CP-SAT's seed is a 32-bit signed
    integer: a study's seed (any value in [0, 2**32)) is taken modulo 2**31 (``--seed 4294967295`` crashed in
    CP-SAT's parameters, issue 21 item 6); below 2**31 it is the seed itself."""
    solver = cp_sat().CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.cp_model_presolve = bool(presolve)
    p.random_seed = int(seed) % 2**31
    p.max_deterministic_time = max(float(deterministic_s), 0.0)
    p.max_time_in_seconds = max(float(wall_s), 0.0)
    return solver


def wall_limit_error(what: str, wall_s: float, deterministic_s: float) -> SolverError:
    """The error of a solve stopped by the wall-clock safety net (module doc): what it was doing, both limits,
    and why no answer is given (one cut short by the machine's speed would depend on its load)."""
    return SolverError(f"{what}: the wall-clock time limit of {wall_s:g} s ran out before CP-SAT finished (a safety "
                       f"net; answers are set by the deterministic limit of {deterministic_s:g} CP-SAT deterministic "
                       f"seconds). No answer is given: one cut short by the wall clock would depend on the machine's "
                       f"load. Raise the wall-clock limit (time_limit_s) or rerun on a less loaded machine")
