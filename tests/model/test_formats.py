"""Number formats through the join (issue 14 item 5): fall-back chains and compounded quantization error.

The numbers checked come from the chips' published rates (their catalog files cite them) and from independent
calculations in the tests, not from the evaluator's own formulas.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip
from dse.model.evaluator import _fallback_chain
from dse.precision import get_format, quant_error, quantize
from dse.workload import build, decode, prefill


def _one(name, workload):
    return evaluate_design(Chips.from_specs([load_chip(name)]), workload)


def _gemm(fmt, m=4096, n=4096, k=4096):
    return build({"name": f"g-{fmt}", "ops": [{"gemm": {"m": m, "n": n, "k": k,
                                                          "formats": {"weights": fmt, "activations": fmt}}}]})


def test_grouped_int4_never_falls_back_to_fp32_first():
    """issue 14: int4_g128 fell back to FP32 (Qwen3-8B prefill-2K on H100: 481 ms vs 39 ms in BF16). A 4-bit
    integer runs on a wider integer or on a float whose significand holds it, the narrowest first."""
    chain = _fallback_chain("int4_g128")
    assert chain[1] == "int4"
    assert chain.index("fp32") > chain.index("fp8_e4m3") > chain.index("int4")
    # H100 has no INT4 matrix path (its file lists bf16, fp16, fp8, int8, tf32): the 4-bit GEMM runs on FP8 at
    # 2x the BF16 rate (H100 SXM: 1979 vs 989 dense TFLOP/s), not on FP32 (67 TFLOP/s, 15x slower than BF16)
    bf16 = _one("h100-sxm", _gemm("bf16"))["time_s"][0]
    int4 = _one("h100-sxm", _gemm("int4_g128"))["time_s"][0]
    assert int4 < bf16


def test_bf16_on_v100_runs_on_its_fp16_tensor_cores():
    """issue 14: a BF16 model on V100 ran on the FP32 CUDA cores (20 ms decode). V100 has FP16 Tensor Cores
    (1024 FLOP/cycle/SM vs 128 on FP32 lanes, NVIDIA V100 whitepaper): a 16-bit float runs on the other 16-bit
    float path first."""
    assert _fallback_chain("bf16")[1] == "fp16"
    v100 = load_chip("v100-sxm2")
    fp16 = _one("v100-sxm2", _gemm("fp16"))
    bf16 = _one("v100-sxm2", _gemm("bf16"))
    assert bf16["time_s"][0] == pytest.approx(fp16["time_s"][0], rel=1e-9)
    # 4096^3 x 2 FLOPs at 80 SMs x 1024 FLOP/cycle x 1.53 GHz (125 TFLOP/s) is 1.1 ms; FP32 lanes would take 8.8 ms
    peak_fp16 = v100.units * 1024 * v100.clock
    assert bf16["time_s"][0] < 2 * (2 * 4096**3 / peak_fp16)


def test_float_formats_stay_on_float_units_while_the_chip_has_one():
    for fmt in ("fp8_e4m3", "nvfp4", "bf16"):
        chain = _fallback_chain(fmt)
        first_int = min(chain.index(f) for f in chain if get_format(f).kind == "int")
        assert all(get_format(f).kind == "float" for f in chain[:first_int]), (fmt, chain)


def test_quantization_errors_compound_over_roles():
    """issue 14: the roles' errors combined by max. Independent check: quantize a random GEMM's weights and
    activations with dse.precision.quantize and measure the output's relative L2 error directly; the compounded
    figure of the join (sqrt of the sum of squares) matches it, and is above the larger of the two."""
    rng = np.random.default_rng(0)
    w, x = rng.standard_normal((512, 512)), rng.standard_normal((512, 64))
    fw, fa = get_format("fp8_e4m3"), get_format("mxfp6")
    y = w @ x
    yq = quantize(w.ravel(), fw).reshape(w.shape) @ quantize(x.T.ravel(), fa).reshape(x.T.shape).T
    measured = np.linalg.norm(yq - y) / np.linalg.norm(y)
    wl = decode("qwen3-8b", batch=1, context=1024, formats={"weights": "fp8_e4m3", "activations": "mxfp6",
                                                             "kv": "bf16"})
    joined = _one("h100-sxm", wl)["quant_error"][0]
    ew, ea, ekv = quant_error("fp8_e4m3"), quant_error("mxfp6"), quant_error("bf16")
    assert joined > max(ew, ea, ekv)
    assert joined == pytest.approx(measured, rel=0.25)


def test_sram_main_memory_energy_is_the_banks():
    """issue 14 item 6: Groq and Cerebras failed their own TDP because their SRAM main memory was charged at
    the MB-scale SRAM energy. A read touches one bank: Groq's MEM tile of 8K 16-byte words (Abts et al., ISCA
    2020: 88 slices x 20 tiles x 128 KiB = 230.7 MB), a WSE core's 48 kB. Below the node's MB-scale J/B, and
    a decode step at batch 1 runs within the TDP."""
    from dse import technology

    for name, node in (("groq-tsp", "n14"), ("cerebras-wse-3", "n5")):
        chips = Chips.from_specs([load_chip(name)])
        large = technology.process(node).sram_read_energy.large
        assert chips["energy.memory"][0] < 0.6 * large, name
    m = _one("groq-tsp", decode("llama-3.1-8b", batch=1, context=2048))
    assert m["peak_power_w"][0] <= 375.0 * (1 + 1e-9)
    assert not bool(m["memory_throttled"][0])


def test_int4_prefill_on_h100_is_not_slower_than_bf16():
    """issue 14's case: Qwen3-8B prefill-2K with int4_g128 weights on H100 took 481 ms vs 39 ms in BF16."""
    bf16 = _one("h100-sxm", prefill("qwen3-8b", batch=1, tokens=2048))["time_s"][0]
    int4 = _one("h100-sxm", prefill("qwen3-8b", batch=1, tokens=2048,
                                    formats={"weights": "int4_g128"}))["time_s"][0]
    assert int4 < 1.2 * bf16


