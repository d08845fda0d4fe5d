"""Calibration (dse.calibrate, `dse calibrate`, `dse eval --calibrated`) against the measured cases of seed 004
§4.8.3 (dse/data/measurements/seed004.csv; tests/data/seed_cases.yaml: measured_decode_rtx_pro_6000,
measured_qproj).

What is checked: the shipped measurements are the seed's numbers; bad CSVs get located errors; the fit stays
in its physical bounds, reports its residuals and a leave-one-out error per measurement, says when a bound is
active and refuses in --strict; too few or inseparable measurements, and a knob no measurement depends on,
are refused with the knobs named; the written chip loads and evaluates to the fitted predictions; the CLI
exits 2 on bad input, without a traceback.

The evaluator's step is max(sum of count x device time, launches x kernel_overhead) + step_overhead (host
launches overlap device work, seed 004 §4.8.1). On the RTX PRO 6000 rows that makes six of the seven
measurements launch-bound (L x kernel_overhead + step_overhead, L = 652 launches per decode step, 1 per GEMM
call) and the batch-64 decode device-bound, so the expected knobs, residuals and leave-one-out predictions
below are computed here in closed form from the seed's times (a 2-parameter linear least squares, and a 1-D
root for bandwidth_efficiency on the evaluator's per-operator bound times), not taken from dse.calibrate.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from dse import calibrate as cal
from dse.calibrate.fit import _resolve_chip
from dse.calibrate.problem import _Problem
from dse.cli import main
from dse.errors import DseError, SpecError
from dse.model.evaluator import evaluate_arrays
from dse.hardware import Chips, load_chip
from tests.reference_cases import expected

SEED_CSV = Path(cal.__file__).resolve().parents[1] / "data" / "measurements" / "seed004.csv"
DECODE_8K_B1 = "qwen3-8b:decode:batch=1:context=8192"
DECODE_2K_B64 = "qwen3-8b:decode:batch=64:context=2048"
HEADER = "chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source\n"


@pytest.fixture(scope="module")
def rows():
    return cal.load_measurements(SEED_CSV)


# compute_efficiency is fixed: no RTX measurement depends on it (test_rtx_compute_efficiency_is_not_identified)
RTX_FIX = {"compute_efficiency": 1.0}


@pytest.fixture(scope="module")
def rtx_fit(rows):
    return cal.calibrate(rows, "rtx-pro-6000", fix=RTX_FIX, measurements_file=str(SEED_CSV))


# ---------------------------------------------------------------- the expected fit, computed independently

# Qwen3-8B: 36 layers (seed 004 §4.8.2) of 18 operators each (norm, q/k/v projections, q/k norms, rope, QK,
# softmax, PV, o projection, residual, norm, gate/up projections, activation, down projection, residual), plus
# embedding, final norm, output head and sampling: one kernel launch each in eager mode.
L_DECODE = 36 * 18 + 4
# the launch-bound rows of the RTX PRO 6000 (seed 004 §4.8.3): (launches, measured s)
RTX_LAUNCH_ROWS = {
    (DECODE_8K_B1, "vllm-eager"): (L_DECODE, 25.83e-3),
    ("qwen3-8b:decode:batch=1:context=2048", "vllm-eager"): (L_DECODE, 26.26e-3),
    ("gemm:m=1:k=4096:n=4096", "reuse"): (1, 42.9e-6),
    ("gemm:m=1:k=4096:n=4096", "rotate"): (1, 51.9e-6),
    ("gemm:m=256:k=4096:n=4096", "reuse"): (1, 32.6e-6),
    ("gemm:m=256:k=4096:n=4096", "rotate"): (1, 33.5e-6),
}
B64_MEASURED = 29.63e-3  # seed 004 §4.8.3, 2K context, batch 64


def _overheads_ls(pairs):
    """Least squares on relative residuals of launches x koh + soh against measured times: (bounded (koh,
    soh >= 0), unconstrained (koh, soh)), in closed form."""
    L = np.array([p[0] for p in pairs], dtype=float)
    m = np.array([p[1] for p in pairs])
    (koh, soh), *_ = np.linalg.lstsq(np.stack([L / m, 1 / m], axis=1), np.ones(len(m)), rcond=None)
    free = (float(koh), float(soh))
    if soh < 0:  # on the bound: one knob, a / (a . a)
        a = L / m
        koh, soh = a.sum() / (a @ a), 0.0
    return (float(koh), float(soh)), free


def _bound_ops(chip, workload, on_chip=False):
    """The evaluator's per-operator times at the bound (ideal knobs): count, matrix, vector, memory (and with
    ``on_chip`` the L2 and local-buffer times and the operator names)."""
    from dse.evaluate import evaluate
    ops = evaluate(Chips.from_specs([load_chip(chip)]), cal.parse_measured_workload(workload),
                   breakdown=True).attrs["operators"]
    cols = ("count", "t_matrix_s", "t_vector_s", "t_memory_s") + (("t_l2_s", "t_local_s", "op") if on_chip else ())
    return [ops[c].to_numpy() for c in cols]


ATTENTION = ("attn_qk", "attn_softmax", "attn_pv")  # a fused attention block (issue 15 item 6)


def _device_time(chip, workload, ceff=1.0, beff=1.0):
    """sum over operators of count x max(matrix / ceff, vector, memory / beff, L2, local) (no throttling on these
    rows); a fused attention block's three operators overlap across resources, so the block takes the largest
    per-resource sum (seed 004 §4.2.3, Example 4-1) — checked here to be its memory floor, where the evaluator's
    pipeline-fill term cannot matter."""
    cnt, tm, tv, tmem, tl2, tloc, op = _bound_ops(chip, workload, on_chip=True)
    per = np.column_stack([tm / ceff, tv, tmem / beff, tl2, tloc])
    att = np.isin(op, ATTENTION)
    total = float((cnt[~att] * per[~att].max(axis=1)).sum())
    if att.any():
        assert (cnt[att] == cnt[att][0]).all() and att.sum() == 3
        sums = per[att].sum(axis=0)
        assert sums.argmax() == 2  # the memory floor binds the block
        total += float(cnt[att][0] * sums.max())
    return total


def _bandwidth_efficiency_for(target_s):
    """The bandwidth_efficiency at which the 2K/b64 decode's device time is ``target_s`` (bisection)."""
    lo, hi = 0.05, 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _device_time("rtx-pro-6000", DECODE_2K_B64, beff=mid) > target_s else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.fixture(scope="module")
