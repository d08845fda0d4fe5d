"""CP-SAT die split vs the exhaustive grid over the same space, and vs the join.

The grid (:func:`split_grid`) takes the die area and the HBM shoreline from ``dse.model.area.package_area``
on every design and the feasibility from the ``constraints/`` modules, so it also checks that the model's
linear area and its shoreline table are the area model's; it also evaluates every design with the join
(:func:`dse.evaluate.evaluate_design`), whose figures the split's result reports.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import constraints.tdp as c_tdp
from dse.errors import InfeasibleError, SolverError, SpecError
from dse.evaluate import evaluate_design
from dse.model import area as area_model
from dse.model.evaluator import evaluate_arrays
from dse.hardware import Chips, load_chip, with_overrides
from dse.solvers.cpsat_split import CONSTRAINTS, design_chips, solve_split, split_data, split_grid
from dse.space import ChoiceParam, DesignSpace, FloatParam, IntParam
from dse.units import format_quantity
from dse.workload import Workload, decode, gemm, prefill

KiB = 1024

SPACES = {
    # decode + prefill mix on an H100-like die: the reticle and the shoreline bind
    "h100-serving": ("h100-sxm",
                     [(decode("qwen3-8b", batch=16, context=4096), 1.0),
                      (prefill("qwen3-8b", batch=1, tokens=2048), 0.2)],
                     DesignSpace((IntParam("units", 80, 160, 8),
                                  ChoiceParam("local_buffer", (128 * KiB, 228 * KiB, 256 * KiB)),
                                  ChoiceParam("l2", (25e6, 50e6, 80e6)), IntParam("hbm.stacks", 2, 8),
                                  ChoiceParam("clock", (1.4e9, 1.6e9, 1.83e9, 2.0e9)))), {}),
    # GEMMs under a 500 W budget: the TDP binds
    "h200-gemms-500w": ("h200-sxm",
                        [Workload(name="gemms", phase="ops", ops=(gemm("a", 4096, 4096, 4096),
                                                                  gemm("b", 16, 8192, 8192, count=4),
                                                                  gemm("c", 2048, 28672, 4096)))],
                        DesignSpace((IntParam("units", 64, 192, 16), ChoiceParam("local_buffer", (64 * KiB, 228 * KiB)),
                                     ChoiceParam("l2", (10e6, 50e6)), IntParam("hbm.stacks", 1, 6),
                                     ChoiceParam("clock", (1.2e9, 1.6e9, 2.0e9, 2.4e9)))), {"tdp": 500.0}),
    # a 70B model in FP8 on an A100-like die: the capacity binds
    "a100-70b-decode": ("a100-sxm-80gb",
                        [decode("llama-3.1-70b", batch=8, context=8192, formats={"weights": "fp8"})],
                        DesignSpace((IntParam("units", 32, 128, 16), ChoiceParam("local_buffer", (96 * KiB, 164 * KiB)),
                                     ChoiceParam("l2", (20e6, 40e6, 60e6)), IntParam("hbm.stacks", 2, 8),
                                     ChoiceParam("clock", (1.0e9, 1.41e9, 1.8e9)))), {}),
}


@functools.lru_cache(maxsize=None)
def _solved(name: str):
    base, mix, space, kw = SPACES[name]
    return solve_split(base, mix, space, **kw)


@functools.lru_cache(maxsize=None)
def _grid(name: str):
    base, mix, space, kw = SPACES[name]
    return split_grid(base, mix, space, **kw)


def _index(g, params) -> int:
    idx = np.flatnonzero(np.all([np.isclose(g["params"][k], v) for k, v in params.items()], axis=0))
    assert idx.size == 1
    return int(idx[0])


@pytest.mark.parametrize("name", sorted(SPACES))
def test_cpsat_split_equals_the_evaluators_grid(name):
    """The answer is the evaluator's optimum over the whole grid (issue 18 item 2): the least join time among the
    designs the constraint modules accept on the join's own metrics (then the smallest die, then the first in
    the space's order), from split_grid, which evaluates every design of the space with the join."""
    c, g = _solved(name), _grid(name)
    b = g["join_best"]
    print(f"\n{name}: {g['feasible'].size} designs, {c.info['evaluated']} re-evaluated, {c.params}, "
          f"{c.time_s * 1e3:.4f} ms; the surrogate's choice {c.info['surrogate_gap']:+.2%} by the evaluator")
    assert c.status == "OPTIMAL"
    assert b is not None and _index(g, c.params) == b
    assert g["join_feasible"][b]
    assert c.time_s == g["time_s"][b] == g["time_s"][g["join_feasible"]].min()
    assert c.power_w == g["join"]["peak_power_w"][b]
    assert c.model_time_s == pytest.approx(g["model_time_s"][b], rel=1e-12)
    # fewer designs re-evaluated than the grid holds (the bound ruled out the rest)
    assert c.info["evaluated"] < g["feasible"].size
    # the model's linear die area is the area model's
    np.testing.assert_allclose(g["model_die_area_mm2"], g["die_area_mm2"], rtol=1e-12)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_the_surrogate_is_the_split_models_grid_optimum(name):
    """Step 1 (the first design to beat) is CP-SAT's optimum of the split model: the grid's least model time
    among the designs the model's own limits accept (the tdp at the peak clock), then the smallest die."""
    c, g = _solved(name), _grid(name)
    sur = c.info["surrogate"]
    assert sur is not None and sur["status"] == "OPTIMAL"
    b = g["best"]
    assert b is not None and _index(g, sur["params"]) == b
    assert g["feasible"][b]
    assert sur["model_time_s"] == pytest.approx(g["model_time_s"][b], rel=1e-12)
    assert g["model_time_s"][g["feasible"]].min() == pytest.approx(sur["model_time_s"], rel=1e-6)
    # its evaluator time, and the gap to the answer: never negative (the answer is the evaluator's optimum)
    assert sur["time_s"] == g["time_s"][b]
    assert c.info["surrogate_gap"] == pytest.approx(g["time_s"][b] / c.time_s - 1, rel=1e-12)
    assert c.info["surrogate_gap"] >= 0


