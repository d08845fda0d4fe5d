"""`dse serve`: the operating point printed with units, the `output tokens/s` line, exit 2 for mistakes.

The check of the issue: H100, Llama 3.1 8B FP8, ISL 1000 / OSL 1000 within 25% of 15,220 output tokens/s
(TensorRT-LLM's measured row, dse/data/serving/measured_serving.yaml).
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from dse.cli import main

BASE = ["serve", "--chip", "h100-sxm", "--model", "llama-3.1-8b", "--weights", "fp8", "--kv", "fp8",
        "--isl", "1000", "--osl", "1000"]


def _rate(out: str) -> float:
    line = next(x for x in out.splitlines() if x.startswith("output tokens/s"))
    return float(re.match(r"output tokens/s\s+([0-9.]+)", line).group(1))


def test_issue_check(capsys):
    assert main(BASE) == 0
    out = capsys.readouterr().out
    assert _rate(out) == pytest.approx(15220, rel=0.25)
    for label in ("TPOT (time per output token, per user)", "TTFT (time to first token)", "output tokens/s per chip",
                  "energy per output token", "output tokens/s per W", "output tokens/s per $", "KV pool"):
        assert label in out
    assert re.search(r"TPOT \(time per output token, per user\)\s+[0-9.]+ ms", out)
    assert "knobs: trtllm" in out


def test_calibration_none_is_the_bound_and_slo_limits(capsys):
    main(BASE)
    calibrated = _rate(capsys.readouterr().out)
    assert main(BASE + ["--calibration", "none"]) == 0
    out = capsys.readouterr().out
    assert _rate(out) > calibrated and "uncalibrated bound" in out
    assert main(BASE + ["--tpot-slo", "20ms"]) == 0
    out = capsys.readouterr().out
    assert "limited by tpot_slo" in out and _rate(out) < calibrated


def test_other_modes(capsys):
    assert main(BASE + ["--disaggregated"]) == 0
    assert "prefill share of the chips" in capsys.readouterr().out
    assert main(BASE + ["--load", "50%"]) == 0
    assert "50% of the maximum request rate" in capsys.readouterr().out
    assert main(["serve", "--chip", "h100-sxm", "--model", "llama-3.3-70b", "--weights", "fp8", "--isl", "1000",
                 "--osl", "1000", "--tp", "2", "--stack", "trtllm"]) == 0
    assert "TP2" in capsys.readouterr().out


def test_the_header_names_the_formats_the_point_ran_with(capsys):
    """KV and activations default to the weights' format where it is 8-bit or wider, else to BF16 (`dse serve
    --help`); the header printed "KV as weights" for INT4 weights, whose KV cache is BF16. Llama 3.1 8B's KV per
    token, independently: 32 layers x 2 (K, V) x 8 KV heads x 128 x 2 B (BF16) = 128 KiB; FP8: 64 KiB."""
    small = ["serve", "--chip", "h100-sxm", "--model", "llama-3.1-8b", "--isl", "1000", "--osl", "1000"]
    assert main(small + ["--weights", "int4"]) == 0
    out = capsys.readouterr().out
    assert "weights int4, KV bf16, activations bf16" in out.splitlines()[0]
    assert re.search(r"KV per request\s+\d+ tokens x 128 KiB", out)
    assert main(small + ["--weights", "fp8"]) == 0
    out = capsys.readouterr().out
    assert "weights fp8_e4m3, KV fp8_e4m3, activations fp8_e4m3" in out.splitlines()[0]
    assert re.search(r"KV per request\s+\d+ tokens x 64 KiB", out)
    assert main(small + ["--weights", "int4", "--kv", "fp8", "--disaggregated"]) == 0
    assert "weights int4, KV fp8_e4m3, activations bf16" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("extra, words", [
    (["--tpot-slo", "50"], "--tpot-slo: expected a time quantity with a unit"),
    (["--tpot-slo", "10us"], "not met even at batch 1"),
    (["--calibration", "/no/such/knobs.yaml"], "no such knob file"),
    (["--stack", "sglang"], "unknown knob profile 'sglang'"),
    (["--weights", "fp9"], "fp9"),
    (["--kv-fraction", "1.5"], "--kv-fraction: expected a fraction in (0, 1]"),
    (["--isl", "0"], "--isl: expected an integer >= 1"),
    (["--tp", "2", "--ep", "2"], "has no experts"),
    (["--load", "2"], "--load: expected a fraction"),
])
def test_mistakes_exit_2_without_traceback(capsys, extra, words):
    args = list(BASE)
    for i in range(0, len(extra), 2):  # a repeated option replaces the base one
        if extra[i] in args:
            args[args.index(extra[i]) + 1] = extra[i + 1]
        else:
            args += extra[i:i + 2]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("dse: error:") and words in err and "Traceback" not in err


def test_unknown_chip_and_model_and_refused_config(capsys, tmp_path):
    assert main(["serve", "--chip", "h1000", "--model", "llama-3.1-8b", "--isl", "1", "--osl", "1"]) == 2
    assert "did you mean" in capsys.readouterr().err
    assert main(["serve", "--chip", "h100-sxm", "--model", "llama-9b", "--isl", "1", "--osl", "1"]) == 2
    assert "unknown model" in capsys.readouterr().err
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "deepseek_v3", "kv_lora_rank": 512}')
    assert main(["serve", "--chip", "h100-sxm", "--model", str(bad), "--isl", "1", "--osl", "1"]) == 2
    assert "kv_lora_rank" in capsys.readouterr().err


def test_the_installed_command():
    r = subprocess.run([sys.executable, "-m", "dse.cli", *BASE], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert _rate(r.stdout) == pytest.approx(15220, rel=0.25)