def rtx_expected():
    (koh, soh), free = _overheads_ls(list(RTX_LAUNCH_ROWS.values()))
    beff = _bandwidth_efficiency_for(B64_MEASURED - soh)
    return {"kernel_overhead": koh, "step_overhead": soh, "bandwidth_efficiency": beff, "free": free}


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
     ["column 'measured_time_s'", "expected a time between 1 ns and 1 day", "'fast'"]),
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
    assert rtx_fit.fixed == RTX_FIX and rtx_fit.free == ("bandwidth_efficiency", "kernel_overhead", "step_overhead")
    assert len(rtx_fit.rows) == 7
    for r in rtx_fit.rows:
        assert r.residual == pytest.approx(r.predicted_s / r.measurement.time_s - 1, rel=1e-12)
        assert r.bound_s <= r.predicted_s  # calibration only slows the bound down
        # leave-one-out: a number per point, from a refit without it
        assert r.loo_error is not None and math.isfinite(r.loo_error), r
        assert r.loo_error == pytest.approx(r.loo_predicted_s / r.measurement.time_s - 1, rel=1e-12)
    assert math.isfinite(rtx_fit.loo_rms) and rtx_fit.loo_rms >= rtx_fit.rms * 0.999  # predicting is harder
    assert rtx_fit.rms == pytest.approx(np.sqrt(np.mean(rtx_fit.residuals ** 2)))


