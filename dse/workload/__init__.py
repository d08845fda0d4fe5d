"""Workloads: operators with shapes and per-tensor formats, and the LLM phase builders.

A :class:`Workload` is what one *step* asks of a chip: a tuple of :class:`Op`
(one operator kind per op, identical layers folded into ``count``), the
resident state (weights, KV cache, workspace) and the step's token counts.
The evaluator only reads these records; every FLOP and byte is counted here,
once (seed 004 §4.1.1, §4.3.1, §4.8.2).

Operator kinds (kept minimal; ``role`` says what a GEMM is *for*):

=============== ===================================================== =========================
kind            what                                                  role(s)
=============== ===================================================== =========================
gemm            C[m,n] = A[m,k] B[k,n] x batch; B is a weight          linear, lm_head, router,
                matrix (or activations / KV for explicit op lists)    expert, shared_expert
attention_qk    scores = Q K^T per KV head: m = (q heads per KV head)  attention
                x new positions, n = key positions, k = head dim;
                B = K cache
attention_pv    out = P V per KV head: m as above, n = head dim,       attention
                k = key positions; B = V cache
softmax         row softmax over scores / router logits / vocab       vector
norm            RMSNorm (weights = the gamma vector)                  vector
elementwise     RoPE, SwiGLU activation, residual adds, MoE combine   vector
embedding       row gather from the embedding table                   embedding
=============== ===================================================== =========================

What is counted per element (vector work; ``exps`` counts exponentials only):

* softmax: 5 vector FLOPs (scale by 1/sqrt(d), running max, subtract, sum,
  multiply by 1/sum) + 1 exp per score element actually visible.
* RMSNorm: 4 vector FLOPs per element (square, add-reduce, multiply by the
  reciprocal RMS, multiply by gamma); the one rsqrt per row is not counted.
* SwiGLU activation: 4 vector FLOPs (add 1, divide, multiply: x sigmoid(x);
  multiply by the up projection) + 1 exp per element of the FFN width.
* RoPE: 3 vector FLOPs per rotated Q and K element (two multiplies, one add).
* Residual add: 1 per element. MoE combine: 2 per element per selected expert.

Compute format (the format the matrix unit executes, ``Op.fmt``): the
*narrower* of the two operand formats by bits per value (the wider operand is
converted on the fly, e.g. activations quantized to FP8 for FP8 weights), unless
``Formats.compute`` names one explicitly (e.g. ``compute: bf16`` for
weight-only quantization that dequantizes 4-bit weights to BF16). Linear
GEMMs pair activations with weights; attention pairs activations with KV.

Byte fields of an :class:`Op` are *per count*, summed over ``batch``: the
tensor sizes read (A, B) and written (C) once. Tile re-reads are the tiling
model's business (dse/model/tiling.py). Formats with shared scales (MX, NVFP4)
count their scales (dse.precision).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, ConfigDict, Field, field_validator, model_validator

from dse.errors import SpecError, unknown_name
from dse.model.tiling import pad
from dse.precision import NumberFormat, get_format, storage_bytes
from dse.spec import load_yaml, validate
from dse.spec.types import BytesOrZero, Count, CountOrZero, Record
from dse.units import parse_quantity

__all__ = [
    "KINDS",
    "ROLES",
    "MATRIX_KINDS",
    "Formats",
    "MoEConfig",
    "ModelConfig",
    "Op",
    "Workload",
    "WorkloadSpec",
    "model_names",
    "load_model",
    "parameter_counts",
    "resident_weight_bytes",
    "kv_bytes_per_token",
    "max_requests",
    "chips_to_hold",
    "moe_rows",
    "padded_rows",
    "executed_rows",
    "gemm",
    "attention",
    "decode",
    "prefill",
    "build",
    "parse_workload",
]

MODEL_DIR = Path(__file__).resolve().parents[1] / "data" / "models"

KINDS = ("gemm", "attention_qk", "attention_pv", "softmax", "norm", "elementwise", "embedding")
MATRIX_KINDS = ("gemm", "attention_qk", "attention_pv")
ROLES = ("linear", "lm_head", "router", "expert", "shared_expert", "attention", "vector", "embedding")
B_KINDS = ("weights", "kv", "activations", "none")

DEFAULT_WORKSPACE = 2.0 * 2**30  # 2 GiB, seed 004 §4.3.1 / §4.8.2

# Vector work per element (see the module docstring).
SOFTMAX_FLOPS, SOFTMAX_EXPS = 5.0, 1.0
NORM_FLOPS = 4.0
SWIGLU_FLOPS, SWIGLU_EXPS = 4.0, 1.0
ROPE_FLOPS = 3.0
RESIDUAL_FLOPS = 1.0
COMBINE_FLOPS = 2.0


# ---------------------------------------------------------------- formats


def _format_ref(value):
    """A format name (canonicalized) or a NumberFormat object (Python API only)."""
    if isinstance(value, NumberFormat):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a number format name such as 'bf16' or 'fp8', got {value!r}")
    try:
        return get_format(value).name
    except SpecError as e:
        raise ValueError(str(e)) from None


FormatRef = Annotated[Any, BeforeValidator(_format_ref)]


class Formats(Record):
    """Number format of each tensor role (seed 004 §4.1.1, §4.2.4, §4.3.1).

    ``weights``: linear, expert and shared-expert weight matrices.
    ``activations``: GEMM inputs between operators. ``kv``: the KV cache.
    ``accumulator``: partial sums and attention scores (FP32 by default, seed
    004 §4.1.1, §4.6.2). ``output``: what GEMMs write. ``embedding``: the
    embedding table and the LM head (None: same as ``weights``). ``router``:
    MoE router weights (None: same as ``weights``). ``norms``: norm gammas.
    ``compute``: force the matrix format (None: the narrower operand, see the
    module docstring). A format is a name (``fp8`` -> ``fp8_e4m3``) or, from
    Python, a :class:`dse.precision.NumberFormat` for a storage scheme the
    catalog lacks.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              arbitrary_types_allowed=True)

    weights: FormatRef = "bf16"
    activations: FormatRef = "bf16"
    kv: FormatRef = "bf16"
    accumulator: FormatRef = "fp32"
    output: FormatRef = "bf16"
    embedding: FormatRef | None = None
    router: FormatRef | None = None
    norms: FormatRef = "bf16"
    compute: FormatRef | None = None

    def fmt(self, role: str) -> NumberFormat:
        """The NumberFormat of tensor role ``role`` (defaults resolved)."""
        if role not in type(self).model_fields:
            raise SpecError(unknown_name("tensor role", role, type(self).model_fields))
        value = getattr(self, role)
        if value is None:
            value = self.weights if role in ("embedding", "router") else None
        if value is None:
            raise SpecError(f"formats.{role} is not set")
        return get_format(value)

    def bpv(self, role: str) -> float:
        """Bytes per value of role ``role``, shared scales included."""
        return self.fmt(role).bytes_per_value

    def matrix_format(self, x_role: str, y_role: str) -> str:
        """Compute format of a matrix op whose operands have roles ``x_role``, ``y_role``.

        ``compute`` if set, else the narrower operand (fewer bits per value;
        a tie keeps ``x_role``), seed 004 §4.2.4 / §4.6.1.
        """
        if self.compute is not None:
            return get_format(self.compute).name
        x, y = self.fmt(x_role), self.fmt(y_role)
        return (y if y.bits_per_value < x.bits_per_value else x).name


