"""The Python API (issue 19 item 9): `dse.evaluate_design`, `dse.run_study`, `dse.whatif`, `dse.serve`.

Their docstring examples run here as doctests (each example says where its expected number comes from: the
published chip figures, the model config, the study file, TensorRT-LLM's measurement). The wrong-argument
cases check that a mistake is a dse.errors.SpecError naming the argument, not a TypeError or AttributeError
from inside.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

import dse
from dse.errors import DseError, SpecError

ROOT = Path(__file__).resolve().parents[1]
DECODE = "qwen3-8b:decode:batch=1:context=8192"


@pytest.mark.parametrize("module", ["dse.api", "dse.whatif.entry", "dse.serve.entry", "dse.solvers.gemm_tiles"])
def test_docstring_examples_run(module, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name the shipped studies/ by relative path
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_the_four_entry_points_are_importable_from_dse():
    from dse import evaluate_design, run_study, serve, whatif

    for f in (evaluate_design, run_study, serve, whatif):
        assert callable(f)
    assert {"evaluate_design", "run_study", "whatif", "serve"} <= set(dse.__all__) and "serve" in dir(dse)
    # dse.whatif / dse.serve stay the packages of those parts (their lower layers), callable
    assert dse.whatif.run_whatif and dse.serve.serve and dse.serve.Engine
    with pytest.raises(AttributeError):
        dse.no_such_thing  # noqa: B018


def test_evaluate_design_takes_names_specs_mappings_and_lists():
    from dse.hardware import Chips, load_chip
    from dse.workload import decode

    spec = load_chip("h100-sxm")
    a = dse.evaluate_design("h100-sxm", DECODE)
    b = dse.evaluate_design(spec, decode("qwen3-8b", batch=1, context=8192))
    c = dse.evaluate_design(Chips.from_specs([spec]), {"model": "qwen3-8b", "phase": "decode", "batch": 1,
                                                       "context": 8192})
    assert a["time_s"][0] == b["time_s"][0] == c["time_s"][0]
    two = dse.evaluate_design(["h100-sxm", "rtx-4090"], [(DECODE, 3), ("gemm:m=256:k=4096:n=4096", 1)])
    assert two.n == 2 and len(two.per_workload) == 2
    # the package columns are there (issue 19 item 9: "missing area/cost columns")
    assert {"die_area_mm2", "chip_cost_usd"} <= set(a) and "die_area_mm2" in a.frame().columns
    rom = dse.evaluate_design("h100-sxm", DECODE, weights_in_rom=True, rom_bandwidth="8 TB/s")
    assert rom["time_s"][0] < a["time_s"][0]  # the weights read from a second, faster memory


@pytest.mark.parametrize("call, words", [
    (lambda: dse.evaluate_design(123, DECODE), "chips: expected a catalog chip name"),
    (lambda: dse.evaluate_design("h100-sxm", 5), "workloads: expected a workload"),
    (lambda: dse.evaluate_design("h100-sxm", []), "expected at least one workload"),
    (lambda: dse.evaluate_design("h100-sxm", [(DECODE, -1)]), "the weight must be a finite number > 0"),
    (lambda: dse.evaluate_design("h100-sxm", DECODE, fused_atention=True), "did you mean 'fused_attention'"),
    (lambda: dse.evaluate_design("h100-sxm", DECODE, breakdown="yes"), "breakdown: expected True or False"),
    (lambda: dse.evaluate_design("h100-sxm", DECODE, weights_in_rom=True, rom_bandwidth="8 TB"),
     "expected a bandwidth quantity"),
    (lambda: dse.evaluate_design("nope", DECODE), "unknown chip 'nope'"),
    (lambda: dse.run_study(123), "path must be a study YAML file"),
    (lambda: dse.run_study("no-such-study.yaml"), "no such file"),
    (lambda: dse.run_study(ROOT / "studies" / "precision-vs-error.yaml", workers="2"), "workers must be an integer"),
    (lambda: dse.run_study(ROOT / "studies" / "precision-vs-error.yaml", write="no"), "write must be True or False"),
    (lambda: dse.whatif(3), "baseline must be a catalog chip name"),
    (lambda: dse.whatif("h100-sxm"), "is a chip, not a what-if file"),
    (lambda: dse.whatif("h100-sxm", {"hbm.stacks": 6}), "give workloads"),
    (lambda: dse.whatif("h100-sxm", 6, workloads=DECODE), "changes must be a mapping"),
    (lambda: dse.whatif("h100-sxm", ["hbm.stacks"], workloads=DECODE), "expected KEY=VALUE"),
    (lambda: dse.whatif("h100-sxm", {"clock": 2.0}, workloads=DECODE), "clock: expected a frequency quantity"),
    (lambda: dse.whatif("h100-sxm", chips=["h300"], workloads=DECODE), "whatif: chips: unknown chip 'h300'"),
    (lambda: dse.whatif("h100-sxm", chips=["h200-sxm"], workloads=[7]), "workloads must be"),
    (lambda: dse.serve(123, "llama-3.1-8b", 1000, 1000), "chip must be a catalog name"),
    (lambda: dse.serve("h100-sxm", 5, 1000, 1000), "model must be a shipped model name"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", "1000", 1000), "isl must be an integer >= 1"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", 1000, 1000, tp="2"), "tp must be an integer >= 1"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", 1000, 1000, load="50%"), "load must be a number in (0, 1]"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", 1000, 1000, weight="fp8"), "did you mean 'weights'"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", 1000, 1000, engine={"max_batch": 8}), "engine must be"),
    (lambda: dse.serve("h100-sxm", "llama-3.1-8b", 1000, 1000, weights="fp4"), "did you mean 'nvfp4'"),
])
def test_a_wrong_argument_is_a_spec_error(call, words):
    with pytest.raises(SpecError) as e:
        call()
    assert words in str(e.value)


def test_whatif_forms_agree():
    """The quick form, the `--set` strings and a proposals mapping are the same question."""
    a = dse.whatif("h100-sxm", {"hbm.stacks": 6}, workloads=DECODE)
    b = dse.whatif("h100-sxm", ["hbm.stacks=6"], workloads=[DECODE])
    c = dse.whatif("h100-sxm", proposals={"six": {"hbm.stacks": 6}}, workloads=DECODE)
    t = [r.metrics.set_index("design")["time_s"] for r in (a, b, c)]
    assert t[0]["hbm.stacks=6"] == t[1]["hbm.stacks=6"] == t[2]["six"]
    f = dse.whatif(ROOT / "studies" / "whatif-h100-upgrades.yaml", workloads=[DECODE])
    assert [w.name for w in f.spec.workloads] == [a.spec.workloads[0].name]


def test_an_infeasible_serving_question_is_a_dse_error():
    with pytest.raises(DseError):  # 405B parameters in BF16 (810 GB) do not fit one 80 GB H100
        dse.serve("h100-sxm", "llama-3.1-405b", 1000, 1000)