def test_weight_only_quantization_dequantizes_where_the_chip_has_no_narrow_path():
    """issue 14 item 5 / seed 004 §4.2.4: 4-bit weights with BF16 activations ran at the FP4/INT4 rate with no
    dequantization cost. Chosen per chip now: H100 has no INT4 matrix path (its file lists none), so the
    weights are dequantized to BF16 (vector work: a scale and a convert per value per 128-row pass) and
    multiplied at the BF16 rate; B200 has NVFP4 (4x its BF16 rate: 9 vs 2.25 dense PFLOP/s, NVIDIA), so NVFP4
    weights run natively."""
    tokens = 2048
    h_bf16 = _one("h100-sxm", prefill("qwen3-8b", batch=1, tokens=tokens))
    h_int4 = _one("h100-sxm", prefill("qwen3-8b", batch=1, tokens=tokens, formats={"weights": "int4_g128"}))
    assert h_int4["t_matrix_ideal_s"][0] == pytest.approx(h_bf16["t_matrix_ideal_s"][0], rel=0.02)
    # the dequantization's vector work, at least at the peak clock: 2 FLOPs x the 36 layers' 192.9 M linear
    # weights (Qwen3-8B: q, o 4096^2; k, v 4096x1024; gate, up, down 4096x12288) x 16 passes of 128 rows
    h100 = load_chip("h100-sxm")
    flops = 2 * 36 * (2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 12288) * (tokens // 128)
    extra = h_int4["t_vector_s"][0] - h_bf16["t_vector_s"][0]
    assert extra >= flops / (h100.units * h100.vector.flops_per_cycle * h100.clock) * (1 - 1e-9)
    b_bf16 = _one("b200", prefill("qwen3-8b", batch=1, tokens=tokens))
    b_fp4 = _one("b200", prefill("qwen3-8b", batch=1, tokens=tokens, formats={"weights": "nvfp4"}))
    assert b_fp4["time_s"][0] < 0.7 * b_bf16["time_s"][0]
    assert b_fp4["t_vector_s"][0] == pytest.approx(b_bf16["t_vector_s"][0], rel=1e-6)  # no dequantization
