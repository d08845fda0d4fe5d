"""LLM phase builders: the operators of one decode or prefill step of a model (seed 004 §4.8.2)."""

from __future__ import annotations

import dataclasses

import numpy as np

from dse.errors import SpecError
from dse.precision import storage_bytes
from dse.units import parse_quantity
from dse.workload.formats import Formats, _as_formats
from dse.workload.models import ModelConfig, kv_bytes_per_token, load_model, resident_weight_bytes
from dse.workload.ops import (
    COMBINE_FLOPS,
    RESIDUAL_FLOPS,
    ROPE_FLOPS,
    SOFTMAX_EXPS,
    SOFTMAX_FLOPS,
    SWIGLU_EXPS,
    SWIGLU_FLOPS,
    Op,
    _elementwise,
    _norm,
    _vector,
    attention,
    gemm,
)
from dse.workload.routing import _routing_arg, moe_rows
from dse.workload.step import Workload

DEFAULT_WORKSPACE = 2.0 * 2**30  # 2 GiB, seed 004 §4.3.1 / §4.8.2


def _check_int(label: str, v, minimum: int = 1) -> int:
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < minimum:
        raise SpecError(f"{label}: must be an integer >= {minimum}, got {v!r}")
    return int(v)


def _bytes_arg(label: str, v) -> float:
    if isinstance(v, str):
        try:
            out = parse_quantity(v, "bytes")
        except SpecError as e:
            raise SpecError(f"{label}: {e}") from None
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out = float(v)
    else:
        raise SpecError(f"{label}: expected bytes such as '2 GiB', got {v!r}")
    if out < 0:
        raise SpecError(f"{label}: must be >= 0, got {v!r}")
    return out


