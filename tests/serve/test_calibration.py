"""Calibration on measured serving: every row with the shipped knobs, the fit and its leave-one-out errors.

Measured numbers come from dse/data/serving/measured_serving.yaml (a copy of
shared/reference/measured_serving.yaml: NVIDIA TensorRT-LLM's published max-throughput table, H100 SXM,
Llama 3.1 8B FP8 TP1 and Llama 3.3 70B FP8 TP2, 20 rows) and dse/data/measurements/seed004.csv (seed 004
§4.8.3, vLLM eager decode steps on an RTX PRO 6000). The goal of the issue: leave-one-out median within 10%,
every row within 25%.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.hardware import Chips
from dse.serve import Engine, IDEAL, Knobs, read_knobs_file, resolve_knobs, serve
from dse.serve import calibration as cal
from dse.serve.knobs import KNOBS_FILE, shipped
from dse.workload import decode

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "measured_serving.yaml"
MEASURED = yaml.safe_load(cal.MEASURED_SERVING.read_text())
ROWS = [(s["chip"], s["model"], s["tp"], s["weights"], s["kv_cache"], isl, osl, tps)
        for s in MEASURED["systems"] for isl, osl, tps in s["rows"]]


def test_the_shipped_copy_is_the_reference():
    if REFERENCE.exists():  # in the shared workspace; the package's copy stands alone without it
        assert yaml.safe_load(REFERENCE.read_text()) == MEASURED
    assert len(ROWS) == 20


@pytest.mark.parametrize("chip, model, tp, w, kv, isl, osl, measured", ROWS,
                         ids=[f"{r[1]}-tp{r[2]}-{r[5]}-{r[6]}" for r in ROWS])
def test_each_measured_row_with_the_shipped_knobs(chip, model, tp, w, kv, isl, osl, measured):
    p = serve(chip, model, isl, osl, tp=tp, weights=w, kv=kv, activations=w)
    assert p.output_tokens_per_s == pytest.approx(measured, rel=0.25)
    # and the bound (no calibration) is above what was measured: the knobs only take away
    bound = serve(chip, model, isl, osl, tp=tp, weights=w, kv=kv, activations=w, knobs=IDEAL)
    assert bound.output_tokens_per_s > measured


def test_the_issue_check_row():
    # `dse serve --chip h100-sxm --model llama-3.1-8b --weights fp8 --kv fp8 --isl 1000 --osl 1000`:
    # TensorRT-LLM measured 15,220 output tokens/s
    p = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, weights="fp8", kv="fp8")
    assert p.output_tokens_per_s == pytest.approx(15220, rel=0.25)


@pytest.mark.parametrize("workload, measured", [
    (("qwen3-8b", 1, 8192), 25.83e-3), (("qwen3-8b", 1, 2048), 26.26e-3), (("qwen3-8b", 64, 2048), 29.63e-3)])
def test_seed_vllm_steps_with_the_eager_profile(workload, measured):
    # seed 004 §4.8.3 (Experiment 8-1): the vLLM eager profile's knobs on the join's decode step
    knobs = resolve_knobs(None, "vllm-eager")
    chip = Chips.from_specs([cal.system_chip("rtx-pro-6000", knobs=knobs)])
    t = evaluate_design(chip, decode(workload[0], batch=workload[1], context=workload[2]))["time_s"][0]
    assert t == pytest.approx(measured, rel=0.05)


def _trtllm_fit():
    p = cal.PROFILES["trtllm"]
    return cal.fit(p["rows"](), p["free"], p["fixed"], name="trtllm")


@pytest.fixture(scope="module")
def trtllm_fit(computed_once):
    """The fit of the shipped trtllm profile with its leave-one-out refits: about a minute of CPU on a loaded
    machine, computed once per test session however `make test` (pytest -n 2) spreads its tests over the workers
    (tests/conftest.py computed_once; issue 21 item 7: it was fitted on each worker, and again on a worker that
    came back to this module after another one)."""
    return computed_once("serve-calibration-trtllm-fit", _trtllm_fit)


def test_refit_reproduces_the_shipped_knobs(trtllm_fit):
    # the knob file is the fit of the current model: refit with `python -m dse.serve.calibration --write`
    # when the evaluator changes
    shipped_knobs = shipped()[0]["trtllm"]
    for k in ("compute_efficiency", "bandwidth_efficiency", "step_overhead", "collective_overhead"):
        assert getattr(trtllm_fit.knobs, k) == pytest.approx(getattr(shipped_knobs, k), rel=0.02, abs=1e-6), \
            f"{k}: stale dse/data/serving/knobs.yaml, run python -m dse.serve.calibration --write"


def test_fit_and_leave_one_out_meet_the_goal(trtllm_fit):
    s = trtllm_fit.summary()
    assert s["loo"]["median"] <= 0.10 and s["loo"]["max"] <= 0.25
    assert s["fitted"]["max"] <= s["loo"]["max"] + 1e-12
    assert s["bound"]["median"] > 0.2  # the bound alone is far off: the knobs carry real information
    k = trtllm_fit.knobs
    # physical: fractions of peak, overheads of a few hundred microseconds per iteration and microseconds per
    # collective step
    assert 0.3 < k.compute_efficiency < 1 and 0.5 < k.bandwidth_efficiency <= 1
    assert 0 <= k.step_overhead < 5e-3 and 0 <= k.collective_overhead < 100e-6
    assert k.kernel_overhead == 0.0


def test_report_table_lists_every_row(trtllm_fit):
    text = cal.report_table(trtllm_fit)
    assert text.count("| h100-sxm") == 20 and "leave-one-out" in text


def test_knob_file_round_trip(tmp_path, trtllm_fit):
    path = tmp_path / "knobs.yaml"
    path.write_text(cal.knobs_yaml({"trtllm": trtllm_fit}))
    profiles, default, _ = read_knobs_file(path)
    assert default == "trtllm"
    assert profiles["trtllm"].bandwidth_efficiency == pytest.approx(trtllm_fit.knobs.bandwidth_efficiency,
                                                                    abs=1e-4)
    assert resolve_knobs(path).name == "trtllm"


def test_knob_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles:\n  x:\n    compute_efficiency: 1.5\n")
    with pytest.raises(SpecError, match=r"bad.yaml:3:25 profiles.x.compute_efficiency: expected a fraction in "
                                        r"\(0, 1\], found 1.5"):  # located at the value (issue 21 item 6)
        read_knobs_file(bad)
    bad.write_text("profiles:\n  x:\n    step_overhead: 5\n")
    with pytest.raises(SpecError, match="step_overhead"):
        read_knobs_file(bad)
    bad.write_text("profiles:\n  x:\n    step_ovrhead: 5 us\n")
    with pytest.raises(SpecError, match="did you mean 'step_overhead'"):
        read_knobs_file(bad)
    with pytest.raises(SpecError, match="no such knob file"):
        resolve_knobs(tmp_path / "missing.yaml")
    with pytest.raises(SpecError, match="unknown knob profile 'sglang'"):
        resolve_knobs(None, "sglang")
    assert resolve_knobs("none") == IDEAL
    with pytest.raises(SpecError, match="fraction"):
        Knobs(compute_efficiency=0)


def test_shipped_file_is_package_data():
    assert KNOBS_FILE.is_file() and cal.MEASURED_SERVING.is_file()
    assert KNOBS_FILE.relative_to(Path(cal.__file__).resolve().parents[1]).as_posix() == "data/serving/knobs.yaml"
    text = KNOBS_FILE.read_text()
    assert "source:" in text and "leave-one-out" in text


def test_rows_need_no_knobs_for_their_batch():
    # without an SLO the operating point's batch follows from capacity and the engine alone
    rows = cal.throughput_rows(engine=Engine())
    assert [r.batch for r in rows[:2]] == [serve("h100-sxm", "llama-3.1-8b", 128, 128, weights="fp8", kv="fp8",
                                                 knobs=IDEAL).batch,
                                           serve("h100-sxm", "llama-3.1-8b", 128, 2048, weights="fp8", kv="fp8",
                                                 knobs=IDEAL).batch]
    assert np.all([r.time_s > 0 for r in rows])
