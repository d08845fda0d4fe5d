"""Conformance suite: every solver in SOLVERS must pass these tests.

To add a solver, append its class to SOLVERS; it is built as
``cls(problem, seed=..., budget=...)`` (other options keep their defaults).
A solver with options is added as a small subclass that fixes them (the
Optuna variants below); one that needs an optional dependency as a
``pytest.param`` with a ``skipif`` mark that says what is missing.

The toy problem is defined here, with a scalar reference implementation
(`toy_point`) that the tests use to recompute every value independently of
the vectorized `evaluate` the solvers call.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from dse.errors import InfeasibleError, SolverError, SpecError
from dse.solvers.base import Problem, SolverResult
from dse.solvers.grid import GridSolver, RandomSolver
from dse.solvers.optuna_search import OptunaSolver
from dse.space import ChoiceParam, DesignSpace, IntParam


class OptunaNSGA2(OptunaSolver):
    """NSGA-II, generations of 20 (one batch each), first generation a Latin hypercube."""

    def __init__(self, problem, **kw):
        super().__init__(problem, method="nsga2", population=20, **kw)


class OptunaTPE(OptunaSolver):
    """Multivariate TPE with the constant liar, batches of 25."""

    def __init__(self, problem, **kw):
        super().__init__(problem, method="tpe", batch=25, **kw)


class OptunaRandom(OptunaSolver):
    """Optuna's random sampler, batches of 50."""

    def __init__(self, problem, **kw):
        super().__init__(problem, method="random", batch=50, **kw)


class OptunaGP(OptunaSolver):
    """Gaussian-process sampler, batches of 10 (needs torch and scipy)."""

    def __init__(self, problem, **kw):
        super().__init__(problem, method="gp", batch=10, **kw)


def _has(*modules: str) -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in modules)


SOLVERS: list = [
    GridSolver,
    RandomSolver,
    OptunaNSGA2,
    OptunaTPE,
    OptunaRandom,
    pytest.param(OptunaGP, marks=pytest.mark.skipif(
        not _has("torch", "scipy"), reason="the GP sampler needs torch and scipy, not installed here")),
]

# ------------------------------------------------------------- toy problem
# Parameters: units 0..9, buffer 0,3,...,12, mode a/b/c: 10 * 5 * 3 = 150 points.
# Objectives: cost (minimize), perf (maximize). Constraints (<= 0 feasible):
# power = units * buffer + mode_power - 60, area = units + buffer - 18.

UNITS = list(range(10))
BUFFERS = [0, 3, 6, 9, 12]
MODES = ["a", "b", "c"]
MODE_COST = {"a": 0.0, "b": 2.0, "c": 5.0}
MODE_GAIN = {"a": 1.0, "b": 1.3, "c": 1.6}
MODE_POWER = {"a": 0.0, "b": 5.0, "c": 10.0}
GRID_SIZE = len(UNITS) * len(BUFFERS) * len(MODES)


def toy_space() -> DesignSpace:
    return DesignSpace([IntParam("units", 0, 9), IntParam("mem.buffer", 0, 12, step=3), ChoiceParam("mode", MODES)])


def toy_point(units, buffer, mode, impossible=False):
    """Scalar reference: ((cost, perf), (power, area)) of one design point."""
    cost = units + 0.5 * buffer + MODE_COST[mode]
    perf = (units + 1) * math.sqrt(buffer + 3) * MODE_GAIN[mode]
    if impossible:
        return (cost, perf), (units + buffer + 100.0, units - 4.0)
    return (cost, perf), (units * buffer + MODE_POWER[mode] - 60.0, units + buffer - 18.0)


def _lookup(table: dict, keys: np.ndarray) -> np.ndarray:
    return np.select([keys == k for k in table], list(table.values()), default=np.nan)


def make_problem(impossible=False, calls=None) -> Problem:
    def evaluate(params):
        u = params["units"].astype(float)
        b = params["mem.buffer"].astype(float)
        m = params["mode"]
        if calls is not None:
            calls.append({k: np.array(v, copy=True) for k, v in params.items()})
        cost = u + 0.5 * b + _lookup(MODE_COST, m)
        perf = (u + 1) * np.sqrt(b + 3) * _lookup(MODE_GAIN, m)
        if impossible:
            G = np.column_stack([u + b + 100.0, u - 4.0])
        else:
            G = np.column_stack([u * b + _lookup(MODE_POWER, m) - 60.0, u + b - 18.0])
        return np.column_stack([cost, perf]), G

    return Problem(toy_space(), evaluate, ("cost", "perf"), ("minimize", "maximize"), ("power", "area"))