def test_fit_matches_the_closed_form(rtx_fit, rtx_expected):
    """Knobs and residuals as computed here from the seed's times: six launch-bound rows give kernel_overhead
    (step_overhead on its bound 0), the batch-64 decode alone gives bandwidth_efficiency (its residual 0)."""
    from dse.model.evaluator import op_table
    assert op_table(cal.parse_measured_workload(DECODE_8K_B1)).count.sum() == L_DECODE  # the workload agrees
    e = rtx_expected
    for k in ("kernel_overhead", "step_overhead", "bandwidth_efficiency"):
        assert rtx_fit.values[k] == pytest.approx(e[k], rel=1e-4, abs=1e-12), k
    assert e["kernel_overhead"] == pytest.approx(38.29e-6, rel=1e-3) and e["step_overhead"] == 0.0
    by = {(r.measurement.workload, r.measurement.variant): r for r in rtx_fit.rows}
    for key, (launches, measured) in RTX_LAUNCH_ROWS.items():
        assert by[key].predicted_s == pytest.approx(launches * e["kernel_overhead"], rel=1e-4), key
        assert by[key].residual == pytest.approx(launches * e["kernel_overhead"] / measured - 1, abs=1e-4), key
        # launch-bound: the device work at the fitted knobs is shorter than the launches
        assert _device_time("rtx-pro-6000", key[0], beff=e["bandwidth_efficiency"]) < launches * e["kernel_overhead"]
    b64 = by[(DECODE_2K_B64, "vllm-eager")]
    assert b64.residual == pytest.approx(0.0, abs=1e-4)
    assert L_DECODE * e["kernel_overhead"] < B64_MEASURED  # device-bound
    # the seed's effective bandwidth at batch 64 is ~65% of peak (1.16 TB/s); the model's bytes differ a little
    assert e["bandwidth_efficiency"] == pytest.approx(0.65, abs=0.03)


def test_leave_one_out_matches_the_closed_form(rtx_fit, rtx_expected):
    """Each launch-bound row predicted from the other five (the same closed form); the batch-64 decode is the
    only row that depends on bandwidth_efficiency, so its refit holds that knob at the full fit's value and says
    so, and its number is then a fit (0%), which the independent figures leave out."""
    by = {(r.measurement.workload, r.measurement.variant): r for r in rtx_fit.rows}
    for key, (launches, measured) in RTX_LAUNCH_ROWS.items():
        (koh, soh), _ = _overheads_ls([p for k, p in RTX_LAUNCH_ROWS.items() if k != key])
        r = by[key]
        assert r.loo_predicted_s == pytest.approx(launches * koh + soh, rel=1e-4), key
        assert not r.loo_held and not r.loo_note
    b64 = by[(DECODE_2K_B64, "vllm-eager")]
    assert b64.loo_held == ("bandwidth_efficiency",)
    assert "held at the full fit's value" in b64.loo_note and "partly a fit" in b64.loo_note
    assert b64.loo_predicted_s == pytest.approx(B64_MEASURED, rel=1e-4)
    indep = np.array([by[k].loo_error for k in RTX_LAUNCH_ROWS])
    assert rtx_fit.loo_held_count == 1
    assert rtx_fit.loo_rms_independent == pytest.approx(np.sqrt(np.mean(indep ** 2)), rel=1e-9)
    assert rtx_fit.loo_max_independent == pytest.approx(np.max(np.abs(indep)), rel=1e-9)
    assert "1 of 7 refits held a knob" in rtx_fit.loo_text() and "1 of 7 refits" in rtx_fit.summary()


def test_fit_is_a_least_squares_minimum(rtx_fit, rows):
    """No feasible nudge of any free knob lowers the sum of squared relative residuals."""
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
    for k in rtx_fit.free:
        for f in (0.99, 1.01):
            v = base[k] * f if base[k] else (1e-6 if f > 1 else 0.0)
            if (k in cal.FRACTIONS and not 0 < v <= 1) or v < 0:
                continue
            assert cost({**base, k: v}) >= c0 * (1 - 1e-9), (k, f)


def test_active_bounds_are_reported_not_hidden(rtx_fit, rtx_expected):
    """Per launch the batch-1 decode steps take ~40 us (25.83 ms / 652), a single GEMM call ~37.5 us at the
    centre of its 32.6-51.9 us in relative error, so freed the fit wants a negative step_overhead (the
    unconstrained closed form: -2.41 us); it is held at 0 and said so."""
    (b,) = rtx_fit.active
    assert b.knob == "step_overhead" and rtx_fit.values["step_overhead"] == b.bound == 0.0
    assert b.wanted == pytest.approx(rtx_expected["free"][1], rel=1e-3)
    assert rtx_expected["free"][1] == pytest.approx(-2.406e-6, rel=1e-3)
    assert b.edge is None and "= -2.406 us" in b.text()
    assert "bound active" in rtx_fit.summary()
    # Fully unconstrained (bandwidth_efficiency up to 1e4) the fit may leave the physical region altogether:
    # at 24x the pin bandwidth the memory's power alone passes the TDP and the memory is throttled (issue 14),
    # a different basin. It must fit the rows at least as well as the independent freed optimum does.
    unc = rtx_fit.unconstrained
    free_point = {"bandwidth_efficiency": _bandwidth_efficiency_for(B64_MEASURED - rtx_expected["free"][1]),
                  "kernel_overhead": rtx_expected["free"][0], "step_overhead": rtx_expected["free"][1]}
    assert _relative_cost(rtx_fit, unc) <= _relative_cost(rtx_fit, free_point) * (1 + 1e-6)


