"""One engine iteration of continuous batching with chunked prefill, as a :class:`dse.workload.Workload`.

A serving engine with chunked prefill (vLLM, TensorRT-LLM, SGLang) runs, in
each iteration, one forward pass over the concatenated tokens of the ``batch``
requests that are decoding (one new token each, over their own context) and a
*chunk* of prompt tokens of the requests being prefilled (Agrawal et al.,
"Sarathi-Serve", OSDI 2024, §3; NVIDIA TensorRT-LLM docs, "chunked context").
The linear layers (projections, FFN, experts) see the ``batch + chunk`` rows
together, so each weight is read once for both; attention stays per request.

This module only *composes* operators the workload layer builds
(:func:`dse.workload.decode`, :func:`dse.workload.prefill`): the linear
operators of a step over ``batch + chunk`` rows, the decode attention of the
``batch`` requests, the causal attention of the chunk, and the LM head and
sampling of the ``batch`` decoding requests. Every FLOP and byte is still
counted by :mod:`dse.workload`; the evaluator times the result as any other
step (dse.evaluate.evaluate_design). Nothing here is physics.

The chunk of an iteration, on average over a request's prefill: a prompt of S
tokens processed in pieces sees S (S + 1) / 2 query-key pairs in total
whatever the pieces (seed 004 §4.8.2 causal count), so a chunk of P < S tokens
is built as P tokens after (S - P) / 2 cached ones (P (S + 1) / 2 pairs, the
average); a chunk of P >= S tokens as floor(P / S) whole prompts plus that
average piece for the rest.
"""

from __future__ import annotations

import dataclasses

from dse.errors import SpecError
from dse.workload import Workload, decode, prefill

#: Operators of the decode step that belong to each request's attention (kept per request, not merged).
_ATTENTION_KINDS = ("attention_qk", "attention_pv")
#: Operators that run once per *decoding* request (the LM head and sampling of the new token).
_PER_OUTPUT = ("lm_head", "sampling_softmax")


def _attention_ops(w: Workload, prefix: str) -> list:
    """The QK, softmax and PV operators of ``w`` (in order, so the evaluator sees them fused), renamed."""
    ops = list(w.ops)
    out = []
    for i, o in enumerate(ops):
        in_block = o.kind in _ATTENTION_KINDS or (
            o.kind == "softmax" and 0 < i < len(ops) - 1 and ops[i - 1].kind == "attention_qk"
            and ops[i + 1].kind == "attention_pv")
        if in_block:
            out.append(dataclasses.replace(o, name=f"{prefix}.{o.name}"))
    return out


def _chunk_pieces(chunk: int, prompt: int) -> list[tuple[int, int, int]]:
    """(requests, tokens, cached) prefill pieces of a chunk of ``chunk`` tokens of ``prompt``-token prompts.

    Average position inside a prompt (module docstring): whole prompts, then one piece of the remainder
    after (prompt - remainder) / 2 cached tokens.
    """
    whole, rest = divmod(chunk, prompt)
    pieces = []
    if whole:
        pieces.append((whole, prompt, 0))
    if rest:
        pieces.append((1, rest, (prompt - rest) // 2))
    return pieces


def mixed_step(model, batch: int, context: int, chunk: int = 0, prompt: int | None = None, formats=None,
               workspace="2 GiB", routing="uniform") -> Workload:
    """One iteration: ``batch`` decoding requests at ``context`` positions + ``chunk`` prompt tokens.

    ``prompt``: the prompt length S the chunk belongs to (for its attention; module docstring). With
    ``chunk = 0`` this is exactly :func:`dse.workload.decode`. ``tokens_per_step`` is ``batch`` (the output
    tokens of the iteration); the resident KV is the decoding requests' (the serving layer sizes the pool).
    """
    if not isinstance(chunk, int) or chunk < 0:
        raise SpecError(f"mixed_step: chunk must be an integer >= 0, got {chunk!r}")
    dec = decode(model, batch=batch, context=context, formats=formats, workspace=workspace, routing=routing)
    if chunk == 0:
        return dec
    if prompt is None or prompt < 1:
        raise SpecError(f"mixed_step: a chunk of {chunk} tokens needs its prompt length (>= 1), got {prompt!r}")
    rows = decode(model, batch=batch + chunk, context=context, formats=formats, workspace=workspace,
                  routing=routing)
    attention = _attention_ops(dec, "decode")
    for j, (requests, tokens, cached) in enumerate(_chunk_pieces(chunk, prompt)):
        piece = prefill(model, batch=requests, tokens=tokens, cached=cached, formats=formats, workspace=workspace,
                        routing=routing)
        attention += _attention_ops(piece, f"chunk{j}")
    per_output = {o.name: o for o in dec.ops if o.name in _PER_OUTPUT}
    ops = []
    placed = False
    for o in rows.ops:
        if o.kind in _ATTENTION_KINDS or (o.kind == "softmax" and o.name.startswith("attn")):
            if not placed:  # the attention blocks where the step's own attention was
                ops.extend(attention)
                placed = True
            continue
        ops.append(per_output.get(o.name, o))
    return Workload(
        name=f"{dec.model.name}:mixed:batch={batch}:context={context}:chunk={chunk}:prompt={prompt}",
        phase="decode", ops=tuple(ops), batch=batch, tokens=1, context=context, tokens_per_step=batch,
        weight_resident_bytes=dec.weight_resident_bytes, kv_bytes_per_token=dec.kv_bytes_per_token,
        workspace_bytes=dec.workspace_bytes, model=dec.model, formats=dec.formats, routing=dec.routing,
    )
