"""Every objective in objectives/: an independently computed value, its direction and its errors.

Expected values are worked by hand from seed figures in the comments
(seed 004 §4.1.3 decode energy 0.534 J, §4.8.2 step 4.88 ms, §4.8.4 Example 4-3).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import pandas as pd
import pytest

from dse import registry
from dse.errors import SpecError

YEAR = 365 * 86400.0

ALL = {
    "latency_per_token": "minimize", "time_to_first_token": "minimize", "throughput": "maximize",
    "energy_per_token": "minimize", "perf_per_watt": "maximize", "die_area": "minimize",
    "total_silicon_area": "minimize", "chip_cost": "minimize", "cost_per_million_tokens": "minimize",
    "edp": "minimize",
}

# two rows: the seed's H100 single-request 8K decode step (4.88 ms, 0.534 J, ~110 W) and a batch-32 row
METRICS = pd.DataFrame({
    "time_s": [4.88e-3, 6.4e-3],  # the step: what each user waits per output token (TPOT)
    "time_per_token_s": [4.88e-3, 0.2e-3],
    "ttft_s": [0.35, 1.2],
    "tokens_per_s": [1 / 4.88e-3, 5000.0],
    "energy_per_token_j": [0.534, 0.068],
    "power_w": [0.534 / 4.88e-3, 340.0],
    "die_area_mm2": [814.0, 600.0],
    "total_silicon_area_mm2": [814.0, 1200.0],
    "chip_cost_usd": [2400.0, 6000.0],
})


def run(name, metrics=METRICS, params=None):
    return registry.bind_objective(name, params)(metrics)


def test_catalog_lists_every_objective():
    assert set(ALL) <= set(registry.objective_names())


@pytest.mark.parametrize("name", sorted(ALL))
def test_module_contract(name):
    mod = registry.get_objective(name)
    assert mod.NAME == name == mod.__name__.rsplit(".", 1)[1]
    assert mod.DIRECTION == ALL[name]
    for attr in ("UNIT", "FORMULA", "SOURCE"):
        assert isinstance(getattr(mod, attr), str) and getattr(mod, attr)
    assert "Formula:" in mod.__doc__ and "Source:" in mod.__doc__


@pytest.mark.parametrize("name, column", [
    ("latency_per_token", "time_s"), ("time_to_first_token", "ttft_s"), ("throughput", "tokens_per_s"),
    ("energy_per_token", "energy_per_token_j"), ("die_area", "die_area_mm2"),
    ("total_silicon_area", "total_silicon_area_mm2"), ("chip_cost", "chip_cost_usd"),
])
def test_column_objectives(name, column):
    # (latency_per_token, the deprecated alias of tpot, says so each time it computes: expected here, not noise)
    with pytest.warns(DeprecationWarning, match="use 'tpot'") if name == "latency_per_token" else nullcontext():
        values = run(name)
    np.testing.assert_allclose(values, METRICS[column].to_numpy())


def test_values_of_column_objectives_by_hand():
    # 1 / 4.88 ms = 204.9 tokens/s; the seed's 0.534 J per token
    assert run("throughput")[0] == pytest.approx(204.918, rel=1e-5)
    assert run("energy_per_token")[0] == 0.534


def test_perf_per_watt():
    # 204.9 token/s at 109.4 W = 1 / 0.534 J = 1.873 tokens/J; 5000 / 340 = 14.71
    np.testing.assert_allclose(run("perf_per_watt"), [1 / 0.534, 5000 / 340])
    np.testing.assert_array_equal(np.isnan(run("perf_per_watt", {"tokens_per_s": [1.0], "power_w": [0.0]})), [True])


def test_edp():
    # 0.534 J x 4.88 ms = 2.606e-3 J s
    np.testing.assert_allclose(run("edp"), [0.534 * 4.88e-3, 0.068 * 0.2e-3])
    assert run("edp")[0] == pytest.approx(2.606e-3, rel=1e-3)


def test_cost_per_million_tokens_defaults_and_params():
    # defaults: 4 years, 50%, 0.10 $/kWh. Row 2: 6000 / (5000 x 0.5 x 4 yr) = 1.902e-8 $/token
    # + 0.068 J x 0.10 / 3.6e6 = 1.889e-9 $/token -> 0.02091 $ per million
    got = run("cost_per_million_tokens")
    want = 1e6 * (6000 / (5000 * 0.5 * 4 * YEAR) + 0.068 * 0.10 / 3.6e6)
    assert got[1] == pytest.approx(want) and got[1] == pytest.approx(0.02091, rel=1e-3)
    # 3 years at 80% and 0.25 $/kWh
    got = run("cost_per_million_tokens", params={"lifetime": "3 years", "utilization": "80 %",
                                                 "electricity_price": "0.25 $/kWh"})
    want = 1e6 * (6000 / (5000 * 0.8 * 3 * YEAR) + 0.068 * 0.25 / 3.6e6)
    assert got[1] == pytest.approx(want)


def test_cost_per_million_tokens_errors():
    with pytest.raises(SpecError, match="money_per_energy"):
        registry.bind_objective("cost_per_million_tokens", {"electricity_price": "0.1 $"})
    with pytest.raises(SpecError, match="did you mean 'lifetime'"):
        registry.bind_objective("cost_per_million_tokens", {"lifetim": "3 years"})
    with pytest.raises(SpecError, match="utilization"):
        run("cost_per_million_tokens", params={"utilization": 1.5})
    with pytest.raises(SpecError, match="chip_cost_usd"):
        run("cost_per_million_tokens", METRICS.drop(columns="chip_cost_usd"))


@pytest.mark.parametrize("name", sorted(set(ALL) - {"cost_per_million_tokens"}))
def test_parameterless_objectives_refuse_parameters(name):
    with pytest.raises(SpecError, match="takes no parameters"):
        registry.bind_objective(name, {"weight": 2})


@pytest.mark.parametrize("name", sorted(ALL))
def test_missing_metric_column_is_a_spec_error(name):
    with pytest.raises(SpecError, match="needs the metrics column"):
        run(name, {"unrelated": np.zeros(2)})