def _relative_cost(fit, knobs):
    """1/2 sum of squared relative errors of the model's times at ``knobs`` over the fit's rows (the fit's own
    problem, whose knobs may leave the physical range)."""
    prob = _Problem(_resolve_chip("rtx-pro-6000")[0], [x.measurement for x in fit.rows], cal.KNOBS[1:],
                    {"compute_efficiency": 1.0})
    theta = np.array([[{"compute_efficiency": 1.0, **knobs}[k] for k in cal.KNOBS]])
    r = prob.times(theta)[0] / prob.meas - 1.0
    return 0.5 * float(r @ r)


def test_decode_predictions_within_10_percent(rtx_fit):
    """With host launches overlapping device work, the decode steps are fitted within 10% of the seed's
    medians (8K/b1: 652 x 38.29 us = 24.97 ms, -3.3%; 2K/b64: device-bound, 0%)."""
    by = {r.measurement.workload: r for r in rtx_fit.rows}
    assert by[DECODE_8K_B1].predicted_s == pytest.approx(25.83e-3, rel=0.10)
    assert by[DECODE_2K_B64].predicted_s == pytest.approx(29.63e-3, rel=0.10)


def test_rtx_compute_efficiency_is_not_identified(rows):
    """Every RTX row is launch-bound or memory-bound at the fit: no measured time depends on compute_efficiency
    above the value at which the M = 256 call's matrix time (24.85 us at the bound) reaches its launch
    (kernel_overhead), so the unfixed fit is refused with the knob, the range and a --fix named."""
    with pytest.raises(SpecError) as e:
        cal.calibrate(rows, "rtx-pro-6000", loo=False)
    msg = str(e.value)
    assert "compute_efficiency cannot be identified" in msg and "no measured time depends on it" in msg
    assert "--fix compute_efficiency=1" in msg
    koh = _overheads_ls(list(RTX_LAUNCH_ROWS.values()))[0][0]
    _, tm, _, _ = _bound_ops("rtx-pro-6000", "gemm:m=256:k=4096:n=4096")
    edge = float(tm.sum()) / koh
    assert edge == pytest.approx(0.649, abs=1e-3)
    got = re.search(r"every value from ([0-9.]+) to 1 fits the same", msg)
    assert got, msg
    assert float(got.group(1)) == pytest.approx(edge, rel=2e-3)


def test_kernel_overhead_is_linear_only_when_launches_add(monkeypatch, rows):
    """The fitter does not assume how the evaluator uses the overheads. Today kernel_overhead enters through a
    max (so it joins the grid search) and step_overhead adds; with launches *added* to the device work (the
    evaluator before host overlap) kernel_overhead is found linear, and exact data is recovered either way."""
    import dse.evaluate as join
    import dse.model.evaluator as ev

    mine = [m for m in rows if m.chip == "rtx-pro-6000"]
    base = _resolve_chip("rtx-pro-6000")[0]
    prob = _Problem(base, mine, cal.KNOBS[1:], {"compute_efficiency": 1.0})
    assert set(prob.linear()) == {"step_overhead"}

    original = join.evaluate_workload

    def additive(chips, workload, **kw):
        kw.pop("chip_columns", None)  # (the chip's values read from the chips as changed here, not evaluate_design's)
        koh = chips.arrays["calibration.kernel_overhead"]
        chips.arrays["calibration.kernel_overhead"] = np.zeros_like(koh)
        try:
            out = original(chips, workload, **kw)
        finally:
            chips.arrays["calibration.kernel_overhead"] = koh
        out.columns["time_s"] = out.columns["time_s"] + ev.op_table(workload).count.sum() * koh
        return out

    monkeypatch.setattr(join, "evaluate_workload", additive)
    prob = _Problem(base, mine, cal.KNOBS[1:], {"compute_efficiency": 1.0})
    assert set(prob.linear()) == {"kernel_overhead", "step_overhead"}
    truth = {"compute_efficiency": 1.0, "bandwidth_efficiency": 0.6, "kernel_overhead": 20e-6, "step_overhead": 3e-6}
    from dse.hardware import with_overrides
    chip = with_overrides(base, {f"calibration.{k}": (v if k in cal.FRACTIONS else f"{v!r} s")
                                 for k, v in truth.items()})
    t = cal.predict(chip, mine)
    # additive: every row = device + launches x koh + soh (the decode at b1: 9.13 ms / 0.6 + 652 x 20 us + 3 us)
    assert t[0] == pytest.approx(_device_time("rtx-pro-6000", DECODE_8K_B1, beff=0.6) + L_DECODE * 20e-6 + 3e-6,
                                 rel=1e-9)
    exact = [cal.Measurement(m.chip, m.workload, m.variant, float(x), None, None, "synthetic") for m, x in zip(mine, t)]
    fit = cal.calibrate(exact, "rtx-pro-6000", fix={"compute_efficiency": 1.0}, loo=False)
    for k, v in truth.items():
        assert fit.values[k] == pytest.approx(v, rel=1e-4), k


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
    again = cal.calibrate(cal.load_measurements(SEED_CSV), out, fix=RTX_FIX, loo=False)
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


