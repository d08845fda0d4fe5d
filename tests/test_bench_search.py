"""benchmarks/bench_search.py is a benchmark, not a test: here only that it imports, that its rich space is
a valid study of 12 parameters that no grid covers, and that its hypervolume ratio and CMA-ES decomposition
work on a tiny problem (a few dozen evaluations; no timing)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from dse.solvers.base import Problem
from dse.space import ChoiceParam, DesignSpace, FloatParam

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_search", ROOT / "benchmarks" / "bench_search.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_search"] = mod  # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop("bench_search", None)


def test_rich_space_is_a_study_of_twelve_parameters_no_grid_covers(bench, tmp_path):
    problem = bench.problem_from_text(bench.RICH_STUDY, None, tmp_path)
    names = problem.space.names
    assert len(names) == 12
    for p in ("units", "clock", "dies", "hbm.stacks", "hbm.pin_rate", "l2", "local_buffer", "system.chips",
              "workload.formats.weights", "workload.formats.kv", "workload.formats.activations"):
        assert p in names
    assert not problem.space.is_discrete  # continuous clock, buffer, L2, pin rate: no grid
    assert problem.objective_names == ("obj.tpot", "obj.energy_per_token", "obj.chip_cost")


def _toy() -> Problem:
    """Two objectives (x, 1 - x + y^2 + [c == 'b']), one constraint (x <= 0.9): the front is y = 0, c = a."""
    space = DesignSpace([FloatParam("x", 0.0, 1.0), FloatParam("y", -1.0, 1.0), ChoiceParam("c", ("a", "b"))])

    def evaluate(p):
        x, y, c = (np.asarray(p[k]) for k in ("x", "y", "c"))
        F = np.column_stack([x, 1 - x + y**2 + (c == "b")])
        return F, (x - 0.9)[:, None]

    return Problem(space=space, evaluate=evaluate, objective_names=("obj.f1", "obj.f2"),
                   directions=("minimize", "minimize"), constraint_names=("con.x",))


def test_hypervolume_ratio_of_a_run_against_the_pooled_reference(bench):
    p = _toy()
    runs = [bench.run_optuna(p, "random", 40, seed) for seed in (0, 1)]
    ref = bench.reference_of(runs, p.directions, 80)
    ratios = [ref.hv_of(r, p.directions) / ref.hv for r in runs]
    assert all(0 < r <= 1 + 1e-12 for r in ratios)
    assert max(ratios) < 1 or min(ratios) < 1  # two seeds seldom find the same front
    assert ref.hv_of(runs[0], p.directions, k=1) <= ref.hv_of(runs[0], p.directions)  # a prefix has less


def test_cmaes_decomposition_spends_its_budget(bench):
    if bench._optional("cmaes"):
        pytest.skip(bench._optional("cmaes"))
    p = _toy()
    e = bench.run_cmaes(p, 60, seed=0)
    assert len(e.F) == 60 and e.feasible.any()
    assert math.isfinite(float(e.F[e.feasible].min()))
