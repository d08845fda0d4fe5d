"""Every constraint in constraints/: an independently computed value and its errors.

Expected values are worked by hand in the comments (published figures where
they exist: reticle 26 x 33 mm = 858 mm^2, H100 700 W, 814 mm^2); each
constraint is called through the registry with YAML-style parameters, the
way a study calls it, and once with wrong parameters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dse import registry
from dse.errors import SpecError

ALL = [
    "reticle", "interposer", "hbm_shoreline", "tdp", "power_density", "fits_memory", "buffer_fit",
    "max_latency", "min_throughput", "max_quant_error", "max_cost",
]


def run(name, metrics, params=None):
    return registry.bind_constraint(name, params)(metrics)


def test_catalog_lists_every_constraint():
    assert set(ALL) <= set(registry.constraint_names())


@pytest.mark.parametrize("name", ALL)
def test_module_contract(name):
    mod = registry.get_constraint(name)
    assert mod.NAME == name == mod.__name__.rsplit(".", 1)[1]
    for attr in ("UNIT", "FORMULA", "SOURCE"):
        assert isinstance(getattr(mod, attr), str) and getattr(mod, attr)
    doc = mod.__doc__
    assert "Formula:" in doc and "Source:" in doc and "feasible" in doc


def test_reticle():
    # 900 mm^2 die vs the 858 mm^2 reticle (26 x 33 mm): violation 42 mm^2; H100's 814: margin -44
    m = {"die_area_mm2": np.array([900.0, 814.0])}
    np.testing.assert_allclose(run("reticle", m), [42.0, -44.0])
    np.testing.assert_allclose(run("reticle", m, {"max": "800 mm^2"}), [100.0, 14.0])
    # 1 cm^2 = 100 mm^2: 900 - 500
    np.testing.assert_allclose(run("reticle", m, {"max": "5 cm^2"}), [400.0, 314.0])


def test_reticle_errors():
    with pytest.raises(SpecError, match="area"):
        registry.bind_constraint("reticle", {"max": "858 W"})
    with pytest.raises(SpecError, match="did you mean 'max'"):
        registry.bind_constraint("reticle", {"maxx": "858 mm^2"})
    with pytest.raises(SpecError, match="die_area_mm2"):
        run("reticle", {"die_area": np.array([1.0])})


def test_interposer():
    # default: CoWoS-S ~3.3 x reticle = 2831.4 mm^2 (technology.md); 3000 mm^2 exceeds it by 168.6
    m = {"interposer_area_mm2": np.array([3000.0, 2000.0])}
    np.testing.assert_allclose(run("interposer", m), [3000.0 - 3.3 * 858, 2000.0 - 3.3 * 858], rtol=1e-9)
    np.testing.assert_allclose(run("interposer", m, {"max": "2500 mm^2"}), [500.0, -500.0])


def test_interposer_errors():
    with pytest.raises(SpecError):
        registry.bind_constraint("interposer", {"max": 2500})  # bare number: no unit
    with pytest.raises(SpecError, match="interposer_area_mm2"):
        run("interposer", {"die_area_mm2": np.array([1.0])})


def test_hbm_shoreline():
    # 7 stacks on a die whose edges hold 6 (H100): one stack too many; B200 8 of 8: exactly feasible
    m = pd.DataFrame({"hbm_stacks": [7.0, 5.0, 8.0], "hbm_shoreline_stacks": [6.0, 6.0, 8.0]})
    np.testing.assert_allclose(run("hbm_shoreline", m), [1.0, -1.0, 0.0])


def test_hbm_shoreline_errors():
    with pytest.raises(SpecError, match="takes no parameters"):
        registry.bind_constraint("hbm_shoreline", {"max": 3})


def test_tdp():
    # H100 700 W: peak 812 W exceeds by 112 W; with an explicit 1000 W limit: -188 W
    m = {"peak_power_w": np.array([812.0, 650.0]), "tdp": np.array([700.0, np.inf])}
    np.testing.assert_allclose(run("tdp", m), [112.0, 0.0])  # no TDP (inf): no limit
    np.testing.assert_allclose(run("tdp", m, {"max": "1 kW"}), [-188.0, -350.0])


def test_tdp_errors():
    with pytest.raises(SpecError, match="tdp"):
        run("tdp", {"peak_power_w": np.array([1.0])})  # no max and no tdp column
    with pytest.raises(SpecError, match="power"):
        registry.bind_constraint("tdp", {"max": "700 J"})


def test_power_density():
    # H100: 700 W / 814 mm^2 = 0.860 W/mm^2 (technology.md): under the 1.0 default, over 0.6 (air)
    m = {"power_density_w_per_mm2": np.array([700.0 / 814.0])}
    np.testing.assert_allclose(run("power_density", m), [700 / 814 - 1.0])
    np.testing.assert_allclose(run("power_density", m, {"max": "0.6 W/mm^2"}), [700 / 814 - 0.6])
    # 60 W/cm^2 = 0.6 W/mm^2
    np.testing.assert_allclose(run("power_density", m, {"max": "60 W/cm^2"}), [700 / 814 - 0.6])


def test_power_density_errors():
    with pytest.raises(SpecError, match="power_density"):
        registry.bind_constraint("power_density", {"max": "0.6 W"})


def test_fits_memory():
    # Qwen3-8B BF16 resident 16.381 GB on an 80 GB H100: 63.619 GB free; 96 GB on 80 GB: 16 GB over
    m = {"resident_bytes": np.array([16.381e9, 96e9]), "capacity_bytes": np.array([80e9, 80e9])}
    np.testing.assert_allclose(run("fits_memory", m), [-63.619e9, 16e9])
    np.testing.assert_allclose(run("fits_memory", m, {"reserve": "2 GiB"}), [-63.619e9 + 2**31, 16e9 + 2**31])


def test_fits_memory_errors():
    with pytest.raises(SpecError, match="bytes"):
        registry.bind_constraint("fits_memory", {"reserve": "2 GHz"})
    with pytest.raises(SpecError, match="capacity_bytes"):
        run("fits_memory", {"resident_bytes": np.array([1.0])})


def test_buffer_fit():
    # seed 004 §4.4.2 style: a 128x128x64 BF16 tile, two slots of A and B: 2 x 2 x 128 x 64 x 2 B = 64 KiB,
    # plus a 128x128 FP32 accumulator 64 KiB = 128 KiB; in 228 KiB fits (-100 KiB), in 100 KiB does not (+28 KiB)
    ws = 2 * 2 * 128 * 64 * 2 + 128 * 128 * 4
    m = {"tile_working_set_bytes": np.array([ws, ws]), "local_buffer_bytes": np.array([228 * 1024, 100 * 1024])}
    np.testing.assert_allclose(run("buffer_fit", m), [-100 * 1024, 28 * 1024])


def test_buffer_fit_errors():
    with pytest.raises(SpecError, match="takes no parameters"):
        registry.bind_constraint("buffer_fit", {"slots": 2})


def test_max_latency():
    # RTX 4090 read bound 16.22 ms per token vs a 10 ms deadline: 6.22 ms over (seed 004 §4.8.2)
    m = {"time_s": np.array([16.22e-3, 9.12e-3])}  # the step time: each user's time per output token
    np.testing.assert_allclose(run("max_latency", m, {"max": "10 ms"}), [6.22e-3, -0.88e-3], rtol=1e-9)


def test_max_latency_errors():
    with pytest.raises(SpecError, match="needs the parameter 'max'"):
        registry.bind_constraint("max_latency", {})
    with pytest.raises(SpecError, match="time"):
        registry.bind_constraint("max_latency", {"max": "10 GB"})


def test_min_throughput():
    # seed 004 Example 4-3's 10,000 token/s per machine: 8,000 token/s falls short by 2,000
    m = {"tokens_per_s": np.array([8000.0, 12000.0])}
    np.testing.assert_allclose(run("min_throughput", m, {"min": "10000 tokens/s"}), [2000.0, -2000.0])


def test_min_throughput_errors():
    with pytest.raises(SpecError, match="needs the parameter 'min'"):
        registry.bind_constraint("min_throughput")
    with pytest.raises(SpecError, match="did you mean 'min'"):
        registry.bind_constraint("min_throughput", {"mni": "1 /s"})


def test_max_quant_error():
    # relative RMS error 0.031 vs a 2% bound: 0.011 over; percent accepted
    m = {"quant_error": np.array([0.031, 0.004])}
    np.testing.assert_allclose(run("max_quant_error", m, {"max": 0.02}), [0.011, -0.016])
    np.testing.assert_allclose(run("max_quant_error", m, {"max": "2 %"}), [0.011, -0.016])


def test_max_quant_error_errors():
    with pytest.raises(SpecError):
        registry.bind_constraint("max_quant_error", {"max": "2 s"})
    with pytest.raises(SpecError, match="needs the parameter 'max'"):
        registry.bind_constraint("max_quant_error", None)


def test_max_cost():
    # $5,711 (LLMCompass' A100 total) vs a $5,000 budget: $711 over
    m = {"chip_cost_usd": np.array([5711.0, 3000.0])}
    np.testing.assert_allclose(run("max_cost", m, {"max": "5000 $"}), [711.0, -2000.0])
    np.testing.assert_allclose(run("max_cost", m, {"max": "5 k$"}), [711.0, -2000.0])


def test_max_cost_errors():
    with pytest.raises(SpecError, match="money"):
        registry.bind_constraint("max_cost", {"max": "5000 W"})


def test_values_broadcast_over_rows_and_keep_dtype():
    m = pd.DataFrame({"die_area_mm2": np.linspace(700, 900, 5)})
    out = run("reticle", m)
    assert out.shape == (5,) and out.dtype == float
    assert (out <= 0).tolist() == [True, True, True, True, False]  # 850 <= 858 < 900