def _as_formats(formats) -> Formats:
    if formats is None:
        return Formats()
    if isinstance(formats, Formats):
        return formats
    if isinstance(formats, dict):
        return validate(Formats, formats, prefix=("formats",))
    raise SpecError(f"formats must be a mapping of tensor role to format name, got {formats!r}")


# ---------------------------------------------------------------- model configs


class MoEConfig(Record):
    """Mixture-of-experts block (Hugging Face config names in comments of the YAML)."""

    experts: Count
    top_k: Count
    intermediate: Count
    shared_experts: CountOrZero = 0
    shared_intermediate: Count | None = None  # width of each shared expert (None: intermediate)
    layers: Literal["all"] | list[CountOrZero] = "all"

    @model_validator(mode="after")
    def _check(self):
        if self.top_k > self.experts:
            raise ValueError(f"top_k ({self.top_k}) must be <= experts ({self.experts})")
        if isinstance(self.layers, list) and len(set(self.layers)) != len(self.layers):
            raise ValueError("layers: repeated layer index")
        return self


class ModelConfig(Record):
    """A decoder-only transformer, as its Hugging Face config.json describes it.

    Attention: ``heads`` query heads and ``kv_heads`` KV heads (GQA) of
    ``head_dim``; FFN: SwiGLU of width ``intermediate`` (gate, up, down);
    ``qk_norm``: RMSNorm on every query and key head (Qwen3). ``moe``: the
    layers listed there replace the FFN by routed experts.
    """

    name: str
    title: str | None = None
    source: str
    layers: Count
    hidden: Count
    heads: Count
    kv_heads: Count
    head_dim: Count
    intermediate: Count
    vocab: Count
    tie_embeddings: bool = False
    qk_norm: bool = False
    max_position_embeddings: Count | None = None
    moe: MoEConfig | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.moe is not None and isinstance(self.moe.layers, list):
            bad = [i for i in self.moe.layers if i >= self.layers]
            if bad:
                raise ValueError(f"moe.layers: index {bad[0]} >= layers ({self.layers})")
        return self

    @property
    def q_per_kv(self) -> int:
        """Query heads sharing one KV head (GQA group)."""
        return self.heads // self.kv_heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    @property
    def moe_layer_count(self) -> int:
        if self.moe is None:
            return 0
        return self.layers if self.moe.layers == "all" else len(self.moe.layers)

    @property
    def dense_layer_count(self) -> int:
        return self.layers - self.moe_layer_count


@functools.lru_cache(maxsize=1)
def model_names() -> tuple[str, ...]:
    """Names of the shipped model configs (dse/data/models/*.yaml; seed 004 §4.8.2 uses qwen3-8b)."""
    return tuple(sorted(p.stem for p in MODEL_DIR.glob("*.yaml")))


@functools.lru_cache(maxsize=64)
def _load_model_file(name: str) -> ModelConfig:
    path = MODEL_DIR / f"{name}.yaml"
    cfg = validate(ModelConfig, load_yaml(path))
    if cfg.name != name:
        raise SpecError(f"{path}: name '{cfg.name}' does not match the file name '{name}'")
    return cfg


