"""Workload model (dse/workload.py): configs, operators, builders, specs, errors, properties.

Seed cases are in tests/reference/test_workload_cases.py.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse import workload as W
from dse.errors import SpecError
from dse.spec import load_yaml_text, validate

FAST = settings(max_examples=20, deadline=None)

# Published parameter counts (model cards), a check on the shipped configs.
PUBLISHED_PARAMS = {
    "qwen3-8b": 8.19e9,
    "qwen3-32b": 32.8e9,
    "qwen3-235b-a22b": 235.1e9,
    "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.6e9,
    "llama-3.1-405b": 405.9e9,
    "mixtral-8x7b": 46.7e9,
    "llama-3.3-70b": 70.6e9,  # model card (meta-llama/Llama-3.3-70B-Instruct)
    "qwen3-30b-a3b": 30.5e9,  # model card (Qwen/Qwen3-30B-A3B: 30.5B total, 3.3B activated)
}


# ---------------------------------------------------------------- model configs


def test_shipped_models():
    assert set(W.model_names()) == set(PUBLISHED_PARAMS)


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_model_cards(name):
    m = W.load_model(name)
    assert m.source.startswith("Hugging Face ")
    assert sum(W.parameter_counts(m).values()) == pytest.approx(PUBLISHED_PARAMS[name], rel=5e-3)
    # BF16 resident weights are 2 bytes per parameter
    assert W.resident_weight_bytes(m) == 2 * sum(W.parameter_counts(m).values())


def test_qwen3_8b_config():
    m = W.load_model("Qwen3-8B")
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab) == (
        36, 4096, 32, 8, 128, 12288, 151936)
    assert not m.tie_embeddings and m.qk_norm and m.moe is None


def test_moe_configs():
    q = W.load_model("qwen3-235b-a22b")
    assert (q.moe.experts, q.moe.top_k, q.moe.intermediate, q.moe_layer_count) == (128, 8, 1536, 94)
    mx = W.load_model("mixtral-8x7b")
    assert (mx.moe.experts, mx.moe.top_k, mx.dense_layer_count) == (8, 2, 0)


def test_unknown_model_did_you_mean():
    with pytest.raises(SpecError, match="did you mean 'qwen3-8b'"):
        W.load_model("qwen3-8")
    with pytest.raises(SpecError, match="unknown model"):
        W.decode("gpt-5", 1, 10)


def test_model_config_validation():
    with pytest.raises(SpecError, match="multiple of kv_heads"):
        validate(W.ModelConfig, {"name": "x", "source": "s", "layers": 2, "hidden": 64, "heads": 6,
                                 "kv_heads": 4, "head_dim": 16, "intermediate": 128, "vocab": 100})


# ---------------------------------------------------------------- operators


def test_gemm_fields():
    op = W.gemm("q_proj", m=256, n=4096, k=4096)
    assert (op.kind, op.role, op.fmt, op.batch, op.count) == ("gemm", "linear", "bf16", 1, 1)
    assert op.a_bytes == 256 * 4096 * 2 and op.b_bytes == op.weight_bytes == 4096 * 4096 * 2
    assert op.c_bytes == 256 * 4096 * 2 and op.kv_bytes == 0
    assert op.flops == 2 * 256 * 4096 * 4096
    assert (op.elem_bytes_a, op.elem_bytes_b, op.elem_bytes_c) == (2, 2, 2)


def test_gemm_block_format_counts_scales():
    op = W.gemm("w", m=1, n=4096, k=4096, formats={"weights": "mxfp4", "compute": "bf16"})
    assert op.weight_bytes == 8.5 * 2**20  # seed 004 §4.6.1: 4-bit values + 1 scale byte per 32
    assert op.fmt == "bf16" and op.b_fmt == "mxfp4"


@pytest.mark.parametrize("formats,fmt", [
    ({}, "bf16"),
    ({"weights": "fp8"}, "fp8_e4m3"),           # the narrower operand
    ({"activations": "fp8_e5m2", "weights": "bf16"}, "fp8_e5m2"),
    ({"weights": "mxfp4", "compute": "bf16"}, "bf16"),  # weight-only quantization
])
def test_compute_format_rule(formats, fmt):
    assert W.gemm("g", 4, 4, 4, formats=formats).fmt == fmt


def test_attention_compute_format_pairs_activations_with_kv():
    w = W.decode("qwen3-8b", 1, 128, formats={"kv": "fp8"})
    assert w.op("attn_qk").fmt == "fp8_e4m3" and w.op("q_proj").fmt == "bf16"
    assert w.kv_bytes_per_token == 147456 / 2


def test_op_rejects_bad_kind_and_counts():
    with pytest.raises(SpecError, match="operator kind"):
        W.Op(name="x", kind="conv")
    with pytest.raises(SpecError):
        W.Op(name="x", kind="gemm", count=0)
    with pytest.raises(SpecError, match="m must be an integer >= 1"):
        W.gemm("g", 0, 4, 4)


def test_padded_flops_non_causal():
    op = W.gemm("g", m=1, n=4096, k=4096)
    assert op.padded_flops(16, 16, 16) == 16 * op.flops
    got = op.padded_flops(np.array([1, 16, 64]), 8, 16)
    assert got.tolist() == [op.flops, 16 * op.flops, 64 * op.flops]


def _brute_causal(op, im, in_, ik):
    """Executed FLOPs by enumerating tiles of the mask: a tile runs if any element is visible."""
    g, m = op.group, op.m
    keys = op.n if op.causal == "n" else op.k
    p = m // g
    rows = np.arange(m)[:, None]
    cols = np.arange(keys)[None, :]
    mask = cols <= (keys - p) + rows // g
    iv, other, io = (in_, op.k, ik) if op.causal == "n" else (ik, op.n, in_)
    tiles = 0
    for r0, c0 in itertools.product(range(0, m, im), range(0, keys, iv)):
        tiles += bool(mask[r0:r0 + im, c0:c0 + iv].any())
    return 2.0 * tiles * im * iv * (-(-other // io) * io) * op.batch, 2.0 * mask.sum() * other * op.batch


@pytest.mark.parametrize("queries,context", [(10, 10), (7, 19), (1, 9)])
@pytest.mark.parametrize("tiles", [(1, 1, 1), (4, 3, 8), (16, 16, 16), (3, 5, 2)])
def test_causal_padded_flops_match_tile_enumeration(queries, context, tiles):
    qk, _, pv = W.attention(heads=6, kv_heads=2, head_dim=12, queries=queries, context=context, requests=2,
                            causal=True)
    for op in (qk, pv):
        padded, useful = _brute_causal(op, *tiles)
        assert op.flops == useful
        assert op.padded_flops(*tiles) == padded


def test_causal_padded_flops_vectorized():
    qk, _, _ = W.attention(heads=4, kv_heads=1, head_dim=16, queries=33, context=33)
    ims = np.array([1, 8, 16, 8])
    got = qk.padded_flops(ims, np.array([1, 8, 16, 16]), 16)
    assert got.shape == (4,)
    assert got[0] == qk.flops
    assert got[3] == qk.padded_flops(8, 16, 16)


# ---------------------------------------------------------------- phase builders


def test_decode_ops_and_fields():
    w = W.decode("qwen3-8b", batch=4, context=1000)
    assert (w.phase, w.batch, w.tokens, w.context, w.tokens_per_step) == ("decode", 4, 1, 1000, 4)
    qk = w.op("attn_qk")
    assert (qk.m, qk.n, qk.k, qk.batch, qk.count) == (4, 1000, 128, 8 * 4, 36)  # GQA: 4 q heads per KV head
    assert qk.causal is None
    assert w.op("q_proj").m == 4 and w.op("lm_head").m == 4
    assert w.kv_bytes_read == 4 * 1000 * w.kv_bytes_per_token == w.kv_resident_bytes
    assert w.op("embedding").weight_bytes == 4 * 4096 * 2  # rows only
    assert w.op("lm_head").weight_bytes == 151936 * 4096 * 2  # the full head
    with pytest.raises(SpecError, match="did you mean 'q_proj'"):
        w.op("qproj")


def test_prefill_causal_attention_counts_every_visible_pair():
    s = 37
    w = W.prefill("qwen3-8b", batch=2, tokens=s)
    m = W.load_model("qwen3-8b")
    pairs = sum(range(1, s + 1))
    assert w.attention_flops == 2 * 2 * m.layers * m.heads * m.head_dim * pairs * 2
    assert w.op("lm_head").m == 2 and w.op("q_proj").m == 2 * s
    assert w.kv_resident_bytes == 2 * s * w.kv_bytes_per_token
    assert w.tokens_per_step == 2 * s


def test_prefill_with_cached_prefix():
    w = W.prefill("qwen3-8b", batch=1, tokens=4, cached=6)
    qk = w.op("attn_qk")
    assert (qk.n, qk.m) == (10, 4 * 4)
    assert qk.flops == 2 * 128 * 4 * (7 + 8 + 9 + 10) * 8  # positions see 7..10 keys; 8 KV heads
    assert w.context == 10


def test_decode_matches_one_token_prefill_on_a_prefix():
    d = W.decode("qwen3-8b", batch=3, context=50)
    p = W.prefill("qwen3-8b", batch=3, tokens=1, cached=49)
    assert d.total_flops == p.total_flops and d.bytes_read == p.bytes_read


def test_moe_decode_reads_only_active_experts():
    f = {"weights": "bf16"}
    one = W.decode("mixtral-8x7b", 1, 1024, f)
    conc = W.decode("mixtral-8x7b", 4, 1024, f, routing="concentrated")
    unif = W.decode("mixtral-8x7b", 4, 1024, f, routing="uniform")
    expert = 3 * 4096 * 14336 * 2 * 32  # one expert in every layer
    embed_rows = 4096 * 2
    assert conc.weight_bytes_read - one.weight_bytes_read == pytest.approx(3 * embed_rows)
    assert unif.weight_bytes_read - conc.weight_bytes_read == pytest.approx(6 * expert)  # 8 active vs 2
    ops = {o.name: o for o in unif.ops if o.role == "expert"}
    assert ops["expert_gate.r1"].batch == 8
    assert {o.name: o.batch for o in conc.ops if o.role == "expert"}["expert_gate.r4"] == 2


def test_moe_explicit_routing_groups_by_row_count():
    rows = [3, 3, 1, 1, 0, 0, 0, 0]
    w = W.decode("mixtral-8x7b", 4, 64, routing=rows)
    groups = {o.name: (o.m, o.batch) for o in w.ops if o.name.startswith("expert_gate")}
    assert groups == {"expert_gate.r1": (1, 2), "expert_gate.r3": (3, 2)}
    assert w.routing == tuple(rows)


def test_shared_experts_always_run():
    base = W.load_model("mixtral-8x7b").model_dump()
    base["moe"] = {**base["moe"], "shared_experts": 1, "shared_intermediate": 1024}
    m = W.ModelConfig(**base)
    w = W.decode(m, 2, 16)
    op = w.op("shared_gate")
    assert (op.m, op.n, op.batch, op.count, op.role) == (2, 1024, 1, 32, "shared_expert")
    assert W.parameter_counts(m)["shared_experts"] == 32 * 3 * 4096 * 1024


def test_moe_rows_distributions():
    assert W.moe_rows(8, 8, 128).tolist().count(1) == 64  # dispersed decode step, seed 004 §4.3.3
    assert W.moe_rows(5, 2, 4).tolist() == [3, 3, 2, 2]
    assert W.padded_rows([3, 0, 17], 16).tolist() == [16, 0, 32]
    with pytest.raises(SpecError, match="sum to"):
        W.moe_rows(4, 2, 4, [1, 1, 1, 1])
    with pytest.raises(SpecError, match="one row count per expert"):
        W.moe_rows(4, 2, 4, [4, 4])
    with pytest.raises(SpecError, match="did you mean 'uniform'"):
        W.moe_rows(4, 2, 4, "unifrom")
    with pytest.raises(SpecError, match="top_k"):
        W.moe_rows(4, 5, 4)


def test_max_requests_vectorized_and_floored_at_zero():
    w = W.decode("qwen3-8b", 1, 8192)
    got = w.max_requests(np.array([10e9, 24e9, 80e9]))
    assert got.tolist()[0] == 0 and got.tolist()[1] == 4
    assert got[2] == (80e9 - w.weight_resident_bytes - w.workspace_bytes) // (8192 * w.kv_bytes_per_token)


def test_workload_summary_and_vector_work():
    w = W.decode("qwen3-8b", 1, 8192)
    s = w.summary()
    assert s["total_flops"] == s["linear_flops"] + s["attention_flops"] + s["lm_head_flops"]
    # softmax: one exp per score; SwiGLU: one per FFN element; sampling: one per logit
    assert w.exps == 36 * (32 * 8192 + 12288) + 151936
    assert 0 < w.vector_flops < 0.01 * w.total_flops
    assert w.padded_flops(1, 1, 1) == w.total_flops


def test_duplicate_op_names_refused():
    op = W.gemm("g", 2, 2, 2)
    with pytest.raises(SpecError, match="two operators"):
        W.Workload(name="x", phase="ops", ops=(op, op))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("call,key", [
    (lambda: W.decode("qwen3-8b", batch=1, context=0), "context"),
    (lambda: W.decode("qwen3-8b", batch=0, context=8), "batch"),
    (lambda: W.prefill("qwen3-8b", batch=1, tokens=-4), "tokens"),
    (lambda: W.decode("qwen3-8b", 1, 8, workspace="2 GB/s"), "workspace"),
    (lambda: W.decode("qwen3-8b", 1, 8, workspace=2048), None),  # bytes as a number are fine in Python
])
def test_builder_argument_errors(call, key):
    if key is None:
        assert call().workspace_bytes == 2048
        return
    with pytest.raises(SpecError, match=key):
        call()


def test_unknown_format_names_the_key_and_suggests():
    with pytest.raises(SpecError, match=r"formats\.weights.*did you mean 'fp8'"):
        W.decode("qwen3-8b", 1, 8, formats={"weights": "fp9"})
    with pytest.raises(SpecError, match=r"formats\.kvv: unknown key"):
        W.decode("qwen3-8b", 1, 8, formats={"kvv": "fp8"})


SPEC_YAML = """\
model: qwen3-8b
phase: decode
batch: 8
context: {context}
formats: {{weights: {weights}, kv: bf16}}
workspace: 2 GiB
routing: uniform
"""


def test_spec_compact_form_builds_the_decode_workload():
    spec = validate(W.WorkloadSpec, load_yaml_text(SPEC_YAML.format(context=8192, weights="fp8")))
    w = W.build(spec)
    ref = W.decode("qwen3-8b", 8, 8192, {"weights": "fp8_e4m3"})
    assert w.summary() == ref.summary()
    assert spec.formats.weights == "fp8_e4m3"


@pytest.mark.parametrize("context,weights,where", [
    (0, "fp8", "study.yaml:4:10 context"),
    (8192, "fp9", "study.yaml:5:20 formats.weights"),
])
def test_spec_errors_are_located(context, weights, where):
    data = load_yaml_text(SPEC_YAML.format(context=context, weights=weights), "study.yaml")
    with pytest.raises(SpecError) as err:
        validate(W.WorkloadSpec, data)
    assert where in str(err.value)


@pytest.mark.parametrize("data,match", [
    ({"model": "qwen3-8b", "phase": "decode", "batch": 0, "context": 8}, "batch"),
    ({"model": "qwen3-8", "phase": "decode", "context": 8}, "did you mean 'qwen3-8b'"),
    ({"model": "qwen3-8b", "phase": "decode"}, "context"),
    ({"model": "qwen3-8b", "phase": "prefill", "tokens": -1}, "tokens"),
    ({"model": "qwen3-8b", "phase": "prefill"}, "tokens"),
    ({"model": "qwen3-8b", "phase": "sample", "context": 8}, "phase"),
    ({"model": "qwen3-8b", "phase": "decode", "context": 8, "routing": "even"}, "routing"),
    ({"name": "x", "ops": []}, "empty"),
    ({"name": "x", "ops": [{"gemm": {"m": 1, "n": 1, "k": 1}, "vector": {"name": "v", "elements": 1}}]},
     "exactly one"),
])
def test_spec_errors(data, match):
    with pytest.raises(SpecError, match=match):
        W.build(data)


def test_explicit_ops_spec():
    w = W.build({"name": "qproj", "ops": [
        {"gemm": {"name": "q", "m": 256, "k": 4096, "n": 4096, "count": 2, "formats": {"weights": "fp8"}}},
        {"attention": {"heads": 32, "kv_heads": 8, "head_dim": 128, "context": 1024, "queries": 16}},
        {"vector": {"name": "act", "elements": 1000, "flops_per_element": 4, "exps_per_element": 1}},
    ]})
    assert w.phase == "ops" and w.name == "qproj"
    q = w.op("q")
    assert q.fmt == "fp8_e4m3" and q.flops == 2 * 256 * 4096 * 4096 and q.count == 2
    assert w.weight_resident_bytes == 2 * 4096 * 4096
    assert w.op("attn1_qk").causal == "n"  # 16 new queries at the end of 1024 keys
    assert w.exps == 1000 + w.op("attn1_softmax").exps


# ---------------------------------------------------------------- CLI short form


def test_parse_workload_short_form():
    spec = W.parse_workload("qwen3-8b:decode:batch=1:context=8192")
    assert (spec.model, spec.phase, spec.batch, spec.context) == ("qwen3-8b", "decode", 1, 8192)
    spec = W.parse_workload("qwen3-235b-a22b:decode:batch=8:context=8192:weights=mxfp4:routing=concentrated")
    assert spec.formats.weights == "mxfp4" and spec.routing == "concentrated"
    spec = W.parse_workload("qwen3-8b:prefill:tokens=4096:workspace=4GiB")
    assert spec.tokens == 4096 and spec.workspace == 4 * 2**30
    assert W.build(W.parse_workload("qwen3-8b:decode:context=64")).context == 64


@pytest.mark.parametrize("text,match", [
    ("qwen3-8b", "model:phase"),
    ("qwen3-9b:decode:context=8", "part 'qwen3-9b'.*did you mean"),
    ("qwen3-8b:decoding:context=8", "part 'decoding'.*did you mean 'decode'"),
    ("qwen3-8b:decode:batch=x:context=8", "part 'batch=x'"),
    ("qwen3-8b:decode:batch:context=8", "part 'batch'"),
    ("qwen3-8b:decode:bacth=1:context=8", "part 'bacth=1'.*did you mean 'batch'"),
    ("qwen3-8b:decode:batch=1", "needs context"),
    ("qwen3-8b:decode:context=0", "context"),
    ("qwen3-8b:decode:context=8:weights=fp9", "formats.weights.*did you mean"),
    ("qwen3-8b:decode:context=8:context=9", "given twice"),
    ("", "model:phase"),
])
def test_parse_workload_errors(text, match):
    with pytest.raises(SpecError, match=match):
        W.parse_workload(text)


# ---------------------------------------------------------------- properties


@given(batch=st.integers(1, 64), context=st.integers(1, 40000))
@FAST
def test_decode_totals_positive(batch, context):
    w = W.decode("qwen3-8b", batch, context)
    assert w.total_flops > 0 and w.bytes_read > 0 and w.vector_flops > 0 and w.resident_bytes > 0
    for o in w.ops:
        assert o.flops >= 0 and o.bytes > 0 and o.padded_flops(16, 16, 16) >= o.flops


@given(batch=st.integers(1, 32), context=st.integers(1, 20000), db=st.integers(1, 8), dc=st.integers(1, 4000))
@FAST
def test_decode_monotone_in_batch_and_context(batch, context, db, dc):
    w = W.decode("qwen3-8b", batch, context)
    wb = W.decode("qwen3-8b", batch + db, context)
    wc = W.decode("qwen3-8b", batch, context + dc)
    for bigger in (wb, wc):
        assert bigger.total_flops > w.total_flops
        assert bigger.bytes_read > w.bytes_read
        assert bigger.kv_bytes_read > w.kv_bytes_read
        assert bigger.resident_bytes > w.resident_bytes


@pytest.mark.parametrize("model", ["qwen3-8b", "llama-3.1-8b", "qwen3-32b"])
@given(batch=st.integers(1, 256))
@FAST
def test_dense_decode_weight_bytes_independent_of_batch(model, batch):
    """Every linear weight is read once per step whatever the batch; only the embedding rows grow."""
    m = W.load_model(model)
    one, many = W.decode(model, 1, 512), W.decode(model, batch, 512)
    rows = min(batch, m.vocab) - 1
    assert many.weight_bytes_read - one.weight_bytes_read == rows * m.hidden * 2
    assert many.weight_resident_bytes == one.weight_resident_bytes


@given(tokens=st.integers(1, 3000), batch=st.integers(1, 4), dt=st.integers(1, 500))
@FAST
def test_prefill_monotone_in_tokens(tokens, batch, dt):
    w, w2 = W.prefill("llama-3.1-8b", batch, tokens), W.prefill("llama-3.1-8b", batch, tokens + dt)
    assert w2.total_flops > w.total_flops and w2.attention_flops > w.attention_flops
    assert w2.kv_resident_bytes > w.kv_resident_bytes


@given(tokens=st.integers(1, 600), distribution=st.sampled_from(["uniform", "concentrated", "random"]))
@FAST
def test_moe_rows_conserve_dispatches(tokens, distribution):
    rows = W.moe_rows(tokens, 8, 128, distribution)
    assert rows.sum() == tokens * 8 and rows.max() <= tokens
    assert W.executed_rows(rows, 16) >= rows.sum()


@given(tokens=st.integers(1, 2000), top_k=st.integers(1, 8), experts=st.sampled_from([8, 16, 64, 128, 256]))
@FAST
def test_random_routing_reaches_the_expected_experts(tokens, top_k, experts):
    """A router that picks top_k of E experts independently per token activates E (1 - (1 - k / E)^T) experts on
    expectation (each expert is missed by a token with probability 1 - k / E): the rows keep every dispatch, their
    active experts are that expectation within rounding, never more than uniform spreads them over."""
    rows = W.moe_rows(tokens, top_k, experts, "random")
    expected = experts * (1.0 - (1.0 - top_k / experts) ** tokens)
    active = int((rows > 0).sum())
    assert rows.sum() == tokens * top_k and 0 <= rows.min() and rows.max() <= tokens
    assert abs(active - expected) <= 1.0 + 0.02 * expected
    assert active <= int((W.moe_rows(tokens, top_k, experts) > 0).sum())


def test_random_routing_of_a_decode_step():
    """8 decode tokens x top-8 over 128 experts (Qwen3-30B-A3B): 128 (1 - (15/16)^8) = 51.6 experts expected, so
    52 read, against the 64 that uniform ('dispersed', seed 004 §4.3.3) spreads them over; the decode step reads
    fewer expert weights."""
    rows = W.moe_rows(8, 8, 128, "random")
    assert int((rows > 0).sum()) == 52 and rows.sum() == 64
    uni = W.decode("qwen3-30b-a3b", batch=8, context=8192)
    rnd = W.decode("qwen3-30b-a3b", batch=8, context=8192, routing="random")
    assert rnd.weight_bytes_read < uni.weight_bytes_read


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(1, 3000), st.integers(0, 5000), st.sampled_from([1, 2, 4, 7, 8]), st.integers(0, 3),
       st.integers(1, 300), st.integers(1, 300))
def test_causal_tile_area_in_closed_form_is_the_sum_over_row_tiles(positions, extra_keys, group, tail, tm, tv):
    """The closed form (a floor sum) equals the tile-by-tile sum it replaced, exactly (issue 21 item 6: the sum
    over row tiles needed 4 PiB for a prefill of 2**53 tokens)."""
    from dse.workload.ops import _causal_tile_area, _causal_tile_area_by_tile

    m = positions * group + (tail if group > tail else 0)
    keys = m // group + extra_keys
    assert float(_causal_tile_area(m, keys, group, tm, tv)) == _causal_tile_area_by_tile(m, keys, group, tm, tv)


def test_causal_tile_area_of_2_to_the_53_tokens():
    """One tile shape, one square causal GEMM of 2**53 rows: T = 2**47 row tiles of 64, tile t sees 64 (t + 1)
    keys, already a multiple of 64: 64 x 64 x T (T + 1) / 2 = 2**12 x 2**46 (2**47 + 1)."""
    from dse.workload.ops import _causal_tile_area

    n = 2**53
    assert float(_causal_tile_area(n, n, 1, 64, 64)) == float(2**12 * 2**46 * (2**47 + 1))


def test_equal_workloads_hash_alike_and_key_the_caches():
    """Workload.__hash__ (the scalar fields and the operator count, not the operators themselves): two equal
    workloads built apart hash alike and find each other's cache entries; a workload differing in a field is not
    equal (whatever its hash)."""
    import dataclasses

    from dse.model.evaluator import op_table
    a, b = W.decode("qwen3-8b", batch=1, context=8192), W.decode("qwen3-8b", batch=1, context=8192)
    assert a is not b and a == b and hash(a) == hash(b) and {a: 1}[b] == 1
    assert op_table(a) is op_table(b)
    c = dataclasses.replace(a, ops=a.ops[:-1] + (dataclasses.replace(a.ops[-1], count=a.ops[-1].count + 1),))
    assert c != a and op_table(c) is not op_table(a)