@pytest.mark.parametrize("name", sorted(SPACES))
def test_the_model_time_is_a_lower_bound_of_the_evaluators(name):
    """What the answer's proof rests on, over every design of each grid: the split model's roofline time is at
    most the join's time, and the integer objective of a design of model time T stays within _bound_int(T), so
    the enumeration up to the best evaluated time misses no design that could beat it."""
    from dse.solvers.cpsat_split import _bound_int, _SplitModel

    g = _grid(name)
    d = g["data"]
    assert np.all(g["model_time_s"] <= g["time_s"] * (1 + 1e-12))
    sm = _SplitModel(d)
    obj = sm.objective_of(*g["index"])
    bounds = np.array([_bound_int(sm, t) for t in g["model_time_s"]], dtype=object)
    assert np.all(obj <= bounds)
    # and the bound is tight enough to rule designs out: within 1e-5 of the objective (2 q sum(w) / T: ~2e-6 here)
    assert np.all(bounds - obj <= obj * 1e-5 + 1)


@pytest.mark.parametrize("name", sorted(SPACES))
def test_split_reports_the_joins_time_power_and_area(name):
    """The split's choice, re-evaluated by the join (evaluate_design on the chosen design): the same time,
    peak power and die area; the join meets the tdp constraint (its peak_power_w after its own throttling
    <= tdp); the model's roofline time bounds the join's, and where the design holds its clock the model's
    peak power at the peak clock bounds the join's too."""
    base, mix, space, kw = SPACES[name]
    c = _solved(name)
    d = split_data(base, mix, space, **kw)
    idx = [int(np.flatnonzero(vals == v)[0]) for vals, v in
           ((d.units, c.units), (d.buffers, c.local_buffer), (d.l2s, c.l2), (d.stacks, c.hbm_stacks),
            (d.clocks, c.clock))]
    chips = design_chips(d, *idx)
    join = evaluate_design(chips, mix)
    assert c.time_s == join["time_s"][0]
    assert c.power_w == join["peak_power_w"][0]
    assert c.die_area_mm2 == join["die_area_mm2"][0]
    assert c.info["clock_ratio"] == join["clock_ratio"][0]
    limit = kw.get("tdp")
    assert c_tdp.constraint(join, max=limit)[0] <= 0
    assert c.model_time_s <= c.time_s * (1 + 1e-6)
    assert c.info["model_gap"] == pytest.approx(c.time_s / c.model_time_s - 1, rel=1e-12)
    if join["clock_ratio"][0] == 1.0:
        assert c.power_w <= c.model_power_w * (1 + 1e-9)


