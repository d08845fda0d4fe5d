"""Tests of dse.space: parameter records, grids by index arithmetic, samples, Optuna domains."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from dse.errors import SpecError
from dse.space import ChoiceParam, DesignSpace, FloatParam, IntParam, LogParam


def test_int_param_grid_size_and_optuna():
    p = IntParam("hbm.stacks", 2, 12, step=2)
    assert p.grid_values().tolist() == [2, 4, 6, 8, 10, 12]
    assert p.size == 6
    assert p.to_optuna_distribution() == IntDistribution(2, 12, step=2)
    # high not on the step: the last reachable value is used
    q = IntParam("cu", 1, 10, step=4)
    assert q.grid_values().tolist() == [1, 5, 9] and q.size == 3
    assert q.to_optuna_distribution() == IntDistribution(1, 9, step=4)


def test_float_and_log_params():
    f = FloatParam("clock", 1e9, 2e9)
    assert f.grid_values(3).tolist() == [1e9, 1.5e9, 2e9]
    assert f.size == math.inf and not f.is_discrete
    assert f.to_optuna_distribution() == FloatDistribution(1e9, 2e9)
    g = LogParam("l2.bytes", 1e6, 1e8)
    assert g.grid_values(3) == pytest.approx([1e6, 1e7, 1e8])
    assert g.to_optuna_distribution() == FloatDistribution(1e6, 1e8, log=True)
    h = LogParam("batch", 1, 64, integer=True)
    assert h.grid_values(7).tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert h.size == 64 and h.is_discrete
    assert h.to_optuna_distribution() == IntDistribution(1, 64, log=True)
    assert FloatParam("x", 3.0, 3.0).grid_values(5).tolist() == [3.0]


def test_choice_param():
    c = ChoiceParam("precision", ["fp8", "bf16"])
    assert c.grid_values().tolist() == ["fp8", "bf16"] and c.size == 2
    assert c.to_optuna_distribution() == CategoricalDistribution(["fp8", "bf16"])
    assert ChoiceParam("dies", (1, 2, 4)).grid_values().dtype.kind == "i"


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: IntParam("hbm.stacks", 8, 4), "hbm.stacks.*low \\(8\\) must be <= high \\(4\\)"),
        (lambda: IntParam("cu", 1, 4, step=0), "cu.*step"),
        (lambda: IntParam("cu", 1.5, 4), "cu.*integer"),
        (lambda: IntParam("units", 16, 192, step=2 ** 63), "units.*2\\^62"),  # (found by tests/scale/test_fuzz.py)
        (lambda: IntParam("units", -2 ** 63, 0), "units.*2\\^62"),
        (lambda: FloatParam("clock", 2.0, 1.0), "clock.*low"),
        (lambda: FloatParam("clock", 1.0, float("nan")), "clock.*finite"),
        (lambda: LogParam("l2", 0.0, 1.0), "l2.*> 0"),
        (lambda: LogParam("l2", 4, 2, integer=True), "l2.*low"),
        (lambda: ChoiceParam("fmt", []), "fmt.*empty"),
        (lambda: ChoiceParam("fmt", ["a", "a"]), "fmt.*distinct"),
        (lambda: ChoiceParam("fmt", "ab"), "fmt.*list"),
        (lambda: IntParam("", 1, 2), "name"),
        (lambda: DesignSpace([]), "no parameters"),
        (lambda: DesignSpace([IntParam("a", 1, 2), IntParam("a", 1, 3)]), "'a' is given twice"),
    ],
)
def test_bad_params_are_spec_errors_naming_the_param(make, match):
    with pytest.raises(SpecError, match=match):
        make()


def _space():
    return DesignSpace([IntParam("a", 0, 4), ChoiceParam("b", ["x", "y", "z"]), IntParam("c", 10, 30, step=10)])


def test_grid_matches_itertools_product_in_any_chunking():
    space = _space()
    expected = list(itertools.product(range(5), ["x", "y", "z"], [10, 20, 30]))
    assert space.grid_size() == len(expected) == 45
    for chunk in (1, 7, 45, 1000):
        chunks = list(space.iter_grid(chunk))
        assert all(len(ch["a"]) <= chunk for ch in chunks)
        got = [tuple(v) for ch in chunks for v in zip(ch["a"].tolist(), ch["b"].tolist(), ch["c"].tolist())]
        assert got == expected
    pts = space.grid_points([0, 44])
    assert [pts["a"].tolist(), pts["b"].tolist(), pts["c"].tolist()] == [[0, 4], ["x", "z"], [10, 30]]


def test_huge_grid_size_is_exact_and_chunks_stay_bounded():
    space = DesignSpace([IntParam(f"p{i}", 0, 999) for i in range(6)])
    assert space.grid_size() == 1000**6
    first = next(space.iter_grid(chunk=1000))
    assert len(first["p5"]) == 1000 and first["p5"][-1] == 999 and first["p4"].max() == 0
    last = space.grid_points([1000**6 - 1])
    assert all(last[f"p{i}"].tolist() == [999] for i in range(6))
    beyond = DesignSpace([IntParam(f"p{i}", 0, 999) for i in range(8)])
    assert beyond.grid_size() == 1000**8  # exact Python int
    with pytest.raises(SpecError, match="too many to enumerate"):
        next(beyond.iter_grid())


def test_sample_is_seeded_and_in_range():
    space = DesignSpace([
        IntParam("a", 2, 12, step=2), FloatParam("f", -1.0, 1.0), LogParam("l", 1e-3, 1e3),
        LogParam("li", 1, 100, integer=True), ChoiceParam("b", ["x", "y"]),
    ])
    s1, s2 = space.sample(2000, seed=3), space.sample(2000, seed=3)
    for k in space.names:
        assert np.array_equal(s1[k], s2[k])
    assert set(s1["a"].tolist()) == {2, 4, 6, 8, 10, 12}
    assert s1["f"].min() >= -1 and s1["f"].max() <= 1
    assert s1["l"].min() >= 1e-3 and s1["l"].max() <= 1e3
    assert np.median(np.log10(s1["l"])) == pytest.approx(0.0, abs=0.3)  # log-uniform
    assert s1["li"].min() >= 1 and s1["li"].max() <= 100 and s1["li"].dtype.kind == "i"
    assert set(s1["b"].tolist()) == {"x", "y"}
    assert not np.array_equal(space.sample(50, seed=4)["f"], s1["f"][:50])


def test_unknown_parameter_lists_the_known_ones():
    with pytest.raises(SpecError, match="did you mean 'a'"):
        _space()["A"]
    assert _space().to_optuna_distributions()["c"] == IntDistribution(10, 30, step=10)
