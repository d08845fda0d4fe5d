"""The serving objectives and constraints: TPOT, TTFT, throughput per chip / per dollar / at an SLO.

The example of the issue: an H100 decode step at batch 64 takes 28.04 ms; each of the 64 users waits
28.04 ms per token, while the step time divided by the batch is 28.04 / 64 = 0.438 ms (the old
latency_per_token). Seed 004 §4.8.3: vLLM on an RTX PRO 6000, batch 64 at 2K, 29.63 ms per step.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse import registry
from dse.errors import SpecError
from dse.serve import serve

STEP = {"time_s": np.array([28.04e-3, 29.63e-3]), "time_per_token_s": np.array([28.04e-3 / 64, 29.63e-3 / 64]),
        "tokens_per_s": np.array([64 / 28.04e-3, 64 / 29.63e-3]), "system_chips": np.array([1.0, 2.0]),
        "chip_cost_usd": np.array([2000.0, 4000.0]), "ttft_s": np.array([np.nan, 0.2])}


def obj(name, metrics=STEP, params=None):
    return registry.bind_objective(name, params)(metrics)


def con(name, metrics=STEP, params=None):
    return registry.bind_constraint(name, params)(metrics)


def test_tpot_is_what_each_user_waits():
    np.testing.assert_allclose(obj("tpot"), [28.04e-3, 29.63e-3])
    assert obj("tpot")[0] / 64 == pytest.approx(0.438e-3, rel=1e-3)


def test_latency_per_token_is_a_deprecated_alias_of_tpot():
    import objectives.latency_per_token as mod

    mod._warned = False
    with pytest.warns(DeprecationWarning, match="use 'tpot'"):
        got = obj("latency_per_token")
    np.testing.assert_allclose(got, obj("tpot"))
    np.testing.assert_allclose(con("max_latency", params={"max": "20 ms"}), con("max_tpot", params={"max": "20 ms"}))


def test_tpot_constraint_and_ttft_constraint():
    # 28.04 ms vs a 20 ms SLO: 8.04 ms over
    np.testing.assert_allclose(con("max_tpot", params={"max": "20 ms"}), [8.04e-3, 9.63e-3], rtol=1e-9)
    # no TTFT for the decode row: infeasible; 0.2 s vs 0.5 s
    np.testing.assert_allclose(con("max_ttft", params={"max": "500 ms"}), [np.inf, -0.3])
    with pytest.raises(SpecError, match="holds none"):
        con("max_ttft", {"ttft_s": np.array([np.nan])}, {"max": "1 s"})


def test_throughputs_per_chip_dollar_and_at_slo():
    per_chip = np.array([64 / 28.04e-3, 64 / 29.63e-3 / 2])
    np.testing.assert_allclose(obj("throughput_per_chip"), per_chip)
    np.testing.assert_allclose(obj("throughput_per_dollar"), [64 / 28.04e-3 / 2000, 64 / 29.63e-3 / 4000])
    np.testing.assert_allclose(obj("throughput_at_slo", params={"tpot": "29 ms"}), [per_chip[0], 0.0])
    np.testing.assert_allclose(obj("throughput_at_slo", params={"tpot": "30 ms", "ttft": "1 s"}),
                               [0.0, per_chip[1]])
    with pytest.raises(SpecError, match="'throughput_at_slo' needs the parameter 'tpot'"):
        registry.bind_objective("throughput_at_slo")


def test_objectives_read_a_serving_point():
    p = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, weights="fp8", kv="fp8", tp=2)
    m = {k: np.array([v]) for k, v in p.metrics().items()}
    assert obj("tpot", m)[0] == p.tpot_s
    assert obj("throughput_per_chip", m)[0] == pytest.approx(p.output_tokens_per_s / 2)
    assert obj("throughput_at_slo", m, {"tpot": "1 s"})[0] == pytest.approx(p.output_tokens_per_s_per_chip)
    assert con("max_ttft", m, {"max": "10 s"})[0] == pytest.approx(p.ttft_s - 10)
