"""The serving operating point (dse.serve.serve): limits, identities of continuous batching, errors.

Independent numbers: the H100's 80 GB (NVIDIA datasheet), Llama 3.1 8B's config.json (32 layers, hidden 4096,
8 KV heads of 128, FFN 14336, vocab 128256), the engine's documented settings (KV fraction 0.90, 32-token
pages, 2 GiB workspace). Identities: each running user gets one token per iteration (TPOT = iteration
time), so output tokens/s x TPOT = concurrent requests (Little's law, seed 004 §4.3.3).
"""

from __future__ import annotations

import math
import re

import pytest

from dse.errors import InfeasibleError, SpecError
from dse.evaluate import evaluate_design
from dse.hardware import Chips
from dse.serve import IDEAL, Engine, RequestMix, disaggregated, mixed_step, serve, system_chip
from dse.serve.knobs import default_knobs

FP8 = dict(weights="fp8", kv="fp8")


@pytest.fixture(scope="module")
def h100_8b():
    return serve("h100-sxm", "llama-3.1-8b", 1000, 1000, **FP8)


def _llama8b_fp8_weight_bytes() -> int:
    d, L, kv, ffn, vocab = 4096, 32, 8 * 128, 14336, 128256
    linear = L * (2 * d * d + 2 * d * kv + 3 * d * ffn)  # Q, O; K, V; gate, up, down (1 B each in FP8)
    embed = 2 * vocab * d  # embedding + untied LM head
    norms = (2 * L * d + d) * 2  # RMSNorm gammas stay BF16
    return linear + embed + norms


def test_capacity_limited_batch(h100_8b):
    w = _llama8b_fp8_weight_bytes()
    assert h100_8b.weight_bytes == w
    kv_per_token = 32 * 2 * 8 * 128 * 1  # layers x (K, V) x KV heads x head dim x 1 B (FP8)
    assert h100_8b.kv_bytes_per_token == kv_per_token
    pool = 0.90 * (80e9 - w - 2 * 2**30)
    reserved = math.ceil((1000 + 1000) / 32) * 32  # whole pages of ISL + OSL (guaranteed no evict)
    slots = math.floor(pool / (kv_per_token * reserved))
    batch = min(slots - 1, math.floor(slots * 1000 / 1001))  # one request is being prefilled
    assert (h100_8b.batch, h100_8b.limited_by) == (batch, "kv_capacity") == (474, "kv_capacity")
    assert h100_8b.kv_pool_bytes == pytest.approx(pool)


def test_more_memory_more_batch():
    # the same scenario with the KV policy that counts what requests hold now (ISL + OSL/2 on average)
    # admits more: ~2000 / 1516.5 more requests
    hold = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, engine=Engine(kv_policy="current"), **FP8)
    assert hold.kv_tokens_per_request == pytest.approx(1000 + 1001 / 2 + 16)
    assert hold.batch > 1.25 * 474


def test_tpot_is_the_iteration_and_throughput_is_batch_over_it(h100_8b):
    p = h100_8b
    assert p.tpot_s == p.iteration_s
    assert p.output_tokens_per_s * p.tpot_s == pytest.approx(p.batch)
    # the per-token figure of the old latency_per_token is the step divided by the batch: 474 x smaller
    assert p.tpot_s / p.batch == pytest.approx(1 / p.output_tokens_per_s)
    # the iteration is the join's time of B decodes + B x ISL/OSL prompt tokens (with the knobs applied)
    wl = mixed_step("llama-3.1-8b", batch=474, context=1500, chunk=474, prompt=1000, formats=dict(
        weights="fp8", kv="fp8", activations="fp8"))
    t = evaluate_design(Chips.from_specs([system_chip("h100-sxm", knobs=default_knobs())]), wl)["time_s"][0]
    assert p.tpot_s == pytest.approx(t, rel=1e-12)
    assert p.input_tokens_per_s == pytest.approx(p.output_tokens_per_s)  # ISL = OSL
    assert p.energy_per_output_token_j == pytest.approx(p.step["energy_j"] / p.batch)