def brute_force_front(impossible=False) -> set[tuple]:
    """Pareto-optimal feasible (units, buffer, mode) of the toy problem, by the O(n^2) definition."""
    pts = []
    for u, b, mode in itertools.product(UNITS, BUFFERS, MODES):
        (cost, perf), cons = toy_point(u, b, mode, impossible)
        if all(c <= 0 for c in cons):
            pts.append(((u, b, mode), cost, perf))

    def dom(p, q):  # p dominates q: cost lower-or-equal, perf higher-or-equal, one strict
        return p[1] <= q[1] and p[2] >= q[2] and (p[1] < q[1] or p[2] > q[2])

    return {q[0] for q in pts if not any(dom(p, q) for p in pts)}


def run(cls, problem, seed=0, budget=1000) -> SolverResult:
    return cls(problem, seed=seed, budget=budget).run()


def rows(table: pd.DataFrame) -> list[tuple]:
    return list(zip(table["units"].tolist(), table["mem.buffer"].tolist(), table["mode"].tolist()))


# ----------------------------------------------------------- conformance


@pytest.mark.parametrize("cls", SOLVERS)
def test_same_seed_same_result(cls):
    a = run(cls, make_problem(), seed=7, budget=200)
    b = run(cls, make_problem(), seed=7, budget=200)
    pd.testing.assert_frame_equal(a.table, b.table)
    assert (a.status, a.message) == (b.status, b.message)


@pytest.mark.parametrize("cls", SOLVERS)
@pytest.mark.parametrize("budget", [1, 20, 149, 1000])
def test_never_evaluates_more_than_the_budget_and_only_points_of_the_space(cls, budget):
    calls: list[dict] = []
    try:
        res = run(cls, make_problem(calls=calls), seed=1, budget=budget)
    except SolverError as err:  # a solver may refuse a budget it cannot honour, before evaluating
        assert calls == [] and str(err)
        return
    n = sum(len(c["units"]) for c in calls)
    assert 0 < n <= budget
    assert res.n_evaluated == n == len(res.table)
    for c in calls:
        assert set(c["units"].tolist()) <= set(UNITS)
        assert set(c["mem.buffer"].tolist()) <= set(BUFFERS)
        assert set(c["mode"].tolist()) <= set(MODES)


@pytest.mark.parametrize("cls", SOLVERS)
def test_table_values_and_feasibility_match_an_independent_recomputation(cls):
    res = run(cls, make_problem(), seed=3, budget=300)
    t = res.table
    assert list(t.columns) == ["units", "mem.buffer", "mode", "cost", "perf", "power", "area", "feasible", "pareto_rank"]
    for i, (u, b, mode) in enumerate(rows(t)):
        (cost, perf), (power, area) = toy_point(u, b, mode)
        assert t["cost"].iat[i] == pytest.approx(cost) and t["perf"].iat[i] == pytest.approx(perf)
        assert t["power"].iat[i] == pytest.approx(power) and t["area"].iat[i] == pytest.approx(area)
        assert bool(t["feasible"].iat[i]) == (power <= 0 and area <= 0)
    assert (t.loc[~t["feasible"], "pareto_rank"] == -1).all()
    assert (t.loc[t["feasible"], "pareto_rank"] >= 0).all()
    assert res.n_feasible > 0 and res.status in ("optimal", "feasible")


@pytest.mark.parametrize("cls", SOLVERS)
def test_rank_zero_is_the_front_of_the_evaluated_feasible_points(cls):
    res = run(cls, make_problem(), seed=5, budget=120 if cls is not GridSolver else 1000)
    feas = res.feasible_points
    pts = list(zip(feas["cost"], feas["perf"]))

    def dominated(q):
        return any(c <= q[0] and p >= q[1] and (c < q[0] or p > q[1]) for c, p in pts)

    expected = [not dominated(q) for q in pts]
    assert (feas["pareto_rank"] == 0).tolist() == expected