def test_split_on_a_space_the_surrogate_finds_infeasible():
    """At the H100's own 700 W no die of 100+ units holds the peak clock on prefill (the split model's tdp limit:
    issue 14's power model), but the evaluator throttles such a die to its TDP instead: the answer is the
    evaluator's optimum among the throttled designs, found from the relaxation's least time."""
    base, mix, _, _ = SPACES["h100-serving"]
    space = DesignSpace((IntParam("units", 100, 180, 20), IntParam("hbm.stacks", 4, 6)))
    c = solve_split(base, mix, space)
    g = split_grid(base, mix, space)
    assert g["best"] is None and g["join_best"] is not None  # the model's grid: nothing; the evaluator's: a design
    assert c.status == "OPTIMAL" and _index(g, c.params) == g["join_best"]
    assert c.info["surrogate"] is None and c.info["surrogate_conflict"] == ("tdp",)
    assert c.info["clock_ratio"] < 1.0 and c.power_w <= 700.0 * (1 + 1e-9)


def test_a_capped_search_is_feasible_not_optimal():
    """max_candidates (a count, the same on any machine) cuts the enumeration short: the best of what was
    evaluated, FEASIBLE, never claimed optimal; still at least as good as the surrogate's choice."""
    base, mix, space, kw = SPACES["h100-serving"]
    c = solve_split(base, mix, space, max_candidates=5, **kw)
    assert c.status == "FEASIBLE"
    assert c.info["evaluated"] <= 6  # the surrogate's design and 5 candidates
    assert c.time_s <= c.info["surrogate"]["time_s"]
    again = solve_split(base, mix, space, max_candidates=5, **kw)
    assert again.params == c.params


def test_an_evaluator_below_the_model_is_refused():
    """The proof needs the model's time to be a lower bound of the evaluator's objective: an evaluator that
    reports less (here the join's time halved) is a SolverError, not an answer."""
    from dse.solvers.cpsat_split import join_evaluator

    base, mix, space, kw = SPACES["a100-70b-decode"]
    d = split_data(base, mix, space, **kw)
    join = join_evaluator(d, mix)

    def halved(params):
        obj, ok, m = join(params)
        return obj * 0.5, ok, m

    with pytest.raises(SolverError, match="no lower bound"):
        solve_split(base, mix, space, evaluate=halved, **kw)


def test_split_power_is_the_evaluators_peak_power_at_the_peak_clock():
    """The model's peak power bounds the join's peak_power_w at the peak clock: the model counts the largest
    leakage and clock power of the space for every design (dse.solvers.cpsat_split), the join each design's own."""
    base, mix, space, kw = SPACES["a100-70b-decode"]
    g = split_grid(base, mix, space, **kw)
    join = g["join"]
    held = join["clock_ratio"] == 1.0
    assert held.any()
    assert (join["peak_power_w"][held] <= g["model_power_w"][held] * (1 + 1e-9)).all()
    # the bound is tight where the design is the space's leakiest (the most units, SRAM and clock)
    top = np.argmax(g["model_power_w"] - 0 * join["peak_power_w"])
    assert join["peak_power_w"][held].max() >= 0.5 * g["model_power_w"][held].max()


def test_roofline_is_at_the_peak_clock_when_operators_throttle():
    """The evaluator throttles each operator to its own power ceiling; the split model's unit-cycles are the
    peak-clock ones whatever the base chip's TDP (the TDP is the model's limit, not a throttle)."""
    base, mix, _, _ = SPACES["h100-serving"]
    low = with_overrides(load_chip(base), {"tdp": 250.0})
    ops = evaluate_arrays(Chips.from_specs([low]), mix[1][0])
    assert ops["clock_ratio"][0] < 1.0  # (the FLOP-weighted mean of the operators' clocks)
    np.testing.assert_allclose(split_data(low, mix).cycles, split_data(base, mix).cycles, rtol=1e-12)


