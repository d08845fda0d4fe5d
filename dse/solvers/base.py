"""What solvers solve (:class:`Problem`), what they return (:class:`SolverResult`)
and the interface they share (:class:`Solver`).

A problem is a design space plus one vectorized evaluation: a batch of design
points in, an ``(n, m)`` array of objective values and an ``(n, c)`` array of
constraint values out. Constraints follow Optuna's convention (ARCHITECTURE,
rule 5): ``<= 0`` is feasible and a positive value is the violation in the
constraint's own unit. Every solver calls the same ``evaluate``; none carries
physics of its own.

A point is *feasible* when every constraint value is ``<= 0`` (NaN counts as
violated) and no objective value is NaN.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from dse.errors import InfeasibleError, SolverError, SpecError
from dse.pareto import check_directions, non_dominated_sort
from dse.space import DesignSpace

__all__ = [
    "Problem",
    "SolverResult",
    "Solver",
    "STATUS_OPTIMAL",
    "STATUS_FEASIBLE",
    "STATUS_INFEASIBLE",
    "FEASIBLE",
    "PARETO_RANK",
    "feasible_mask",
]

#: Every point of the (finite) space was evaluated: the front is exact.
STATUS_OPTIMAL = "optimal"
#: Feasible points were found by a search that did not visit every point.
STATUS_FEASIBLE = "feasible"
#: No evaluated point is feasible.
STATUS_INFEASIBLE = "infeasible"

#: Result-table column names reserved by dse.
FEASIBLE = "feasible"
PARETO_RANK = "pareto_rank"
_RESERVED = (FEASIBLE, PARETO_RANK)

Evaluate = Callable[[dict[str, np.ndarray]], tuple[np.ndarray, np.ndarray | None]]


def feasible_mask(objectives: np.ndarray, constraints: np.ndarray) -> np.ndarray:
    """Rows whose constraints are all ``<= 0`` (NaN violates) and whose objectives have no NaN."""
    ok = np.all(constraints <= 0, axis=1) if constraints.shape[1] else np.ones(len(constraints), dtype=bool)
    return ok & ~np.isnan(objectives).any(axis=1)


def _names(what: str, names) -> tuple[str, ...]:
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    for n in names:
        if not isinstance(n, str) or not n:
            raise SpecError(f"problem: {what} names must be non-empty strings, got {n!r}")
    return names


@dataclass(frozen=True, eq=False)
class Problem:
    """A design space, a vectorized evaluation, and the names and directions of its outputs.

    ``evaluate(params)`` takes ``{parameter name: array of n values}`` and
    returns ``(objectives, constraints)``: arrays of shape ``(n, m)`` and
    ``(n, c)`` in the order of ``objective_names`` and ``constraint_names``
    (``constraints`` may be None when there are none). It must be a pure
    function of its input (same points, same values).
    """

    space: DesignSpace
    evaluate: Evaluate
    objective_names: tuple[str, ...]
    directions: tuple[str, ...]
    constraint_names: tuple[str, ...] = ()
    #: ``describe(params) -> str``: one trial's parameters as people read them ('clock = 1.41 GHz, ...'), stored
    #: with each Optuna trial (user attribute ``dse:params``) so optuna-dashboard shows units, not raw SI
    describe: Callable[[Mapping], str] | None = None

    def __post_init__(self):
        if not isinstance(self.space, DesignSpace):
            raise SpecError(f"problem: space must be a DesignSpace, got {type(self.space).__name__}")
        if not callable(self.evaluate):
            raise SpecError("problem: evaluate must be callable")
        objectives = _names("objective", self.objective_names)
        constraints = _names("constraint", self.constraint_names)
        if not objectives:
            raise SpecError("problem: it has no objectives; give at least one")
        directions = check_directions(self.directions, len(objectives))
        seen: dict[str, str] = {}
        for kind, names in (("parameter", self.space.names), ("objective", objectives), ("constraint", constraints)):
            for n in names:
                if n in _RESERVED:
                    raise SpecError(f"problem: '{n}' is reserved for the result table; rename the {kind}")
                if n in seen:
                    raise SpecError(f"problem: the name '{n}' is used by a {seen[n]} and a {kind}; names must be unique")
                seen[n] = kind
        object.__setattr__(self, "objective_names", objectives)
        object.__setattr__(self, "constraint_names", constraints)
        object.__setattr__(self, "directions", directions)

    @property
    def n_objectives(self) -> int:
        return len(self.objective_names)

    @property
    def n_constraints(self) -> int:
        return len(self.constraint_names)

    def evaluate_batch(self, params: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Call ``evaluate`` and check its answer: float arrays of shape (n, m) and (n, c).

        Raises SolverError when the batch is malformed or the evaluation
        returns the wrong shapes.
        """
        names = self.space.names
        missing = [n for n in names if n not in params]
        if missing:
            raise SolverError(f"batch of design points lacks parameters {missing}")
        lengths = {n: len(np.asarray(params[n])) for n in names}
        n = next(iter(lengths.values()))
        if any(v != n for v in lengths.values()):
            raise SolverError(f"batch of design points has columns of different lengths: {lengths}")
        out = self.evaluate({k: params[k] for k in names})
        if not (isinstance(out, tuple) and len(out) == 2):
            raise SolverError("problem evaluate: must return a pair (objectives, constraints)")
        F = np.asarray(out[0], dtype=float)
        m, c = self.n_objectives, self.n_constraints
        if F.ndim == 1 and m == 1:
            F = F.reshape(-1, 1)
        if F.shape != (n, m):
            raise SolverError(f"problem evaluate: objectives have shape {F.shape}, expected ({n}, {m}) for {list(self.objective_names)}")
        G = np.zeros((n, 0)) if out[1] is None else np.asarray(out[1], dtype=float)
        if G.ndim == 1 and c == 1:
            G = G.reshape(-1, 1)
        if G.shape != (n, c):
            raise SolverError(f"problem evaluate: constraints have shape {G.shape}, expected ({n}, {c}) for {list(self.constraint_names)}")
        return F, G