def load_model(name: str | ModelConfig) -> ModelConfig:
    """The shipped model config called ``name`` (SpecError with did-you-mean if unknown).

    Configs carry the Hugging Face config.json values that seed 004 §4.3.1 and
    §4.8.2 use (layers, hidden, heads, KV heads, head dim, FFN width, vocab).
    """
    if isinstance(name, ModelConfig):
        return name
    if not isinstance(name, str):
        raise SpecError(f"model must be a name, got {name!r}")
    key = name.strip().lower()
    if key not in model_names():
        raise SpecError(unknown_name("model", name, model_names()))
    return _load_model_file(key)


def _matrix_bytes(k: int, n: int, fmt) -> float:
    """Storage of one k x n weight matrix, scales included (seed 004 §4.2.4)."""
    return float(storage_bytes(k * n, fmt))


def parameter_counts(model: ModelConfig | str) -> dict[str, int]:
    """Parameters by role: attention, ffn, experts, shared_experts, router, embedding, lm_head, norms.

    seed 004 §4.8.2: W_layer = 2 d^2 + 2 d (kv_heads x head_dim) + 3 d d_ff for
    Qwen3-8B (Q and O of d x heads*head_dim; K and V of d x kv_dim). The LM
    head counts 0 when tied to the embedding.
    """
    m = load_model(model)
    d, L = m.hidden, m.layers
    attn = d * m.q_dim * 2 + d * m.kv_dim * 2
    norms = L * 2 * d + d + (L * 2 * m.head_dim if m.qk_norm else 0)
    out = {
        "attention": L * attn,
        "ffn": m.dense_layer_count * 3 * d * m.intermediate,
        "experts": 0,
        "shared_experts": 0,
        "router": 0,
        "embedding": m.vocab * d,
        "lm_head": 0 if m.tie_embeddings else m.vocab * d,
        "norms": norms,
    }
    if m.moe is not None:
        e, lm = m.moe, m.moe_layer_count
        out["experts"] = lm * e.experts * 3 * d * e.intermediate
        out["shared_experts"] = lm * e.shared_experts * 3 * d * (e.shared_intermediate or e.intermediate)
        out["router"] = lm * d * e.experts
    return out


def resident_weight_bytes(model: ModelConfig | str, formats=None) -> float:
    """Bytes of every stored parameter: all layers, all experts, embedding table, LM head, norms.

    seed 004 §4.8.2 (Qwen3-8B BF16: 16.381 GB), §4.3.3 / §4.6.3 (all experts
    stay resident; weights and scales). Each matrix is stored in its role's
    format (weights, embedding, router, norms).
    """
    m, f = load_model(model), _as_formats(formats)
    d, L = m.hidden, m.layers
    w, emb, router, nrm = f.fmt("weights"), f.fmt("embedding"), f.fmt("router"), f.fmt("norms")
    total = L * (2 * _matrix_bytes(d, m.q_dim, w) + 2 * _matrix_bytes(d, m.kv_dim, w))
    total += m.dense_layer_count * 3 * _matrix_bytes(d, m.intermediate, w)
    if m.moe is not None:
        e, lm = m.moe, m.moe_layer_count
        total += lm * e.experts * 3 * _matrix_bytes(d, e.intermediate, w)
        total += lm * e.shared_experts * 3 * _matrix_bytes(d, e.shared_intermediate or e.intermediate, w)
        total += lm * _matrix_bytes(d, e.experts, router)
    total += _matrix_bytes(m.vocab, d, emb) * (1 if m.tie_embeddings else 2)
    total += float(storage_bytes(parameter_counts(m)["norms"], nrm))
    return total


def kv_bytes_per_token(model: ModelConfig | str, kv_format="bf16") -> float:
    """KV-cache bytes per context token: layers x 2 (K, V) x kv_heads x head_dim x bytes.

    seed 004 §4.3.1: Qwen3-8B BF16, 36 x 2 x 8 x 128 x 2 = 147,456 B (144 KiB).
    """
    m = load_model(model)
    return 2.0 * m.layers * m.kv_heads * float(storage_bytes(m.head_dim, kv_format))


def max_requests(capacity, weights, workspace, context, kv_per_token):
    """B_max = floor((C - W - workspace) / (S m_KV)), never below 0 (seed 004 §4.3.1).

    Vectorized over any argument. RTX 4090: 24 GB, 16.4 GB weights, 2 GiB
    workspace, 144 KiB per token: 4 requests at 8K, 2 at 16K.
    """
    c, w, ws, s, kv = (np.asarray(v, dtype=float) for v in (capacity, weights, workspace, context, kv_per_token))
    if np.any(s <= 0) or np.any(kv <= 0):
        raise SpecError("max_requests: context and kv bytes per token must be > 0")
    out = np.maximum(np.floor((c - w - ws) / (s * kv)), 0).astype(np.int64)
    return out.item() if out.ndim == 0 else out