def test_every_limit_binds_somewhere():
    rejected = dict.fromkeys(CONSTRAINTS, 0)
    for base, mix, space, kw in SPACES.values():
        g = split_grid(base, mix, space, **kw)
        for k, v in g["constraints"].items():
            rejected[k] += int((v > 0).sum())
    assert all(n > 0 for n in rejected.values()), rejected


def test_reticle_too_small_is_named():
    base, mix, space, _ = SPACES["h100-serving"]
    with pytest.raises(InfeasibleError, match="the reticle limit") as err:
        solve_split(base, mix, space, reticle=300.0)
    # the smallest die of the space, by the area model itself (not the split model's linear sum)
    small = Chips.from_base(load_chip(base) if isinstance(base, str) else base, 1,
                            {"units": np.array([80.0]), "local_buffer": np.array([131072.0]),
                             "l2": np.array([25e6]), "hbm.stacks": np.array([2.0])})
    want = area_model.package_area(small, process="n4", memory="hbm3").die_area_mm2[0]
    assert f"{want:.1f} mm^2, the reticle 300.0 mm^2" in str(err.value)
    assert split_grid(base, mix, space, reticle=300.0)["best"] is None


def test_a_conflict_of_two_limits_names_both():
    """7-8 stacks need a die of ~1,170 mm^2 of shoreline; the space has such dies, but not within the reticle.
    (At the H100's 700 W, and still at 2 kW, those dies' units at the peak clock also break the TDP: a 2.5 kW
    limit leaves the reticle and the shoreline as the conflict. It was 2 kW before the on-chip levels of issue 15:
    the local buffers' reads by the matrix units add their energy to the prefill's GEMMs.)"""
    base, mix, _, _ = SPACES["h100-serving"]
    space = DesignSpace((IntParam("units", 100, 340, 20), IntParam("hbm.stacks", 7, 8)))
    with pytest.raises(InfeasibleError, match="reticle and hbm_shoreline together"):
        solve_split(base, mix, space, tdp=2500.0)  # (2.5 kW: with the local-read energy big dies pass 2 kW)
    # at the H100's own 700 W no die of 100+ units holds the peak clock (issue 14's power model: the H100 itself
    # throttles on prefill), but the evaluator throttles instead of refusing: reticle and shoreline stay the conflict
    with pytest.raises(InfeasibleError, match="reticle and hbm_shoreline together"):
        solve_split(base, mix, space)


def test_power_and_capacity_infeasibility_are_named():
    """At 20 W no die of the space holds its peak clock (the split model), and none fits even throttled to 5% of
    its clock (the evaluator: leakage and clock-tree power of the smallest die are ~52 W)."""
    base, mix, _, _ = SPACES["h100-serving"]
    small = DesignSpace((IntParam("units", 80, 160, 40), IntParam("hbm.stacks", 2, 4)))
    with pytest.raises(InfeasibleError, match="the tdp limit by the evaluator") as err:
        solve_split(base, mix, small, tdp=20.0)
    g = split_grid(base, mix, small, tdp=20.0)
    least = format_quantity(float(g["join"]["peak_power_w"].min()), "power")
    assert f"least peak power of them, after the evaluator's throttling, is {least}, the TDP 20 W" in str(err.value)
    base, mix, _, _ = SPACES["a100-70b-decode"]
    few = DesignSpace((IntParam("units", 64, 96, 32), IntParam("hbm.stacks", 1, 2)))
    with pytest.raises(InfeasibleError, match="the fits_memory limit"):
        solve_split(base, mix, few)


def test_fixed_parameters_stay_at_the_base():
    base, mix, _, _ = SPACES["h100-serving"]
    # (1.5 kW: the split holds the peak clock, which the H100's own 700 W does not allow on prefill: issue 14)
    c = solve_split(base, mix, DesignSpace((IntParam("hbm.stacks", 4, 6),)), tdp=1500.0)
    assert (c.units, c.clock) == (132, 1.83e9) and c.hbm_stacks in (4, 5, 6)