def _violation_summary(table: pd.DataFrame, constraint_names: Sequence[str], objective_names: Sequence[str]) -> tuple[str, list[str]]:
    """Why nothing is feasible: (headline naming the worst constraint, one line per rejecting cause)."""
    n = len(table)
    rows: list[tuple[int, float, str]] = []
    for name in constraint_names:
        v = table[name].to_numpy(dtype=float)
        bad = ~(v <= 0)
        count = int(bad.sum())
        if count == 0:
            continue
        pos = v[bad & ~np.isnan(v)]
        n_nan = int(np.isnan(v).sum())
        if pos.size:
            text = f"constraint '{name}' rejected {count:,} of {n:,} points (violation max {pos.max():.6g}, median {np.median(pos):.6g})"
        else:
            text = f"constraint '{name}' rejected {count:,} of {n:,} points"
        if n_nan:
            text += f"; {n_nan:,} evaluated to NaN"
        rows.append((count, float(pos.max()) if pos.size else np.inf, text))
    nan_obj = int(table[list(objective_names)].isna().any(axis=1).sum()) if n else 0
    if nan_obj:
        rows.append((nan_obj, -np.inf, f"{nan_obj:,} of {n:,} points have a NaN objective value"))
    rows.sort(key=lambda r: (-r[0], -r[1]))
    lines = [r[2] for r in rows]
    headline = lines[0] if lines else "no point was evaluated"
    return headline, lines


