"""Exhaustive grid and uniform random sampling: the ground truth and the baseline.

:class:`GridSolver` evaluates every point of the design space's grid in
chunks of bounded size; on a discrete space it is exact, and the other
solvers are tested against it. :class:`RandomSolver` draws points uniformly;
it costs nothing to set up and any search must beat it.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from dse.errors import SolverError, SpecError
from dse.solvers.base import Problem, Solver, SolverResult
from dse.space import DEFAULT_CHUNK, DEFAULT_RESOLUTION

__all__ = ["GridSolver", "RandomSolver"]


def _positive_int(solver: str, what: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{solver}: {what} must be an integer >= 1, got {value!r}")
    return value


class GridSolver(Solver):
    """Evaluate every grid point, ``chunk`` points per call to the evaluator.

    Integer and choice parameters contribute all their values; float and log
    parameters ``resolution`` values each. ``budget`` is the largest grid the
    solver accepts: a bigger grid raises SolverError at construction, before
    anything is evaluated. The seed is not used (the grid is deterministic).
    Status 'optimal' when the space is discrete (the front is exact); with
    continuous parameters the front is exact on the grid only, status 'feasible'.
    """

    name: ClassVar[str] = "grid"
    default_budget: ClassVar[int] = 1_000_000

    def __init__(self, problem: Problem, *, seed: int = 0, budget: int | None = None,
                 chunk: int = DEFAULT_CHUNK, resolution: int = DEFAULT_RESOLUTION):
        super().__init__(problem, seed=seed, budget=budget)
        self.chunk = _positive_int(self.name, "chunk", chunk)
        self.resolution = _positive_int(self.name, "resolution", resolution)
        space = problem.space
        self.grid_size = space.grid_size(self.resolution)
        if self.grid_size > self.budget:
            axes = " x ".join(f"{p.name} {len(p.grid_values(self.resolution))}" for p in space)
            raise SolverError(
                f"grid: the design space has {self.grid_size:,} grid points ({axes}), more than the "
                f"budget of {self.budget:,}; raise the budget, narrow the space or the resolution, "
                f"or use a sampling solver ('random', or Optuna with NSGA-II)"
            )

    def run(self) -> SolverResult:
        space = self.problem.space
        for batch in space.iter_grid(self.chunk, self.resolution):
            self.evaluate(batch)
        exact = space.is_discrete
        note = "" if exact else f"continuous parameters sampled at {self.resolution} grid values each"
        return self.result(exhaustive=exact, note=note,
                           info={"grid_size": self.grid_size, "resolution": self.resolution})


class RandomSolver(Solver):
    """Evaluate ``budget`` points drawn uniformly (with replacement), ``batch_size`` at a time.

    One numpy Generator seeded with ``seed`` draws every batch, so the same
    seed and batch size give the same points. On a small discrete space the
    draws repeat points; use the grid there.
    """

    name: ClassVar[str] = "random"
    default_budget: ClassVar[int] = 10_000

    def __init__(self, problem: Problem, *, seed: int = 0, budget: int | None = None, batch_size: int = 4096):
        super().__init__(problem, seed=seed, budget=budget)
        self.batch_size = _positive_int(self.name, "batch_size", batch_size)

    def run(self) -> SolverResult:
        rng = np.random.default_rng(self.seed)
        while self.remaining > 0:
            self.evaluate(self.problem.space.sample(min(self.batch_size, self.remaining), rng))
        return self.result(exhaustive=False, info={"batch_size": self.batch_size})