def _micro_batches(micro_batches, batch: int) -> int:
    """The micro-batch count: a whole number >= 1 that divides the batch (equal micro-batches of requests)."""
    m = _check_int("micro_batches", micro_batches)
    if batch % m:
        small = [d for d in range(1, int(batch ** 0.5) + 1) if batch % d == 0]
        divisors = sorted(set(small) | {batch // d for d in small})
        raise SpecError(f"micro_batches: {m} does not divide batch {batch}; a micro-batch is batch / micro_batches "
                        f"whole requests (expected one of {divisors})")
    return m


def _repeated(ops: list[Op], times: int) -> list[Op]:
    """The operators of ``times`` micro-batches in a row: each operator's count x times."""
    if times == 1:
        return ops
    return [dataclasses.replace(o, count=o.count * times) for o in ops]


def _step_ops(m: ModelConfig, f: Formats, requests: int, new: int, context: int, routing) -> list[Op]:
    """Operators of one forward step: ``requests`` x ``new`` tokens, each request over ``context`` keys."""
    d, L = m.hidden, m.layers
    T = requests * new
    act = f.fmt("activations")
    ops: list[Op] = []
    emb = f.fmt("embedding")
    rows = min(T, m.vocab)  # distinct rows gathered, at most the table
    emb_bytes = float(storage_bytes(d, emb)) * rows
    ops.append(_vector("embedding", "embedding", T * d, 0.0, 0.0, 1, a_bytes=0.0,
                       c_bytes=T * d * f.bpv("output"), a_fmt=act, c_fmt=f.fmt("output"),
                       weight_bytes=emb_bytes, b_fmt=emb, role="embedding"))
    # attention block, all layers
    ops.append(_norm("attn_norm", T, d, L, f))
    ops.append(gemm("q_proj", T, m.q_dim, d, count=L, formats=f))
    ops.append(gemm("k_proj", T, m.kv_dim, d, count=L, formats=f))
    ops.append(gemm("v_proj", T, m.kv_dim, d, count=L, formats=f))
    if m.qk_norm:
        ops.append(_norm("q_norm", T * m.heads, m.head_dim, L, f))
        ops.append(_norm("k_norm", T * m.kv_heads, m.head_dim, L, f))
    ops.append(_elementwise("rope", T * (m.q_dim + m.kv_dim), ROPE_FLOPS, 0.0, L, f))
    ops.extend(attention(m.heads, m.kv_heads, m.head_dim, new, context, requests, count=L, formats=f))
    ops.append(gemm("o_proj", T, d, m.q_dim, count=L, formats=f))
    ops.append(_elementwise("attn_residual", T * d, RESIDUAL_FLOPS, 0.0, L, f, inputs=2))
    ops.append(_norm("ffn_norm", T, d, L, f))
    # dense FFN layers
    if m.dense_layer_count:
        Ld, i = m.dense_layer_count, m.intermediate
        ops.append(gemm("gate_proj", T, i, d, count=Ld, formats=f))
        ops.append(gemm("up_proj", T, i, d, count=Ld, formats=f))
        ops.append(_elementwise("ffn_act", T * i, SWIGLU_FLOPS, SWIGLU_EXPS, Ld, f, inputs=2))
        ops.append(gemm("down_proj", T, d, i, count=Ld, formats=f))
    # MoE layers
    if m.moe_layer_count:
        e, Lm = m.moe, m.moe_layer_count
        ops.append(gemm("router", T, e.experts, d, count=Lm, formats=f, role="router"))
        ops.append(_elementwise("router_softmax", T * e.experts, SOFTMAX_FLOPS, SOFTMAX_EXPS, Lm, f,
                                kind="softmax"))
        rows_per_expert = moe_rows(T, e.top_k, e.experts, routing)
        counts = np.unique(rows_per_expert[rows_per_expert > 0], return_counts=True)
        for r, nexp in zip(*counts):
            r, nexp = int(r), int(nexp)
            tag = f"r{r}"
            ops.append(gemm(f"expert_gate.{tag}", r, e.intermediate, d, batch=nexp, count=Lm, formats=f,
                            role="expert"))
            ops.append(gemm(f"expert_up.{tag}", r, e.intermediate, d, batch=nexp, count=Lm, formats=f,
                            role="expert"))
            ops.append(_elementwise(f"expert_act.{tag}", r * nexp * e.intermediate, SWIGLU_FLOPS, SWIGLU_EXPS,
                                    Lm, f, inputs=2, role="expert"))
            ops.append(gemm(f"expert_down.{tag}", r, d, e.intermediate, batch=nexp, count=Lm, formats=f,
                            role="expert"))
        if e.shared_experts:
            si = e.shared_intermediate or e.intermediate
            s = e.shared_experts
            ops.append(gemm("shared_gate", T, si, d, batch=s, count=Lm, formats=f, role="shared_expert"))
            ops.append(gemm("shared_up", T, si, d, batch=s, count=Lm, formats=f, role="shared_expert"))
            ops.append(_elementwise("shared_act", T * s * si, SWIGLU_FLOPS, SWIGLU_EXPS, Lm, f, inputs=2))
            ops.append(gemm("shared_down", T, d, si, batch=s, count=Lm, formats=f, role="shared_expert"))
        ops.append(_elementwise("moe_combine", T * (e.top_k + e.shared_experts) * d, COMBINE_FLOPS, 0.0, Lm, f))
    ops.append(_elementwise("ffn_residual", T * d, RESIDUAL_FLOPS, 0.0, L, f, inputs=2))
    # head: final norm on every token, LM head on the last position of each request
    ops.append(_norm("final_norm", T, d, 1, f))
    ops.append(gemm("lm_head", requests, m.vocab, d, formats=f, role="lm_head"))
    ops.append(_elementwise("sampling_softmax", requests * m.vocab, SOFTMAX_FLOPS, SOFTMAX_EXPS, 1, f,
                            kind="softmax"))
    return ops


def decode(model, batch: int = 1, context: int = 8192, formats=None, workspace="2 GiB",
           routing="uniform", micro_batches: int = 1) -> Workload:
    """One decode step: ``batch`` requests each add 1 token and attend over ``context`` positions.

    seed 004 §4.8.2: context 8192 = 8191 existing + 1 new. Weights: every
    linear weight read once per step (shared by the batch), the embedding
    *rows* of the batch's tokens, the full LM head, the norms; MoE: only the
    experts that received >= 1 row under ``routing`` (seed 004 §4.3.3). KV read:
    batch x context x kv_bytes_per_token. Qwen3-8B BF16, batch 1, 8K: 13.89 +
    4.832 + 1.245 = 19.97 GFLOPs; 15.137 GB weights + 1.208 GB KV = 16.345 GB.

    ``micro_batches`` m (a divisor of the batch): the step runs as m micro-batches of batch / m requests, each
    a pass over the weights (the operators of one micro-batch, counted m times); a pipeline-parallel system
    overlaps them across its stages (dse.model.evaluator), one chip runs them in turn.
    """
    m = load_model(model)
    batch = _check_int("batch", batch)
    context = _check_int("context", context)
    mb = _micro_batches(micro_batches, batch)
    f = _as_formats(formats)
    routing = _routing_arg(routing)
    ws = _bytes_arg("workspace", workspace)
    ops = _repeated(_step_ops(m, f, batch // mb, 1, context, routing if isinstance(routing, str) else list(routing)),
                    mb)
    return Workload(
        name=f"{m.name}:decode:batch={batch}:context={context}" + (f":micro_batches={mb}" if mb > 1 else ""),
        phase="decode", ops=tuple(ops), micro_batches=mb,
        batch=batch, tokens=1, context=context, tokens_per_step=batch,
        weight_resident_bytes=resident_weight_bytes(m, f), kv_bytes_per_token=kv_bytes_per_token(m, f.fmt("kv")),
        workspace_bytes=ws, model=m, formats=f, routing=routing,
    )


def prefill(model, batch: int = 1, tokens: int = 4096, formats=None, workspace="2 GiB",
            routing="uniform", cached: int = 0, micro_batches: int = 1) -> Workload:
    """Prefill ``tokens`` new tokens for each of ``batch`` requests (after ``cached`` cached positions).

    seed 004 §4.8.2: linear work grows with batch x tokens; causal attention
    counts exactly sum_{i=1..S} i visible pairs (S (S+1)/2, + S x cached with
    a cached prefix); the LM head runs on the last position only. Qwen3-8B
    BF16, 4096 tokens: 61.85 TFLOPs. KV resident afterwards: batch x (cached +
    tokens) x kv_bytes_per_token. ``micro_batches``: as for :func:`decode` (micro-batches of whole prompts).
    """
    m = load_model(model)
    batch = _check_int("batch", batch)
    tokens = _check_int("tokens", tokens)
    cached = _check_int("cached", cached, minimum=0)
    mb = _micro_batches(micro_batches, batch)
    f = _as_formats(formats)
    routing = _routing_arg(routing)
    ws = _bytes_arg("workspace", workspace)
    ctx = cached + tokens
    ops = _repeated(_step_ops(m, f, batch // mb, tokens, ctx, routing if isinstance(routing, str)
                              else list(routing)), mb)
    name = f"{m.name}:prefill:batch={batch}:tokens={tokens}" + (f":cached={cached}" if cached else "") \
        + (f":micro_batches={mb}" if mb > 1 else "")
    return Workload(
        name=name, phase="prefill", ops=tuple(ops), micro_batches=mb,
        batch=batch, tokens=tokens, context=ctx, tokens_per_step=batch * tokens,
        weight_resident_bytes=resident_weight_bytes(m, f), kv_bytes_per_token=kv_bytes_per_token(m, f.fmt("kv")),
        workspace_bytes=ws, model=m, formats=f, routing=routing,
    )