@dataclass(frozen=True, eq=False)
class SolverResult:
    """Every point a solver evaluated, in evaluation order, and how the search ended.

    ``table`` has one row per evaluated point and the columns: the parameters
    (space order), the objectives, the constraints, ``feasible`` (bool) and
    ``pareto_rank`` (0 = Pareto front of the feasible points, -1 =
    infeasible). ``status`` is ``'optimal'`` (every point of a finite space was
    evaluated, the front is exact), ``'feasible'`` (a search that did not visit
    every point found feasible points) or ``'infeasible'`` (none of the
    evaluated points is feasible; ``message`` says which constraint rejected
    the most). A solver may use another status; it explains it in ``message``.
    """

    table: pd.DataFrame
    status: str
    message: str
    solver: str
    seed: int
    param_names: tuple[str, ...]
    objective_names: tuple[str, ...]
    directions: tuple[str, ...]
    constraint_names: tuple[str, ...] = ()
    info: dict = field(default_factory=dict)

    @property
    def n_evaluated(self) -> int:
        return len(self.table)

    @property
    def n_feasible(self) -> int:
        return int(self.table[FEASIBLE].sum())

    @property
    def feasible_points(self) -> pd.DataFrame:
        return self.table[self.table[FEASIBLE]]

    def pareto_front(self) -> pd.DataFrame:
        """The rows of rank 0: the Pareto-optimal feasible points (duplicates kept)."""
        return self.table[self.table[PARETO_RANK] == 0]

    def objectives(self, feasible_only: bool = False) -> np.ndarray:
        """The objective values as an (n, m) float array."""
        t = self.feasible_points if feasible_only else self.table
        return t[list(self.objective_names)].to_numpy(dtype=float)

    def require_feasible(self) -> SolverResult:
        """Return ``self`` if some point is feasible; otherwise raise InfeasibleError.

        The error names the constraint that rejected the most points, with the
        largest and the median violation among them (in the constraint's own
        unit), then every other cause.
        """
        if self.n_feasible:
            return self
        headline, lines = _violation_summary(self.table, self.constraint_names, self.objective_names)
        others = "".join(f"\n  also: {line}" for line in lines[1:])
        raise InfeasibleError(
            f"no feasible design point among the {self.n_evaluated:,} evaluated by {self.solver}: {headline}{others}"
        )


