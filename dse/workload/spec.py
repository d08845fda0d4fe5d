"""Workload specs: the YAML / CLI forms of a workload, and build() that turns one into a Workload."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dse.errors import SpecError, unknown_name
from dse.spec import validate
from dse.spec.types import BytesOrZero, Count, CountOrZero, Record
from dse.workload.formats import Formats
from dse.workload.models import model_names
from dse.workload.ops import Op, _elementwise, attention, gemm
from dse.workload.phases import DEFAULT_WORKSPACE, decode, prefill
from dse.workload.step import Workload


class GemmSpec(Record):
    """``{gemm: {m, n, k, batch, count, b, formats}}`` (seed 004 §4.1.1)."""

    name: str | None = None
    m: Count
    n: Count
    k: Count
    batch: Count = 1
    count: Count = 1
    b: Literal["weights", "kv", "activations"] = "weights"
    role: Literal["linear", "lm_head", "router", "expert", "shared_expert"] = "linear"
    formats: Formats = Formats()


class AttentionSpec(Record):
    """``{attention: {heads, kv_heads, head_dim, queries, context, batch, causal, count, formats}}``."""

    name: str | None = None
    heads: Count
    kv_heads: Count | None = None
    head_dim: Count
    queries: Count = 1
    context: Count
    batch: Count = 1
    causal: bool | None = None
    count: Count = 1
    formats: Formats = Formats()

    @model_validator(mode="after")
    def _check(self):
        kv = self.kv_heads or self.heads
        if self.heads % kv:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({kv})")
        if self.queries > self.context:
            raise ValueError(f"queries ({self.queries}) must be <= context ({self.context})")
        return self


class VectorSpec(Record):
    """``{vector: {name, elements, flops_per_element, exps_per_element, count, formats}}``."""

    name: str
    kind: Literal["elementwise", "softmax", "norm"] = "elementwise"
    elements: Count
    flops_per_element: float = Field(1.0, ge=0)
    exps_per_element: float = Field(0.0, ge=0)
    count: Count = 1
    formats: Formats = Formats()


class OpSpec(Record):
    """One entry of an explicit operator list: exactly one of gemm, attention, vector."""

    gemm: GemmSpec | None = None
    attention: AttentionSpec | None = None
    vector: VectorSpec | None = None

    @model_validator(mode="after")
    def _one(self):
        given = [k for k in ("gemm", "attention", "vector") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"an operator is exactly one of gemm, attention, vector; got {given or 'none'}")
        return self


class WorkloadSpec(Record):
    """A workload in a study (seed 004 §4.8.2), compact or explicit.

    Model phase: ``{model: qwen3-8b, phase: decode, batch: 8, context: 8192,
    formats: {weights: fp8}, workspace: 2 GiB, routing: uniform}``; prefill
    ``{model, phase: prefill, batch, tokens[, cached]}``. Explicit:
    ``{name: qproj, ops: [{gemm: {m: 256, k: 4096, n: 4096}}, {attention: {...}}]}``.
    """

    name: str | None = None
    model: str | None = None
    phase: Literal["prefill", "decode"] | None = None
    batch: Count = 1
    context: Count | None = None
    tokens: Count | None = None
    cached: CountOrZero = 0
    formats: Formats = Formats()
    workspace: BytesOrZero = DEFAULT_WORKSPACE
    routing: Literal["uniform", "concentrated"] | list[CountOrZero] = "uniform"
    ops: list[OpSpec] | None = None
    tokens_per_step: Count | None = None

    @field_validator("model")
    @classmethod
    def _known_model(cls, v):
        if v is not None and v.strip().lower() not in model_names():
            raise ValueError(unknown_name("model", v, model_names()))
        return None if v is None else v.strip().lower()

    @model_validator(mode="after")
    def _consistent(self):
        if self.ops is not None:
            if self.model is not None:
                raise ValueError("give either 'model' (with 'phase') or 'ops', not both")
            if not self.ops:
                raise ValueError("ops: the operator list is empty")
            for key in ("phase", "context", "tokens"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key}: only for model workloads (model + phase), not for 'ops'")
            return self
        if self.model is None:
            raise ValueError("missing required key 'model' (or give an explicit 'ops' list)")
        if self.phase is None:
            raise ValueError("missing required key 'phase' (prefill or decode)")
        if self.tokens_per_step is not None:
            raise ValueError("tokens_per_step: only for explicit 'ops' workloads")
        if self.phase == "decode":
            if self.context is None:
                raise ValueError("context: a decode workload needs 'context' (positions attended per request)")
            if self.tokens is not None:
                raise ValueError("tokens: a decode step adds one token per request; use 'context'")
            if self.cached:
                raise ValueError("cached: only for prefill")
        else:
            if self.tokens is None:
                raise ValueError("tokens: a prefill workload needs 'tokens' (new tokens per request)")
            if self.context is not None:
                raise ValueError("context: a prefill workload takes 'tokens' (and 'cached'), not 'context'")
        return self


def _ops_workload(spec: WorkloadSpec) -> Workload:
    ops: list[Op] = []
    for i, entry in enumerate(spec.ops):
        if entry.gemm is not None:
            g = entry.gemm
            ops.append(gemm(g.name or f"gemm{i}", g.m, g.n, g.k, batch=g.batch, count=g.count,
                            formats=g.formats, role=g.role, b_kind=g.b))
        elif entry.attention is not None:
            a = entry.attention
            ops.extend(attention(a.heads, a.kv_heads or a.heads, a.head_dim, a.queries, a.context, a.batch,
                                 count=a.count, formats=a.formats, causal=a.causal,
                                 prefix=a.name or f"attn{i}"))
        else:
            v = entry.vector
            ops.append(_elementwise(v.name, v.elements, v.flops_per_element, v.exps_per_element, v.count,
                                    v.formats, kind=v.kind))
    weights = float(sum(o.weight_bytes * o.count for o in ops))
    return Workload(
        name=spec.name or "ops", phase="ops", ops=tuple(ops), batch=spec.batch,
        tokens_per_step=spec.tokens_per_step or 1, weight_resident_bytes=weights,
        workspace_bytes=spec.workspace,
    )


def build(spec: WorkloadSpec | dict) -> Workload:
    """WorkloadSpec (or its mapping) -> Workload (seed 004 §4.8.2)."""
    if isinstance(spec, dict):
        spec = validate(WorkloadSpec, spec)
    if spec.ops is not None:
        return _ops_workload(spec)
    routing = spec.routing if isinstance(spec.routing, str) else list(spec.routing)
    if spec.phase == "decode":
        w = decode(spec.model, spec.batch, spec.context, spec.formats, spec.workspace, routing)
    else:
        w = prefill(spec.model, spec.batch, spec.tokens, spec.formats, spec.workspace, routing, spec.cached)
    if spec.name:
        w = dataclasses.replace(w, name=spec.name)
    return w


_INT_KEYS = ("batch", "context", "tokens", "cached")
_FORMAT_KEYS = tuple(Formats.model_fields)
_SHORT_KEYS = (*_INT_KEYS, "workspace", "routing", *_FORMAT_KEYS)


def key_values(parts, where: str, known, int_keys=(), kind: str = "key", example: str = "") -> dict:
    """``['batch=1', 'context=8192']`` -> {'batch': 1, 'context': 8192}: the CLI short forms' key=value parts.

    Errors name the part: not key=value, an unknown key (did you mean), a key twice, a non-integer count.
    """
    got: dict[str, object] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise SpecError(f"{where}: part '{part}': expected key=value{', e.g. ' + example if example else ''}")
        if key not in known:
            raise SpecError(f"{where}: part '{part}': " + unknown_name(kind, key, known))
        if key in got:
            raise SpecError(f"{where}: part '{part}': '{key}' given twice")
        if key in int_keys:
            try:
                got[key] = int(value)
            except ValueError:
                raise SpecError(f"{where}: part '{part}': {key} must be an integer, got '{value}'") from None
        else:
            got[key] = value
    return got


def parse_workload(text: str) -> WorkloadSpec:
    """CLI short form ``model:phase:key=value:...`` -> WorkloadSpec.

    ``qwen3-8b:decode:batch=1:context=8192``, ``qwen3-8b:prefill:tokens=4096``,
    ``qwen3-235b-a22b:decode:batch=8:context=8192:weights=mxfp4:routing=concentrated``.
    Keys: batch, context, tokens, cached, workspace, routing and the format roles
    (weights, activations, kv, accumulator, output, embedding, router, norms,
    compute). Errors name the bad part.
    """
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"workload: expected 'model:phase:key=value...', got {text!r}")
    parts = text.strip().split(":")
    where = f"workload '{text}'"
    if len(parts) < 2:
        raise SpecError(f"{where}: expected 'model:phase[:key=value...]', e.g. qwen3-8b:decode:batch=1:context=8192")
    data: dict[str, Any] = {"model": parts[0], "phase": parts[1]}
    if parts[0].strip().lower() not in model_names():
        raise SpecError(f"{where}: part '{parts[0]}': " + unknown_name("model", parts[0], model_names()))
    if parts[1] not in ("prefill", "decode"):
        raise SpecError(f"{where}: part '{parts[1]}': " + unknown_name("phase", parts[1], ("prefill", "decode")))
    formats: dict[str, str] = {}
    for key, value in key_values(parts[2:], where, _SHORT_KEYS, _INT_KEYS, "key").items():
        if key in _FORMAT_KEYS:
            formats[key] = value
        else:
            data[key] = value
    if formats:
        data["formats"] = formats
    if "phase" in data and data["phase"] == "decode" and "context" not in data:
        raise SpecError(f"{where}: a decode workload needs context=N (positions attended per request)")
    if data["phase"] == "prefill" and "tokens" not in data:
        raise SpecError(f"{where}: a prefill workload needs tokens=N (new tokens per request)")
    try:
        return validate(WorkloadSpec, data)
    except SpecError as e:
        raise SpecError([f"{where}: {p.split(' ', 1)[1] if p.startswith('<input>') else p}"
                         for p in e.problems]) from None