def chips_to_hold(nbytes, capacity_per_chip):
    """Chips needed to hold ``nbytes`` split evenly: ceil(bytes / capacity) (seed 004 §4.7.2).

    Groq TSP, 220 MiB SRAM per chip: Qwen3-8B BF16 weights (16.4 GB) need 72
    chips; one 8K request's KV (1.125 GiB = 1152 MiB) 6; eight requests (9 GiB)
    42 (the total is rounded, not each request); eight 32K requests 168.
    """
    b, c = np.asarray(nbytes, dtype=float), np.asarray(capacity_per_chip, dtype=float)
    if np.any(c <= 0):
        raise SpecError("chips_to_hold: capacity per chip must be > 0")
    out = np.ceil(b / c).astype(np.int64)
    return out.item() if out.ndim == 0 else out


# ---------------------------------------------------------------- MoE routing

ROUTINGS = ("uniform", "concentrated")


def moe_rows(tokens: int, top_k: int, experts: int, distribution="uniform") -> np.ndarray:
    """Rows each expert receives when ``tokens`` tokens each pick ``top_k`` of ``experts``.

    seed 004 §4.2.1, §4.3.3: tokens x top_k dispatches in total.
    ``'uniform'`` (the seed's *dispersed*) spreads them as evenly as possible
    (64 tokens x top-8 over 256 experts: 2 rows each; 8 decode tokens x 8 over
    128 experts: 64 experts with 1 row); ``'concentrated'``: every token picks
    the same ``top_k`` experts, which get ``tokens`` rows each. An explicit
    list gives each expert's row count (length ``experts``, sum tokens x top_k,
    none above ``tokens``). Returns an int array of length ``experts``.
    """
    for name, v in (("tokens", tokens), ("top_k", top_k), ("experts", experts)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < (0 if name == "tokens" else 1):
            raise SpecError(f"moe_rows: {name} must be an integer >= {0 if name == 'tokens' else 1}, got {v!r}")
    if top_k > experts:
        raise SpecError(f"moe_rows: top_k ({top_k}) must be <= experts ({experts})")
    dispatches = tokens * top_k
    if isinstance(distribution, str):
        if distribution == "uniform":
            base, extra = divmod(dispatches, experts)
            rows = np.full(experts, base, dtype=np.int64)
            rows[:extra] += 1
            return rows
        if distribution == "concentrated":
            rows = np.zeros(experts, dtype=np.int64)
            rows[:top_k] = tokens
            return rows
        raise SpecError(unknown_name("routing distribution", distribution, ROUTINGS))
    rows = np.asarray(list(distribution), dtype=np.int64)
    if rows.shape != (experts,):
        raise SpecError(f"routing: an explicit list needs one row count per expert ({experts}), got {rows.size}")
    if np.any(rows < 0) or np.any(rows > tokens):
        raise SpecError(f"routing: each expert's rows must be between 0 and tokens ({tokens})")
    if rows.sum() != dispatches:
        raise SpecError(f"routing: rows must sum to tokens x top_k = {dispatches}, got {int(rows.sum())}")
    return rows


def padded_rows(rows, quantum: int) -> np.ndarray:
    """Each expert's rows padded up to the row quantum; 0 stays 0 (seed 004 §4.2.1)."""

    return np.asarray(pad(np.asarray(rows, dtype=np.int64), quantum))


def executed_rows(rows, quantum: int) -> int:
    """Rows the matrix unit executes over all experts (seed 004 §4.2.1).

    64 tokens x top-8, quantum 16: uniform over 256 experts 256 x 16 = 4096;
    concentrated on 8 experts 8 x 64 = 512; useful rows 512 in both.
    """
    return int(np.sum(padded_rows(rows, quantum)))


# ---------------------------------------------------------------- operators


@dataclass(frozen=True)
class Op:
    """One operator kind, evaluated once and multiplied by ``count``.

    GEMM view (matrix kinds): ``batch`` independent ``[m, k] x [k, n]``
    products per count. Padded FLOPs for an instruction/tile shape are
    ``2 pad(m) pad(n) pad(k) batch`` (seed 000 "Shape tails"), except for causal
    attention, see :meth:`padded_flops`. Vector kinds have m = n = k = 0 and
    ``elements``.

    Per count (summed over batch): ``a_bytes`` (A, activations in),
    ``b_bytes`` (B: weights, KV or activations as ``b_kind`` says; for
    norm/embedding the gamma vector / gathered rows), ``c_bytes`` (output
    written); ``weight_bytes`` and ``kv_bytes`` are the parts of those that
    are weights / KV cache. ``flops``: useful, 2 per MAC. ``vector_flops``
    and ``exps``: see the module docstring. ``elem_bytes_*``: bytes per
    element of each operand (scales included) for tile working sets.
    ``causal``: which dimension is masked ('n' for QK, 'k' for PV, None),
    with query row r at position r // group of the m / group new positions,
    which sit at the end of the key range (seed 004 §4.8.2).
    """

    name: str
    kind: str
    role: str = "linear"
    m: int = 0
    n: int = 0
    k: int = 0
    batch: int = 1
    count: int = 1
    fmt: str = "bf16"
    a_fmt: str = "bf16"
    b_fmt: str = "bf16"
    c_fmt: str = "bf16"
    elem_bytes_a: float = 2.0
    elem_bytes_b: float = 2.0
    elem_bytes_c: float = 2.0
    a_bytes: float = 0.0
    b_bytes: float = 0.0
    c_bytes: float = 0.0
    b_kind: str = "weights"
    weight_bytes: float = 0.0
    kv_bytes: float = 0.0
    flops: float = 0.0
    vector_flops: float = 0.0
    exps: float = 0.0
    elements: int = 0
    causal: str | None = None
    group: int = 1

    def __post_init__(self):
        if self.kind not in KINDS:
            raise SpecError(unknown_name("operator kind", self.kind, KINDS))
        if self.role not in ROLES:
            raise SpecError(unknown_name("operator role", self.role, ROLES))
        if self.b_kind not in B_KINDS:
            raise SpecError(unknown_name("operand kind", self.b_kind, B_KINDS))
        if self.count < 1 or self.batch < 1:
            raise SpecError(f"op {self.name}: count and batch must be >= 1")
        if self.causal not in (None, "n", "k"):
            raise SpecError(f"op {self.name}: causal must be None, 'n' or 'k'")

    # -- totals over count
    @property
    def is_matrix(self) -> bool:
        return self.kind in MATRIX_KINDS

    @property
    def bytes(self) -> float:
        """a + b + c bytes per count (each tensor once)."""
        return self.a_bytes + self.b_bytes + self.c_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity flops / bytes with each tensor moved once (seed 004 §4.1.1)."""
        return self.flops / self.bytes if self.bytes else math.inf

    @property
    def total_flops(self) -> float:
        return self.flops * self.count

    @property
    def total_bytes(self) -> float:
        return self.bytes * self.count

    @property
    def macs(self) -> float:
        return self.flops / 2.0

    @property
    def positions(self) -> int:
        """New query positions per GEMM instance (m / group)."""
        return self.m // self.group if self.group else self.m

    def padded_flops(self, im, in_, ik):
        """FLOPs the matrix unit executes with shapes padded to ``im x in_ x ik`` (per count).

        seed 000 "Shape tails", seed 004 §4.2.1: ``2 pad(m) pad(n) pad(k) batch``.
        Causal attention skips whole tiles above the diagonal: for row tile t
        the masked dimension is padded up to the last visible key of its last
        row. Vectorized over numpy arrays of tile shapes; 0 for vector ops.
        """

        if not self.is_matrix:
            return np.zeros(np.broadcast(np.asarray(im), np.asarray(in_), np.asarray(ik)).shape)[()]
        im, in_, ik = (np.asarray(v).astype(np.int64) for v in (im, in_, ik))
        if self.causal is None:
            out = 2.0 * pad(self.m, im) * pad(self.n, in_) * pad(self.k, ik) * self.batch
            return np.asarray(out, dtype=float)[()]
        keys = self.n if self.causal == "n" else self.k
        other, iother = (self.k, ik) if self.causal == "n" else (self.n, in_)
        imask = in_ if self.causal == "n" else ik
        rows_cols = _causal_tile_area(self.m, keys, self.group, im, imask)
        out = 2.0 * rows_cols * pad(other, iother) * self.batch
        return np.asarray(out, dtype=float)[()]


def _causal_tile_area(m: int, keys: int, group: int, im, iv) -> np.ndarray:
    """sum over row tiles of (rows in tile, padded) x (visible keys, padded), exact."""
    im, iv = np.broadcast_arrays(np.asarray(im, dtype=np.int64), np.asarray(iv, dtype=np.int64))
    if np.any(im < 1) or np.any(iv < 1):
        raise SpecError("tile sizes must be >= 1")
    positions = m // group
    offset = keys - positions
    pairs = np.stack([im.ravel(), iv.ravel()], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    vals = np.empty(len(uniq))
    for j, (tm, tv) in enumerate(uniq):
        t = np.arange(-(-m // tm), dtype=np.int64)
        last_row = np.minimum((t + 1) * tm, m) - 1
        visible = offset + last_row // group + 1
        vals[j] = float(tm) * float(np.sum(-(-visible // tv) * tv))
    return vals[inverse.ravel()].reshape(im.shape)


def _causal_visible(m: int, keys: int, group: int) -> float:
    """Visible (query row, key) pairs of one causal instance: g sum_p (keys - P + 1 + p)."""
    p = m // group
    return float(group) * (p * (keys - p + 1) + p * (p - 1) / 2)


def gemm(name: str, m: int, n: int, k: int, batch: int = 1, count: int = 1, formats=None,
         role: str = "linear", b_kind: str = "weights") -> Op:
    """One GEMM ``[m,k] x [k,n]`` (x batch, x count) with its bytes and FLOPs (seed 004 §4.1.1).

    F = 2 M K N; V = a M K + b K N + c M N with A in ``activations``, B in
    ``weights`` (or ``kv`` / ``activations`` per ``b_kind``), C in ``output``.
    Q projection, M = 256, BF16: 8.59 GFLOPs over 36 MiB, 227.6 FLOPs/byte.
    """
    for label, v in (("m", m), ("n", n), ("k", k), ("batch", batch), ("count", count)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise SpecError(f"gemm {name}: {label} must be an integer >= 1, got {v!r}")
    f = _as_formats(formats)
    b_role = {"weights": "weights", "kv": "kv", "activations": "activations"}.get(b_kind)
    if b_role is None:
        raise SpecError(unknown_name("gemm operand kind", b_kind, ("weights", "kv", "activations")))
    if role in ("lm_head",) and b_kind == "weights":
        b_role = "embedding"
    if role == "router":
        b_role = "router"
    a_f, b_f, c_f = f.fmt("activations"), f.fmt(b_role), f.fmt("output")
    b_bytes = _matrix_bytes(k, n, b_f) * batch
    return Op(
        name=name, kind="gemm", role=role, m=int(m), n=int(n), k=int(k), batch=int(batch), count=int(count),
        fmt=f.matrix_format("activations", b_role), a_fmt=a_f.name, b_fmt=b_f.name, c_fmt=c_f.name,
        elem_bytes_a=a_f.bytes_per_value, elem_bytes_b=b_f.bytes_per_value, elem_bytes_c=c_f.bytes_per_value,
        a_bytes=float(m * k * batch) * a_f.bytes_per_value, b_bytes=b_bytes,
        c_bytes=float(m * n * batch) * c_f.bytes_per_value, b_kind=b_kind,
        weight_bytes=b_bytes if b_kind == "weights" else 0.0,
        kv_bytes=b_bytes if b_kind == "kv" else 0.0,
        flops=2.0 * m * n * k * batch,
    )


def _vector(name: str, kind: str, elements: int, flops_per: float, exps_per: float, count: int,
            a_bytes: float, c_bytes: float, a_fmt: NumberFormat, c_fmt: NumberFormat,
            weight_bytes: float = 0.0, b_fmt: NumberFormat | None = None, role: str = "vector") -> Op:
    b_fmt = b_fmt or a_fmt
    return Op(
        name=name, kind=kind, role=role, count=count, fmt=a_fmt.name, a_fmt=a_fmt.name, b_fmt=b_fmt.name,
        c_fmt=c_fmt.name, elem_bytes_a=a_fmt.bytes_per_value, elem_bytes_b=b_fmt.bytes_per_value,
        elem_bytes_c=c_fmt.bytes_per_value,
        a_bytes=a_bytes, b_bytes=weight_bytes, c_bytes=c_bytes,
        b_kind="weights" if weight_bytes else "none", weight_bytes=weight_bytes,
        vector_flops=flops_per * elements, exps=exps_per * elements, elements=int(elements),
    )


def _elementwise(name, elements, flops_per, exps_per, count, f: Formats, inputs=1, kind="elementwise"):
    act, out = f.fmt("activations"), f.fmt("output")
    return _vector(name, kind, elements, flops_per, exps_per, count,
                   a_bytes=inputs * elements * act.bytes_per_value, c_bytes=elements * out.bytes_per_value,
                   a_fmt=act, c_fmt=out)


def _norm(name, rows, width, count, f: Formats):
    act, out, nrm = f.fmt("activations"), f.fmt("output"), f.fmt("norms")
    elements = rows * width
    return _vector(name, "norm", elements, NORM_FLOPS, 0.0, count,
                   a_bytes=elements * act.bytes_per_value, c_bytes=elements * out.bytes_per_value,
                   a_fmt=act, c_fmt=out, weight_bytes=float(storage_bytes(width, nrm)),
                   b_fmt=nrm)


def attention(heads: int, kv_heads: int, head_dim: int, queries: int, context: int, requests: int = 1,
              count: int = 1, formats=None, causal: bool | None = None, prefix: str = "attn") -> tuple[Op, Op, Op]:
    """QK, softmax and PV of GQA attention: ``queries`` new positions per request over ``context`` keys.

    seed 004 §4.8.2: per KV head and request, QK is ``[g x queries, head_dim] x
    [head_dim, context]`` with g = heads / kv_heads, and PV ``[g x queries,
    context] x [context, head_dim]``; batch = kv_heads x requests. Decode
    (queries = 1) sees every key: 4 x heads x head_dim x context FLOPs per
    layer (Qwen3-8B, 8K: 4 x 36 x 8192 x 4096 = 4.832 GFLOPs over 36 layers).
    Causal (default when queries > 1): position i of the new ones sees
    context - queries + 1 + i keys, counted exactly (prefill of S tokens:
    S (S+1) / 2 pairs). K and V are read as KV cache (``kv`` format); scores
    are written in ``accumulator`` format (FP32 handoff, seed 004 §4.6.2),
    probabilities in ``activations`` format.
    """
    for label, v in (("heads", heads), ("kv_heads", kv_heads), ("head_dim", head_dim), ("queries", queries),
                     ("context", context), ("requests", requests), ("count", count)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
            raise SpecError(f"attention: {label} must be an integer >= 1, got {v!r}")
    if heads % kv_heads:
        raise SpecError(f"attention: heads ({heads}) must be a multiple of kv_heads ({kv_heads})")
    if queries > context:
        raise SpecError(f"attention: queries ({queries}) must be <= context ({context}); "
                        "the new positions are part of the context")
    f = _as_formats(formats)
    if causal is None:
        causal = queries > 1
    g = heads // kv_heads
    m = g * queries
    batch = kv_heads * requests
    visible = _causal_visible(m, context, g) if causal else float(m * context)  # per instance
    act, kv, acc, out = f.fmt("activations"), f.fmt("kv"), f.fmt("accumulator"), f.fmt("output")
    cfmt = f.matrix_format("activations", "kv")
    k_bytes = float(storage_bytes(context * head_dim, kv)) * batch
    common = dict(role="attention", batch=batch, count=count, fmt=cfmt, b_kind="kv", group=g)
    qk = Op(
        name=f"{prefix}_qk", kind="attention_qk", m=m, n=context, k=head_dim,
        a_fmt=act.name, b_fmt=kv.name, c_fmt=acc.name,
        elem_bytes_a=act.bytes_per_value, elem_bytes_b=kv.bytes_per_value, elem_bytes_c=acc.bytes_per_value,
        a_bytes=float(m * head_dim * batch) * act.bytes_per_value, b_bytes=k_bytes,
        c_bytes=visible * batch * acc.bytes_per_value, kv_bytes=k_bytes,
        flops=2.0 * visible * head_dim * batch, causal="n" if causal else None, **common,
    )
    sm = _vector(f"{prefix}_softmax", "softmax", int(visible * batch), SOFTMAX_FLOPS, SOFTMAX_EXPS, count,
                 a_bytes=visible * batch * acc.bytes_per_value, c_bytes=visible * batch * act.bytes_per_value,
                 a_fmt=acc, c_fmt=act)
    pv = Op(
        name=f"{prefix}_pv", kind="attention_pv", m=m, n=head_dim, k=context,
        a_fmt=act.name, b_fmt=kv.name, c_fmt=out.name,
        elem_bytes_a=act.bytes_per_value, elem_bytes_b=kv.bytes_per_value, elem_bytes_c=out.bytes_per_value,
        a_bytes=visible * batch * act.bytes_per_value, b_bytes=k_bytes,
        c_bytes=float(m * head_dim * batch) * out.bytes_per_value, kv_bytes=k_bytes,
        flops=2.0 * visible * head_dim * batch, causal="k" if causal else None, **common,
    )
    return qk, sm, pv


# ---------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """One step of work and the state it needs resident (seed 004 §4.3.1, §4.8.2).

    ``batch`` requests, each with ``tokens`` new positions this step and
    ``context`` positions attended at its end (decode: tokens = 1; prefill:
    tokens = context = prompt length). ``tokens_per_step``: tokens produced
    (decode: batch) or processed (prefill: batch x tokens). Resident state:
    ``weight_resident_bytes`` (every parameter), KV (batch x context x
    ``kv_bytes_per_token``), ``workspace_bytes``.
    """

    name: str
    phase: str
    ops: tuple[Op, ...]
    batch: int = 1
    tokens: int = 0
    context: int = 0
    tokens_per_step: int = 1
    weight_resident_bytes: float = 0.0
    kv_bytes_per_token: float = 0.0
    workspace_bytes: float = 0.0
    model: ModelConfig | None = field(default=None, repr=False)
    formats: Formats | None = field(default=None, repr=False)
    routing: str | tuple[int, ...] | None = None

    def __post_init__(self):
        if self.phase not in ("prefill", "decode", "ops"):
            raise SpecError(unknown_name("phase", self.phase, ("prefill", "decode", "ops")))
        names = [o.name for o in self.ops]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SpecError(f"workload {self.name}: two operators are called '{dup}'")

    def op(self, name: str) -> Op:
        """The operator called ``name`` (did-you-mean if absent)."""
        for o in self.ops:
            if o.name == name:
                return o
        raise SpecError(unknown_name("operator", name, [o.name for o in self.ops]))

    def _sum(self, attr: str, pred=lambda o: True) -> float:
        return float(sum(getattr(o, attr) * o.count for o in self.ops if pred(o)))

    # -- FLOPs (seed 004 §4.8.2)
    @property
    def total_flops(self) -> float:
        """Useful matrix FLOPs of the step (linear + attention + LM head); vector work is separate."""
        return self._sum("flops", lambda o: o.is_matrix)

    @property
    def linear_flops(self) -> float:
        """Projections, FFN, experts and router (every GEMM except the LM head)."""
        return self._sum("flops", lambda o: o.kind == "gemm" and o.role != "lm_head")

    @property
    def attention_flops(self) -> float:
        """QK and PV."""
        return self._sum("flops", lambda o: o.kind in ("attention_qk", "attention_pv"))

    @property
    def lm_head_flops(self) -> float:
        return self._sum("flops", lambda o: o.role == "lm_head")

    @property
    def vector_flops(self) -> float:
        return self._sum("vector_flops")

    @property
    def exps(self) -> float:
        return self._sum("exps")

    def padded_flops(self, im, in_, ik):
        """Executed matrix FLOPs with every GEMM padded to the ``im x in_ x ik`` shape (vectorized)."""
        total = 0.0
        for o in self.ops:
            if o.is_matrix:
                total = total + o.padded_flops(im, in_, ik) * o.count
        return total

    # -- bytes (seed 004 §4.8.2: the dominant weight- and KV-interface payload)
    @property
    def weight_bytes_read(self) -> float:
        """Weights read per step (seed 004 §4.8.2, §4.3.3).

        Each linear weight once (shared by the batch), the embedding rows of
        the step's tokens, the full LM head, the norms, the active experts.
        """
        return self._sum("weight_bytes")

    @property
    def kv_bytes_read(self) -> float:
        return self._sum("kv_bytes")

    @property
    def bytes_read(self) -> float:
        """weight_bytes_read + kv_bytes_read (activations excluded; see activation_bytes)."""
        return self.weight_bytes_read + self.kv_bytes_read

    @property
    def activation_bytes(self) -> float:
        """Every other tensor read or written once (unfused upper bound)."""
        return self._sum("bytes") - self.bytes_read

    # -- resident state (seed 004 §4.3.1)
    @property
    def kv_resident_bytes(self) -> float:
        return float(self.batch * self.context * self.kv_bytes_per_token)

    @property
    def resident_bytes(self) -> float:
        """W + B S m_KV + workspace (seed 004 §4.3.1, §4.8.2)."""
        return self.weight_resident_bytes + self.kv_resident_bytes + self.workspace_bytes

    def max_requests(self, capacity, context=None):
        """floor((C - W - workspace) / (S m_KV)) at ``context`` (default: this workload's), seed 004 §4.3.1."""
        s = self.context if context is None else context
        if not self.kv_bytes_per_token:
            raise SpecError(f"workload {self.name} has no KV cache; max_requests is undefined")
        return max_requests(capacity, self.weight_resident_bytes, self.workspace_bytes, s, self.kv_bytes_per_token)

    def summary(self) -> dict[str, float]:
        """The headline numbers, for reports and tests."""
        return {
            "total_flops": self.total_flops,
            "linear_flops": self.linear_flops,
            "attention_flops": self.attention_flops,
            "lm_head_flops": self.lm_head_flops,
            "vector_flops": self.vector_flops,
            "exps": self.exps,
            "weight_bytes_read": self.weight_bytes_read,
            "kv_bytes_read": self.kv_bytes_read,
            "bytes_read": self.bytes_read,
            "activation_bytes": self.activation_bytes,
            "weight_resident_bytes": self.weight_resident_bytes,
            "kv_resident_bytes": self.kv_resident_bytes,
            "resident_bytes": self.resident_bytes,
        }


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
                                    Lm, f, inputs=2))
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


