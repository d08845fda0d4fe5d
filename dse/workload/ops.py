"""Operators: one :class:`Op` per operator kind, and the constructors that count its FLOPs and bytes.

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

Byte fields of an :class:`Op` are *per count*, summed over ``batch``: the
tensor sizes read (A, B) and written (C) once. Tile re-reads are the tiling
model's business (dse/model/tiling.py). Formats with shared scales (MX, NVFP4)
count their scales (dse.precision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError, unknown_name
from dse.model.tiling import ceil_div_core, pad, pad_core
from dse.precision import NumberFormat, storage_bytes
from dse.workload.formats import Formats, _as_formats, _matrix_bytes

KINDS = ("gemm", "attention_qk", "attention_pv", "softmax", "norm", "elementwise", "embedding")
MATRIX_KINDS = ("gemm", "attention_qk", "attention_pv")
ROLES = ("linear", "lm_head", "router", "expert", "shared_expert", "attention", "vector", "embedding")
B_KINDS = ("weights", "kv", "activations", "none")

# Vector work per element (see the module docstring).
SOFTMAX_FLOPS, SOFTMAX_EXPS = 5.0, 1.0
NORM_FLOPS = 4.0
SWIGLU_FLOPS, SWIGLU_EXPS = 4.0, 1.0
ROPE_FLOPS = 3.0
RESIDUAL_FLOPS = 1.0
COMBINE_FLOPS = 2.0


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


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """sum_{i=0}^{n-1} floor((a i + b) / m) for n >= 0 and m >= 1, exact, in O(log m) steps (the Euclid-like
    reduction of a floor sum of a linear function: a and b reduced mod m, then the roles of a and m swapped)."""
    total = 0
    while n > 0:
        q, a = divmod(a, m)
        total += q * (n * (n - 1) // 2)
        q, b = divmod(b, m)
        total += q * n
        y_max = a * n + b
        if y_max < m:
            break
        n, b, m, a = y_max // m, y_max % m, a, m
    return total


def _causal_tile_area(m: int, keys: int, group: int, im, iv) -> np.ndarray:
    """sum over row tiles of (rows in tile, padded) x (visible keys, padded), exact.

    Row tile t of T = ceil(m / tm) ends at row min((t + 1) tm, m) - 1 and sees v_t = offset + last_row // g + 1
    keys, padded to ceil(v_t / tv) tv. For the full tiles t < T - 1, ceil(v_t / tv) = floor((tm t + tm - 1 +
    (offset + tv) g) / (g tv)) (a floor of a floor is the floor of the product of the divisors), a floor sum
    computed in closed form; the last tile ends at row m - 1. O(log) per tile shape, whatever m is (a loop over
    the row tiles needed 4 PiB for 2**53 tokens, issue 21 item 6).
    """
    im, iv = np.broadcast_arrays(np.asarray(im, dtype=np.int64), np.asarray(iv, dtype=np.int64))
    if np.any(im < 1) or np.any(iv < 1):
        raise SpecError("tile sizes must be >= 1")
    m, keys, group = int(m), int(keys), int(group)
    positions = m // group
    offset = keys - positions
    pairs = np.stack([im.ravel(), iv.ravel()], axis=1)
    uniq, inverse = np.unique(pairs, axis=0, return_inverse=True)
    vals = np.empty(len(uniq))
    for j, (tm, tv) in enumerate(uniq):
        tm, tv = int(tm), int(tv)
        tiles = -(-m // tm)
        full = _floor_sum(tiles - 1, group * tv, tm, tm - 1 + (offset + tv) * group)
        last = -(-(offset + (m - 1) // group + 1) // tv)
        vals[j] = float(tm) * float((full + last) * tv)
    return vals[inverse.ravel()].reshape(im.shape)


def _causal_tile_area_by_tile(m: int, keys: int, group: int, tm: int, tv: int) -> float:
    """The sum of :func:`_causal_tile_area` tile by tile (the definition; tests compare the two)."""
    t = np.arange(ceil_div_core(m, tm), dtype=np.int64)
    last_row = np.minimum((t + 1) * tm, m) - 1
    visible = keys - m // group + last_row // group + 1
    return float(tm) * float(np.sum(pad_core(visible, tv)))


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


def _elementwise(name, elements, flops_per, exps_per, count, f: Formats, inputs=1, kind="elementwise",
                 role="vector"):
    act, out = f.fmt("activations"), f.fmt("output")
    return _vector(name, kind, elements, flops_per, exps_per, count,
                   a_bytes=inputs * elements * act.bytes_per_value, c_bytes=elements * out.bytes_per_value,
                   a_fmt=act, c_fmt=out, role=role)


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