def test_tpot_slo_limits_the_batch(h100_8b):
    p = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, tpot_slo="20 ms", **FP8)
    assert p.limited_by == "tpot_slo" and p.slo_met and p.tpot_s <= 20e-3
    assert p.batch < h100_8b.batch and p.output_tokens_per_s < h100_8b.output_tokens_per_s
    # one request more breaks the SLO (the join on the next batch)
    chip = Chips.from_specs([system_chip("h100-sxm", knobs=default_knobs())])
    b = p.batch + 1
    wl = mixed_step("llama-3.1-8b", batch=b, context=1500, chunk=b, prompt=1000,
                    formats=dict(weights="fp8", kv="fp8", activations="fp8"))
    assert evaluate_design(chip, wl)["time_s"][0] > 20e-3
    tight = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, tpot_slo=1e-4, **FP8)
    assert not tight.slo_met and tight.batch == 1


def test_engine_limits_short_requests():
    # 128/128: the KV pool holds ~3,700 requests, the token budget 8192 / (1 + 1) = 4096, max_batch 2048
    p = serve("h100-sxm", "llama-3.1-8b", 128, 128, **FP8)
    assert p.limits["kv_capacity"] > 3000 and p.limits["token_budget"] == 4096
    assert (p.batch, p.limited_by) == (2048, "max_batch")
    q = serve("h100-sxm", "llama-3.1-8b", 128, 128, engine=Engine(max_batch=4096, max_num_tokens=4096), **FP8)
    assert (q.batch, q.limited_by) == (2048, "token_budget")


def test_ttft_prefills_with_the_spare_budget(h100_8b):
    # 1000 prompt tokens fit the 8192 - 474 spare tokens of one iteration: TTFT is one iteration of the 474
    # decodes plus the whole prompt, a little longer than the average iteration
    assert h100_8b.tpot_s < h100_8b.ttft_s < 2 * h100_8b.tpot_s
    long = serve("h100-sxm", "llama-3.1-8b", 20000, 2000, **FP8)
    assert long.ttft_s > 2 * long.tpot_s  # 20,000 tokens need ceil(20000 / (8192 - B)) = 3 iterations


def test_below_maximum_load(h100_8b):
    half = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, load=0.5, **FP8)
    # the request rate is half the maximum: half the output tokens/s, served by a smaller, faster batch
    assert half.output_tokens_per_s == pytest.approx(0.5 * h100_8b.output_tokens_per_s, rel=0.05)
    assert half.batch < h100_8b.batch and half.tpot_s < h100_8b.tpot_s
    busy = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, load=0.99, **FP8)
    assert busy.ttft_s > half.ttft_s  # the queue for a slot


def test_pipeline_parallel_micro_batches():
    p = serve("h100-sxm", "llama-3.3-70b", 1000, 1000, pp=2, **FP8)
    assert p.batch_total == 2 * p.batch and p.chips == 2
    assert p.output_tokens_per_s == pytest.approx(2 * p.batch / p.tpot_s)


def test_tensor_parallel_and_experts():
    p = serve("h100-sxm", "qwen3-30b-a3b", 1000, 1000, tp=2, ep=2, **FP8)
    assert p.chips == 2 and p.output_tokens_per_s_per_chip == pytest.approx(p.output_tokens_per_s / 2)
    with pytest.raises(SpecError, match="has no experts"):
        serve("h100-sxm", "llama-3.1-8b", 100, 100, tp=2, ep=2)
    with pytest.raises(SpecError, match=r"expected 1 or tp \(2\)"):
        serve("h100-sxm", "qwen3-30b-a3b", 100, 100, tp=2, ep=4)
    with pytest.raises(SpecError, match="tp 2 with pp 2"):
        serve("h100-sxm", "llama-3.1-8b", 100, 100, tp=2, pp=2)