def _routing_arg(routing):
    if isinstance(routing, str):
        if routing not in ROUTINGS:
            raise SpecError(unknown_name("routing distribution", routing, ROUTINGS))
        return routing
    return tuple(int(r) for r in routing)


def decode(model, batch: int = 1, context: int = 8192, formats=None, workspace="2 GiB",
           routing="uniform") -> Workload:
    """One decode step: ``batch`` requests each add 1 token and attend over ``context`` positions.

    seed 004 §4.8.2: context 8192 = 8191 existing + 1 new. Weights: every
    linear weight read once per step (shared by the batch), the embedding
    *rows* of the batch's tokens, the full LM head, the norms; MoE: only the
    experts that received >= 1 row under ``routing`` (seed 004 §4.3.3). KV read:
    batch x context x kv_bytes_per_token. Qwen3-8B BF16, batch 1, 8K: 13.89 +
    4.832 + 1.245 = 19.97 GFLOPs; 15.137 GB weights + 1.208 GB KV = 16.345 GB.
    """
    m = load_model(model)
    batch = _check_int("batch", batch)
    context = _check_int("context", context)
    f = _as_formats(formats)
    routing = _routing_arg(routing)
    ws = _bytes_arg("workspace", workspace)
    ops = _step_ops(m, f, batch, 1, context, routing if isinstance(routing, str) else list(routing))
    return Workload(
        name=f"{m.name}:decode:batch={batch}:context={context}", phase="decode", ops=tuple(ops),
        batch=batch, tokens=1, context=context, tokens_per_step=batch,
        weight_resident_bytes=resident_weight_bytes(m, f), kv_bytes_per_token=kv_bytes_per_token(m, f.fmt("kv")),
        workspace_bytes=ws, model=m, formats=f, routing=routing,
    )