class Solver(abc.ABC):
    """Base of every solver: it searches a :class:`Problem` and returns a :class:`SolverResult`.

    Life cycle (one instance, one search):

    - ``__init__(problem, *, seed, budget, ...)`` is called once, before any
      evaluation. Subclasses check their own options here and raise SpecError
      (a bad value) or SolverError (a request the solver cannot honour, e.g. a
      grid bigger than the budget) so that a study fails before it spends time.
      Nothing is evaluated in ``__init__``.
    - ``run()`` is called once. It asks :meth:`evaluate` for batches of design
      points (as many as it likes, never more than ``budget`` points in all) and
      ends with ``return self.result(...)``.
    - :meth:`evaluate` is called by ``run()`` for every batch: the only path to
      the problem's ``evaluate``. It enforces the budget, records the rows and
      returns ``(objectives, constraints, feasible)`` for the solver to learn from.
    - :meth:`result` is called once, at the end of ``run()``: it assembles the
      table, computes feasibility and Pareto ranks, and the status and message.

    Same problem, same seed, same options -> same result (ARCHITECTURE, rule 6).
    ``budget`` is the largest number of points evaluated; None means the
    solver's ``default_budget``.
    """

    #: Short name, used in messages and study files.
    name: ClassVar[str] = "solver"
    #: Budget when none is given (None: a budget is required).
    default_budget: ClassVar[int | None] = None

    def __init__(self, problem: Problem, *, seed: int = 0, budget: int | None = None):
        if not isinstance(problem, Problem):
            raise SpecError(f"{self.name}: expected a Problem, got {type(problem).__name__}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise SpecError(f"{self.name}: seed must be an integer >= 0, got {seed!r}")
        if budget is None:
            budget = self.default_budget
            if budget is None:
                raise SpecError(f"{self.name}: a budget (maximum number of evaluated points) is required")
        if isinstance(budget, bool) or not isinstance(budget, (int, np.integer)) or budget < 1:
            raise SpecError(f"{self.name}: budget must be an integer >= 1, got {budget!r}")
        self.problem = problem
        self.seed = int(seed)
        self.budget = int(budget)
        self._batches: list[tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]] = []
        self.n_evaluated = 0

    @property
    def remaining(self) -> int:
        """Points that may still be evaluated."""
        return self.budget - self.n_evaluated

    @abc.abstractmethod
    def run(self) -> SolverResult:
        """Search, calling :meth:`evaluate` for each batch, and ``return self.result(...)``."""

    def evaluate(self, params: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Evaluate one batch and record it; return ``(objectives, constraints, feasible)``.

        Raises SolverError if the batch would take the solver past its budget
        (a solver bug: solvers size their batches with :attr:`remaining`).
        """
        n = len(np.asarray(next(iter(params.values())))) if params else 0
        if n > self.remaining:
            raise SolverError(
                f"{self.name}: a batch of {n:,} points would exceed the budget of {self.budget:,} "
                f"({self.n_evaluated:,} already evaluated)"
            )
        F, G = self.problem.evaluate_batch(params)
        feasible = feasible_mask(F, G)
        self._batches.append(({k: np.asarray(params[k]) for k in self.problem.space.names}, F, G))
        self.n_evaluated += n
        return F, G, feasible

    def evaluated(self) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
        """(params, objectives, constraints) of everything evaluated so far, in order."""
        p = self.problem
        names = p.space.names
        if not self._batches:
            return {k: np.array([]) for k in names}, np.zeros((0, p.n_objectives)), np.zeros((0, p.n_constraints))
        return ({k: np.concatenate([b[0][k] for b in self._batches]) for k in names},
                np.concatenate([b[1] for b in self._batches]), np.concatenate([b[2] for b in self._batches]))

    def result(self, *, exhaustive: bool = False, status: str | None = None, note: str = "", info: dict | None = None) -> SolverResult:
        """Assemble the :class:`SolverResult` of everything evaluated so far.

        ``exhaustive``: every point of the space was evaluated, so a feasible
        result has status 'optimal' (else 'feasible'); no feasible point ->
        'infeasible'. ``status`` overrides that choice; ``note`` is appended to
        the message.
        """
        p = self.problem
        cols, F, G = self.evaluated()
        feasible = feasible_mask(F, G)
        ranks = non_dominated_sort(F, p.directions, feasible)
        data: dict[str, np.ndarray] = dict(cols)
        data.update({name: F[:, j] for j, name in enumerate(p.objective_names)})
        data.update({name: G[:, j] for j, name in enumerate(p.constraint_names)})
        data[FEASIBLE] = feasible
        data[PARETO_RANK] = ranks
        table = pd.DataFrame(data)
        n, n_feas = len(table), int(feasible.sum())
        if n_feas == 0:
            auto = STATUS_INFEASIBLE
            headline, _ = _violation_summary(table, p.constraint_names, p.objective_names)
            scope = "the whole space was evaluated" if exhaustive else "the search did not visit every point"
            message = f"no feasible point among {n:,} evaluated ({scope}): {headline}"
        else:
            auto = STATUS_OPTIMAL if exhaustive else STATUS_FEASIBLE
            n_front = int((ranks == 0).sum())
            kind = "exact" if exhaustive else "approximate"
            message = f"{n_feas:,} of {n:,} evaluated points feasible; {n_front:,} on the {kind} Pareto front"
        if note:
            message = f"{message}; {note}"
        return SolverResult(
            table=table,
            status=status or auto,
            message=message,
            solver=self.name,
            seed=self.seed,
            param_names=p.space.names,
            objective_names=p.objective_names,
            directions=p.directions,
            constraint_names=p.constraint_names,
            info=dict(info or {}),
        )