def test_calibration_none_is_the_bound(h100_8b):
    bound = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, knobs=IDEAL, **FP8)
    assert bound.batch == h100_8b.batch  # capacity does not depend on the knobs
    assert bound.output_tokens_per_s > h100_8b.output_tokens_per_s
    assert bound.knobs.compute_efficiency == 1.0 and bound.knobs.step_overhead == 0.0


def test_separate_prefill_iterations_and_disaggregation(h100_8b):
    sep = serve("h100-sxm", "llama-3.1-8b", 1000, 1000, engine=Engine(chunked_prefill=False), **FP8)
    assert sep.mode == "separate" and sep.chunk_tokens == 0 and sep.output_tokens_per_s > 0
    d = disaggregated("h100-sxm", "llama-3.1-8b", 1000, 1000, **FP8)
    assert 0 < d.prefill_share < 1 and d.decode.chunk_tokens == 0
    # balanced pools: per chip 1 / (1 / (prompts/s x OSL) + 1 / decode tokens/s)
    want = 1 / (1 / (d.prefill["prompts_per_s"] * 1000) + 1 / d.decode.output_tokens_per_s)
    assert d.output_tokens_per_s_per_chip == pytest.approx(want)
    assert d.kv_transfer_s == pytest.approx(2e-6 + 1000 * 65536 / 450e9)  # alpha + V / R, NVLink 4


def test_request_mix_averages():
    mix = RequestMix.of([(1000, 1000, 1), (3000, 500, 1)])
    assert mix.isl_mean == 2000 and mix.osl_mean == 750
    # decode context weighted by the decode iterations each request spends: (1000 x 1500.5 + 500 x 3250.5) / 1500
    assert mix.decode_context == pytest.approx((1000 * 1500.5 + 500 * 3250.5) / 1500)
    p = serve("h100-sxm", "llama-3.1-8b", mix=mix, **FP8)
    assert p.input_tokens_per_s == pytest.approx(p.output_tokens_per_s * 2000 / 750)


def test_errors_are_spec_errors():
    with pytest.raises(InfeasibleError, match="cannot serve llama-3.1-405b") as e:
        serve("h100-sxm", "llama-3.1-405b", 1000, 1000)
    # sizes with their units (it said "workspace 2.147 GB" for 2 GiB and "needs 0.02936 GB"): the H100's 80 GB,
    # the default 2 GiB workspace, and no room left
    assert "capacity 80 GB" in str(e.value) and "workspace 2 GiB" in str(e.value) and "leave 0 B" in str(e.value)
    assert not re.search(r"\b0\.0\d+ GB", str(e.value))
    # eight Groq chips (230 MB of SRAM each, its chip file) hold the default workspace of no GPU: it is named
    with pytest.raises(InfeasibleError, match="a smaller --workspace"):
        serve("groq-tsp", "llama-3.1-8b", 100, 100, tp=8)
    with pytest.raises(SpecError, match="isl: expected an integer >= 1"):
        serve("h100-sxm", "llama-3.1-8b", 0, 10)
    with pytest.raises(SpecError, match="expected isl and osl"):
        serve("h100-sxm", "llama-3.1-8b")
    with pytest.raises(SpecError, match="tpot_slo"):
        serve("h100-sxm", "llama-3.1-8b", 10, 10, tpot_slo="-1 ms")
    with pytest.raises(SpecError, match="unknown model"):
        serve("h100-sxm", "llama-9", 10, 10)
    with pytest.raises(SpecError, match="kv_fraction"):
        Engine(kv_fraction=1.5)
    with pytest.raises(SpecError, match="load"):
        serve("h100-sxm", "llama-3.1-8b", 10, 10, load=0)
    with pytest.raises(SpecError, match="rtx-4090: a system of 2 chips .* needs a scale-up link"):
        serve("rtx-4090", "llama-3.1-8b", 10, 10, tp=2)