def prefill(model, batch: int = 1, tokens: int = 4096, formats=None, workspace="2 GiB",
            routing="uniform", cached: int = 0) -> Workload:
    """Prefill ``tokens`` new tokens for each of ``batch`` requests (after ``cached`` cached positions).

    seed 004 §4.8.2: linear work grows with batch x tokens; causal attention
    counts exactly sum_{i=1..S} i visible pairs (S (S+1)/2, + S x cached with
    a cached prefix); the LM head runs on the last position only. Qwen3-8B
    BF16, 4096 tokens: 61.85 TFLOPs. KV resident afterwards: batch x (cached +
    tokens) x kv_bytes_per_token.
    """
    m = load_model(model)
    batch = _check_int("batch", batch)
    tokens = _check_int("tokens", tokens)
    cached = _check_int("cached", cached, minimum=0)
    f = _as_formats(formats)
    routing = _routing_arg(routing)
    ws = _bytes_arg("workspace", workspace)
    ctx = cached + tokens
    ops = _step_ops(m, f, batch, tokens, ctx, routing if isinstance(routing, str) else list(routing))
    name = f"{m.name}:prefill:batch={batch}:tokens={tokens}" + (f":cached={cached}" if cached else "")
    return Workload(
        name=name, phase="prefill", ops=tuple(ops),
        batch=batch, tokens=tokens, context=ctx, tokens_per_step=batch * tokens,
        weight_resident_bytes=resident_weight_bytes(m, f), kv_bytes_per_token=kv_bytes_per_token(m, f.fmt("kv")),
        workspace_bytes=ws, model=m, formats=f, routing=routing,
    )


# ---------------------------------------------------------------- specs


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
