"""Expert parallelism with random routing: the most loaded chip (dse.model.experts), checked against a simulation
of the router in the test and through the evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dse
from dse.hardware import load_chip, with_overrides
from dse.model.evaluator import evaluate_workload
from dse.model.experts import ep_load_factors, expected_max_normal
from dse.solvers.tile_data import as_chips
from dse.workload import decode


def test_expected_max_of_normals():
    """E[max of 2 standard normals] = 1 / sqrt(pi), of 3 3 / (2 sqrt(pi)) exactly; of 16 and 50, 1.7660 and 2.2491
    (Harter 1961's tables), where Blom's approximation takes over: within 1%. Continuous across the switch."""
    z = expected_max_normal([1, 2, 3, 10, 11, 16, 50])
    assert z[0] == 0.0
    assert z[1] == pytest.approx(1 / math.sqrt(math.pi), rel=1e-3)
    assert z[2] == pytest.approx(3 / (2 * math.sqrt(math.pi)), rel=1e-3)
    assert z[5] == pytest.approx(1.7660, rel=0.01) and z[6] == pytest.approx(2.2491, rel=0.01)
    assert 0 < z[4] - z[3] < 0.06  # (exact: 1.5388 -> 1.5864)


def _simulated(tokens, top_k, experts, chips, trials, seed=0):
    """The router, simulated: each token picks top_k distinct experts uniformly; chip j holds experts
    j E/p .. (j+1) E/p - 1. Returns E[max]/E[mean] of the active experts and of the rows per chip."""
    rng = np.random.default_rng(seed)
    n = experts // chips
    act_max = act_mean = row_max = row_mean = 0.0
    for _ in range(trials):
        picks = np.argsort(rng.random((tokens, experts)), axis=1)[:, :top_k]
        counts = np.bincount(picks.ravel(), minlength=experts).reshape(chips, n)
        active, rows = (counts > 0).sum(axis=1), counts.sum(axis=1)
        act_max, act_mean = act_max + active.max(), act_mean + active.mean()
        row_max, row_mean = row_max + rows.max(), row_mean + rows.mean()
    return act_max / act_mean, row_max / row_mean


@pytest.mark.parametrize("tokens, top_k, experts, chips", [(8, 8, 128, 8), (32, 8, 128, 4), (16, 2, 8, 8),
                                                            (64, 4, 64, 16)])
def test_load_factors_match_a_simulated_router(tokens, top_k, experts, chips):
    """The closed form (binomial active experts, hypergeometric picks per token, normal extremes) against 2,000
    simulated routing steps: within 6%."""
    f_act, f_rows = ep_load_factors(tokens, top_k, experts, chips)
    sim_act, sim_rows = _simulated(tokens, top_k, experts, chips, 2000)
    assert float(f_act) == pytest.approx(sim_act, rel=0.06)
    assert float(f_rows) == pytest.approx(sim_rows, rel=0.06)


def test_load_factors_limits():
    """One chip: no imbalance. Many tokens: every expert active on every chip, rows even to ~2%. Never below 1."""
    assert ep_load_factors(8, 8, 128, 1) == (1.0, 1.0)
    f_act, f_rows = ep_load_factors(4096, 8, 128, 8)
    assert float(f_act) == 1.0 and 1.0 < float(f_rows) < 1.03
    f = np.array(ep_load_factors(8, 8, 128, np.array([1.0, 2.0, 4.0, 8.0, 16.0])))
    assert (f >= 1.0).all() and (np.diff(f, axis=1) > 0).all()  # more chips, more imbalance


def test_expert_parallel_waits_for_the_most_loaded_chip():
    """Qwen3-30B-A3B decode, 8 requests, on 8 H100s: with random routing the MoE layer's experts under expert
    parallelism take the most loaded chip's time (their weight reads: f_active), under tensor parallelism every chip
    holds a slice of every expert (balanced); uniform routing is balanced either way."""
    h = load_chip("h100-sxm")
    ep, tp = (as_chips(with_overrides(h, {"system.chips": 8, "system.expert_parallel": e})) for e in (8, 1))
    w = decode("qwen3-30b-a3b", batch=8, context=8192, routing="random")
    a, b = (evaluate_workload(x, w, breakdown=True).operators for x in (ep, tp))
    cols = [j for j, name in enumerate(a.names) if name.startswith("expert_")]
    f_act, f_rows = (float(x) for x in ep_load_factors(8, 8, 128, 8))
    for j in cols:
        ratio = a.t_op[0, j] / b.t_op[0, j]
        assert ratio == pytest.approx(f_act, rel=1e-12) or ratio == pytest.approx(f_rows, rel=1e-12), a.names[j]
    assert f_act > 1.3
    u = decode("qwen3-30b-a3b", batch=8, context=8192)
    ua, ub = (evaluate_workload(x, u, breakdown=True).operators for x in (ep, tp))
    ucols = [j for j, name in enumerate(ua.names) if name.startswith("expert_")]
    assert np.allclose(ua.t_op[0, ucols], ub.t_op[0, ucols], rtol=1e-12)
    t_ep = dse.evaluate_design(with_overrides(h, {"system.chips": 8, "system.expert_parallel": 8}),
                               "qwen3-30b-a3b:decode:batch=8:context=8192:routing=random")["time_s"][0]
    t_ep_uniform = dse.evaluate_design(with_overrides(h, {"system.chips": 8, "system.expert_parallel": 8}),
                                       "qwen3-30b-a3b:decode:batch=8:context=8192")["time_s"][0]
    assert t_ep > t_ep_uniform  # fewer experts read on average, but the slowest chip reads 1.44x the average