EXACT_WORKLOADS = GEMMS + ["gemm:m=512:k=8192:n=8192", "qwen3-8b:decode:batch=1:context=4096"]


def _exact(truth):
    """Measurements made by the RTX PRO 6000 with the knobs ``truth`` (times from the evaluator)."""
    ms = _synthetic("rtx-pro-6000", EXACT_WORKLOADS)
    from dse.hardware import with_overrides
    chip = with_overrides(load_chip("rtx-pro-6000"), {
        f"calibration.{k}": (v if k in cal.FRACTIONS else f"{v!r} s") for k, v in truth.items()})
    t = cal.predict(chip, ms)
    return [cal.Measurement(m.chip, m.workload, "", float(x), None, None, "synthetic") for m, x in zip(ms, t)]


def test_exact_data_is_recovered_without_active_bounds():
    """Measurements made by a chip with known knobs give those knobs back, and nothing is reported active.
    With kernel_overhead = 30 us, the small GEMM (18.7 us / 0.8 of device work, 1 launch) and the decode
    (~9 ms / 0.8 of device work, 652 launches = 19.6 ms) are launch-bound and fix the two overheads; the two
    128 MiB GEMMs (~94 us) are memory-bound and the M = 512 GEMM matrix-bound, which fix the two fractions."""
    truth = {"compute_efficiency": 0.7, "bandwidth_efficiency": 0.8, "kernel_overhead": 30e-6, "step_overhead": 20e-6}
    for w, launches in zip(EXACT_WORKLOADS, (1, 1, 1, 1, L_DECODE)):
        device = _device_time("rtx-pro-6000", w, 0.7, 0.8)
        assert (device < launches * 30e-6) == (w in (GEMMS[0], EXACT_WORKLOADS[-1])), w
    fit = cal.calibrate(_exact(truth), "rtx-pro-6000")
    for k, v in truth.items():
        assert fit.values[k] == pytest.approx(v, rel=1e-4), k
    assert not fit.active and fit.rms < 1e-6 and fit.loo_max < 1e-4
    # without the one M = 512 GEMM nothing depends on compute_efficiency: that refit holds it, and says so
    (r,) = [r for r in fit.rows if r.measurement.workload == "gemm:m=512:k=8192:n=8192"]
    assert r.loo_held == ("compute_efficiency",) and "compute_efficiency" in r.loo_note
    assert all(not x.loo_held for x in fit.rows if x is not r)


def test_a_knob_no_measurement_depends_on_is_refused():
    """With kernel_overhead = 5 us every row is device-bound (its device work outlasts its launches): no measured
    time depends on kernel_overhead between 0 and the shortest device time per launch (the decode's, here), so
    the fit is refused naming the knob, the range and a --fix."""
    truth = {"compute_efficiency": 0.7, "bandwidth_efficiency": 0.8, "kernel_overhead": 5e-6, "step_overhead": 20e-6}
    per_launch = min(_device_time("rtx-pro-6000", w, 0.7, 0.8) / launches
                     for w, launches in zip(EXACT_WORKLOADS, (1, 1, 1, 1, L_DECODE)))
    assert per_launch > 5e-6
    with pytest.raises(SpecError) as e:
        cal.calibrate(_exact(truth), "rtx-pro-6000")
    msg = str(e.value)
    assert "kernel_overhead cannot be identified" in msg and "no measured time depends on it" in msg
    assert "--fix kernel_overhead=0" in msg
    got = re.search(r"every value from 0 s to ([0-9.]+) us fits the same", msg)
    assert got, msg
    assert float(got.group(1)) * 1e-6 == pytest.approx(per_launch, rel=2e-3)
    # fixed as suggested, the other three come back exactly
    fit = cal.calibrate(_exact(truth), "rtx-pro-6000", fix={"kernel_overhead": 0.0}, loo=False)
    for k in ("compute_efficiency", "bandwidth_efficiency", "step_overhead"):
        assert fit.values[k] == pytest.approx(truth[k], rel=1e-4), k


