"""Calibration (dse.calibrate, `dse calibrate`, `dse eval --calibrated`) against the measured cases of seed 004
§4.8.3 (dse/data/measurements/seed004.csv; tests/data/seed_cases.yaml: measured_decode_rtx_pro_6000,
measured_qproj).

What is checked: the shipped measurements are the seed's numbers; bad CSVs get located errors; the fit stays
in its physical bounds, reports its residuals and a leave-one-out error per measurement, says when a bound is
active and refuses in --strict; too few or inseparable measurements are refused with the knobs named; the
written chip loads and evaluates to the fitted predictions; the CLI exits 2 on bad input, without a traceback.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dse import calibrate as cal
from dse.cli import main
from dse.errors import DseError, SpecError
from dse.evaluate import evaluate_arrays
from dse.hardware import Chips, load_chip
from tests.reference_cases import expected

SEED_CSV = Path(cal.__file__).parent / "data" / "measurements" / "seed004.csv"
DECODE_8K_B1 = "qwen3-8b:decode:batch=1:context=8192"
DECODE_2K_B64 = "qwen3-8b:decode:batch=64:context=2048"
HEADER = "chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source\n"


@pytest.fixture(scope="module")
def rows():
    return cal.load_measurements(SEED_CSV)


@pytest.fixture(scope="module")
def rtx_fit(rows):
    return cal.calibrate(rows, "rtx-pro-6000", measurements_file=str(SEED_CSV))


def _row(rows, chip, workload, variant=None):
    got = [m for m in rows if m.chip == chip and m.workload == workload and (variant is None or m.variant == variant)]
    assert len(got) == 1, (chip, workload, variant, got)
    return got[0]


# ---------------------------------------------------------------- the shipped measurements


def test_seed_measurements_are_the_seed_numbers(rows):
    assert len(rows) == 11
    assert {m.chip for m in rows} == {"rtx-pro-6000", "apple-m2-max"}
    for m in rows:
        assert "seed 004 §4.8.3" in m.source, m
    q = "measured_qproj"
    d = "measured_decode_rtx_pro_6000"
    want = {
        ("rtx-pro-6000", DECODE_8K_B1, None): expected(d, "measured_8k_b1_s"),
        ("rtx-pro-6000", DECODE_2K_B64, None): expected(d, "measured_2k_b64_s"),
        ("rtx-pro-6000", "qwen3-8b:decode:batch=1:context=2048", None): 26.26e-3,  # seed 004 §4.8.3, same experiment
        ("rtx-pro-6000", "gemm:m=1:k=4096:n=4096", "reuse"): expected(q, "measured_m1_reuse_s"),
        ("rtx-pro-6000", "gemm:m=1:k=4096:n=4096", "rotate"): expected(q, "measured_m1_rotate_s"),
        ("rtx-pro-6000", "gemm:m=256:k=4096:n=4096", "reuse"): expected(q, "measured_m256_reuse_s"),
        ("rtx-pro-6000", "gemm:m=256:k=4096:n=4096", "rotate"): expected(q, "measured_m256_rotate_s"),
        ("apple-m2-max", "gemm:m=1:k=4096:n=4096", "reuse"): 166e-6,  # seed 004 §4.8.3 table: ~166/183 us
        ("apple-m2-max", "gemm:m=1:k=4096:n=4096", "rotate"): 183e-6,
        ("apple-m2-max", "gemm:m=256:k=4096:n=4096", "reuse"): 1.835e-3,  # "both ~1.835 ms"
        ("apple-m2-max", "gemm:m=256:k=4096:n=4096", "rotate"): 1.835e-3,
    }
    for (chip, w, v), t in want.items():
        assert _row(rows, chip, w, v).time_s == pytest.approx(t, rel=1e-12)
    # decode rows: medians over three rounds (seed 004 note 33); Q projection: 11 rounds (note 27)
    assert {m.n_samples for m in rows if m.workload.startswith("qwen3")} == {3}
    assert {m.n_samples for m in rows if m.workload.startswith("gemm")} == {11}
    assert all(m.energy_j is None for m in rows)  # the seed measured no energy


def test_measured_workloads_reproduce_the_seed_bounds(rows):
    """The model's bound for the measured cases is the seed's (§4.8.3: 9.12 ms; 18.7 us at M = 1)."""
    t = dict(zip([(m.workload, m.variant) for m in rows if m.chip == "rtx-pro-6000"],
                 cal.predict("rtx-pro-6000", [m for m in rows if m.chip == "rtx-pro-6000"])))
    assert t[(DECODE_8K_B1, "vllm-eager")] == pytest.approx(expected("measured_decode_rtx_pro_6000", "bound_8k_b1_s"),
                                                           rel=0.01)
    assert t[("gemm:m=1:k=4096:n=4096", "reuse")] == pytest.approx(expected("measured_qproj", "bound_m1_s"), rel=0.01)


def test_m2_max_is_in_the_catalog_with_sources():
    c = load_chip("apple-m2-max")
    assert c.memory_bandwidth == pytest.approx(400e9)
    assert c.memory_capacity == pytest.approx(96e9)
    assert "seed 004 §4.8.3" in c.source and "Apple" in c.source
    assert c.dram.source and c.matrix.source


# ---------------------------------------------------------------- the GEMM workload form


def test_gemm_form():
    w = cal.parse_measured_workload("gemm:n=4096:m=1:k=4096")
    assert w.name == "gemm:m=1:k=4096:n=4096"  # canonical order
    (op,) = w.ops
    assert (op.m, op.k, op.n) == (1, 4096, 4096)
    assert op.flops == 2 * 4096 * 4096
    assert op.weight_bytes == 4096 * 4096 * 2  # BF16 weights, 32 MiB
    w8 = cal.parse_measured_workload("gemm:m=256:k=4096:n=4096:weights=fp8")
    assert w8.ops[0].weight_bytes == 4096 * 4096


def test_one_spelling_per_workload():
    """Key order does not matter; number formats do (a built decode Workload's name leaves them out)."""
    c = cal.canonical_workload
    assert c("qwen3-8b:decode:context=8192:batch=1") == c("qwen3-8b:decode:batch=1:context=8192") == DECODE_8K_B1
    assert c("qwen3-8b:decode:batch=1:context=8192:weights=fp8") != DECODE_8K_B1
    assert c("gemm:k=4096:n=4096:m=1") == "gemm:m=1:k=4096:n=4096"


@pytest.mark.parametrize("text, words", [
    ("gemm:m=1:k=4096", ["missing n"]),
    ("gemm:m=1:k=4096:n=4096:kk=3", ["kk", "did you mean 'k'"]),
    ("gemm:m=one:k=4096:n=4096", ["m must be an integer", "one"]),
    ("gemm:m=0:k=4096:n=4096", ["m must be >= 1"]),
    ("gemm:m=1:k=4096:n=4096:weights=fp7", ["fp7"]),
    ("qwen3-8x:decode:batch=1:context=8192", ["qwen3-8x", "did you mean 'qwen3-8b'"]),
])
def test_gemm_form_errors(text, words):
    with pytest.raises(SpecError) as e:
        cal.parse_measured_workload(text)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ---------------------------------------------------------------- CSV errors, located


GOOD_ROW = "rtx-pro-6000,gemm:m=1:k=4096:n=4096,reuse,42.9e-6,,11,seed 004 §4.8.3\n"

CSV_CASES = [
    # (description, text, line, words)
    ("unknown chip", HEADER + GOOD_ROW.replace("rtx-pro-6000", "rtx-pro-600"), 2,
     ["column 'chip'", "rtx-pro-600", "did you mean 'rtx-pro-6000'"]),
    ("time not a number", HEADER + GOOD_ROW.replace("42.9e-6", "fast"), 2,
     ["column 'measured_time_s'", "expected a time > 0", "'fast'"]),
    ("negative time", HEADER + GOOD_ROW.replace("42.9e-6", "-1e-3"), 2, ["measured_time_s", "'-1e-3'"]),
    ("time with a wrong unit", HEADER + GOOD_ROW.replace("42.9e-6", "42.9 GB"), 2, ["measured_time_s", "42.9 GB"]),
    ("missing source", HEADER + GOOD_ROW.replace("seed 004 §4.8.3", ""), 2, ["column 'source'", "not empty"]),
    ("bad workload", HEADER + GOOD_ROW.replace("gemm:m=1:k=4096:n=4096", "qwen3-8b:decode:batch=1"), 2,
     ["column 'workload'", "context"]),
    ("bad n_samples", HEADER + GOOD_ROW.replace(",11,", ",eleven,"), 2,
     ["column 'n_samples'", "integer >= 1", "'eleven'"]),
    ("bad energy", HEADER + GOOD_ROW.replace(",,11", ",hot,11"), 2, ["column 'measured_energy_j'", "'hot'"]),
    ("too few fields", HEADER + "rtx-pro-6000,gemm:m=1:k=4096:n=4096,reuse\n", 2, ["expected 7 fields", "got 3"]),
    ("unknown column", HEADER.replace("n_samples", "n_sample") + GOOD_ROW, 1,
     ["column 'n_sample'", "did you mean 'n_samples'"]),
    ("missing column", HEADER.replace(",source", "") + GOOD_ROW.rsplit(",", 1)[0] + "\n", 1,
     ["missing required column 'source'"]),
    ("comments keep line numbers", "# a comment\n\n" + HEADER + GOOD_ROW.replace("42.9e-6", "x"), 4,
     ["measured_time_s"]),
]


@pytest.mark.parametrize("desc, text, line, words", CSV_CASES, ids=[c[0] for c in CSV_CASES])
def test_csv_errors_are_located(tmp_path, capsys, desc, text, line, words):
    p = tmp_path / "m.csv"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as e:
        cal.load_measurements(p)
    msg = str(e.value)
    assert f"{p}:{line}:" in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    # the CLI: exit code 2, the same message, no traceback
    code = main(["calibrate", str(p), "--chip", "rtx-pro-6000"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and f"{p}:{line}:" in err, err


def test_csv_reports_every_problem_at_once(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text(HEADER + GOOD_ROW.replace("42.9e-6", "x") + GOOD_ROW + GOOD_ROW.replace("rtx-pro-6000", "h1000"),
                 encoding="utf-8")
    with pytest.raises(SpecError) as e:
        cal.load_measurements(p)
    assert len(e.value.problems) == 2
    assert f"{p}:2:" in e.value.problems[0] and f"{p}:4:" in e.value.problems[1]


# ---------------------------------------------------------------- the fit on the RTX PRO 6000


def test_fit_is_physical_and_reports_residuals_and_leave_one_out(rtx_fit):
    v = rtx_fit.values
    assert 0 < v["compute_efficiency"] <= 1 and 0 < v["bandwidth_efficiency"] <= 1
    assert v["kernel_overhead"] >= 0 and v["step_overhead"] >= 0
    assert len(rtx_fit.rows) == 7
    for r in rtx_fit.rows:
        assert r.residual == pytest.approx(r.predicted_s / r.measurement.time_s - 1, rel=1e-12)
        assert r.bound_s <= r.predicted_s  # calibration only slows the bound down
        # leave-one-out: a number per point, from a refit without it
        assert r.loo_error is not None and math.isfinite(r.loo_error), r
        assert r.loo_error == pytest.approx(r.loo_predicted_s / r.measurement.time_s - 1, rel=1e-12)
    assert math.isfinite(rtx_fit.loo_rms) and rtx_fit.loo_rms >= rtx_fit.rms * 0.999  # predicting is harder
    assert rtx_fit.rms == pytest.approx(np.sqrt(np.mean(rtx_fit.residuals ** 2)))


def test_fit_is_a_least_squares_minimum(rtx_fit, rows):
    """No feasible nudge of any knob lowers the sum of squared relative residuals."""
    mine = [m for m in rows if m.chip == "rtx-pro-6000"]
    meas = np.array([m.time_s for m in mine])
    base = rtx_fit.values

    def cost(values):
        from dse.hardware import with_overrides
        c = with_overrides(load_chip("rtx-pro-6000"), {
            f"calibration.{k}": (v if k in cal.FRACTIONS else f"{v!r} s") for k, v in values.items()})
        return float(np.sum((cal.predict(c, mine) / meas - 1) ** 2))

    c0 = cost(base)
    assert c0 == pytest.approx(np.sum(rtx_fit.residuals ** 2), rel=1e-9)
    for k in cal.KNOBS:
        for f in (0.99, 1.01):
            v = base[k] * f if base[k] else (1e-6 if f > 1 else 0.0)
            if (k in cal.FRACTIONS and not 0 < v <= 1) or v < 0:
                continue
            assert cost({**base, k: v}) >= c0 * (1 - 1e-9), (k, f)


def test_active_bounds_are_reported_not_hidden(rtx_fit):
    """These measurements ask for more than physical knobs allow (seed 004 §4.8.3: the M = 256 call is faster
    than the M = 1 call, and 2K/b1 is slower than 8K/b1), so the fit says which bound it is held at."""
    assert rtx_fit.active, "expected an active bound"
    for b in rtx_fit.active:
        assert b.knob in cal.KNOBS and b.knob in rtx_fit.free
        assert rtx_fit.values[b.knob] == b.bound
        if b.knob in cal.FRACTIONS:
            assert b.wanted > 1 and (b.edge is None or 1 < b.edge <= b.wanted)
        else:
            assert b.wanted < 0
    assert "bound active" in rtx_fit.summary()


@pytest.mark.xfail(strict=True, reason=(
    "not reachable with the current evaluator: dse.evaluate adds kernel_overhead to every operator's device "
    "time (t_op = max(...) + kernel_overhead), so 2K/b64 - 8K/b1 >= 19.76 - 9.13 ms for any physical knobs, "
    "while the seed measured 29.63 - 25.83 = 3.8 ms; the best physical fit of the two decode points alone "
    "misses one by >= 12%. With host launches overlapping device work (max(device, launches x overhead), seed "
    "004 §4.8.1) the same fit lands within 5%: see test_nonlinear_overhead_composition_is_fitted."))
def test_decode_predictions_within_10_percent(rtx_fit):
    by = {r.measurement.workload: r for r in rtx_fit.rows}
    assert by[DECODE_8K_B1].predicted_s == pytest.approx(25.83e-3, rel=0.10)
    assert by[DECODE_2K_B64].predicted_s == pytest.approx(29.63e-3, rel=0.10)


def test_nonlinear_overhead_composition_is_fitted(monkeypatch, rows):
    """The fitter does not assume how the evaluator uses the overheads: with host launches overlapping the
    device (step = max(device busy, launches x kernel_overhead) + step_overhead), kernel_overhead joins the
    grid search, and the decode predictions land within 10% of the seed's medians."""
    import dse.evaluate as ev

    original = ev.evaluate_arrays

    def overlapped(chips, workload, **kw):
        koh = chips.arrays["calibration.kernel_overhead"]
        soh = chips.arrays["calibration.step_overhead"]
        chips.arrays["calibration.kernel_overhead"] = np.zeros_like(koh)
        try:
            out = dict(original(chips, workload, **kw))
        finally:
            chips.arrays["calibration.kernel_overhead"] = koh
        launches = ev.op_table(workload).count.sum()
        out["time_s"] = np.maximum(out["time_s"] - soh, launches * koh) + soh
        return out

    monkeypatch.setattr(ev, "evaluate_arrays", overlapped)
    fit = cal.calibrate(rows, "rtx-pro-6000", loo=False)
    by = {r.measurement.workload: r for r in fit.rows}
    assert by[DECODE_8K_B1].predicted_s == pytest.approx(25.83e-3, rel=0.10)
    assert by[DECODE_2K_B64].predicted_s == pytest.approx(29.63e-3, rel=0.10)


def test_written_chip_loads_and_evaluates_to_the_fit(rtx_fit, tmp_path):
    out = cal.write_calibrated_chip(rtx_fit, tmp_path / "rtx-cal.yaml")
    chip = load_chip(out)
    assert chip.name == "rtx-pro-6000"
    for k in cal.KNOBS:
        assert getattr(chip.calibration, k) == rtx_fit.values[k]
    assert str(SEED_CSV) in chip.calibration.source and "leave-one-out" in chip.calibration.source
    text = out.read_text(encoding="utf-8")
    assert text.startswith("# NVIDIA RTX PRO 6000")  # the catalog file's comments are kept
    chips = Chips.from_specs([chip])
    for r in rtx_fit.rows:
        t = evaluate_arrays(chips, cal.parse_measured_workload(r.measurement.workload))["time_s"][0]
        assert t == pytest.approx(r.predicted_s, rel=1e-12)
    # recalibrating a calibrated file replaces its calibration section (one, not two)
    again = cal.calibrate(cal.load_measurements(SEED_CSV), out, loo=False)
    text2 = cal.calibrated_yaml(again)
    assert text2.count("\ncalibration:") == 1 and text2.count("# calibration: fitted") == 1


# ---------------------------------------------------------------- refusals


def _synthetic(chip: str, workloads: list[str], scale: float = 1.0, shift: float = 0.0) -> list[cal.Measurement]:
    """Measurements at ``scale`` x the bound + ``shift`` seconds (to construct unphysical optima exactly)."""
    ms = [cal.Measurement(chip, w, "", 1.0, None, None, "synthetic") for w in workloads]
    bound = cal.predict(chip, ms)
    return [cal.Measurement(chip, cal.canonical_workload(w), "", float(b * scale + shift), None, None,
                            "synthetic", "synthetic.csv", i + 2) for i, (w, b) in enumerate(zip(workloads, bound))]


GEMMS = ["gemm:m=1:k=4096:n=4096", "gemm:m=1:k=8192:n=8192", "gemm:m=1:k=4096:n=16384"]


def test_strict_refuses_a_fraction_above_one():
    ms = _synthetic("rtx-pro-6000", GEMMS, scale=0.5)  # twice as fast as the memory bound
    fix = {"compute_efficiency": 1.0, "kernel_overhead": 0.0, "step_overhead": 0.0}
    fit = cal.calibrate(ms, "rtx-pro-6000", fix=fix, loo=False)
    assert fit.values["bandwidth_efficiency"] == 1.0
    (b,) = fit.active
    assert b.knob == "bandwidth_efficiency" and b.wanted == pytest.approx(2.0, rel=1e-4)
    with pytest.raises(DseError) as e:
        cal.calibrate(ms, "rtx-pro-6000", fix=fix, strict=True)
    msg = str(e.value)
    assert "refused (--strict)" in msg and "bandwidth_efficiency = 2" in msg and "above its physical bound 1" in msg


def test_strict_refuses_a_negative_overhead():
    ms = _synthetic("rtx-pro-6000", GEMMS, shift=-2e-6)  # 2 us faster than the bound, every call
    fix = {"compute_efficiency": 1.0, "bandwidth_efficiency": 1.0, "kernel_overhead": 0.0}
    fit = cal.calibrate(ms, "rtx-pro-6000", fix=fix, loo=False)
    assert fit.values["step_overhead"] == 0.0
    (b,) = fit.active
    assert b.knob == "step_overhead" and b.wanted == pytest.approx(-2e-6, rel=1e-3)
    with pytest.raises(DseError) as e:
        cal.calibrate(ms, "rtx-pro-6000", fix=fix, strict=True)
    msg = str(e.value)
    assert "step_overhead = -2 us" in msg and "below its physical bound 0" in msg


def test_exact_data_is_recovered_without_active_bounds():
    """Measurements made by a chip with known knobs give those knobs back, and nothing is reported active."""
    ms = _synthetic("rtx-pro-6000", GEMMS + ["gemm:m=512:k=8192:n=8192", "qwen3-8b:decode:batch=1:context=4096"])
    truth = {"compute_efficiency": 0.7, "bandwidth_efficiency": 0.8, "kernel_overhead": 5e-6, "step_overhead": 20e-6}
    from dse.hardware import with_overrides
    chip = with_overrides(load_chip("rtx-pro-6000"), {
        f"calibration.{k}": (v if k in cal.FRACTIONS else f"{v!r} s") for k, v in truth.items()})
    t = cal.predict(chip, ms)
    ms = [cal.Measurement(m.chip, m.workload, "", float(x), None, None, "synthetic") for m, x in zip(ms, t)]
    fit = cal.calibrate(ms, "rtx-pro-6000")
    for k, v in truth.items():
        assert fit.values[k] == pytest.approx(v, rel=1e-4), k
    assert not fit.active and fit.rms < 1e-6 and fit.loo_max < 1e-4


def test_fewer_measurements_than_knobs_is_refused(rows):
    with pytest.raises(SpecError) as e:
        cal.calibrate(rows, "apple-m2-max", variant="reuse")  # 2 rows, 4 knobs
    msg = str(e.value)
    assert "fewer measurements than free knobs" in msg
    assert "--fix" in msg and "cannot be identified" in msg


def test_inseparable_overheads_are_refused(rows):
    """Every M2 Max measurement is one kernel in one step: kernel and step overhead cannot be told apart."""
    with pytest.raises(SpecError) as e:
        cal.calibrate(rows, "apple-m2-max")
    msg = str(e.value)
    assert "kernel and step overhead cannot be told apart" in msg
    assert "--fix kernel_overhead=0" in msg and "--fix step_overhead=0" in msg


def test_m2_max_with_fixed_overheads(rows):
    fit = cal.calibrate(rows, "apple-m2-max", fix={"kernel_overhead": 0.0, "step_overhead": 0.0})
    # M = 1 reads 32 MiB: 400 GB/s x ~0.48; M = 256 runs at ~36% of the (estimated) 13.6 TFLOP/s
    assert 0.3 < fit.values["bandwidth_efficiency"] < 0.7
    assert 0.2 < fit.values["compute_efficiency"] < 0.5
    assert all(r.loo_error is not None for r in fit.rows)
    assert fit.fixed == {"kernel_overhead": 0.0, "step_overhead": 0.0}


def test_parse_fix():
    assert cal.parse_fix(["step_overhead=0", "kernel_overhead=5 us", "compute_efficiency=0.8"]) == {
        "step_overhead": 0.0, "kernel_overhead": pytest.approx(5e-6), "compute_efficiency": 0.8}
    for bad, word in [("step_overhed=0", "did you mean 'step_overhead'"), ("compute_efficiency=1.5", "(0, 1]"),
                      ("kernel_overhead=5", "with a unit"), ("kernel_overhead", "knob=value")]:
        with pytest.raises(SpecError) as e:
            cal.parse_fix([bad])
        assert word in str(e.value), (bad, str(e.value))


# ---------------------------------------------------------------- the CLI


def test_cli_calibrate_writes_the_chip(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    code = main(["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    for word in ("residual", "LOO err", "leave-one-out", "BOUND ACTIVE", "wrote"):
        assert word in text, word
    assert load_chip(out).calibration.source


def test_cli_strict_exits_2_naming_the_knob(capsys):
    code = main(["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--strict"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "refused (--strict)" in err and "compute_efficiency" in err and "wants" in err


@pytest.mark.parametrize("argv, words", [
    (["calibrate", "no-such.csv", "--chip", "rtx-pro-6000"], ["no such measurements file"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-600"], ["unknown chip", "did you mean 'rtx-pro-6000'"]),
    (["calibrate", str(SEED_CSV), "--chip", "h100"], ["no measurements of chip 'h100-sxm'", "rtx-pro-6000 (7 rows)"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--fix", "step_overhed=0"], ["did you mean"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--variant", "rotat"], ["did you mean 'rotate'"]),
    (["calibrate", str(SEED_CSV), "--chip", "apple-m2-max"], ["cannot be told apart", "--fix"]),
])
def test_cli_bad_input_exits_2(capsys, argv, words):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    for w in words:
        assert w in err, (w, err)


def test_cli_eval_shows_bound_and_calibrated(rtx_fit, tmp_path, capsys):
    out = cal.write_calibrated_chip(rtx_fit, tmp_path / "cal.yaml")
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_8K_B1, "--calibrated", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rtx-pro-6000 bound" in text and "rtx-pro-6000 calibrated" in text
    by = {r.measurement.workload: r for r in rtx_fit.rows}
    step = next(line for line in text.splitlines() if line.startswith("step time"))
    assert "9.13 ms" in step and f"{by[DECODE_8K_B1].predicted_s * 1e3:.4g} ms" in step
    # from the measurements directly: the fitted row is flagged as a fit, with its leave-one-out prediction
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_8K_B1, "--calibrated", str(SEED_CSV)]) == 0
    text = capsys.readouterr().out
    assert "is one of the fitted measurements" in text and "25.83 ms" in text
    # a GEMM call evaluates too
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", "gemm:m=1:k=4096:n=4096"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("extra, words", [
    (["--chip", "h100"], ["exactly one --chip"]),
    (["--calibrated", "OTHER"], ["is chip 'rtx-pro-6000', not 'h100-sxm'"]),
])
def test_cli_eval_calibrated_bad_input(rtx_fit, tmp_path, capsys, extra, words):
    out = cal.write_calibrated_chip(rtx_fit, tmp_path / "cal.yaml")
    argv = ["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_8K_B1, "--calibrated", str(out)]
    if extra[0] == "--calibrated":
        argv = ["eval", "--chip", "h100", "--workload", DECODE_8K_B1, "--calibrated", str(out)]
    else:
        argv += extra
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    for w in words:
        assert w in err, (w, err)