def test_bad_requests():
    mix = [decode("qwen3-8b", batch=1, context=1024)]
    with pytest.raises(SpecError, match="one die"):
        solve_split("b200", mix)
    with pytest.raises(SpecError, match="unknown split parameter"):
        split_data("h100-sxm", mix, DesignSpace((IntParam("unitz", 1, 4),)))
    with pytest.raises(SpecError, match="finite domain"):
        split_data("h100-sxm", mix, DesignSpace((FloatParam("clock", 1e9, 2e9),)))
    with pytest.raises(SpecError, match="weight"):
        split_data("h100-sxm", [(mix[0], -1.0)])


def test_same_split_twice_is_the_same_answer():
    """One worker, a fixed seed, a deterministic-time limit: the same answer and the same work every time."""
    base, mix, space, kw = SPACES["h100-serving"]
    a, b = solve_split(base, mix, space, seed=5, **kw), solve_split(base, mix, space, seed=5, **kw)
    assert a.params == b.params and a.status == b.status == "OPTIMAL"
    # (the join's figures of the same design agree to the last bits; the answer itself is identical)
    assert (a.time_s, a.model_time_s, a.power_w) == pytest.approx((b.time_s, b.model_time_s, b.power_w), rel=1e-12)
    assert a.info["deterministic_time"] == pytest.approx(b.info["deterministic_time"], rel=1e-9)  # (CP-SAT's float)


def test_tdp_limit_per_clock_where_the_energies_follow_the_clock():
    """Where the evaluator's energies depend on the clock (a voltage that follows it), the tdp limit is one per
    operator and clock; CP-SAT still finds the data's own optimum (here energies x (f / f_max)^2)."""
    from dataclasses import replace

    from dse.solvers.cpsat_split import _SplitModel, _value_index

    base, mix, space, kw = SPACES["h200-gemms-500w"]
    d = split_data(base, mix, space, **kw)
    scale = (d.clocks / d.clocks.max()) ** 2
    d2 = replace(d, energy=d.energy * scale)  # higher clocks cost more energy per operation
    sm = _SplitModel(d2)
    solver, status = sm.solve(30.0, 300.0, 0)
    assert status == "OPTIMAL"
    got = (int(solver.value(sm.i_u)), _value_index(solver, sm.x_b), _value_index(solver, sm.x_l),
           _value_index(solver, sm.x_s), _value_index(solver, sm.x_f))
    iu, ib, il, is_, if_ = (a.ravel() for a in np.indices((len(d.units), len(d.buffers), len(d.l2s), len(d.stacks),
                                                          len(d.clocks))))
    ok = ((d2.power(iu, ib, il, is_, if_) <= d2.tdp) & (d2.die_area(iu, ib, il, is_) <= d2.reticle)
          & (d2.die_area(iu, ib, il, is_) >= d2.shore_area[is_]) & (d2.stacks[is_] * d2.stack_capacity >= d2.resident))
    obj = sm.objective_of(iu, ib, il, is_, if_)
    best = min(obj[ok])
    assert int(solver.value(sm.objective)) == best
    assert d2.power(*got) <= d2.tdp
    # the scaled energies let a faster clock through than the unscaled ones would at that design
    assert d2.power(*got) < d.power(*got) or scale[got[4]] == 1.0


def test_the_wall_clock_safety_net_is_an_error_not_another_answer(monkeypatch):
    """issue 21 item 7: the tie-break solve stopped by the wall clock used to leave the first solve's design (one
    of the fastest, not the smallest): an answer that depends on the machine's load. Now it is a SolverError."""
    from types import SimpleNamespace

    import dse.solvers.cpsat_split as mod

    base, mix, space, kw = SPACES[sorted(SPACES)[0]]
    assert solve_split(base, mix, space, **kw).status == "OPTIMAL"
    clock = SimpleNamespace(t=0.0)
    real = mod.status_name

    def status_name(status):  # the first solve answers, then every limit in wall seconds has run out
        name = real(status)
        clock.t = 1e9
        return name

    monkeypatch.setattr(mod, "time", SimpleNamespace(perf_counter=lambda: clock.t))
    monkeypatch.setattr(mod, "status_name", status_name)
    with pytest.raises(SolverError, match=r"split solver \(the smallest die of the least time\): the wall-clock time "
                                          r"limit of 300 s ran out.*No answer is given"):
        solve_split(base, mix, space, **kw)