def test_fewer_measurements_than_knobs_is_refused(rows):
    with pytest.raises(SpecError) as e:
        cal.calibrate(rows, "apple-m2-max", variant="reuse")  # 2 rows, 4 knobs
    msg = str(e.value)
    assert "fewer measurements than free knobs" in msg
    assert "--fix" in msg and "cannot be identified" in msg


def test_inseparable_overheads_are_refused(rows):
    """Every M2 Max measurement is one kernel in one step, max(device, kernel_overhead) + step_overhead: on each
    row kernel_overhead has no effect or adds exactly as step_overhead does, so the two cannot be told apart (and
    two distinct workloads cannot set four knobs)."""
    with pytest.raises(SpecError) as e:
        cal.calibrate(rows, "apple-m2-max")
    msg = str(e.value)
    assert "4 measurements (2 distinct workloads) for 4 free knobs" in msg
    assert "kernel and step overhead cannot be told apart" in msg and "launches the same number of kernels, 1" in msg
    assert "--fix kernel_overhead=0" in msg and "--fix step_overhead=0" in msg


def test_m2_max_with_fixed_overheads(rows):
    """With both overheads at 0 each row is its device time: M = 256 is matrix-bound (656 us at the bound),
    M = 1 memory-bound (83.9 us: 32 MiB at 400 GB/s); the closed forms from the seed's times:
    compute_efficiency = t_matrix / 1.835 ms, 1 / bandwidth_efficiency = sum(a) / sum(a^2), a = t_memory / m."""
    fit = cal.calibrate(rows, "apple-m2-max", fix={"kernel_overhead": 0.0, "step_overhead": 0.0})
    _, tm256, _, _ = _bound_ops("apple-m2-max", "gemm:m=256:k=4096:n=4096")
    _, _, _, tmem1 = _bound_ops("apple-m2-max", "gemm:m=1:k=4096:n=4096")
    a = tmem1.sum() / np.array([166e-6, 183e-6])
    ceff = tm256.sum() / 1.835e-3
    beff = (a @ a) / a.sum()
    assert ceff == pytest.approx(0.3577, abs=1e-4) and beff == pytest.approx(0.4832, abs=1e-4)
    assert fit.values["compute_efficiency"] == pytest.approx(ceff, rel=1e-4)
    assert fit.values["bandwidth_efficiency"] == pytest.approx(beff, rel=1e-4)
    assert fit.fixed == {"kernel_overhead": 0.0, "step_overhead": 0.0} and not fit.active
    by = {(r.measurement.workload, r.measurement.variant): r for r in fit.rows}
    reuse, rotate = by[("gemm:m=1:k=4096:n=4096", "reuse")], by[("gemm:m=1:k=4096:n=4096", "rotate")]
    assert reuse.residual == pytest.approx(tmem1.sum() / beff / 166e-6 - 1, abs=1e-4)  # +4.6%
    assert rotate.residual == pytest.approx(tmem1.sum() / beff / 183e-6 - 1, abs=1e-4)  # -5.1%
    # leave-one-out: each M = 1 row is predicted by the other (183 us for the reuse call, 166 us for rotate)
    assert reuse.loo_error == pytest.approx(183 / 166 - 1, rel=1e-4)
    assert rotate.loo_error == pytest.approx(166 / 183 - 1, rel=1e-4)
    # the two M = 256 rows are one seed figure ("both ~1.835 ms"): each predicts the other exactly
    for v in ("reuse", "rotate"):
        assert by[("gemm:m=256:k=4096:n=4096", v)].loo_error == pytest.approx(0.0, abs=1e-5)
    assert fit.loo_held_count == 0


