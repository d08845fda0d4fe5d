"""What the CP-SAT models share: the float -> integer conversion, status names, and the solver settings.

Determinism (ARCHITECTURE rule 6): every CP-SAT solve of dse runs one worker with the study's seed and is
limited in *deterministic* time (``max_deterministic_time``, CP-SAT's load-independent work measure), so
the same study gives the same answer on an idle or a loaded machine. A wall-clock limit stays as a
generous outer safety net only; should it ever stop a solve first, the best feasible answer found so far
is returned (status FEASIBLE), and only a solve that found nothing fails (status UNKNOWN, a SolverError).
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from dse.errors import SolverError, SpecError

__all__ = ["to_int", "status_name", "new_solver", "DETERMINISTIC_LIMIT", "WALL_LIMIT_S", "INT_LIMIT"]

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


def new_solver(*, deterministic_s: float, wall_s: float, seed: int, presolve: bool = True) -> cp_model.CpSolver:
    """A CP-SAT solver with dse's deterministic settings (module doc): one worker, ``seed``, a limit of
    ``deterministic_s`` deterministic seconds and ``wall_s`` wall seconds (the safety net); ``presolve=False``
    for a model CP-SAT's presolve gets wrong (dse.solvers.cpsat_split)."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = 1
    p.cp_model_presolve = bool(presolve)
    p.random_seed = int(seed)
    p.max_deterministic_time = max(float(deterministic_s), 0.0)
    p.max_time_in_seconds = max(float(wall_s), 0.0)
    return solver
