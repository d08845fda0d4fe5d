"""Workload specs: the YAML / CLI forms of a workload, and build() that turns one into a Workload."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dse.errors import SpecError, unknown_name
from dse.spec import locate, validate
from dse.spec.types import BytesOrZero, Count, CountOrZero, Record
from dse.workload.formats import Formats
from dse.workload.hf_config import is_config_path
from dse.workload.models import load_model, model_names
from dse.workload.ops import Op, _elementwise, attention, gemm
from dse.workload.phases import DEFAULT_WORKSPACE, decode, prefill
from dse.workload.step import Workload


class GemmSpec(Record):
    """``{gemm: {m, n, k, batch, count, b, formats}}`` (seed 004 §4.1.1)."""

    name: str | None = Field(None, description="the operator's name")
    m: Count = Field(description="rows of A and C")
    n: Count = Field(description="columns of B and C")
    k: Count = Field(description="the reduction dimension")
    batch: Count = Field(1, description="independent GEMMs of this shape in one call")
    count: Count = Field(1, description="calls per step")
    b: Literal["weights", "kv", "activations"] = Field("weights",
        description="what the B operand is (sets its format role and whether it is resident)")
    role: Literal["linear", "lm_head", "router", "expert", "shared_expert"] = Field("linear",
        description="what the GEMM is in a model (sets the weights' format role)")
    formats: Formats = Field(Formats(), description="number formats of the operands (see formats)")


class AttentionSpec(Record):
    """``{attention: {heads, kv_heads, head_dim, queries, context, batch, causal, count, formats}}``."""

    name: str | None = Field(None, description="the operators' name prefix")
    heads: Count = Field(description="query heads")
    kv_heads: Count | None = Field(None, description="KV heads (GQA; default: heads)")
    head_dim: Count = Field(description="dimension of one head")
    queries: Count = Field(1, description="query positions per request")
    context: Count = Field(description="positions attended per request")
    batch: Count = Field(1, description="requests")
    causal: bool | None = Field(None, description="causal mask (default: when queries > 1)")
    count: Count = Field(1, description="calls per step (layers)")
    formats: Formats = Field(Formats(), description="number formats (activations, kv, accumulator)")

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

    name: str = Field(description="the operator's name")
    kind: Literal["elementwise", "softmax", "norm"] = Field("elementwise", description="what the vector work is")
    elements: Count = Field(description="elements processed")
    flops_per_element: float = Field(1.0, ge=0, allow_inf_nan=False, description="vector FLOPs per element")
    exps_per_element: float = Field(0.0, ge=0, allow_inf_nan=False, description="exponentials per element")
    count: Count = Field(1, description="calls per step")
    formats: Formats = Field(Formats(), description="number formats of input and output")


class OpSpec(Record):
    """One entry of an explicit operator list: exactly one of gemm, attention, vector."""

    gemm: GemmSpec | None = Field(None, description="a matrix multiplication")
    attention: AttentionSpec | None = Field(None, description="an attention block (QK, softmax, PV)")
    vector: VectorSpec | None = Field(None, description="element-wise work")

    @model_validator(mode="after")
    def _one(self):
        given = [k for k in ("gemm", "attention", "vector") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"an operator is exactly one of gemm, attention, vector; got {given or 'none'}")
        return self


class WorkloadSpec(Record):
    """A workload in a study (seed 004 §4.8.2), compact or explicit.

    Model phase: ``{model: qwen3-8b, phase: decode, batch: 8, context: 8192,
    formats: {weights: fp8}, workspace: 2 GiB, routing: uniform}``; prefill = Field(
        description="number format of each tensor role (see `formats`)")
    ``{model, phase: prefill, batch, tokens[, cached]}``. Explicit:
    ``{name: qproj, ops: [{gemm: {m: 256, k: 4096, n: 4096}}, {attention: {...}}]}``.
    """

    name: str | None = Field(None, description="the workload's name (default: from the model and phase)")
    model: str | None = Field(None, description="a shipped model (see above), or a Hugging Face config.json path "
                                                "(in a file: from the file's folder)")
    phase: Literal["prefill", "decode"] | None = Field(None, description="one prefill or decode step")
    batch: Count = Field(1, description="requests in the step")
    context: Count | None = Field(None, description="decode: positions attended per request")
    tokens: Count | None = Field(None, description="prefill: new tokens per request")
    cached: CountOrZero = Field(0, description="prefill: tokens already in the KV cache per request")
    micro_batches: Count = Field(1, description="the step as this many micro-batches of batch / micro_batches "
                                                "requests (a divisor of batch); a pipeline-parallel system "
                                                "overlaps them over its stages")
    formats: Formats = Formats()
    workspace: BytesOrZero = Field(DEFAULT_WORKSPACE, description="memory reserved besides weights and KV cache")
    routing: Literal["uniform", "concentrated", "random"] | list[CountOrZero] = Field("uniform",
        description="MoE expert load: uniform (the most experts), concentrated (the fewest), random (independent "
                    "top-k picks on expectation), or tokens per expert")
    ops: list[OpSpec] | None = Field(None, description="an explicit operator list instead of model and phase")
    tokens_per_step: Count | None = Field(None,
        description="ops workloads: tokens one step produces (for per-token metrics)")

    @field_validator("model")
    @classmethod
    def _known_model(cls, v):
        if v is not None and is_config_path(v):  # a Hugging Face config.json, as `dse serve --model` takes
            try:
                load_model(v.strip())
            except SpecError as e:
                raise ValueError("; ".join(e.problems)) from None
            return v.strip()
        if v is not None and v.strip().lower() not in model_names():
            raise ValueError(unknown_name("model", v, model_names()) + " (or a Hugging Face config.json path)")
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
            if self.micro_batches != 1:
                raise ValueError("micro_batches: only for model workloads (model + phase), not for 'ops'")
            return self
        if self.model is None:
            raise ValueError("missing required key 'model' (or give an explicit 'ops' list)")
        if self.phase is None:
            raise ValueError("missing required key 'phase' (prefill or decode)")
        if self.tokens_per_step is not None:
            raise ValueError("tokens_per_step: only for explicit 'ops' workloads")
        if self.batch % self.micro_batches:
            raise ValueError(f"micro_batches: {self.micro_batches} does not divide batch {self.batch}; a micro-batch "
                             "is batch / micro_batches whole requests")
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


def _ops_workload(spec: WorkloadSpec, data=None) -> Workload:
    """The Workload of an explicit operator list; ``data``: the mapping it was validated from (to locate a problem)."""
    ops: list[Op] = []
    owner: list[int] = []  # the entry of spec.ops each operator comes from
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
        owner += [i] * (len(ops) - len(owner))
    first: dict[str, int] = {}
    for o, i in zip(ops, owner):
        if o.name in first:  # (Workload refuses it too, without knowing where it was written)
            msg = (f"two operators are called '{o.name}' (ops.{first[o.name]} and ops.{i}); give each its own "
                   f"name")
            if data is None:
                raise SpecError(f"workload {spec.name or 'ops'}: {msg}")
            file, (line, col) = locate(data, ("ops", i))
            raise SpecError(f"{file}:{line}:{col} ops.{i}: {msg}")
        first[o.name] = i
    weights = float(sum(o.weight_bytes * o.count for o in ops))
    return Workload(
        name=spec.name or "ops", phase="ops", ops=tuple(ops), batch=spec.batch,
        tokens_per_step=spec.tokens_per_step or 1, weight_resident_bytes=weights,
        workspace_bytes=spec.workspace,
    )


def build(spec: WorkloadSpec | dict) -> Workload:
    """WorkloadSpec (or its mapping) -> Workload (seed 004 §4.8.2)."""
    data = None
    if isinstance(spec, dict):
        data, spec = spec, validate(WorkloadSpec, spec)
    if spec.ops is not None:
        return _ops_workload(spec, data)
    routing = spec.routing if isinstance(spec.routing, str) else list(spec.routing)
    if spec.phase == "decode":
        w = decode(spec.model, spec.batch, spec.context, spec.formats, spec.workspace, routing, spec.micro_batches)
    else:
        w = prefill(spec.model, spec.batch, spec.tokens, spec.formats, spec.workspace, routing, spec.cached,
                    spec.micro_batches)
    if spec.name:
        w = dataclasses.replace(w, name=spec.name)
    return w


_INT_KEYS = ("batch", "context", "tokens", "cached", "micro_batches")
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


def parse_workload(text: str, folder=None) -> WorkloadSpec:
    """CLI short form ``model:phase:key=value:...`` -> WorkloadSpec (:func:`workload_mapping`, validated); a
    relative config.json path taken from ``folder`` where given (:func:`anchored`)."""
    data = anchored(workload_mapping(text), folder)
    try:
        return validate(WorkloadSpec, data)
    except SpecError as e:
        raise SpecError([f"workload '{text}': {p.split(' ', 1)[1] if p.startswith('<input>') else p}"
                         for p in e.problems]) from None


def anchored(mapping, folder) -> dict:
    """A workload mapping whose ``model`` is a relative config.json path, with the path taken from ``folder`` (the
    folder of the study or what-if file that names it, as its chip files are); any other mapping as it is."""
    model = mapping.get("model") if isinstance(mapping, dict) else None
    if folder is None or not is_config_path(model) or Path(str(model).strip()).is_absolute():
        return mapping
    out = type(mapping)(mapping)  # (a located mapping, dse.spec.yamlio.LocDict, keeps its places in its file)
    for attr in ("file", "loc", "key_locs", "value_locs"):
        if hasattr(mapping, attr):
            setattr(out, attr, getattr(mapping, attr))
    out["model"] = str(Path(folder) / str(model).strip())
    return out


def workload_mapping(text: str) -> dict[str, Any]:
    """CLI short form ``model:phase:key=value:...`` -> the workload mapping a file would hold (not yet validated:
    :func:`parse_workload` validates it; a study's workloads list takes it as a mapping written out).

    ``qwen3-8b:decode:batch=1:context=8192``, ``qwen3-8b:prefill:tokens=4096``,
    ``qwen3-235b-a22b:decode:batch=8:context=8192:weights=mxfp4:routing=concentrated``.
    ``qwen3-8b:decode:batch=64:context=8192:micro_batches=16`` (16 micro-batches of 4).
    Keys: batch, context, tokens, cached, micro_batches, workspace, routing and the format roles
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
    if parts[0].strip().lower() not in model_names() and not is_config_path(parts[0]):
        raise SpecError(f"{where}: part '{parts[0]}': " + unknown_name("model", parts[0], model_names())
                        + " (or a Hugging Face config.json path)")
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
    return data