@pytest.mark.parametrize("cls", SOLVERS)
def test_nothing_feasible_gives_an_infeasible_result_and_a_clear_error(cls):
    res = run(cls, make_problem(impossible=True), seed=2, budget=200)
    assert res.n_feasible == 0 and res.status == "infeasible"
    assert not res.table["feasible"].any() and (res.table["pareto_rank"] == -1).all()
    assert res.pareto_front().empty
    assert "no feasible point" in res.message and "'power'" in res.message
    # the worst constraint, by hand: power = units + buffer + 100 > 0 everywhere
    violation = res.table["units"] + res.table["mem.buffer"] + 100.0
    with pytest.raises(InfeasibleError) as info:
        res.require_feasible()
    msg = str(info.value)
    n = res.n_evaluated
    assert f"constraint 'power' rejected {n:,} of {n:,} points" in msg
    assert f"max {violation.max():.6g}" in msg and f"median {np.median(violation):.6g}" in msg
    assert "also: constraint 'area'" in msg  # area rejects only units >= 5


@pytest.mark.parametrize("cls", SOLVERS)
def test_require_feasible_returns_the_result_when_something_is_feasible(cls):
    res = run(cls, make_problem(), seed=0, budget=200)
    assert res.require_feasible() is res


@pytest.mark.parametrize("cls", SOLVERS)
def test_bad_options_fail_at_construction(cls):
    for bad in (dict(budget=0), dict(budget=2.5), dict(seed=-1), dict(seed="x")):
        with pytest.raises(SpecError):
            cls(make_problem(), **{"seed": 0, "budget": 100, **bad})


# ------------------------------------------------------------- the grid


def test_grid_finds_the_exact_front():
    res = GridSolver(make_problem(), budget=GRID_SIZE).run()
    assert res.status == "optimal" and res.n_evaluated == GRID_SIZE
    front = set(rows(res.pareto_front()))
    assert front == brute_force_front()
    assert len(front) >= 5  # the toy front is not trivial


def test_grid_is_the_same_in_any_chunking_and_chunks_are_bounded():
    calls: list[dict] = []
    small = GridSolver(make_problem(calls=calls), chunk=7).run()
    assert max(len(c["units"]) for c in calls) <= 7 and len(calls) == math.ceil(GRID_SIZE / 7)
    pd.testing.assert_frame_equal(small.table, GridSolver(make_problem()).run().table)


def test_grid_bigger_than_budget_is_refused_with_advice():
    calls: list[dict] = []
    with pytest.raises(SolverError) as info:
        GridSolver(make_problem(calls=calls), budget=100)
    msg = str(info.value)
    assert "150 grid points" in msg and "budget of 100" in msg
    assert "random" in msg and "NSGA-II" in msg
    assert calls == []


def test_random_solver_seeds_differ_and_batches_are_bounded():
    calls: list[dict] = []
    a = RandomSolver(make_problem(calls=calls), seed=1, budget=50, batch_size=16).run()
    assert [len(c["units"]) for c in calls] == [16, 16, 16, 2]
    b = RandomSolver(make_problem(), seed=2, budget=50, batch_size=16).run()
    assert rows(a.table) != rows(b.table)
    assert a.status == "feasible"


# ------------------------------------------------------------ the problem


def test_problem_checks_names_and_evaluate_shapes():
    space = toy_space()
    with pytest.raises(SpecError, match="'units' is used by a parameter and a objective"):
        Problem(space, lambda p: None, ("units",), ("minimize",))
    with pytest.raises(SpecError, match="reserved"):
        Problem(space, lambda p: None, ("feasible",), ("minimize",))
    with pytest.raises(SpecError, match="direction"):
        Problem(space, lambda p: None, ("cost",), ("lowest",))

    def wrong(params):
        n = len(params["units"])
        return np.zeros((n, 3)), np.zeros((n, 2))

    bad = Problem(space, wrong, ("cost", "perf"), ("minimize", "maximize"), ("power", "area"))
    with pytest.raises(SolverError, match=r"objectives have shape \(150, 3\), expected \(150, 2\)"):
        GridSolver(bad).run()


def test_no_constraints_and_nan_objectives():
    def evaluate(params):
        u = params["units"].astype(float)
        cost = np.where(u == 0, np.nan, u)  # a failed evaluation: NaN is never feasible
        return np.column_stack([cost, -u]), None

    p = Problem(toy_space(), evaluate, ("cost", "neg"), ("minimize", "minimize"))
    res = GridSolver(p).run()
    assert res.n_feasible == GRID_SIZE - 15
    assert not res.table.loc[res.table["units"] == 0, "feasible"].any()
    assert (res.pareto_front()["units"] > 0).all()