def test_leave_one_out_holds_a_knob_it_cannot_refit(rows):
    """Two rows, two knobs (the M2 Max reuse calls): without either row one fraction has no measurement left,
    so that refit holds it at the full fit's value, every row still gets a number, and the note says so."""
    fit = cal.calibrate(rows, "apple-m2-max", variant="reuse", fix={"kernel_overhead": 0.0, "step_overhead": 0.0})
    assert fit.rms < 1e-5  # two rows, two knobs: exact
    by = {r.measurement.workload: r for r in fit.rows}
    assert by["gemm:m=1:k=4096:n=4096"].loo_held == ("bandwidth_efficiency",)
    assert by["gemm:m=256:k=4096:n=4096"].loo_held == ("compute_efficiency",)
    for r in fit.rows:
        assert r.loo_error is not None and "held at the full fit's value" in r.loo_note
    assert fit.loo_held_count == 2 and math.isnan(fit.loo_rms_independent)


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
    code = main(["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--fix", "compute_efficiency=1",
                 "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    for word in ("residual", "LOO err", "leave-one-out", "BOUND ACTIVE", "wrote", "fixed (--fix)",
                 "held at the full fit's value", "1 of 7 refits held a knob"):
        assert word in text, word
    chip = load_chip(out)
    assert chip.calibration.compute_efficiency == 1.0 and "compute_efficiency=1" in chip.calibration.source


def test_cli_strict_exits_2_naming_the_knob(capsys):
    """The active bound is step_overhead, which the closed form wants at -2.406 us."""
    code = main(["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--fix", "compute_efficiency=1", "--strict"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "refused (--strict)" in err and "wants step_overhead = -2.406 us" in err
    assert "below its physical bound 0" in err and "--fix step_overhead=VALUE" in err


@pytest.mark.parametrize("argv, words", [
    (["calibrate", "no-such.csv", "--chip", "rtx-pro-6000"], ["no such measurements file"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-600"], ["unknown chip", "did you mean 'rtx-pro-6000'"]),
    (["calibrate", str(SEED_CSV), "--chip", "h100"], ["no measurements of chip 'h100-sxm'", "rtx-pro-6000 (7 rows)"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--fix", "step_overhed=0"], ["did you mean"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--variant", "rotat"], ["did you mean 'rotate'"]),
    (["calibrate", str(SEED_CSV), "--chip", "apple-m2-max"], ["cannot be told apart", "--fix"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000"],
     ["compute_efficiency cannot be identified", "--fix compute_efficiency=1"]),
    (["calibrate", str(SEED_CSV), "--chip", "rtx-pro-6000", "--strict"],
     ["compute_efficiency cannot be identified", "--fix compute_efficiency=1"]),
])
def test_cli_bad_input_exits_2(capsys, argv, words):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err
    assert "\\n" not in err, err  # (a message of several lines printed its line breaks escaped, "\n")
    for w in words:
        assert w in err, (w, err)


def test_cli_eval_shows_bound_and_calibrated(rtx_fit, tmp_path, capsys):
    out = cal.write_calibrated_chip(rtx_fit, tmp_path / "cal.yaml")
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_8K_B1, "--calibrated", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rtx-pro-6000 bound" in text and "rtx-pro-6000 calibrated" in text
    by = {r.measurement.workload: r for r in rtx_fit.rows}
    step = next(line for line in text.splitlines() if line.startswith("step time"))
    bound = _device_time("rtx-pro-6000", DECODE_8K_B1)  # 9.129 ms: the read bound, computed here
    assert f"{bound * 1e3:.4g} ms" in step and f"{by[DECODE_8K_B1].predicted_s * 1e3:.4g} ms" in step
    # from the measurements directly: the fitted row is flagged as a fit, with its leave-one-out prediction
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_8K_B1, "--calibrated", str(SEED_CSV),
                 "--fix", "compute_efficiency=1"]) == 0
    text = capsys.readouterr().out
    assert "is one of the fitted measurements" in text and "25.83 ms" in text
    assert "compute_efficiency fixed at 1" in text
    # the batch-64 decode: its leave-one-out refit held bandwidth_efficiency, and the note says so
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", DECODE_2K_B64, "--calibrated", str(SEED_CSV),
                 "--fix", "compute_efficiency=1"]) == 0
    assert "held at the full fit's value" in capsys.readouterr().out
    # a GEMM call evaluates too
    assert main(["eval", "--chip", "rtx-pro-6000", "--workload", "gemm:m=1:k=4096:n=4096"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("extra, words", [
    (["--chip", "h100"], ["exactly one --chip"]),
    (["--calibrated", "OTHER"], ["is chip 'rtx-pro-6000', not 'h100-sxm'"]),
    (["--fix", "compute_efficiency=1"], ["--fix holds a knob of a fit", "not to the chip file"]),
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


def test_a_fit_with_rows_bound_by_the_l2_or_local_buffer_runs(tmp_path, capsys):
    """A user's H100 bench (times of their own, not a published table): decodes, a GEMM and a 2K prefill.
    The leave-one-out refits explain an unidentifiable knob by what bounds each row, and the message's names
    stopped at matrix, vector and memory: a row bound by the L2 or the local buffer (issue 15's levels) raised
    IndexError out of `dse calibrate` (a traceback). Every bound the evaluator names has a name now."""
    csv = tmp_path / "mine.csv"
    csv.write_text("chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source\n"
                   "h100-sxm,qwen3-8b:decode:batch=1:context=2048,,6.1e-3,,10,my bench\n"
                   "h100-sxm,qwen3-8b:decode:batch=32:context=2048,,9.5e-3,,10,my bench\n"
                   "h100-sxm,gemm:m=256:k=4096:n=4096,,0.0145e-3,,10,my bench\n"
                   "h100-sxm,qwen3-8b:prefill:tokens=2048,,0.05,,10,my bench\n")
    assert main(["calibrate", str(csv), "--chip", "h100-sxm", "--fix", "kernel_overhead=0"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    # what bounds each row at the ideal knobs, by the evaluator's own bound column: the GEMM at M = 256 is bound by
    # the H100's L2 (issue 15: its L2 at 4950 B/clk feeds 132 SMs; the default tiles' requests, 11.9 us)
    rows = [x.measurement for x in cal.calibrate(cal.load_measurements(csv), "h100-sxm",
                                                 fix={"kernel_overhead": 0.0}).rows]
    prob = _Problem(_resolve_chip("h100-sxm")[0], rows, cal.KNOBS, {})
    states = prob.states(np.array([cal.IDEAL[k] for k in cal.KNOBS]))
    assert len(states) == 4 and set(states) & {"l2-bound", "local-bound"}, states


def test_measurements_of_a_chip_file_of_ones_own(tmp_path, capsys):
    """The CSV's chip column took catalog names only, so a chip of one's own (measured on a board the catalog
    lacks) could not be calibrated. A chip file there (from the CSV's folder) stands for the file's `name`, and
    `dse calibrate --chip FILE` selects its rows; a missing file is located at its cell. (The times are a user's
    bench of their own, not a published table.)"""
    src = Path(cal.__file__).resolve().parents[1] / "data" / "chips" / "h100-sxm.yaml"
    (tmp_path / "my-h100.yaml").write_text(src.read_text().replace("name: h100-sxm", "name: my-h100", 1))
    csv = tmp_path / "mine.csv"
    csv.write_text("chip,workload,variant,measured_time_s,measured_energy_j,n_samples,source\n"
                   "my-h100.yaml,qwen3-8b:decode:batch=1:context=2048,,6.1e-3,,10,my bench\n"
                   "my-h100.yaml,qwen3-8b:decode:batch=32:context=2048,,9.5e-3,,10,my bench\n"
                   "my-h100.yaml,gemm:m=4096:k=4096:n=4096,,0.21e-3,,10,my bench\n"
                   "my-h100.yaml,qwen3-8b:prefill:tokens=2048,,0.05,,10,my bench\n")
    assert [m.chip for m in cal.load_measurements(csv)] == ["my-h100"] * 4
    assert main(["calibrate", str(csv), "--chip", str(tmp_path / "my-h100.yaml"), "--fix", "kernel_overhead=0",
                 "--out", str(tmp_path / "cal.yaml")]) == 0
    assert "calibrated my-h100 on 4 measurements" in capsys.readouterr().out
    (tmp_path / "bad.csv").write_text(csv.read_text().replace("my-h100.yaml", "nope.yaml"))
    assert main(["validate", str(tmp_path / "bad.csv")]) == 2
    assert f"{tmp_path / 'bad.csv'}:2:1 column 'chip': " in capsys.readouterr().err
