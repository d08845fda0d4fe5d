"""Tests of dse.registry: discovery, did-you-mean, YAML parameters, study modules from a path."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from dse import registry
from dse.errors import SpecError


def test_discovery_finds_both_catalogs():
    cons = registry.constraint_names()
    objs = registry.objective_names()
    assert {"reticle", "tdp", "hbm_shoreline", "fits_memory"} <= set(cons)
    assert {"throughput", "edp", "cost_per_million_tokens"} <= set(objs)
    assert not any(n.startswith("_") for n in cons + objs)


def test_unknown_names_suggest_the_closest():
    with pytest.raises(SpecError, match="unknown constraint 'retcle' \\(did you mean 'reticle'\\?\\)"):
        registry.get_constraint("retcle")
    with pytest.raises(SpecError, match="did you mean 'throughput'"):
        registry.get_objective("througput")
    with pytest.raises(SpecError, match="known: .*tpot") as e:
        registry.get_objective("nothing_like_it")
    # a deprecated name (objectives/latency_per_token.py: REPLACED_BY tpot) still works but is neither listed nor
    # suggested: the name closest to it suggests its replacement ('time_per_token' suggested energy_per_token)
    assert "latency_per_token" not in str(e.value)
    with pytest.raises(SpecError, match="unknown objective 'time_per_token' \\(did you mean 'tpot'\\?\\)"):
        registry.get_objective("time_per_token")
    assert registry.get_objective("latency_per_token").REPLACED_BY == "tpot"


def test_parse_params_units_defaults_and_auto():
    tdp = registry.get_constraint("tdp")
    assert registry.parse_params(tdp, {"max": "1000 W"}) == {"max": 1000.0}
    assert registry.parse_params(tdp, {"max": "1.2 kW"}) == {"max": 1200.0}
    assert registry.parse_params(tdp, None) == {}  # AUTO: the function uses the chip's tdp column
    pd_ = registry.get_constraint("power_density")
    assert registry.parse_params(pd_, {}) == {"max": 1.0}  # declared default
    assert tdp.PARAMS["max"] == ("power", registry.AUTO)


def test_parse_params_reports_every_problem_at_once():
    mod = registry.get_objective("cost_per_million_tokens")
    with pytest.raises(SpecError) as err:
        registry.parse_params(mod, {"lifetim": "3 years", "electricity_price": "3 W", "utilization": "x"},
                              where="study.yaml:12")
    problems = err.value.problems
    assert len(problems) == 3
    assert all(p.startswith("study.yaml:12: ") for p in problems)
    assert any("did you mean 'lifetime'" in p for p in problems)


def test_missing_required_parameter():
    with pytest.raises(SpecError, match="'max_latency' needs the parameter 'max' \\(a time quantity\\)"):
        registry.bind_constraint("max_latency")


def test_bare_number_needs_a_unit():
    with pytest.raises(SpecError, match="with a unit"):
        registry.bind_constraint("tdp", {"max": 700})
    with pytest.raises(SpecError, match="must be a mapping"):
        registry.bind_constraint("tdp", ["700 W"])


def test_yaml_sections_mapping_and_list_forms():
    metrics = {"die_area_mm2": np.array([900.0]), "peak_power_w": np.array([800.0]),
               "tokens_per_s": np.array([100.0]), "time_per_token_s": np.array([0.01])}
    cons = registry.constraints_from_yaml({"reticle": None, "tdp": {"max": "1000 W"}})
    assert [t.name for t in cons] == ["reticle", "tdp"]
    np.testing.assert_allclose([t(metrics)[0] for t in cons], [42.0, -200.0])
    assert cons[1].unit == "W" and "peak_power_w" in cons[1].formula and cons[1].source
    objs = registry.objectives_from_yaml(["throughput", {"latency_per_token": None}])
    assert [(t.name, t.direction) for t in objs] == [("throughput", "maximize"), ("latency_per_token", "minimize")]
    assert registry.constraints_from_yaml(None) == []


def test_yaml_sections_collect_errors_with_locations():
    with pytest.raises(SpecError) as err:
        registry.constraints_from_yaml({"retcle": {}, "tdp": {"mx": "1 W"}, "max_latency": {}})
    text = str(err.value)
    assert "constraints.retcle: unknown constraint 'retcle'" in text
    assert "constraints.tdp: " in text and "did you mean 'max'" in text
    assert "constraints.max_latency: 'max_latency' needs the parameter 'max'" in text
    with pytest.raises(SpecError, match="expected a name or"):
        registry.objectives_from_yaml([{"a": 1, "b": 2}])
    with pytest.raises(SpecError, match="expected a mapping or a list"):
        registry.objectives_from_yaml("throughput")


# ------------------------------------------------------------------ study modules from a path

GOOD = '''
"""Headroom: keep 10% of the reticle free.

Formula: die_area_mm2 - fraction x 858      (mm^2; <= 0 feasible)
Source: the study's own rule.
"""
import numpy as np
from dse.registry import column

NAME = "reticle_headroom"
UNIT = "mm^2"
FORMULA = "die_area_mm2 - fraction * 858"
SOURCE = "study rule"
PARAMS = {"fraction": ("dimensionless", 0.9)}


def constraint(metrics, fraction=0.9):
    return column(metrics, "die_area_mm2", NAME) - fraction * 858.0
'''


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_load_module_from_path_and_use_it(tmp_path):
    p = write(tmp_path, "headroom.py", GOOD)
    mod = registry.load_module_from_path("headroom.py", base_dir=tmp_path)
    assert mod.NAME == "reticle_headroom" and registry.check_module(mod) == "constraint"
    extra = registry.load_modules([p])
    term = registry.bind_constraint("reticle_headroom", {"fraction": "80 %"}, extra=extra)
    assert term({"die_area_mm2": np.array([700.0])})[0] == pytest.approx(700 - 0.8 * 858)
    # the built-ins still resolve, and a study name is not visible without its module
    assert registry.bind_constraint("reticle", extra=extra).name == "reticle"
    with pytest.raises(SpecError, match="unknown constraint"):
        registry.get_constraint("reticle_headroom")


def test_load_module_refuses_anything_but_an_existing_py_file(tmp_path):
    (tmp_path / "pkg").mkdir()
    write(tmp_path, "notes.txt", "x = 1")
    with pytest.raises(SpecError, match="path to a .py file"):
        registry.load_module_from_path("constraints.reticle")  # a dotted module name is not a path
    with pytest.raises(SpecError, match="path to a .py file"):
        registry.load_module_from_path(tmp_path / "notes.txt")
    with pytest.raises(SpecError, match="no such file"):
        registry.load_module_from_path(tmp_path / "missing.py")
    with pytest.raises(SpecError, match="path to a .py file"):
        registry.load_module_from_path(tmp_path / "pkg")


def test_load_module_reports_a_broken_or_incomplete_module(tmp_path):
    bad = write(tmp_path, "broken.py", "raise RuntimeError('boom')\n")
    with pytest.raises(SpecError, match="loading the module failed: RuntimeError: boom"):
        registry.load_module_from_path(bad)
    incomplete = write(tmp_path, "incomplete.py", "def objective(metrics):\n    return metrics\n")
    with pytest.raises(SpecError) as err:
        registry.load_module_from_path(incomplete)
    text = str(err.value)
    assert "missing module attribute NAME" in text and "DIRECTION" in text
    neither = write(tmp_path, "neither.py", "NAME = 'x'\n")
    with pytest.raises(SpecError, match="exactly one of constraint"):
        registry.load_module_from_path(neither)
    bad_dim = write(tmp_path, "bad_dim.py", GOOD.replace('("dimensionless", 0.9)', '("dimensionles", 0.9)'))
    with pytest.raises(SpecError, match="did you mean 'dimensionless'"):
        registry.load_module_from_path(bad_dim)


def test_study_module_cannot_shadow_a_builtin(tmp_path):
    p = write(tmp_path, "shadow.py", GOOD.replace('NAME = "reticle_headroom"', 'NAME = "reticle"'))
    with pytest.raises(SpecError, match="already taken"):
        registry.load_modules([p])


def test_every_builtin_passes_check_module():
    for name in registry.constraint_names():
        assert registry.check_module(registry.get_constraint(name)) == "constraint"
    for name in registry.objective_names():
        assert registry.check_module(registry.get_objective(name)) == "objective"
