"""The evaluator: N design points x one workload -> time, energy, power, clock, capacity, per operator.

The public join :func:`dse.evaluate.evaluate_design` calls
:func:`evaluate_workload` for each workload of a mix and adds area and cost;
solvers, the what-if, `dse eval` and calibration go through that join.
Shapes: chips are (N,) arrays, operators (O,) arrays; the work is (N, O)
numpy broadcasting, identical layers evaluated once and multiplied by their
count (ARCHITECTURE rule 2).

Per operator (seed 004 §4.8.1: overlapped resources take the max, work on
one resource adds, dependent stages add):
    t_matrix = padded, wave-quantized FLOPs / (units x FLOP/cycle x sustained clock x eff)
    t_vector = vector FLOPs / vector rate + exps / exp rate
    t_memory = off-chip bytes / min(bandwidth x eff, Little's-law cap); with a memory-side cache, the longer of
               that and what the L2s miss / the cache's bandwidth (off-chip bytes: the reads below the cache,
               dse.model.tiling.cache_reads; L2s private to each die with l2_scope: die)
    t_l2     = what the local buffers read from the L2 / (L2 bytes/cycle x dies x sustained clock)
    t_local  = what the matrix units read from their local buffers / (bytes/cycle x units x sustained clock),
               wave-quantized like t_matrix                                  (dse.model.hierarchy)
    t_op     = max(t_matrix, t_vector, t_memory, t_l2, t_local)   (kernel launches overlap device time)
    step     = max(sum of count x t_op, launches) + step overhead + scale-up links
                 (tensor parallel: all-reduces by the cheapest algorithm of the topology, and expert
                 parallel: two all-to-alls per MoE layer; dse.model.links.collective / alltoall_time; with
                 random routing the experts' operators wait for the most loaded chip, dse.model.experts)
    pipeline = m micro-batches through p stages and the p - 1 hops between them:
                 p t_s + (p - 1) t_h + (m - 1) max(t_s, t_h)      (dse.model.pipeline.flow_core; GPipe)
                 t_s = one micro-batch's work / p, t_h = alpha + activations / R (seed 004 §4.5.3)

Energy sums every level: the datapath's FLOPs, the register files (each instruction's operand and
accumulator bytes x energy.register_file), the local buffer (fills and the matrix unit's reads), the L2 (what
the local buffers read), the memory-side cache (what the L2s miss), main memory, the links, and static power
over the time.

Each rule is written once, in the module of its kind, and called from here (and from the CP-SAT data
steps and dse.workload): padding, output tiles, waves, working sets, L2-panel re-reads, tile requests
and split-K partial sums in :mod:`dse.model.tiling`; the on-chip levels' traffic (register files, local
buffer reads by register tile, L2 requests with multicast) in :mod:`dse.model.hierarchy`; Little's law,
alpha-beta transfers, the collectives by topology in :mod:`dse.model.links`; the most loaded chip of expert
parallelism in :mod:`dse.model.experts`; the flow of micro-batches in
:mod:`dse.model.pipeline`; the sustained clock under the power ceiling, average and static
power in :mod:`dse.model.power`; resident bytes, fits and max batch in :mod:`dse.model.capacity`.

Lower bounds the seeds quote, as columns beside the modelled time:
    t_matrix_ideal_s       useful FLOPs / peak rate (no padding, waves, throttling)
    t_memory_compulsory_s  every tensor moved once (no re-reads) / bandwidth
    t_roofline_s           sum over operators of max(the two above)   (seed 004 §4.8.1)
    t_read_s               weight + KV bytes / bandwidth: the read lower bound of a
                           decode step (seed 004 §4.8.2, §4.6.3; §4.7.3 with a weight ROM)

Capacity and tiles: ``max_batch`` is the number of requests that fit, never negative (0 where the
weights do not fit, inf without a KV cache; dse.model.capacity); ``tile_working_set_bytes`` the largest
double-buffered working set of the tiles over the GEMM-like operators (the buffer_fit constraint).

Speed (it is the inner loop of every search): a chip input that is the same
for every point (the base chip's value where a search does not vary it) is
kept as one (1, 1) value and broadcast, so only what varies is computed per
point (Chips hold such a figure once, a view of stride 0, so that is known
without reading it: dse.hardware.chips.same_at_every_point, Chips.compact); the
N points are evaluated in blocks that stay in the CPU cache. The
arithmetic per element is the same either way, so N points at once give the
same numbers as one at a time. Identical operators are evaluated once without a
breakdown (:func:`_merged`). The per-element chains run as compiled kernels over
a block (dse.model.jit: the default tiles, the tiles' traffic, the cache reads,
main memory's bytes and times, the compute energy, the design-clock and
sustained times, the power ceiling's bisection, the operating points and their
sums, the largest working set), from the same rules numpy runs
(tests/model/test_jit.py); a block of one operator per point (a GEMM alone)
compiles each kernel once more with its per-operator values as numbers
(jit.of_op), so that its loop along the points runs on the vector lanes; a
block of several operators per point without a breakdown runs from the design
clock's times on point by point in two kernels (_clock_kernel, _tail_kernel:
the same rules, without the block's (points x operators) arrays between the
passes; tests/test_evaluate_fast.py compares them with the passes), and a
block of one operator from the sustained clock on in the tail kernel's one
pass along the points (a kernel stores all its results in one pass where
LLVM may check the arrays apart: jit.LLVM_OPTIONS). An
input that is one value or one row of operators at every point is laid over
the points once and shared (jit.filled); the sums over operators run on the
vector lanes in an order of their own, the same for every row (_sums_kernel).
Points alike in what a rule reads are evaluated once where at least half the
points repeat (jit.distinct): the default tiles (compared in cycles, so the
clock does not enter them) and their traffic by class of points, the cache
re-reads and the working set by set of points with the same tiles, laid over
the points only where a later rule reads them per point; the package area
and the power model's sums of its parts (dse.model.area.package_area,
part_sets_for), the chip's power figures then laid over the points in one
compiled pass (_chip_power_kernel). A result of one value at every point comes
back as that value laid over the points (read-only, stride 0).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dse.errors import SpecError
from dse.hardware import Chips
from dse.hardware.chips import over_points, same_at_every_point
from dse.model import (area as area_mod, capacity as cap_rules, experts, hierarchy, jit, links, pipeline,
                       power as pw, tiling)
from dse.model.args import nan_to_num
from dse.model.power import MIN_CLOCK_RATIO
from dse.model.tiling import ceil_div_core, pad_core as _pad
from dse.precision import get_format, quant_error

RESOURCES = ("matrix", "vector", "memory", "l2", "local")
#: The bound resource of an operator or a design, by its code (0 .. 4): the on-chip levels after main memory.
BOUND_NAMES = np.array(["compute", "vector", "memory", "l2", "local"])

# fall-back order when a chip lacks a format: run it on the next wider format the chip has
_WIDER = ["int4", "mxfp4", "nvfp4", "mxfp6", "mxfp6_e3m2", "fp8_e4m3", "fp8_e5m2", "mxfp8", "mxfp8_e5m2", "int8",
          "fp16", "bf16", "tf32", "fp32"]

#: (point x operator) elements per block: big enough to amortize numpy's per-call cost (measured best at 2^17 once
#: the temporaries stopped coming back as fresh pages, see _MALLOC_SETTINGS; 2^15 before)
_BLOCK_ELEMENTS = 1 << 17
#: the operators a point of :func:`_clock_kernel` and :func:`_tail_kernel` can have: the length of their scratch rows
#: (jit.SCRATCH_ROW; more take the passes)
_ROW = jit.SCRATCH_ROW
#: a block of several operators per point without a breakdown: its times at the design clock and its operating
#: points by :func:`_clock_kernel`, and where it has no die-to-die placement and no expert-parallel load, what
#: follows by :func:`_tail_kernel` (point by point, without the (points x operators) arrays of the passes they
#: stand for); a block of one operator (a GEMM alone) likewise, its operating points by the passes (on the vector
#: lanes along the points); False: always by the passes (tests/test_evaluate_fast.py compares the two)
_FUSED = True

#: glibc malloc settings the evaluator sets once (``DSE_MALLOC_TUNING=0`` leaves the allocator alone): arrays up
#: to 32 MiB from the heap instead of fresh mmap()s, and up to 512 MiB of freed heap kept instead of returned to
#: the system. With glibc's defaults every block's (points x operators) temporaries and every call's (N,) outputs
#: came back as fresh pages: ~25% of a call's CPU time was the kernel zeroing pages (docs/evaluator-speed.md).
_MALLOC_SETTINGS = ((-3, 32 << 20), (-1, 512 << 20))  # (M_MMAP_THRESHOLD, bytes), (M_TRIM_THRESHOLD, bytes)
_malloc_tuned = False


def _tune_allocator() -> None:
    """Apply :data:`_MALLOC_SETTINGS` once per process (glibc only; a no-op elsewhere or where it fails)."""
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    import os
    import sys
    if not sys.platform.startswith("linux") or os.environ.get("DSE_MALLOC_TUNING", "1") == "0":
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        mallopt = getattr(libc, "mallopt", None)
        if mallopt is not None and getattr(libc, "gnu_get_libc_version", None) is not None:
            for param, value in _MALLOC_SETTINGS:
                mallopt(ctypes.c_int(param), ctypes.c_int(value))
    except OSError:  # (no C library to load: leave it)
        pass


@dataclass(frozen=True)
class OpTable:
    """A workload's operators as (O,) arrays (built once per workload)."""

    names: tuple[str, ...]
    kinds: tuple[str, ...]
    formats: tuple[str, ...]
    count: np.ndarray
    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    batch: np.ndarray
    flops: np.ndarray
    a_bytes: np.ndarray
    b_bytes: np.ndarray
    c_bytes: np.ndarray
    weight_bytes: np.ndarray
    kv_bytes: np.ndarray
    vector_flops: np.ndarray
    exps: np.ndarray
    ea: np.ndarray  # bytes per element of A, B, C
    eb: np.ndarray
    ec: np.ndarray
    emax: np.ndarray  # the wider of A's and B's element sizes (default tiles, local-buffer bytes)
    is_gemm: np.ndarray
    a_gemm: np.ndarray  # A and B bytes of GEMM-like operators, 0 for the others (L2-panel re-reads)
    b_gemm: np.ndarray
    gemm_cols: np.ndarray  # indices of the GEMM-like operators
    on_chip_a: np.ndarray  # operand A / output C stay on chip (fused attention: scores, probabilities)
    on_chip_c: np.ndarray
    causal_ops: tuple  # (column, Op) of causal attention operators: padded FLOPs skip masked tiles
    rate_keys: tuple[str, ...] = ()  # the matrix-rate key of each operator: its format, or "narrow|wide"
    attn_groups: tuple = ()  # (QK, softmax, PV) columns of each fused attention block (their blocks pipeline)
    dequant_flops: np.ndarray | None = None  # vector FLOPs to dequantize the narrow operand (that path only)


@functools.lru_cache(maxsize=128)
def op_table(workload, fused: bool = True) -> OpTable:
    """Operator arrays; ``fused``: attention scores and probabilities stay on chip (FlashAttention-style
    kernels, seed 004 §4.4.3 direct handoff), so QK output, softmax and PV input cost no memory traffic."""
    ops = workload.ops

    def arr(attr, default=0.0):
        return np.array([float(getattr(o, attr, default) or 0.0) for o in ops], dtype=float)

    m, n, k = arr("m"), arr("n"), arr("k")
    ea, eb = arr("elem_bytes_a", 2.0), arr("elem_bytes_b", 2.0)
    a_bytes, b_bytes = arr("a_bytes"), arr("b_bytes")
    is_gemm = (m > 0) & (n > 0) & (k > 0)
    kinds = [o.kind for o in ops]
    # the softmax of an attention block (QK, softmax, PV in a row; not the router's or the sampler's)
    attn_softmax = [0 < i < len(ops) - 1 and kind == "softmax" and kinds[i - 1] == "attention_qk"
                    and kinds[i + 1] == "attention_pv" for i, kind in enumerate(kinds)]
    return OpTable(
        names=tuple(o.name for o in ops),
        kinds=tuple(o.kind for o in ops),
        formats=tuple(get_format(o.fmt).name if getattr(o, "fmt", None) else "bf16" for o in ops),
        count=arr("count", 1.0),
        m=m, n=n, k=k,
        batch=np.maximum(arr("batch", 1.0), 1.0),
        flops=arr("flops"),
        a_bytes=a_bytes, b_bytes=b_bytes, c_bytes=arr("c_bytes"),
        weight_bytes=arr("weight_bytes"), kv_bytes=arr("kv_bytes"),
        vector_flops=arr("vector_flops"), exps=arr("exps"),
        ea=ea, eb=eb, ec=arr("elem_bytes_c", 2.0), emax=np.maximum(ea, eb),
        is_gemm=is_gemm, a_gemm=np.where(is_gemm, a_bytes, 0.0), b_gemm=np.where(is_gemm, b_bytes, 0.0),
        gemm_cols=np.flatnonzero(is_gemm),
        on_chip_a=np.array([fused and (o.kind == "attention_pv" or sm) for o, sm in zip(ops, attn_softmax)]),
        on_chip_c=np.array([fused and (o.kind == "attention_qk" or sm) for o, sm in zip(ops, attn_softmax)]),
        causal_ops=tuple((i, o) for i, o in enumerate(ops) if getattr(o, "causal", None)),
        rate_keys=tuple(_rate_key(o) for o in ops),
        attn_groups=tuple((i - 1, i, i + 1) for i, sm in enumerate(attn_softmax) if fused and sm),
        dequant_flops=np.array([_dequant_flops(o) for o in ops], dtype=float),
    )


#: Rows of A per pass over B in a dequantizing kernel: each output-row tile dequantizes the B tiles it reads
#: once (est.: the 128-row tiles of W4A16 kernels such as Marlin; seed 004 §4.2.4 names the vector work, not
#: its count)
DEQUANT_ROWS = 128
#: Vector FLOPs to dequantize one value: a scale multiply and a convert (seed 004 §4.2.4: "scale and convert")
DEQUANT_FLOPS_PER_VALUE = 2.0


def _mixed(o) -> tuple[str, str] | None:
    """(narrow, wide) formats of a matrix operator whose B operand (weights, KV) is narrower than A and is its
    compute format (weight-only quantization, seed 004 §4.2.4), else None."""
    if not (getattr(o, "m", 0) > 0 and getattr(o, "n", 0) > 0 and getattr(o, "k", 0) > 0):
        return None
    fmt, a, b = (get_format(x).name for x in (o.fmt, o.a_fmt, o.b_fmt))
    if fmt != b or a == b or get_format(b).bits_per_value >= get_format(a).bits_per_value:
        return None
    return b, a


def _rate_key(o) -> str:
    mixed = _mixed(o)
    return f"{mixed[0]}|{mixed[1]}" if mixed else (get_format(o.fmt).name if getattr(o, "fmt", None) else "bf16")


def _dequant_flops(o) -> float:
    """Vector FLOPs of the dequantizing path: every B value scaled and converted once per DEQUANT_ROWS rows."""
    if _mixed(o) is None:
        return 0.0
    return DEQUANT_FLOPS_PER_VALUE * o.k * o.n * o.batch * math.ceil(o.m / DEQUANT_ROWS)


@functools.lru_cache(maxsize=64)
def _fallback_chain(fmt: str) -> tuple[str, ...]:
    """``fmt``, then the formats a chip without it runs it on, in order of preference (seed 004 §4.2.4).

    First the formats at least as wide (element bits, the narrowest first, in the order of _WIDER): a float
    format runs on a float format (FP8 weights on an A100 are up-converted and multiplied in FP16/BF16; a
    BF16 model on V100 runs on its FP16 tensor cores, a format of the same width), never on integer units
    while the chip has a float format (INT8 units cannot multiply FP8 values); an integer format runs on a
    wider integer format, or on a float format whose significand holds its values (INT8 on FP16/BF16, INT4
    also on FP8 E4M3). A format outside _WIDER (a grouped INT4 such as int4_g128) falls back by its width
    like the others: INT4 group formats run on INT4, INT8, FP8 or FP16 units, never first on FP32. Last
    resort, for a chip that has none of those (a BF16 model on the INT8-only TPU v1): any other format,
    widest first -- the model quantized to what the chip runs.
    """
    src = get_format(fmt)
    bits = {f: get_format(f).element_bits for f in _WIDER}
    wider = [f for f in _WIDER if f != fmt and bits[f] >= src.element_bits]
    wider.sort(key=lambda f: bits[f] != src.element_bits)  # (stable) the same width first: BF16 on FP16
    def ok(f):
        dst = get_format(f)
        if src.kind == "float":
            return dst.kind == "float"
        return dst.kind == "int" or dst.mantissa_bits + 1 >= src.element_bits - 1

    narrower = [f for f in reversed(_WIDER) if f != fmt and f not in wider]  # the widest first
    chain = ([fmt] + [f for f in wider if ok(f)] + [f for f in narrower if ok(f)]
             + [f for f in reversed(_WIDER) if f != fmt and not ok(f)])
    return tuple(chain)


def _format_rate(chips: Chips, fmt: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """FLOPs/cycle/unit, J/FLOP and bytes per value each point runs ``fmt`` at: its own rate, else the first
    format of :func:`_fallback_chain` it has (seed 004 §4.2.4); 0 where it has none."""
    n = chips.n
    rate = energy = nbytes = done = None  # (made where a point falls back: the first format every point has is the
    # common case, one pass over the points)
    for f in _fallback_chain(fmt):
        fp = chips.flops_per_cycle(f)
        if done is None:  # (no point has found its format yet)
            one = same_at_every_point(fp)
            if ((fp[:1] if one else fp) > 0).all():  # every point has it
                return (over_points(fp[:1] if one else fp.copy(), n), over_points(
                    chips.compact(f"energy.flop.{f}", 0.0), n), over_points(_value_bytes(f), n))
            if one:  # (no point has it)
                continue
            rate, energy, nbytes, done = np.zeros(n), np.zeros(n), np.full(n, _value_bytes(fmt)), np.zeros(n, bool)
        ok = ~done & (fp > 0)
        if ok.any():
            rate[ok] = fp[ok]
            energy[ok] = chips.get(f"energy.flop.{f}", 0.0)[ok]
            nbytes[ok] = _value_bytes(f)
            done |= ok
        if done.all():
            break
    if done is None:  # (no point has any)
        return np.zeros(n), np.zeros(n), np.full(n, _value_bytes(fmt))
    return rate, energy, nbytes


@functools.lru_cache(maxsize=64)
def _value_bytes(fmt: str) -> float:
    """Bytes of one value of ``fmt`` (block scales included), the register-file bytes of its operands."""
    return get_format(fmt).bits_per_value / 8.0


def matrix_rate(chips: Chips, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """FLOPs/cycle/unit, J/FLOP of the datapath, the dequantizing flag (1 / 0) and the bytes per operand value
    each point runs an operator of rate key ``key`` (OpTable.rate_keys) at.

    A format: :func:`_format_rate`. ``narrow|wide`` (weight-only quantization, seed 004 §4.2.4), chosen per
    chip: a native low-precision matrix path where the chip has the narrow format itself (the activations
    converted on the fly), else the narrow operand is dequantized to the wide format (its vector work,
    OpTable.dequant_flops) and multiplied there.
    """
    fmt, _, wide = key.partition("|")
    r, e, b = _format_rate(chips, fmt)
    dq = over_points(0.0, chips.n)
    if wide:
        native = chips.flops_per_cycle(fmt) > 0
        if not native.all():
            rw, ew, bw = _format_rate(chips, wide)
            r, e, b, dq = (np.where(native, r, rw), np.where(native, e, ew), np.where(native, b, bw),
                           (~native).astype(float))
    return r, e, dq, b


def register_bytes_per_flop(chips: Chips, elem_bytes) -> np.ndarray:
    """Register-file bytes per matrix FLOP of each point's instruction at operand size ``elem_bytes``
    (:func:`dse.model.hierarchy.register_bytes_per_flop` of the instruction's K at that size,
    :func:`dse.model.hierarchy.instruction_k`)."""
    one = np.asarray(elem_bytes, dtype=float)
    one = one[:1] if one.ndim == 1 and same_at_every_point(one) else one
    ik = hierarchy.instruction_k(chips.compact("matrix.instruction.k", 16), one, chips.compact("matrix.systolic", 0.0))
    return over_points(hierarchy.register_bytes_per_flop(
        chips.compact("matrix.instruction.m", 16), chips.compact("matrix.instruction.n", 16), ik, one), chips.n)


def _l2_request_bytes(ops: OpTable, c_m, c_n, mcast, visible, partial):
    """:func:`l2_request_bytes` of every operator of ``ops`` (arrays broadcast)."""
    with jit.quiet():
        return _l2_request_gu(ops.a_bytes, ops.b_bytes, ops.c_bytes, ops.is_gemm, ops.on_chip_a, ops.on_chip_c, c_m,
                              c_n, mcast, visible, partial)


@jit.rule
def l2_request_bytes(a_bytes, b_bytes, c_bytes, is_gemm, on_chip_a, on_chip_c, c_m, c_n, mcast, visible, partial):
    """Bytes the local buffers read from the L2 (dse.model.hierarchy), one operator: each output tile's A and B
    panels, the requests shared by multicast within a cluster of units, C written once and the split-K partial
    sums; operands that stay on chip (fused attention's scores and probabilities) never pass through it, causal
    attention requests the keys of its visible tiles only, and a fused attention kernel keeps its query tile
    in the local buffer over the whole key loop (FlashAttention, Dao et al. 2022): QK's A operand is requested
    once. Vector operators read their inputs and write their outputs once. (Numbers; flags 0 / 1.)"""
    a_l2, b_l2 = l2_operands(a_bytes, b_bytes, on_chip_a, visible)
    r2a, r2b = 1.0, 1.0  # (a vector operator has no panels: its inputs once)
    if is_gemm > 0.5:
        r2a, r2b = hierarchy.cluster_requests_core(a_l2, b_l2, c_m, c_n, mcast)
    return l2_request_total(a_l2, b_l2, r2a, r2b, b_bytes, c_bytes, is_gemm, on_chip_c, partial)


@jit.rule
def l2_operands(a_bytes, b_bytes, on_chip_a, visible):
    """The A and B bytes whose panels the L2 serves (:func:`l2_request_bytes`)."""
    return jit.where(on_chip_a > 0.5, 0.0, a_bytes), b_bytes * visible


@jit.rule
def l2_request_total(a_l2, b_l2, r2a, r2b, b_bytes, c_bytes, is_gemm, on_chip_c, partial):
    """:func:`l2_request_bytes` from the panels' request counts."""
    r2a = jit.where(on_chip_c > 0.5, 1.0, r2a)
    c_l2 = jit.where(on_chip_c > 0.5, 0.0, c_bytes)
    return jit.where(is_gemm > 0.5, a_l2 * r2a + b_l2 * r2b, a_l2 + b_bytes) + c_l2 + partial


@jit.elementwise(11, 1)
def _l2_request_gu(a_bytes, b_bytes, c_bytes, is_gemm, on_chip_a, on_chip_c, c_m, c_n, mcast, visible, partial, out):
    out[0] = l2_request_bytes(a_bytes, b_bytes, c_bytes, is_gemm, on_chip_a, on_chip_c, c_m, c_n, mcast, visible,
                              partial)


@jit.rule
def padded_gemm_flops(m, n, k, batch, im, inn, ik):
    """FLOPs of a GEMM-like operator in whole instructions (seed 000 "Shape tails"). The kernel puts the
    GEMM's smaller side where the instruction tile is narrower (C^T = B^T A^T, as BLAS libraries do for skinny
    products: a 1-row decode GEMM pads to n = 8 rows, not m = 64, on Hopper)."""
    mn = jit.minimum(_pad(m, im) * _pad(n, inn), _pad(n, im) * _pad(m, inn))
    return 2.0 * mn * _pad(k, ik) * batch


def _padded_gemm_flops(ops: OpTable, im, inn, ik):
    """:func:`padded_gemm_flops` of every operator of ``ops``."""
    return padded_gemm_flops(ops.m, ops.n, ops.k, ops.batch, im, inn, ik)


def _tiles(im, inn, ik, buf, units, l2, acc, ops: OpTable, levels, laid: bool = True):
    """Default tiles (T_M, T_N, T_K, split) from per-point columns ((1, 1) or (rows, 1)); see :func:`default_tiles`.
    ``levels`` (:func:`_tile_levels`): the matrix rate per unit (FLOP / cycle, (operators, points or 1)) and the
    on-chip levels (dse.model.hierarchy) the candidate tilings of a small grid are compared on: (unit FLOP / cycle,
    L2 B / cycle or 0, a unit's local B / cycle or 0, R_M (0: systolic), R_N, multicast). T_M, T_N and split come
    back (rows, O), the L2 bytes each operator requests with them (:func:`l2_request_bytes`, every tile visible),
    and the points' classes: (first, inverse) of jit.distinct (points of a class have the same inputs; None where
    too few points repeat to evaluate them once). Not ``laid``: where there are classes, T_M, T_N, split and the L2
    bytes come back one row per class ((classes, O), not laid over the points)."""
    unit_rate, l2_rate, loc_rate, rm, rn, mcast = levels
    inputs = (im, inn, ik, buf, units, l2, l2_rate, loc_rate, rm, rn, mcast, acc)
    rows = max(max(np.shape(x)[0] for x in inputs), unit_rate.shape[1])
    O = len(ops.names)
    op = np.empty((O, 13))
    for j, x in enumerate((ops.m, ops.n, ops.k, ops.batch, ops.emax, ops.ea, ops.eb, ops.is_gemm, ops.a_bytes,
                           ops.b_bytes, ops.c_bytes, ops.on_chip_a, ops.on_chip_c)):
        op[:, j] = x
    inverse, classes, pick = _EVERY_POINT, _ONE_CLASS, None
    if rows > 1:  # points with the same inputs have the same tiles: each set of inputs once (jit.distinct)
        keys = [x[:, 0] for x in inputs if np.shape(x)[0] > 1] + ([unit_rate] if unit_rate.shape[1] > 1 else [])
        alike = jit.distinct(keys, most=rows // 2)  # (worth it where at least half the points repeat)
        classes = alike
        if alike is not None:
            pick, inverse = alike
    n = rows if pick is None else pick.size
    point = np.empty((12, n))  # (the kernel's loops run along the points: one contiguous row per input)
    for j, x in enumerate(inputs):
        point[j] = x[:, 0] if x.shape[0] == 1 or pick is None else x[pick, 0]
    rate = unit_rate if pick is None or unit_rate.shape[1] == 1 else unit_rate[:, pick]
    if not (rate.shape == (O, n) and rate.flags.c_contiguous and rate.flags.writeable):
        rate = np.array(np.broadcast_to(rate, (O, n)), order="C")  # (one compiled signature: writable)
    tm, tn, split, l2_bytes = _default_tiles_kernel(point, op, rate, _EVERY_POINT if not laid else inverse)
    return tm, tn, 4 * ik, split, l2_bytes, classes


#: the default tiles' kernel's ``inverse`` where it evaluates every point (none repeats another)
_EVERY_POINT = np.empty(0, dtype=np.int64)
#: the classes of points whose tiles' inputs are those of every point: (first, inverse) of one class
_ONE_CLASS = (np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64))


@jit.rule
def tile_candidates(im, inn, ik, buf, units, l2, acc, m, n, k, batch, emax):
    """The default tiles' three candidates for one operator on one point (numbers or arrays; the rule:
    :func:`default_tiles`): (T_M, T_N, split) of the largest square tile of whole instruction tiles whose
    double-buffered working set (the wider operand's element size, an FP32 accumulator; T_K = 4 instruction
    k-steps) fills the buffer, clamped to the padded operator, with split-K spreading a too-small grid over the
    units no further than the L2 (``l2``) holds partial sums; the same for the smaller square tile that spreads
    the grid over the units; and for the largest wide tile T x 2T that fits (T <= 128). On a chip with a
    separate accumulator store of ``acc`` bytes per unit (TPU accumulators, TMEM, PSUM, L0C; 0: none) the
    accumulator tile lives there, as in the CP-SAT tile model (dse.solvers.cpsat_tiles, "buffer"): the operands
    alone fill the buffer and 4 T_M T_N <= acc."""
    tk = 4.0 * ik
    store = acc > 0.0
    t = tiling.square_tile_core(jit.maximum(buf, 16.0 * 1024.0), tk, emax,
                                jit.where(store, 0.0, tiling.ACCUMULATOR_BYTES), 2.0)
    t = jit.where(store, jit.minimum(t, np.sqrt(acc / tiling.ACCUMULATOR_BYTES)), t)
    q = jit.maximum(im, inn)
    t = jit.minimum(jit.maximum(np.floor(t / q) * q, q), 256.0)
    tm = jit.minimum(t, _pad(jit.maximum(m, 1.0), im))
    tn = jit.minimum(t, _pad(jit.maximum(n, 1.0), inn))
    cap = jit.minimum(jit.maximum(ceil_div_core(k, tk), 1.0), tiling.partial_sum_splits(l2, m, n, batch))
    split = _filling_split(units, m, n, tm, tn, batch, cap)
    t_par = np.sqrt(jit.maximum(_pad(m, im) * _pad(n, inn) * batch, 1.0) / units)
    t2 = jit.minimum(t, jit.maximum(np.floor(t_par / q) * q, q))
    tm2 = jit.minimum(t2, _pad(jit.maximum(m, 1.0), im))
    tn2 = jit.minimum(t2, _pad(jit.maximum(n, 1.0), inn))
    split2 = _filling_split(units, m, n, tm2, tn2, batch, cap)
    # the wide tile T x 2T (CUTLASS's 128 x 256 Hopper GEMMs): the largest whose working set fits, its sides at
    # most the square's 256; where the buffer holds no square of the next instruction multiple (H100: 128 x 128),
    # it re-reads one operand half as often
    a = tiling.tile_side_core(jit.maximum(buf, 16.0 * 1024.0), tk, emax,
                              jit.where(store, 0.0, tiling.ACCUMULATOR_BYTES), 2.0, 2.0)
    a = jit.where(store, jit.minimum(a, np.sqrt(acc / (2.0 * tiling.ACCUMULATOR_BYTES))), a)
    a = jit.minimum(jit.maximum(np.floor(a / q) * q, q), 128.0)
    tm3 = jit.minimum(a, _pad(jit.maximum(m, 1.0), im))
    tn3 = jit.minimum(2.0 * a, _pad(jit.maximum(n, 1.0), inn))
    split3 = _filling_split(units, m, n, tm3, tn3, batch, cap)
    return tm, tn, split, tm2, tn2, split2, tm3, tn3, split3


@jit.rule
def _filling_split(units, m, n, tm, tn, batch, cap):
    """The split-K that spreads a tiling's grid over the units (floor(units / tiles), at least 1), at most ``cap``."""
    return jit.minimum(jit.maximum(np.floor(units / jit.maximum(tiling.output_tiles(m, n, tm, tn, batch), 1.0)), 1.0),
                       cap)


@jit.rule
def choose_tile(first, second, third, units, im, inn, ik, m, n, k, batch, ea, eb, a_l2, b_l2, b_bytes, c_bytes,
                on_chip_c, unit_rate, l2_rate, loc_rate, rm, rn):
    """(T_M, T_N, split) of a GEMM-like operator from its three :func:`tile_candidates`, each (T_M, T_N, split,
    r2a, r2b) with its L2 requests per operand (``r2a``, ``r2b``: :func:`dse.model.hierarchy.cluster_requests_core`
    of :func:`l2_operands`). (Tuples: a call of more than 30 arguments compiles as a call with ``*args``, which
    numba does not inline.)

    Each candidate with its best split-K (:func:`_best_split`), on the matrix and the on-chip levels' times (in
    s at rates in /s, in cycles at rates per cycle: the evaluator's, :func:`_tile_levels`); the
    smaller tile only where the square tile's grid is smaller than the units, and only where it is faster (so
    adding units never slows an operator down: for a fixed tile, waves = ceil(work / units) only falls); the
    wide tile where it is faster than the one of those two taken."""
    tm, tn, split, r2a, r2b = first
    tm2, tn2, split2, r2a2, r2b2 = second
    tm3, tn3, split3, r2a3, r2b3 = third
    pad_flops = padded_gemm_flops(m, n, k, batch, im, inn, ik)
    p = jit.where(l2_rate > 0, tiling.partial_sum_bytes(m, n, batch, 2.0) / jit.where(l2_rate > 0, l2_rate, 1.0), 0.0)
    k1 = jit.maximum(k, 1.0)
    tiles = tiling.output_tiles(m, n, tm, tn, batch)
    tiles2 = tiling.output_tiles(m, n, tm2, tn2, batch)
    d1, l0 = _tile_time(tm, tn, tiles, r2a, r2b, units, pad_flops, unit_rate, loc_rate, l2_rate, k1, im, inn, rm, rn,
                        ea, eb, a_l2, b_l2, b_bytes, c_bytes, on_chip_c)
    s1, t1 = _best_split(d1, l0, p, split)
    d2, l02 = _tile_time(tm2, tn2, tiles2, r2a2, r2b2, units, pad_flops, unit_rate, loc_rate, l2_rate, k1, im, inn,
                         rm, rn, ea, eb, a_l2, b_l2, b_bytes, c_bytes, on_chip_c)
    s2, t2 = _best_split(d2, l02, p, split2)
    tiles3 = tiling.output_tiles(m, n, tm3, tn3, batch)
    d3, l03 = _tile_time(tm3, tn3, tiles3, r2a3, r2b3, units, pad_flops, unit_rate, loc_rate, l2_rate, k1, im, inn,
                         rm, rn, ea, eb, a_l2, b_l2, b_bytes, c_bytes, on_chip_c)
    s3, t3 = _best_split(d3, l03, p, split3)
    # (split-K's partial sums cost L2 time: a grid smaller than the units compares the smaller tiles even where
    # split-K fills the units)
    take = (tiles < units) & (t2 < t1)
    take3 = t3 < jit.where(take, t2, t1)
    return (jit.where(take3, tm3, jit.where(take, tm2, tm)), jit.where(take3, tn3, jit.where(take, tn2, tn)),
            jit.where(take3, s3, jit.where(take, s2, s1)))


@jit.rule
def _tile_time(tm, tn, tiles, r2a, r2b, units, pad_flops, unit_rate, loc_rate, l2_rate, k, im, inn, rm, rn, ea, eb,
               a_l2, b_l2, b_bytes, c_bytes, on_chip_c):
    """A GEMM tiling's (matrix and local-buffer time, L2 time) at split 1 (in the rates' unit of time): the waves of
    the evaluator's padded FLOPs at the unit rate, the local buffer's reads by register tile, the L2's panel
    requests."""
    waves = tiling.waves(tiles, units)
    t = waves * pad_flops / jit.maximum(tiles, 1.0) / unit_rate
    reads = hierarchy.local_read_bytes(1.0, k, tm, tn, jit.where(rm > 0, jit.maximum(rm, im), tm),
                                       jit.maximum(rn, inn), ea, eb)
    t = jit.maximum(t, jit.where(loc_rate > 0, waves * reads / loc_rate, 0.0))
    l2b = l2_request_total(a_l2, b_l2, r2a, r2b, b_bytes, c_bytes, 1.0, on_chip_c, 0.0)
    t2 = jit.where(l2_rate > 0, l2b / jit.where(l2_rate > 0, l2_rate, 1.0), 0.0)
    return jit.where(np.isfinite(t), t, np.inf), t2


@jit.rule
def _best_split(d1, l0, p, split):
    """(split, time) of a tiling whose time at split 1 is D_1 on the units and L_0 on the L2: the partial sums of
    each extra split go through the L2 (dse.model.hierarchy), so with s <= floor(units / tiles) (one wave) the
    time is max(D_1 / s, L_0 + P (s - 1)), P one split's partial sums: past the split where the two meet, more
    splits are slower. The best of filling the units and the two whole splits around that crossing (which does
    not depend on the units, so more units are never slower)."""
    best, best_t = split, jit.maximum(d1 / split, l0 + p * (split - 1.0))
    sx = jit.where(p > 0, (-(l0 - p) + np.sqrt((l0 - p) * (l0 - p) + 4.0 * p * d1)) / (2.0 * p), np.inf)
    cand = np.floor(sx)
    cand = jit.minimum(jit.maximum(jit.where(np.isfinite(cand), cand, split), 1.0), split)
    t_c = jit.maximum(d1 / cand, l0 + p * (cand - 1.0))
    take = t_c < best_t
    best, best_t = jit.where(take, cand, best), jit.where(take, t_c, best_t)
    cand = np.ceil(sx)
    cand = jit.minimum(jit.maximum(jit.where(np.isfinite(cand), cand, split), 1.0), split)
    t_c = jit.maximum(d1 / cand, l0 + p * (cand - 1.0))
    take = t_c < best_t
    return jit.where(take, cand, best), jit.where(take, t_c, best_t)


@jit.kernel
def _default_tiles_kernel(point, op, unit_rate, inverse):
    """(T_M, T_N, split, L2 bytes), each (rows, O), of every operator (``op``: its 13 columns in the order of
    :func:`_tiles`) on every point (``point``: 12 rows of inputs, one value per point). Per operator: the
    candidates in one pass over the points, the L2 requests of a GEMM-like operator's candidates (a pass per
    cluster height), then the choice and the chosen tile's :func:`l2_request_bytes` (every tile visible); the
    passes have no branch, so they run on the vector lanes. The results are laid out (points, operators) after:
    point r's are those of column ``inverse[r]`` where ``inverse`` is given (the distinct points, jit.distinct),
    else of column r."""
    O, rows = unit_rate.shape
    tm_t, tn_t, split_t, req_t = np.empty((O, rows)), np.empty((O, rows)), np.empty((O, rows)), np.empty((O, rows))
    tm2, tn2, split2 = np.empty(rows), np.empty(rows), np.empty(rows)
    tm3, tn3, split3 = np.empty(rows), np.empty(rows), np.empty(rows)
    r2a, r2b, r2a2, r2b2 = np.empty(rows), np.empty(rows), np.empty(rows), np.empty(rows)
    r2a3, r2b3, cm3, cn3, best3 = np.empty(rows), np.empty(rows), np.empty(rows), np.empty(rows), np.empty(rows)
    cm1, cn1, cm2, cn2, best1, best2 = (np.empty(rows), np.empty(rows), np.empty(rows), np.empty(rows),
                                        np.empty(rows), np.empty(rows))
    im, inn, ik, buf, units, l2 = point[0], point[1], point[2], point[3], point[4], point[5]
    l2_rate, loc_rate, rm, rn, mcast, acc = point[6], point[7], point[8], point[9], point[10], point[11]
    top = 0
    for r in range(rows):
        top = max(top, int(mcast[r]))
    for o in range(O):
        m, n, k, batch, emax, ea, eb, is_gemm, a_bytes, b_bytes, c_bytes, on_chip_a, on_chip_c = op[o]
        tm_o, tn_o, split_o = tm_t[o], tn_t[o], split_t[o]
        same = -1  # (a vector operator of the same shape as an earlier one has its tiles: the norms, residuals)
        if is_gemm < 0.5:
            for o2 in range(o):
                if op[o2, 7] < 0.5 and op[o2, 0] == m and op[o2, 1] == n and op[o2, 2] == k and op[o2, 3] == batch \
                        and op[o2, 4] == emax:
                    same = o2
                    break
        if same >= 0:  # (a loop, not a slice assignment: that compiles numba's string formatting for its error)
            for r in range(rows):
                tm_o[r], tn_o[r], split_o[r] = tm_t[same, r], tn_t[same, r], split_t[same, r]
        else:
            for r in range(rows):
                (tm_o[r], tn_o[r], split_o[r], tm2[r], tn2[r], split2[r], tm3[r], tn3[r],
                 split3[r]) = tile_candidates(im[r], inn[r], ik[r], buf[r], units[r], l2[r], acc[r], m, n, k, batch,
                                              emax)
        a_l2, b_l2 = l2_operands(a_bytes, b_bytes, on_chip_a, 1.0)
        req_o = req_t[o]
        if is_gemm < 0.5:  # (its L2 requests: its inputs once)
            for r in range(rows):
                req_o[r] = l2_request_total(a_l2, b_l2, 1.0, 1.0, b_bytes, c_bytes, is_gemm, on_chip_c,
                                            tiling.partial_sum_bytes(m, n, batch, split_o[r]))
            continue
        # the L2 requests of both candidates (dse.model.hierarchy.cluster_requests_core), one cluster height at a
        # time for every point (a height no point's cluster has changes nothing)
        for r in range(rows):
            cm1[r], cn1[r] = jit.maximum(ceil_div_core(m, tm_o[r]), 1.0), jit.maximum(ceil_div_core(n, tn_o[r]), 1.0)
            cm2[r], cn2[r] = jit.maximum(ceil_div_core(m, tm2[r]), 1.0), jit.maximum(ceil_div_core(n, tn2[r]), 1.0)
            r2a[r], r2b[r], best1[r] = cn1[r], cm1[r], a_l2 * cn1[r] + b_l2 * cm1[r]
            r2a2[r], r2b2[r], best2[r] = cn2[r], cm2[r], a_l2 * cn2[r] + b_l2 * cm2[r]
            cm3[r], cn3[r] = jit.maximum(ceil_div_core(m, tm3[r]), 1.0), jit.maximum(ceil_div_core(n, tn3[r]), 1.0)
            r2a3[r], r2b3[r], best3[r] = cn3[r], cm3[r], a_l2 * cn3[r] + b_l2 * cm3[r]
        for a in range(1, top + 1):
            for r in range(rows):
                best1[r], r2a[r], r2b[r] = hierarchy.cluster_request_step(
                    a_l2, b_l2, cm1[r], cn1[r], mcast[r], float(a), best1[r], r2a[r], r2b[r])
                best2[r], r2a2[r], r2b2[r] = hierarchy.cluster_request_step(
                    a_l2, b_l2, cm2[r], cn2[r], mcast[r], float(a), best2[r], r2a2[r], r2b2[r])
                best3[r], r2a3[r], r2b3[r] = hierarchy.cluster_request_step(
                    a_l2, b_l2, cm3[r], cn3[r], mcast[r], float(a), best3[r], r2a3[r], r2b3[r])
        rate_o = unit_rate[o]
        for r in range(rows):
            tm_o[r], tn_o[r], split_o[r] = choose_tile(
                (tm_o[r], tn_o[r], split_o[r], r2a[r], r2b[r]), (tm2[r], tn2[r], split2[r], r2a2[r], r2b2[r]),
                (tm3[r], tn3[r], split3[r], r2a3[r], r2b3[r]), units[r], im[r], inn[r], ik[r], m, n, k, batch, ea, eb,
                a_l2, b_l2, b_bytes, c_bytes, on_chip_c, rate_o[r], l2_rate[r], loc_rate[r], rm[r], rn[r])
        for r in range(rows):  # the chosen tile's requests (the second or third candidate's where it is that one)
            second = (tm_o[r] == tm2[r]) & (tn_o[r] == tn2[r])
            third = (tm_o[r] == tm3[r]) & (tn_o[r] == tn3[r])
            req_o[r] = l2_request_total(a_l2, b_l2, jit.where(second, r2a2[r], jit.where(third, r2a3[r], r2a[r])),
                                        jit.where(second, r2b2[r], jit.where(third, r2b3[r], r2b[r])), b_bytes,
                                        c_bytes, is_gemm, on_chip_c, tiling.partial_sum_bytes(m, n, batch, split_o[r]))
    if inverse.size == 0:
        return _transposed(tm_t), _transposed(tn_t), _transposed(split_t), _transposed(req_t)
    return _gathered(tm_t, inverse), _gathered(tn_t, inverse), _gathered(split_t, inverse), _gathered(req_t, inverse)


@jit.rule(loops=True)
def _transposed(x):
    """(points, operators) from (operators, points), in kernels: one array per loop (0.04 ms per 8192 x 16 block,
    on the vector lanes; four arrays in one loop take 2.4)."""
    n_ops, rows = x.shape
    out = np.empty((rows, n_ops))
    for r in range(rows):
        for o in range(n_ops):
            out[r, o] = x[o, r]
    return out


@jit.rule(loops=True)
def _gathered(x, inverse):
    """(points, operators) from (operators, distinct points): point r's row is column ``inverse[r]`` (the distinct
    points laid out (points, operators) first, so that each point copies one contiguous row; one operator: a
    gather along the points)."""
    n_ops, rows = x.shape[0], inverse.size
    out = np.empty((rows, n_ops))
    if n_ops == 1:
        row = x[0]
        for r in range(rows):
            out[r, 0] = row[inverse[r]]
        return out
    return jit.rows_laid_over(_transposed(x), inverse)


def default_tiles(chips: Chips, ops: OpTable):
    """Output tile (T_M, T_N), T_K and split-K from a buffer-filling heuristic (seed 004 §4.3.2, §4.4.2).

    The largest square tile, a multiple of the instruction tile, whose
    double-buffered working set 2 (T_M T_K + T_K T_N) e + T_M T_N x 4 B fits
    the local buffer (:func:`dse.model.tiling.square_tile`; e the wider operand's element size,
    T_K = 4 k-steps of the instruction), clamped to the
    padded operator; split-K spreads a too-small grid of tiles over the units,
    as far as the partial sums fit in L2 (beyond that, split-K would trade
    idle units for memory traffic). A chip with a separate accumulator store
    (``accumulator``: TPU accumulators, TMEM, PSUM) holds the T_M T_N x 4 B there, as
    the CP-SAT tile model does: the operands alone fill the buffer, and the
    accumulator tile fits the store. The CP-SAT tile solver replaces this
    where the exact optimum matters.
    """
    N, O = chips.n, len(ops.names)
    c = _chip_columns(chips, ops)
    tiles = _tiles(c.im, c.inn, c.ik, c.buf, c.units, c.psum, c.acc, ops,
                   _tile_levels(c, _by_format(c.fpc, ops)))[:4]
    return tuple(np.broadcast_to(x, (N, O)) for x in tiles)


def _tile_levels(c: "ChipColumns", fpc) -> tuple:
    """The matrix rate per unit ((operators, points or 1): laid out as the default tiles' kernel reads it) and the
    on-chip levels' rates the default tiles compare candidates on, all per cycle (FLOP / cycle, B / cycle): the
    levels run on the chip's clock, so the choice is the same at every clock (compared in cycles, a sweep of the
    clock alone gives one row of tiles, and points that differ only off the tiles' inputs are alike)."""
    return (np.multiply(fpc.T, c.ceff.T, order="C"), np.where(c.l2 > 0, c.l2bw * c.dies, 0.0),
            np.where(c.buf > 0, c.locbw, 0.0), np.where(c.sys > 0.5, 0.0, c.rm), c.rn, c.mcast)


def _psum_capacity(chips: Chips) -> np.ndarray:
    """Where split-K partial sums can live on chip: L2, or the SRAM main memory of an SRAM-only chip."""
    l2 = chips.compact("l2", 0.0) * chips.compact("dies")
    sram = chips.compact("memory.kind", 0.0) == 2
    if not sram.any():  # (no SRAM-only chip among the points: the L2)
        return over_points(l2, chips.n)
    return over_points(np.where(sram, np.maximum(l2, chips.compact("memory.capacity", 0.0)), l2), chips.n)


# chip inputs the model reads: (name in the block, dotted chip key or a derived name, default)
_INPUTS = (
    ("clock", "clock", None), ("units", "_units", None), ("dies", "dies", None),
    ("ceff", "calibration.compute_efficiency", 1.0), ("beff", "calibration.bandwidth_efficiency", 1.0),
    ("koh", "calibration.kernel_overhead", 0.0), ("step_oh", "calibration.step_overhead", 0.0),
    ("im", "matrix.instruction.m", 16), ("inn", "matrix.instruction.n", 16), ("ik", "matrix.instruction.k", 16),
    ("buf", "local_buffer", 0.0), ("l2", "l2", 0.0), ("bw_raw", "memory.bandwidth", None),
    ("lat", "memory_system.latency", 0.0), ("inflight", "memory_system.outstanding", 0.0),
    ("txn", "memory_system.transaction", 128.0),
    ("vfpc", "vector.flops_per_cycle", 0.0), ("xpc", "vector.exp_per_cycle", 0.0),
    ("e_mem", "energy.memory", 0.0), ("e_l2", "energy.l2", 0.0), ("e_loc", "energy.local", 0.0),
    ("e_vec", "energy.vector_flop", 0.0),
    ("vscale", "power.voltage_scaling", 1.0), ("cap", "memory.capacity", None),
    ("nsys", "system.chips", 1.0), ("link_bw", "links.scale_up.rate", np.nan),
    ("link_alpha", "links.scale_up.alpha", 0.0), ("e_link", "energy.link", 0.0),
    ("pipe", "system.pipeline", 0.0), ("acc", "accumulator", 0.0),
    ("peers", "links.scale_up.peers", 1.0), ("d2d_bw", "links.die_to_die.rate", np.nan),
    ("ep", "system.expert_parallel", 1.0),
    ("sys", "matrix.systolic", 0.0), ("wload", "matrix.weight_load_cycles", np.nan),
    ("npart", "system.partitions", 1.0),
    ("rm", "matrix.register_tile.m", 16.0), ("rn", "matrix.register_tile.n", 16.0),
    ("locbw", "local_bytes_per_cycle", 0.0), ("l2bw", "l2_bytes_per_cycle", 0.0), ("mcast", "l2_multicast", 1.0),
    ("e_reg", "energy.register_file", 0.0),
    ("l2die", "l2_scope", 0.0), ("msc", "memory_side_cache.capacity", 0.0),
    ("msc_bw", "memory_side_cache.bandwidth", 0.0), ("e_msc", "memory_side_cache.energy", 0.0),
)
#: inputs that are 0 where a chip does not have the part (NaN in a mixed batch of chips)
_ZERO_IF_ABSENT = ("l2die", "msc", "msc_bw", "e_msc")

#: Per-chip resources a tensor-parallel system of ``system.chips`` chips multiplies (seed 004 §4.7.2).
_SYSTEM_SCALED = ("units", "bw_raw", "cap", "leak", "clk", "tdp", "tdp_limit", "fixed1", "l2", "l2bw", "msc", "msc_bw")
#: ... and those that add up under pipeline parallelism too (each chip runs its layers at its own rates).
_PIPELINE_SCALED = ("cap", "leak", "clk", "tdp", "tdp_limit", "fixed1")


def _column(a: np.ndarray) -> np.ndarray:
    """(1, 1) when every point has the same value (known without reading it where the chips hold one value,
    dse.hardware.chips.same_at_every_point), else (N, 1)."""
    if same_at_every_point(a):
        return a[:1, None]
    # (17 points spread over them first: a column that varies is told without a pass over it, ~0.1 ms of 1e5 GEMM)
    if a.shape[0] and (a[::max(1, a.shape[0] // 16)] == a[0]).all() and (a == a[0]).all():
        return a[:1, None]
    return a[:, None]


@dataclass(frozen=True)
class ChipColumns:
    """The chip inputs the evaluator reads, each (1, 1) (the same for every point) or (N, 1).

    ``values`` holds the scalar inputs of :data:`_INPUTS` (and ``psum``, where split-K
    partial sums can live); ``fpc`` / ``ef`` the matrix rate and J/FLOP per operator
    format; ``causal`` the padded FLOPs of causal attention operators by column;
    ``rom_bw`` / ``rom_e`` a weight ROM's bandwidth and J/B (None without one).
    """

    values: dict[str, np.ndarray]
    fpc: dict[str, np.ndarray]
    ef: dict[str, np.ndarray]
    causal: dict[int, np.ndarray]
    rom_bw: np.ndarray | None = None
    rom_e: np.ndarray | None = None
    dq: dict[str, np.ndarray] | None = None  # per rate key: 1 where the narrow operand is dequantized
    rbf: dict[str, np.ndarray] | None = None  # per rate key: register-file bytes per matrix FLOP

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def rows(self, s: int, e: int) -> "ChipColumns":
        """Points s..e (a (1, 1) column stays as it is)."""
        def cut(d):
            return {k: (v if v.shape[0] == 1 else v[s:e]) for k, v in d.items()}

        def one(v):
            return v if v is None or v.shape[0] == 1 else v[s:e]

        return ChipColumns(cut(self.values), cut(self.fpc), cut(self.ef), cut(self.causal),
                           one(self.rom_bw), one(self.rom_e), cut(self.dq or {}), cut(self.rbf or {}))


def power_inputs(chips: Chips, package=None, most: bool = True) -> dict[str, np.ndarray]:
    """Per chip (N,): the voltage law, leakage and clock power at V_nom, and the TDP (the model's estimate where
    the chip publishes none; ``tdp_estimated``). ``package``: the points' PackageArea (computed when None).
    ``most``: False leaves ``most`` out where every point publishes its TDP (the evaluator and the CP-SAT models
    read it as the TDP's estimate alone: the formats' peak powers are then not computed, ~10% of a GEMM's
    evaluation at N = 1; issue 20).

    leak = the chip's ``power.static``, else logic and SRAM area x the node's leakage densities (per die x dies)
    clk  = the chip's ``power.clock``, else unit-logic area (matrix + unit logic) x clock energy x rated clock
    most = leakage + clock + the widest format's matrix power at peak + memory power at full bandwidth, all at
    the design clock: the most the chip can draw, and its TDP estimate (a chip file may give its own ``tdp``).
    """
    # the package's sums of parts, once per set of points alike in its inputs (and each point's set)
    logic, sram, clocked, inverse = (area_mod.part_sets_for(chips) if package is None else
                                     area_mod.part_sets(package))
    n = chips.n

    def arg(x):  # (a figure every point shares as one number: the kernels' loops then read only what varies)
        return jit.number_or_points(x, n)
    per_point = tuple(arg(chips.compact(k, d)) for k, d in (
        ("dies", 1.0), ("tech.leak_logic", 0.0), ("tech.leak_sram", 0.0), ("power.static", np.nan),
        ("power.rated_clock", np.nan), ("clock", 0.0), ("tech.clock_energy", 0.0), ("power.clock", np.nan),
        ("tech.v_min", 1.0), ("tech.v_nominal", 1.0), ("tech.v_threshold", 0.0)))
    sums = (logic, sram, clocked)
    if inverse is None and logic.size == 1 and n > 1:  # (one package for every point: the same as one set)
        inverse = np.zeros(n, dtype=np.int64)
    one = logic.size == 1 and all(np.ndim(x) == 0 for x in per_point)  # (every point the same: computed once)
    rows = 1 if one else n
    out, unusual = _chip_power_kernel(*(jit.points(x, x.size) for x in sums), None if one else inverse, *per_point,
                                      rows)
    leak, clk, rated, d, v1, s1, fixed1 = out[:, :rows]
    if rows > 1 and np.ndim(per_point[4]) == 0 and per_point[4] == per_point[4]:  # (one rated clock given for every
        rated = rated[:1]  # point: the rated clock, one value)

    def with_leak(x):  # V_min, V_nom or V_th + 0 x leak (NaN where a leak is not finite): the figure itself where
        # every point shares it, every leak is finite and it is not -0.0 (which + 0.0 makes 0.0)
        if np.ndim(x) == 0 and unusual == 0 and not (x == 0.0 and math.copysign(1.0, x) < 0):
            return x
        with jit.quiet():
            return x + 0.0 * leak
    v_law = tuple(with_leak(x) for x in per_point[8:])
    tdp = chips.compact("tdp", np.inf)
    estimated = ~np.isfinite(tdp)
    # the most the chip can draw at its design clock: only where some TDP is its estimate, unless asked for
    most_w = _most_power(chips, fixed1, s1, arg) if most or estimated.any() else None
    if estimated.any():
        tdp = np.where(estimated, most_w, tdp)
    tdp, limit, estimated = (over_points(x, n) for x in (tdp, np.where(estimated, np.inf, tdp), estimated))
    # (fixed1: leakage and clock at the design clock, what the throttle budgets for: an upper bound of both at
    # any lower clock, and the same for every operator, so the CP-SAT tile model's power budget is a constant)
    # the estimate is reported, not imposed: it is the most the chip can draw, so it never throttles
    out = {"leak": leak, "clk": clk, "rated": rated, "d": d, "v1": v1, "v_min": v_law[0], "v_nom": v_law[1],
           "v_th": v_law[2], "tdp": tdp, "tdp_limit": limit, "tdp_est": estimated, "fixed1": fixed1}
    if most_w is not None:
        out["most"] = most_w
    return {k: over_points(v, n) for k, v in out.items()}


def _most_power(chips: Chips, fixed1, s1, arg):
    """:func:`power_inputs`' ``most``: leakage and clock power at the design clock (``fixed1``), the costliest
    format at the peak rate (:func:`format_power`) and the memory at full bandwidth (``arg``: power_inputs' layout
    of a kernel's argument)."""
    peak = np.zeros(chips.n)
    per_point = tuple(arg(x) for x in (chips["dies"], chips["units"], chips["clock"], s1))
    im, inn, ik, e_reg, systolic = (arg(chips.get(k, d)) for k, d in (
        ("matrix.instruction.m", 16), ("matrix.instruction.n", 16), ("matrix.instruction.k", 16),
        ("energy.register_file", 0.0), ("matrix.systolic", 0.0)))
    for fmt in chips.formats:
        with jit.quiet():
            e_fmt = format_energy(arg(chips.get(f"energy.flop.{fmt}", 0.0)), im, inn, ik, systolic, _value_bytes(fmt),
                                  e_reg)
            _peak_power_kernel(peak, arg(chips.flops_per_cycle(fmt)), arg(e_fmt), *per_point)
    p_mem_max = chips.memory_bandwidth * chips.compact("energy.memory", 0.0)
    return fixed1 + peak + p_mem_max


@jit.kernel
def _chip_power_kernel(logic, sram, clocked, inverse, dies, leak_logic, leak_sram, static, rated_clock, clock,
                       clock_energy, given_clock, v_min, v_nom, v_th, rows):
    """:func:`power_inputs`' figures of ``rows`` points, one row each of a :func:`jit.staggered` array: leakage,
    clock power, the rated clock, d = design / rated clock, V1 + 0 x leakage, V1's dynamic-energy scale and the
    fixed power at the design clock; and the count of points whose leakage is not finite. ``logic`` / ``sram`` /
    ``clocked``: the package's sums of parts per set of points alike (``inverse``: each point's set) or per point
    (``inverse`` None); the other inputs an array of the points or one number for every point (jit.of_op). One
    pass where numpy made ~25 over the points, the sums of parts laid over the points first (a loop of loads from
    a table, apart from the loop on the vector lanes: 100,000 GEMM points 0.46 -> 0.22 ms) (issue 20)."""
    parts = jit.staggered(3, rows)
    for i in range(rows):
        s = jit.set_of(inverse, i)
        parts[0, i], parts[1, i], parts[2, i] = logic[s], sram[s], clocked[s]
    out = jit.staggered(7, rows)
    unusual = 0
    for i in range(rows):
        dd = jit.of_op(dies, i)
        leak = pw.leakage_power(parts[0, i] * dd, parts[1, i] * dd, jit.of_op(leak_logic, i), jit.of_op(leak_sram, i))
        st = jit.of_op(static, i)
        leak = jit.where(st != st, leak, st)
        rc, ck = jit.of_op(rated_clock, i), jit.of_op(clock, i)
        rated = jit.where(rc != rc, ck, rc)
        clk = pw.clock_power(parts[2, i] * dd, jit.of_op(clock_energy, i), rated)
        gc = jit.of_op(given_clock, i)
        clk = jit.where(gc != gc, clk, gc)
        vnom = jit.of_op(v_nom, i)
        d = ck / rated
        v1 = pw.voltage_at(d, jit.of_op(v_min, i), vnom, jit.of_op(v_th, i))
        zero = 0.0 * leak
        out[0, i], out[1, i], out[2, i], out[3, i], out[4, i] = leak, clk, rated, d, v1 + zero
        out[5, i] = pw.dynamic_energy_scale(v1, vnom)
        out[6, i] = pw.fixed_power_core(leak, clk, d, 1.0, v1, vnom)
        unusual += zero != 0.0
    return out, unusual


@jit.rule
def format_energy(e_flop, im, inn, ik, systolic, value_bytes, e_reg):
    """J per FLOP of one format at V_nom: the datapath's and its register-file traffic's (dse.model.hierarchy, the
    instruction's K at the format's size)."""
    k = hierarchy.instruction_k(ik, value_bytes, systolic)
    return e_flop + hierarchy.register_bytes_per_flop(im, inn, k, value_bytes, tiling.ACCUMULATOR_BYTES) * e_reg


@jit.rule
def format_power(dies, units, fpc, clock, e_fmt, s1):
    """The matrix units' power at one format's peak rate (dies x units x FLOPs/cycle x clock, seed 000 "Dense and
    sparse peaks") at its J/FLOP (:func:`format_energy`) scaled by the design clock's voltage (``s1``)."""
    return dies * units * fpc * clock * e_fmt * s1


@jit.kernel
def _peak_power_kernel(peak, fpc, e_fmt, dies, units, clock, s1):
    """``peak`` (per point) raised in place to one format's :func:`format_power` where that is higher (a NaN wins,
    as numpy's maximum); called once per format, ``peak`` starting at 0. Each input an array of the points or one
    number for every point (jit.of_op)."""
    for i in range(peak.size):
        peak[i] = jit.maximum(peak[i], format_power(jit.of_op(dies, i), jit.of_op(units, i), jit.of_op(fpc, i),
                                                    jit.of_op(clock, i), jit.of_op(e_fmt, i), jit.of_op(s1, i)))


def chip_values(chips: Chips, package=None) -> dict[str, np.ndarray]:
    """The chip inputs the evaluator reads whatever the workload (:class:`ChipColumns`' ``values``: the inputs of
    :data:`_INPUTS`, the power model's (:func:`power_inputs`), where split-K partial sums live, a system's and a
    partition's share), each (1, 1) or (N, 1). ``package``: the points' PackageArea (computed when None). Computed
    once for every workload of a design (dse.evaluate.evaluate_design passes them to :func:`evaluate_workload`:
    ~30% of an evaluation at N = 1; issue 20); read, never written."""
    cols = {}
    for name, key, default in _INPUTS:  # (Chips.compact: one value where every point has it)
        if key == "_units":
            a = chips.compact("dies") * chips.compact("units")
        else:
            a = chips[key] if default is None else chips.compact(key, default)
        a = np.asarray(a, dtype=float)
        cols[name] = _column(nan_to_num(a) if name in _ZERO_IF_ABSENT else a)
    for name, a in power_inputs(chips, package, most=False).items():
        cols[name] = _column(np.asarray(a, dtype=float))
    cols["psum"] = _column(_psum_capacity(chips))
    if np.any(cols["nsys"] != 1):  # (the topology matters to systems of chips only)
        cols["topo"] = _column(links.topology_code(chips.arrays.get("links.scale_up.topology"),
                                                   chips.get("links.scale_up.lanes", np.nan),
                                                   chips.get("links.scale_up.bandwidth", np.nan)))
    else:
        cols["topo"] = np.zeros((1, 1))
    ep = cols["ep"]
    if np.any(ep != 1):
        bad = (ep != 1) & ((ep != cols["nsys"]) | (cols["pipe"] > 0.5))
        if bad.any():
            i = int(np.flatnonzero(bad.any(axis=1))[0])
            e, p = float(np.broadcast_to(ep, bad.shape)[i, 0]), float(np.broadcast_to(cols["nsys"], bad.shape)[i, 0])
            raise SpecError(f"system.expert_parallel: {e:g} on a system of {p:g} chips"
                            f"{' (pipeline parallel)' if np.broadcast_to(cols['pipe'], bad.shape)[i, 0] > 0.5 else ''}"
                            f" at point {i}; expected 1 or system.chips of a tensor-parallel system")
    if np.any(cols["nsys"] != 1):  # a system of chips acts as one chip with their summed resources + its links
        tensor = cols["pipe"] < 0.5
        for name in _SYSTEM_SCALED:
            scaled = name in _PIPELINE_SCALED
            cols[name] = cols[name] * np.where(tensor | scaled, cols["nsys"], 1.0)
        cols["psum"] = cols["psum"] * np.where(tensor, cols["nsys"], 1.0)
    if np.any(cols["npart"] != 1):  # one logical device of a partitioned package (seed 000 "Partition modes")
        for name in _SYSTEM_SCALED:
            cols[name] = cols[name] / cols["npart"]
        cols["psum"] = cols["psum"] / cols["npart"]
    return cols


def _chip_columns(chips: Chips, ops: OpTable, rom=None, package=None, values=None) -> ChipColumns:
    """The :class:`ChipColumns` of ``chips`` for the operators ``ops``: ``values`` (:func:`chip_values`, computed
    when None) and each operator format's matrix rate, a causal operator's padded FLOPs, a weight ROM's figures."""
    cols = chip_values(chips, package) if values is None else values
    # matrix rate and energy per FLOP of each operator's format (a format the chip lacks runs on a wider one)
    fpc_cols, ef_cols, dq_cols, rbf_cols = {}, {}, {}, {}
    for key in sorted(set(ops.rate_keys)):
        fpc, ef, dq, eb = matrix_rate(chips, key)
        fpc_cols[key], ef_cols[key], dq_cols[key] = _column(fpc), _column(ef), _column(dq)
        rbf_cols[key] = _column(np.asarray(register_bytes_per_flop(chips, eb), dtype=float))
    # causal attention: padded FLOPs of the visible tiles, per distinct instruction shape
    im, inn, ik = cols["im"][:, 0], cols["inn"][:, 0], cols["ik"][:, 0]
    causal = {col: np.asarray(op.padded_flops(im, inn, ik), dtype=float).reshape(-1, 1)
              for col, op in ops.causal_ops}
    rom_bw = rom_e = None
    if rom is not None:
        n = chips.n
        rom_bw = _column(np.broadcast_to(np.asarray(rom[0], dtype=float), (n,)))
        rom_e = _column(np.broadcast_to(np.asarray(rom[1], dtype=float), (n,)))
    return ChipColumns(cols, fpc_cols, ef_cols, causal, rom_bw, rom_e, dq_cols, rbf_cols)


def _by_format(per_fmt: dict, ops: OpTable) -> np.ndarray:
    """(rows, O) or (1, O) array of a per-rate-key column."""
    fmts = ops.rate_keys
    if len(per_fmt) == 1:
        (v,) = per_fmt.values()
        return np.broadcast_to(v, (v.shape[0], len(fmts)))
    rows = max(v.shape[0] for v in per_fmt.values())
    out = np.empty((rows, len(fmts)))
    for fmt, v in per_fmt.items():
        out[:, [i for i, f in enumerate(fmts) if f == fmt]] = v
    return out


@jit.rule
def fused_block_time(m0, m1, m2, v0, v1, v2, l0, l1, l2, waves, floor, cap):
    """The time of a fused attention block (QK, softmax, PV) from its three operators' matrix (m), vector (v) and
    local-buffer (l) times, seed 004 §4.2.3 (Example 4-1): the matrix unit, the exponentials (the vector unit) and
    the local buffer work on different blocks at once, so once the pipeline runs the block interval is the slowest
    resource's (per resource the three operators' times add, seed 004 §4.8.1: pipeline.shared_core; the resources
    overlap: pipeline.overlapped_core). Each unit's first block still passes the three stages one after the other:
    over the w blocks a unit computes (``waves``), its own resources take S / w + O (1 - 1 / w), S the three
    operators' times on them one after the other, O their overlap (one block: S; many: the steady interval).
    ``floor``: the resources the units share (main memory, L2, die-to-die link) stay busy through the other units'
    first blocks; ``cap``: never more than the three operators in a row."""
    s_loc = pipeline.shared_core(pipeline.overlapped_core(m0, v0, l0), pipeline.overlapped_core(m1, v1, l1),
                                 pipeline.overlapped_core(m2, v2, l2))
    o_loc = pipeline.overlapped_core(pipeline.shared_core(m0, m1, m2), pipeline.shared_core(v0, v1, v2),
                                     pipeline.shared_core(l0, l1, l2))
    w = jit.maximum(waves, 1.0)
    pipe = jit.where(w > 1.0, s_loc / w + o_loc * (1.0 - 1.0 / w), s_loc)
    return jit.minimum(jit.maximum(pipe, floor), cap)


@jit.rule
def fused_block_clock_inputs(a, b, c, waves):
    """The power ceiling's inputs of a fused attention block (its three operators run at once) from its operators'
    times and energies at the design clock, ``a``, ``b``, ``c`` each (matrix busy, matrix with the waves' loss,
    vector, L2, local buffer busy, local buffer with the waves' loss, busy, with the waves' loss, compute energy,
    memory energy, memory time): the block's busy time without and with the waves' loss (:func:`fused_block_time`,
    the L2 as the floor, the operators' own busy times in a row as the cap), and the three operators' compute and
    memory energies and memory times, summed."""
    floor = pipeline.shared_core(a[3], b[3], c[3])
    busy = fused_block_time(a[0], b[0], c[0], a[2], b[2], c[2], a[4], b[4], c[4], waves, floor,
                            pipeline.shared_core(a[6], b[6], c[6]))
    clocked = fused_block_time(a[1], b[1], c[1], a[2], b[2], c[2], a[5], b[5], c[5], waves, floor,
                               pipeline.shared_core(a[7], b[7], c[7]))
    return (busy, clocked, pipeline.shared_core(a[8], b[8], c[8]), pipeline.shared_core(a[9], b[9], c[9]),
            pipeline.shared_core(a[10], b[10], c[10]))


@jit.rule
def _clock_inputs_at(x, p, col):
    """:func:`fused_block_clock_inputs`' tuple of operator ``col`` at point ``p`` of the (points, operators) arrays
    ``x`` (in its order)."""
    return (x[0][p, col], x[1][p, col], x[2][p, col], x[3][p, col], x[4][p, col], x[5][p, col], x[6][p, col],
            x[7][p, col], x[8][p, col], x[9][p, col], x[10][p, col])


@jit.kernel
def _attention_clock_kernel(x, waves, c0, c1, c2):
    """The power ceiling's inputs (:func:`fused_block_clock_inputs`) of the fused attention block in columns c0, c1,
    c2 of (points, operators) arrays ``x`` (in that rule's order): (5, points)."""
    rows = waves.shape[0]
    out = np.empty((5, rows))
    for p in range(rows):
        out[0, p], out[1, p], out[2, p], out[3, p], out[4, p] = fused_block_clock_inputs(
            _clock_inputs_at(x, p, c0), _clock_inputs_at(x, p, c1), _clock_inputs_at(x, p, c2), waves[p, c0])
    return out


@jit.rule
def fused_block_power(e0, e1, e2, t0, t1, t2, p0, p1, p2):
    """The highest power a fused attention block draws: its three operators' energies (compute and memory, e) together
    over the block's time (t0 + t1 + t2), each operator at its own fixed power (p); a NaN wins, as numpy's maximum."""
    a = pw.average_power_core(pipeline.shared_core(e0, e1, e2), pipeline.shared_core(t0, t1, t2))
    return jit.maximum(jit.maximum(a + p0, a + p1), a + p2)


@jit.kernel
def _group_power_kernel(peak, e_comp, e_mem, t_op, p_fixed, c0, c1, c2):
    """``peak`` (per point) raised in place to :func:`fused_block_power` of the fused attention block in columns c0,
    c1, c2 of (points, operators) arrays (a NaN wins, as numpy's maximum)."""
    for p in range(peak.size):
        g = fused_block_power(e_comp[p, c0] + e_mem[p, c0], e_comp[p, c1] + e_mem[p, c1], e_comp[p, c2] + e_mem[p, c2],
                              t_op[p, c0], t_op[p, c1], t_op[p, c2], p_fixed[p, c0], p_fixed[p, c1], p_fixed[p, c2])
        peak[p] = jit.maximum(peak[p], g)


def _attention_clock(ops: OpTable, cr, stretch, e_comp, e_mem, busy_parts, clocked_parts, busy1, clocked1, t_memory,
                     waves, tdp, leak, clk, law):
    """The sustained clock of each fused attention block (QK, softmax, PV), whose operators run at once
    (:func:`_attention_overlap`): one operating point for the three (dse.model.power.sustained_operating_point)
    on their summed energies over the block's busy time at the design clock (the same pipeline of the units'
    own resources, ``busy_parts``: matrix, vector, L2, local buffer, with the L2 as a floor: :func:`fused_block_time`;
    with and without the waves' loss, as the power ceiling takes them) and their summed memory time. (The
    block's time at the clock found is at least its time here over that clock: _attention_overlap.) ``cr`` and
    ``stretch`` are changed in place where they have the block's shape (:func:`_own`)."""
    shape = np.broadcast_shapes(np.shape(cr), np.shape(e_comp), np.shape(busy1))
    cr, stretch = _own(cr, shape), _own(stretch, shape)
    (matrix_b, vector, l2, local_b), (matrix_c, _, _, local_c) = busy_parts, clocked_parts
    full = tuple(_full(x, shape) for x in (matrix_b, matrix_c, vector, l2, local_b, local_c, busy1, clocked1, e_comp,
                                          e_mem, t_memory))
    waves = _full(waves, shape)
    for cols in ops.attn_groups:
        busy_g, clocked_g, e_comp_g, e_mem_g, t_mem_g = _attention_clock_kernel(full, waves, *(int(c) for c in cols))
        r, st = pw.sustained_operating_point(tdp, e_comp_g[:, None], e_mem_g[:, None], busy_g[:, None],
                                             clocked_g[:, None], t_mem_g[:, None], leak, clk, law, MIN_CLOCK_RATIO)
        at = slice(cols[0], cols[0] + 3) if tuple(cols) == tuple(range(cols[0], cols[0] + 3)) else list(cols)
        cr[:, at], stretch[:, at] = r, st  # (a slice where the three are side by side: no fancy indexing)
    return cr, stretch


@jit.rule
def fused_block_share(t0, t1, t2, m0, m1, m2, v0, v1, v2, l0, l1, l2, mem0, mem1, mem2, c0, c1, c2, d0, d1, d2,
                      waves):
    """The share of their own times in a row (t0 + t1 + t2) the fused attention block's three operators take when
    its blocks pipeline (:func:`fused_block_time`, seed 004 §4.2.3): m, v, l their matrix, vector and local-buffer
    times (a centralized operator's x the dies), mem, c, d their memory, L2 and die-to-die link times (the block's
    floor: those resources are shared); 1 where the time in a row is 0 or not finite."""
    serial = pipeline.shared_core(t0, t1, t2)
    floor = pipeline.overlapped_core(pipeline.shared_core(mem0, mem1, mem2), pipeline.shared_core(c0, c1, c2),
                                     pipeline.shared_core(d0, d1, d2))
    total = fused_block_time(m0, m1, m2, v0, v1, v2, l0, l1, l2, waves, floor, serial)
    return jit.where((serial > 0) & np.isfinite(serial), total / serial, 1.0)


@jit.kernel
def _attention_overlap_kernel(t_op, matrix, vector, memory, l2, local, d2d, scale, waves, c0, c1, c2):
    """:func:`_attention_overlap` for the block in columns c0, c1, c2: ``t_op`` scaled in place."""
    for p in range(t_op.shape[0]):
        share = fused_block_share(t_op[p, c0], t_op[p, c1], t_op[p, c2], matrix[p, c0] * scale[p, c0],
                                  matrix[p, c1] * scale[p, c1], matrix[p, c2] * scale[p, c2],
                                  vector[p, c0] * scale[p, c0], vector[p, c1] * scale[p, c1],
                                  vector[p, c2] * scale[p, c2], local[p, c0] * scale[p, c0],
                                  local[p, c1] * scale[p, c1], local[p, c2] * scale[p, c2], memory[p, c0],
                                  memory[p, c1], memory[p, c2], l2[p, c0], l2[p, c1], l2[p, c2], d2d[p, c0],
                                  d2d[p, c1], d2d[p, c2], waves[p, c0])
        t_op[p, c0], t_op[p, c1], t_op[p, c2] = t_op[p, c0] * share, t_op[p, c1] * share, t_op[p, c2] * share


def _attention_overlap(ops: OpTable, t_op, resources, scale, waves):
    """Operator times of each fused attention block (QK, softmax, PV) whose blocks pipeline across resources
    (:func:`fused_block_time`): the block's time, never more than the three operators' own times in a row, is
    shared among them in proportion to those times. ``resources``: the per-operator times (matrix, vector,
    memory, L2, local buffer, die-to-die link); ``scale``: dies where an operator runs centralized on one die (its
    units' work takes dies x its time); ``waves``: the blocks each unit computes (QK's waves). ``t_op`` is changed in
    place where it has the block's shape (:func:`_own`)."""
    shape = np.broadcast_shapes(t_op.shape, *(np.shape(r) for r in resources), np.shape(scale), np.shape(waves))
    t_op = _own(t_op, shape)
    full = tuple(_full(x, shape) for x in (*resources, scale, waves))
    for cols in ops.attn_groups:
        _attention_overlap_kernel(t_op, *full, *(int(c) for c in cols))
    return t_op


def _group_columns(ops: OpTable) -> np.ndarray:
    """The fused attention blocks' three columns, (blocks, 3) int64 ((0, 3) without one)."""
    return np.array(ops.attn_groups, dtype=np.int64).reshape(-1, 3)


def _own(x, shape) -> np.ndarray:
    """``x`` to change in place: itself where it is a writeable C-ordered float array of ``shape`` (the caller
    hands it over), else a copy broadcast to ``shape``."""
    if type(x) is np.ndarray and x.shape == shape and x.dtype == np.float64 and x.flags.writeable \
            and x.flags.c_contiguous:
        return x
    return np.array(np.broadcast_to(x, shape), dtype=float)


def _sum(x, cnt, shape=None):
    """sum over operators of x x count: (rows, O) -> (rows,), in one pass (:func:`_sums_kernel`; within rounding of
    the sum of the products). Each row is summed by the same loop over its C-contiguous values whatever the number
    of rows, so N points give the numbers of one point at a time, to the bit; a broadcast row is summed once, and
    comes back as one value, (1,) (the block's results of one value at every point are laid over the points at
    the end, evaluate_workload). One operator counted once (a GEMM alone): its values as they are (-0.0 too), a
    read-only view (27 sums of 100,000 points, ~6% of a GEMM's evaluation, issue 20). ``shape``: (points, operators) to
    broadcast ``x`` to first (where it is not that shape already)."""
    if shape is not None and (type(x) is not np.ndarray or x.shape != shape):
        x = np.broadcast_to(x, shape)
    if type(x) is not np.ndarray or x.dtype != np.float64:
        x = np.asarray(x, dtype=float)
    if x.ndim < 2:
        x = x.reshape(1, -1)
    if x.shape[1] != cnt.size:
        x = np.broadcast_to(x, (x.shape[0], cnt.size))
    if _shrunk(x) is not x:  # (one row laid over the points: summed once)
        return _sum(x[:1], cnt)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if cnt.size == 1 and cnt.item(0) == 1.0:  # (one operator, once: its values, read-only, not a pass to copy them)
        return jit.points(x, x.shape[0])
    return _sums_kernel(x.reshape(-1), cnt)  # (numba's arithmetic raises no numpy warnings: no jit.quiet)


@jit.sums_kernel
def _sums_kernel(x, w):
    """Per row of ``x`` (rows x len(w), flat) the sum of x[row, j] w[j]: on the vector lanes, in the order LLVM gives
    a row of that length (jit.sums_kernel; within 1e-15 of the sums in einsum's order; issue 20: 0.76 -> 0.27 ms
    for 17 sums of 7,700 x 16). One operator per point counted more than once (:func:`_sum` passes one counted once
    as it is): a loop along the points, on the vector lanes (the same 0 + x w: 100,000 points 48 -> ~15 us)."""
    k = w.size
    rows = x.size // k
    out = np.empty(rows)
    if k == 1:
        w0 = w[0]
        for p in range(rows):
            out[p] = 0.0 + x[p] * w0
        return out
    for p in range(rows):
        acc = 0.0
        for j in range(k):
            acc += x[p * k + j] * w[j]
        out[p] = acc
    return out


def _working_set(tm, tn, tk, ops: OpTable, acc_store) -> np.ndarray:
    """(rows,) the largest double-buffered working set over the GEMM-like operators, 0 without one.

    :func:`dse.model.tiling.tile_working_set` with 2 input slots; the FP32 accumulator tile counts in
    the local buffer unless the chip has a separate accumulator store (``accumulator`` > 0), where the part of it
    the store does not hold counts (:func:`dse.model.tiling.accumulator_spill`). ``tk``: one per point
    ((rows, 1), the default tiles) or one per operator and point (given tiles).
    """
    return _block_kernel(_working_set_kernel, (tm, tn, tk), (acc_store,), (ops.ea, ops.eb, ops.is_gemm))[0][0]


@jit.kernel
def _working_set_kernel(tm, tn, tk, acc_store, ea, eb, is_gemm, n_ops):
    """The largest :func:`dse.model.tiling.tile_working_set_core` (2 slots) and its
    :func:`~dse.model.tiling.accumulator_spill` over each point's GEMM-like operators, 0 without one: flat (points
    x operators) tiles, then per point the accumulator store's bytes (0: none, the accumulator in the local
    buffer), then per operator the element sizes and 1 for a GEMM-like operator; a (1, points) array (NaN wins, as
    numpy's max)."""
    n, k = tm.size, jit.op_count(n_ops)
    rows = n // k
    out = np.empty((1, rows))
    for p in range(rows):
        top, first, store = 0.0, True, acc_store[p]
        acc = jit.where(store > 0.0, 0.0, tiling.ACCUMULATOR_BYTES)
        for j in range(k):
            i = p * k + j
            if jit.of_op(is_gemm, j) > 0.5:
                ws = tiling.tile_working_set_core(tm[i], tn[i], tk[i], jit.of_op(ea, j), jit.of_op(eb, j), acc, 2.0) \
                    + tiling.accumulator_spill(tm[i], tn[i], store)
                top, first = jit.where(first, ws, jit.maximum(top, ws)), False
        out[0, p] = top
    return (out,)


# ---- the block's per-element chains (issue 20): each a rule of numbers, run by numpy on arrays (the tests) and by a
# kernel over the block (production). A kernel takes the (points, operators) arrays flattened (C order: point p's
# operators at p x n_ops ..), the per-point ones as (points,) and the per-operator ones as (operators,); it loops
# over points, then operators (a point's values loaded once) and stores its results into the rows of one
# jit.staggered array: so laid out, LLVM runs a point's operators on the CPU's vector lanes (the design-clock times:
# 1.0 ns per element, 5.1 with the results in a (7, points, operators) array, ~10 in numpy;
# docs/evaluator-speed.md, "The block's chains as kernels").


@jit.rule
def tile_counts(tm, tn, split, units, m, n, batch):
    """An operator's tiles on a point (seed 004 §4.2.1; 0 tiles for a vector operator): its output tiles, the waves
    of its work items (tiles x split-K) over the units and their efficiency, the tiles along M and N."""
    tiles_out = tiling.output_tiles(m, n, tm, tn, batch)
    work = tiles_out * split
    n_waves = tiling.waves(work, units)
    return tiles_out, n_waves, tiling.wave_efficiency_core(work, units, n_waves), tiling.ceil_div_core(m, tm), \
        tiling.ceil_div_core(n, tn)


@jit.rule
def resident_operands(tm, tn, ik, acc_bytes, buf, k, ea, eb, is_gemm, on_chip_a):
    """1 where an operand panel stays in a unit's local buffer (tiling.resident_panels), else 0: (A, B); GEMM
    operands only, not an A that stays on chip."""
    fits_a, fits_b = tiling.resident_panels(tm, tn, k, ik, ea, eb, acc_bytes, buf)
    return jit.where(fits_a & (is_gemm > 0.5) & (on_chip_a < 0.5), 1.0, 0.0), jit.where(fits_b & (is_gemm > 0.5),
                                                                                         1.0, 0.0)


@jit.rule
def local_traffic(tm, tn, visible, systolic, rm, rn, buf, m, n, k, batch, emax, ea, eb, on_chip_a):
    """What an operator's tiles move through the local buffer (seed 004 §4.3.2), of the ``visible`` share of its
    tiles (causal attention): the matrix unit's reads (hierarchy.local_read_bytes, register tile R_M x R_N:
    ``rm`` where not ``systolic``, else the tile's rows; ``rn``; A's element size 0 for an A in registers) and
    those plus the fills (tiling.local_buffer_bytes at ``emax``); 0 without a buffer (``buf``)."""
    seen = tiling.output_tiles(m, n, tm, tn, batch) * visible
    reads = hierarchy.local_read_bytes(seen, k, tm, tn, jit.where(systolic > 0.5, tm, rm), rn,
                                       jit.where(on_chip_a > 0.5, 0.0, ea), eb)
    return reads, jit.where(buf > 0, tiling.local_buffer_bytes(seen, k, tm, tn, emax) + reads, 0.0)


@jit.rule
def tile_traffic(tm, tn, split, visible, units, ik, systolic, rm, rn, acc_bytes, buf, m, n, k, batch, emax, ea, eb,
                 is_gemm, on_chip_a):
    """An operator's tiles on a point: :func:`tile_counts`, :func:`resident_operands`, :func:`local_traffic`."""
    tiles_out, n_waves, wave_eff, c_m, c_n = tile_counts(tm, tn, split, units, m, n, batch)
    keep_a, keep_b = resident_operands(tm, tn, ik, acc_bytes, buf, k, ea, eb, is_gemm, on_chip_a)
    reads, moved = local_traffic(tm, tn, visible, systolic, rm, rn, buf, m, n, k, batch, emax, ea, eb, on_chip_a)
    return tiles_out, n_waves, wave_eff, c_m, c_n, keep_a, keep_b, reads, moved


@jit.kernel
def _traffic_kernel(tm, tn, split, visible, units, ik, systolic, rm, rn, acc_bytes, buf, m, n, k, batch, emax, ea,
                    eb, is_gemm, on_chip_a, n_ops):
    """:func:`tile_traffic` over a block: flat (points x operators) tiles, then per-point and per-operator inputs;
    its 9 results (jit.staggered). One operator per point (``n_ops`` None): the rule in one pass (on the vector lanes
    with jit.LLVM_OPTIONS: 100,000 GEMM points 0.73 -> 0.59 ms alone); else one pass per part (a pass storing fewer
    arrays runs on the vector lanes, 4.8 ms per 1e5 decode points against 11.1 for the rule in one pass; with the
    options, one pass 13.4 -> 18 ms in a decode step: their checks run once per point there)."""
    size, at = tm.size, jit.of_op
    out = jit.staggered(9, size)
    if n_ops is None:  # (one operator a point: one pass, on the vector lanes with jit.LLVM_OPTIONS)
        for i in range(size):
            out[0, i], out[1, i], out[2, i], out[3, i], out[4, i], out[5, i], out[6, i], out[7, i], out[8, i] = \
                tile_traffic(tm[i], tn[i], split[i], visible[i], units[i], ik[i], systolic[i], rm[i], rn[i],
                             acc_bytes[i], buf[i], at(m, 0), at(n, 0), at(k, 0), at(batch, 0), at(emax, 0),
                             at(ea, 0), at(eb, 0), at(is_gemm, 0), at(on_chip_a, 0))
        return out[:, :size]
    for p in range(size // n_ops):
        u = units[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i], out[2, i], out[3, i], out[4, i] = tile_counts(tm[i], tn[i], split[i], u, at(m, j),
                                                                                at(n, j), at(batch, j))
    for p in range(size // n_ops):
        i_k, acc, b = ik[p], acc_bytes[p], buf[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[5, i], out[6, i] = resident_operands(tm[i], tn[i], i_k, acc, b, at(k, j), at(ea, j), at(eb, j),
                                                     at(is_gemm, j), at(on_chip_a, j))
    for p in range(size // n_ops):
        sy, r_m, r_n, b = systolic[p], rm[p], rn[p], buf[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[7, i], out[8, i] = local_traffic(tm[i], tn[i], visible[i], sy, r_m, r_n, b, at(m, j), at(n, j),
                                                 at(k, j), at(batch, j), at(emax, j), at(ea, j), at(eb, j),
                                                 at(on_chip_a, j))
    return out[:, :size]


def _alike_points(tile_class, more, rows: int) -> tuple:
    """Points of a block of ``rows`` alike: of the same default tiles' class (``tile_class``: (first, inverse) of
    the classes, :func:`_tiles`) and the same values of the per-point columns ``more`` ((rows or 1, 1) each).
    Returns each point's first point alike ((rows, 1) floats: itself where no earlier point is; every point itself
    without the tiles' classes (given tiles, or too few points alike) or where fewer than half the points repeat),
    and (first, inverse) of jit.distinct (None where every point is itself). The tiles' counts, the panels they
    keep and their working set depend only on the tiles, the tiles' inputs and the accumulator's store, so points
    alike so have the same re-reads (:func:`_cache_reads_kernel`) and working set."""
    if tile_class is None or rows == 1:  # (one point is itself)
        return np.arange(float(rows))[:, None], None
    keys = [np.broadcast_to(x, (rows, 1))[:, 0] for x in more if np.shape(x)[0] > 1]
    first, inverse = tile_class
    if inverse.size > 1:
        if not keys:  # (the classes themselves: jit.distinct of them would give the same, numbered in order too)
            return jit.laid_over(first.astype(float), inverse)[:, None], tile_class
        keys.append(inverse)
    if not keys:
        return np.zeros((rows, 1)), (np.zeros(1, dtype=np.int64), np.zeros(rows, dtype=np.int64))
    alike = jit.distinct(keys, most=rows // 2)  # (worth it where at least half the points repeat)
    if alike is None:
        return np.arange(float(rows))[:, None], None
    first, inverse = alike
    return jit.laid_over(first.astype(float), inverse)[:, None], (first, inverse)


@jit.kernel
def _cache_reads_kernel(c_m, c_n, split, keep_a, keep_b, units, capacity, buf, alike, a_bytes, b_bytes, m, n, k, ea,
                        eb, a_read, n_ops):
    """(r_A, r_B) of :func:`dse.model.tiling.cache_reads_core` over a block: flat (points x operators) tile counts,
    splits and kept panels, then per point the units, the cache's capacity beside the local buffer and the first
    point alike (:func:`_alike_points`: a point with an earlier one alike copies its results), then per operator
    its GEMM operands' bytes, shape and element sizes, and A's bytes in the block cost (an operator without GEMM
    operands: 1, 1); its 2 results (jit.staggered). (Each element searches its block's height: a loop of its own,
    one element at a time; in a kernel the operators' columns need no gathering.)"""
    size, n_ops, at = c_m.size, jit.op_count(n_ops), jit.of_op
    out = jit.staggered(2, size)
    for p in range(size // n_ops):
        q = int(alike[p])
        if q < p:
            for j in range(n_ops):
                out[0, p * n_ops + j], out[1, p * n_ops + j] = out[0, q * n_ops + j], out[1, q * n_ops + j]
            continue
        u, cap, b = units[p], capacity[p], buf[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i] = tiling.cache_reads_core(
                at(a_bytes, j), at(b_bytes, j), at(m, j), at(n, j), at(k, j), at(ea, j), at(eb, j), c_m[i], c_n[i], u,
                split[i], cap, b, keep_a[i], keep_b[i], at(a_read, j))
    return out[:, :size]


@jit.rule
def operand_traffic(a_bytes, r_a, b_bytes, r_b, c_bytes):
    """Bytes an operator moves through a level below its caches: A read ``r_a`` times, B ``r_b`` times, C written
    once (tiling.cache_reads gives the re-reads)."""
    return a_bytes * r_a + b_bytes * r_b + c_bytes


@jit.rule
def memory_traffic(r_a, r_b, spill, bandwidth, rom, a_mem, b_bytes, c_mem, weight_bytes, kv_bytes, compulsory):
    """An operator's main-memory traffic and time (seed 004 §4.1.1, §4.3.2, §4.8.1): A (``a_mem`` bytes, 0 where it
    stays on chip) read ``r_a`` times and B ``r_b`` times (tiling.cache_reads), C written once, split-K's partial
    sums that spill from the L2 (``spill``); the weights not where they come from a ROM of their own (``rom`` 1).
    Returns the bytes, the weights' and the KV cache's bytes (B is one or the other: ``weight_bytes`` /
    ``kv_bytes`` of its bytes), the time at ``bandwidth`` B/s, and the compulsory bytes' time at it."""
    bytes_w = weight_bytes * r_b
    moved = operand_traffic(a_mem, r_a, b_bytes, r_b, c_mem)
    moved = jit.where(rom > 0.5, moved - bytes_w, moved) + spill
    return moved, bytes_w, kv_bytes * r_b, memory_time(moved, bandwidth), memory_time(compulsory, bandwidth)


@jit.rule
def memory_time(bytes_moved, bandwidth):
    """Main memory's time for ``bytes_moved`` at ``bandwidth`` B/s (the roofline's V / BW, seed 004 §4.1.1)."""
    return bytes_moved / bandwidth


@jit.rule
def memory_energy(bytes_moved, energy_per_byte):
    """Main memory's energy for ``bytes_moved`` at ``energy_per_byte`` J/B (seed 004 §4.1.3: bytes x pJ/B)."""
    return bytes_moved * energy_per_byte


@jit.kernel
def _memory_by_set_kernel(bytes_sets, inverse, bandwidth, compulsory, e_mem, n_ops, times_only):
    """Main memory's bytes of a block found once per set of points alike (``bytes_sets``: flat (sets x operators),
    ``inverse`` each point's set) laid over the points, with what each point reads from them in the same pass: the
    time of the bytes and of the compulsory bytes (``compulsory`` per operator) at its ``bandwidth``
    (:func:`memory_time`) and their energy at its ``e_mem`` J/B (:func:`memory_energy`). Returns (4, points x
    operators). (The laying over, two divisions and a product in numpy before: ~6 ms of a decode step's 1e5 points
    against 2.1 in this pass; issue 20.) One operator per point: ``n_ops`` None and ``compulsory`` a number
    (jit.of_op), the loop along the points on the vector lanes (100,000 GEMM points 0.65 -> 0.25 ms alone).
    ``times_only``: the times alone (rows 1 and 2; the caller has the bytes and the energy as one value)."""
    k = jit.op_count(n_ops)
    rows = inverse.size
    n = rows * k
    out = jit.staggered(4, n)
    for p in range(rows):  # (the sets' bytes laid over first: the loops that divide then read them in order, on
        base, src = p * k, inverse[p] * k  # the vector lanes; read through ``inverse`` they ran one point at a time,
        for j in range(k):  # 100,000 GEMM points 0.25 -> 0.10 ms alone; a decode step's block 0.13 -> 0.16)
            out[0, base + j] = bytes_sets[src + j]
    if times_only:
        for p in range(rows):
            base, bw = p * k, bandwidth[p]
            for j in range(k):
                out[1, base + j] = memory_time(out[0, base + j], bw)
                out[2, base + j] = memory_time(jit.of_op(compulsory, j), bw)
        return out[:, :n]
    for p in range(rows):
        base, bw, em = p * k, bandwidth[p], e_mem[p]
        for j in range(k):
            i = base + j
            b = out[0, i]
            out[1, i], out[2, i], out[3, i] = memory_time(b, bw), memory_time(jit.of_op(compulsory, j), bw), \
                memory_energy(b, em)
    return out[:, :n]


@jit.rule
def peak_rate(units, fpc, clock, padded_flops):
    """FLOP/s of the matrix units at the peak clock (units x FLOPs per cycle of the operator's format x clock), and
    that rate x the operator's padded FLOPs (the terms of the FLOP-weighted peak rate)."""
    rate = units * fpc * clock
    return rate, rate * padded_flops


#: :func:`_rate_kernel`'s FLOPs per cycle and padded FLOPs: numbers where every point and operator has the same (one
#: group, :func:`_block_kernel`)
_RATE_NUMBERS = ((0, 1),)


@jit.kernel
def _rate_kernel(fpc, padded_flops, units, clock, n_ops):
    """:func:`peak_rate` over a block (flat (points x operators) FLOPs per cycle and padded FLOPs, then per point
    the units and the clock), in one pass (numpy's products broadcast a point's value over its row of operators:
    ~0.17 ms per 8,192 decode points). The FLOPs per cycle and the padded FLOPs numbers where every point and
    operator has the same (:data:`_RATE_NUMBERS`)."""
    n_ops, at = jit.op_count(n_ops), jit.of_op
    n = units.size * n_ops
    out = jit.staggered(2, n)
    for p in range(n // n_ops):
        u, c = units[p], clock[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i] = peak_rate(u, at(fpc, i), c, at(padded_flops, i))
    return out[:, :n]


@jit.kernel
def _memory_kernel(r_a, r_b, spill, bandwidth, rom, a_mem, b_bytes, c_mem, weight_bytes, kv_bytes, compulsory, n_ops):
    """:func:`memory_traffic` over a block (flat (points x operators) re-reads and spills, then per point the
    bandwidth and the ROM flag, then per operator its bytes); its 5 results (jit.staggered: a sixth, the energy,
    kept the loop off the vector lanes, 2.7 -> 5.2 ms per 1e5 decode points)."""
    n, n_ops, at = r_a.size, jit.op_count(n_ops), jit.of_op
    out = jit.staggered(5, n)
    for p in range(n // n_ops):
        bw, ro = bandwidth[p], rom[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i], out[2, i], out[3, i], out[4, i] = memory_traffic(
                r_a[i], r_b[i], spill[i], bw, ro, at(a_mem, j), at(b_bytes, j), at(c_mem, j), at(weight_bytes, j),
                at(kv_bytes, j), at(compulsory, j))
    return out[:, :n]


@jit.rule
def compute_energy(padded_flops, e_flop, reg_per_flop, vector_flops, local_bytes, l2_requests, l2, e_vector, e_reg,
                   e_local, e_l2, s1, exps, is_gemm):
    """An operator's compute energy at the design clock's voltage (seed 004 §4.1.3: bytes x J/B + FLOPs x J/FLOP at
    V_nom, times ``s1``, (V1 / V_nom)^2): its matrix FLOPs at the format's J/FLOP, its vector FLOPs and
    exponentials at the vector unit's, the register files' bytes (``reg_per_flop`` per matrix FLOP of a GEMM-like
    operator, dse.model.hierarchy), the local buffers' and the L2's (what the local buffers request, where there
    is an L2). Returns the register bytes, the L2 bytes and the energy."""
    reg_bytes = jit.where(is_gemm > 0.5, padded_flops, 0.0) * reg_per_flop
    l2_bytes = jit.where(l2 > 0, l2_requests, 0.0)
    e = padded_flops * e_flop + (vector_flops + exps) * e_vector + reg_bytes * e_reg + local_bytes * e_local \
        + l2_bytes * e_l2
    return reg_bytes, l2_bytes, e * s1


@jit.kernel
def _compute_energy_kernel(padded_flops, e_flop, reg_per_flop, vector_flops, local_bytes, l2_requests, l2, e_vector,
                           e_reg, e_local, e_l2, s1, exps, is_gemm, n_ops):
    """:func:`compute_energy` over a block (flat (points x operators) arrays, then per point the L2 and the J/B
    and the voltage's scale, then per operator the exponentials and 1 for a GEMM-like operator); its 3 results
    (jit.staggered). The FLOPs, J/FLOP, register bytes per FLOP, L2 and J/B numbers where every point and operator has
    the same (:data:`_COMPUTE_ENERGY_NUMBERS`)."""
    n, n_ops, at = local_bytes.size, jit.op_count(n_ops), jit.of_op
    out = jit.staggered(3, n)
    for p in range(n // n_ops):
        c2, ev, er, el, e2, s = at(l2, p), at(e_vector, p), at(e_reg, p), at(e_local, p), at(e_l2, p), s1[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i], out[2, i] = compute_energy(
                at(padded_flops, i), at(e_flop, i), at(reg_per_flop, i), at(vector_flops, i), local_bytes[i],
                l2_requests[i], c2, ev, er, el, e2, s, at(exps, j), at(is_gemm, j))
    return out[:, :n]


#: :func:`_compute_energy_kernel`'s inputs read as numbers where every point and operator has the same (groups of
#: indices, :func:`_block_kernel`): the padded FLOPs, J/FLOP, register bytes per FLOP and vector FLOPs (one
#: operator's); the L2 and the vector unit's, the register files', the local buffers' and the L2's J/B (a chip's)
_COMPUTE_ENERGY_NUMBERS = ((0, 1, 2, 3), (6, 7, 8, 9, 10))


@jit.rule
def vector_time(vector_flops, exps, vector_rate, exp_rate):
    """The vector unit's time (softmax, norms, activations): its ALU work and its exponentials run on one unit, so
    their times add (seed 004 §4.8.1); 0 without work, inf for work at a rate of 0."""
    t = pipeline.shared_core(jit.where(vector_flops > 0, vector_flops / vector_rate, 0.0),
                             jit.where(exps > 0, exps / exp_rate, 0.0))
    return jit.where(np.isfinite(t), t, jit.where(vector_flops + exps > 0, np.inf, 0.0))


@jit.rule
def design_clock_figures(units, clock, vector_fpc, exp_pc, l2_bw, dies, local_bw, v1, v_nom, leak, fixed1, bw_raw,
                         bw_factor, in_flight, txn_bytes, latency):
    """A point's figures at the design clock that its operators share: the vector unit's FLOP/s and exponentials/s
    (units x per cycle x clock), the L2's B/s (per die and cycle x dies x clock), the local buffers' (per unit and
    cycle x units x clock), the switching energies' scale (V1 / V_nom)^2, the leakage at V1 and the clock tree's
    power (the fixed power's rest; dse.model.power), and main memory's bandwidth (the interface's x its efficiency,
    capped by Little's law: dse.model.links)."""
    leak1 = leak * pw.leakage_scale(v1, v_nom)
    return (units * vector_fpc * clock, units * exp_pc * clock, l2_bw * dies * clock, local_bw * units * clock,
            pw.dynamic_energy_scale(v1, v_nom), leak1, fixed1 - leak1,
            links.little_bandwidth(bw_raw * bw_factor, in_flight, txn_bytes, latency))


#: :func:`design_clock_figures`' inputs (its order) that are one group of numbers or arrays
#: (:func:`_per_point_groups`): the chip's structure (per-cycle rates, dies), V_nom and main memory's efficiency,
#: transactions and latency; the units, the clock, V1, the leakage, the fixed power and the interface's bandwidth
#: (which follow the units, the clock and the stacks) arrays
_DESIGN_CLOCK_GROUPS = ((2, 3, 4, 5, 6, 8, 12, 13, 14, 15),)


@jit.kernel
def _design_clock_kernel(x):
    """:func:`design_clock_figures` of a block's points (``x``: its inputs, arrays of one value per point or
    numbers, jit.of_op), one pass: its 8 results (jit.staggered). (~15 numpy passes over the points' columns
    before, each writing an array: 0.47 -> 0.23 ms for the columns of 100,000 GEMM points alone; issue 20.)"""
    (units, clock, vector_fpc, exp_pc, l2_bw, dies, local_bw, v1, v_nom, leak, fixed1, bw_raw, bw_factor, in_flight,
     txn_bytes, latency) = x
    at = jit.of_op
    n = units.size
    out = jit.staggered(8, n)
    for p in range(n):
        t = design_clock_figures(at(units, p), at(clock, p), at(vector_fpc, p), at(exp_pc, p), at(l2_bw, p),
                                 at(dies, p), at(local_bw, p), at(v1, p), at(v_nom, p), at(leak, p), at(fixed1, p),
                                 at(bw_raw, p), at(bw_factor, p), at(in_flight, p), at(txn_bytes, p), at(latency, p))
        out[0, p], out[1, p], out[2, p], out[3, p] = t[0], t[1], t[2], t[3]
        out[4, p], out[5, p], out[6, p], out[7, p] = t[4], t[5], t[6], t[7]
    return out[:, :n]


def _design_clock_columns(c: "ChipColumns", fixed1) -> tuple:
    """:func:`design_clock_figures` of the points of ``c`` (the fixed power ``fixed1`` at the design clock), each a
    (rows, 1) column: one row where no input varies."""
    xs = (c.units, c.clock, c.vfpc, c.xpc, c.l2bw, c.dies, c.locbw, c.v1, c.v_nom, c.leak, fixed1, c.bw_raw, c.beff,
          c.inflight, c.txn, c.lat)
    rows = max(x.shape[0] for x in xs)
    out = _design_clock_kernel(_per_point_groups(xs, _DESIGN_CLOCK_GROUPS, rows))
    return tuple(out[k].reshape(rows, 1) for k in range(8))


@jit.rule
def busy_at_design_clock(padded_flops, rate, ceff, wave_eff, vector_flops, exps, vector_rate, exp_rate, l2_bytes,
                         l2_rate, local_reads, buf, local_rate):
    """An operator's times at the design clock, the power ceiling's inputs: the matrix unit's busy time without
    the waves' loss (t_c1; idle units draw no switching power) and with it (t_m1), the L2's time (its bytes at
    ``l2_rate`` B/s), the local buffers' (``local_rate``: all units' B/s; per unit, wave by wave like the matrix
    unit: t_loc1 = t_loc_c1 / wave efficiency; none without a local buffer, ``buf`` = 0), the overlapped busy
    time of the units' resources without (busy1) and with the waves' loss (clocked1), and the vector unit's time
    (:func:`vector_time`)."""
    t_vector = vector_time(vector_flops, exps, vector_rate, exp_rate)
    t_c1 = jit.where(padded_flops > 0, padded_flops / (rate * ceff), 0.0)
    t_m1 = jit.where(padded_flops > 0, padded_flops / (rate * ceff * wave_eff), 0.0)
    t_l2_1 = hierarchy.level_time_core(l2_bytes, l2_rate)
    t_loc_c1 = hierarchy.level_time_core(jit.where(buf > 0, local_reads, 0.0), local_rate)
    t_loc_1 = t_loc_c1 / wave_eff
    busy1 = pipeline.overlapped_core(t_c1, t_vector, t_l2_1, t_loc_c1)
    clocked1 = pipeline.overlapped_core(t_m1, t_vector, t_l2_1, t_loc_1)
    return t_c1, t_m1, t_l2_1, t_loc_c1, t_loc_1, busy1, clocked1, t_vector


@jit.rule
def operator_times(padded_flops, flops, rate, cr, ceff, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory):
    """An operator's resource times at the sustained clock, ``cr`` x the design clock (seed 004 §4.1.3, §4.8.1):
    the matrix unit's (its padded FLOPs at the sustained rate with the waves' loss; inf for FLOPs at a rate of 0),
    the ideal matrix time (the FLOPs at the peak rate), the vector unit's and the on-chip levels' (their design-clock
    times over cr; they run on the core clock), and the overlapped busy time with the memory's."""
    sustained = rate * cr * ceff * wave_eff  # (wave_eff is 1 for vector operators)
    t_matrix = jit.where(padded_flops > 0, padded_flops / sustained, 0.0)
    t_matrix = jit.where(np.isfinite(t_matrix), t_matrix, np.inf)
    t_matrix_ideal = jit.where(flops > 0, flops / rate, 0.0)
    t_vector = t_vector1 / cr
    t_l2, t_local = t_l2_1 / cr, t_loc_1 / cr
    t_busy = pipeline.overlapped_core(t_matrix, t_vector, t_memory, t_l2, t_local)
    return t_matrix, t_matrix_ideal, t_vector, t_l2, t_local, t_busy


@jit.rule
def memory_stretched(t_busy, t_memory, stretch):
    """An operator whose memory traffic the power ceiling slows as well (``stretch`` > 1: even the lowest clock is over
    TDP, dse.model.power.sustained_operating_point): its memory time is ``stretch`` x its time; (its time, at least
    that; its memory time)."""
    t_mem = jit.where(stretch > 1.0, t_busy * stretch, t_memory)
    return jit.maximum(t_busy, t_mem), t_mem


@jit.rule
def operating_energy(cr, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_comp1, e_mem, t_op, t_matrix, t_vector,
                     t_memory, t_l2, t_local):
    """An operator at its sustained clock ``cr`` (the clock law's fields d, V_min, V_nom, V_th, V1, ``scaling``;
    dse.model.power): the voltage, the switching energy's scale over the design clock's (V / V1)^2, the compute
    energy (``e_comp1`` at V1) at that voltage, the leakage and clock power and their energy over the operator's
    time, the bound (the first of matrix, vector, memory, L2, local buffer with the largest time: 0 .. 4) and the
    power it draws (its energy over its time plus the fixed power)."""
    v = pw.clock_voltage(cr, d, v_min, v_nom, v_th, v1, scaling)
    e_scale = pw.dynamic_energy_scale(v, v1)
    e_comp = e_comp1 * e_scale
    p_fixed = pw.fixed_power_core(leak, clk, d, cr, v, v_nom)
    e_fixed = p_fixed * t_op
    t_top = pipeline.overlapped_core(t_matrix, t_vector, t_memory, t_l2, t_local)
    bound = jit.where(t_matrix >= t_top, 0.0, jit.where(t_vector >= t_top, 1.0, jit.where(
        t_memory >= t_top, 2.0, jit.where(t_l2 >= t_top, 3.0, 4.0))))
    power = pw.average_power_core(e_comp + e_mem, t_op) + p_fixed
    return v, e_scale, e_comp, p_fixed, e_fixed, bound, power


#: the results of :func:`busy_at_design_clock` (its indices) that :func:`_busy_kernel` stores for one operator a
#: point: the L2's and the local buffers' times, the busy times without and with the waves' loss and the vector
#: unit's time. The matrix unit's busy times and the local buffers' without the loss are read by fused attention
#: blocks alone, which one operator a point never has (3 of 8 results not written over the points: 100,000 GEMM
#: points 0.61 -> 0.35-0.45 ms in place; issue 20)
_BUSY_ONE_OP = (2, 4, 5, 6, 7)

#: :func:`_busy_kernel`'s inputs read as numbers where every point and operator has the same (groups of indices,
#: :func:`_block_kernel`): the padded and the vector FLOPs (one operator's); the compute efficiency and the buffer
_BUSY_NUMBERS = ((0, 3), (6, 10))


@jit.kernel
def _busy_kernel(padded_flops, rate, wave_eff, vector_flops, l2_bytes, local_reads, ceff, vector_rate, exp_rate,
                 l2_rate, buf, local_rate, exps, n_ops):
    """:func:`busy_at_design_clock` over a block: flat (points x operators) arrays, then per-point ones, then the
    exponentials per operator; its 8 results (jit.staggered), those of :data:`_BUSY_ONE_OP` for one operator a point
    (``n_ops`` None). The FLOPs, the compute efficiency and the buffer numbers where every point and operator has
    the same (:data:`_BUSY_NUMBERS`)."""
    n, k, at = rate.size, jit.op_count(n_ops), jit.of_op
    out = jit.staggered(len(_BUSY_ONE_OP) if n_ops is None else 8, n)
    for p in range(n // k):
        ce, vr, xr, l2r, b, lr = at(ceff, p), vector_rate[p], exp_rate[p], l2_rate[p], at(buf, p), local_rate[p]
        for j in range(k):
            i = p * k + j
            t = busy_at_design_clock(at(padded_flops, i), rate[i], ce, wave_eff[i], at(vector_flops, i), at(exps, j),
                                     vr, xr, l2_bytes[i], l2r, local_reads[i], b, lr)
            if n_ops is None:
                out[0, i], out[1, i], out[2, i] = t[_BUSY_ONE_OP[0]], t[_BUSY_ONE_OP[1]], t[_BUSY_ONE_OP[2]]
                out[3, i], out[4, i] = t[_BUSY_ONE_OP[3]], t[_BUSY_ONE_OP[4]]
            else:
                out[0, i], out[1, i], out[2, i], out[3, i], out[4, i], out[5, i], out[6, i], out[7, i] = t
    return out[:, :n]


@jit.kernel
def _times_kernel(padded_flops, flops, rate, cr, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory, ceff, n_ops):
    """:func:`operator_times` over a block (flat (points x operators) arrays, then ``ceff`` per point); its 6
    results (jit.staggered)."""
    n, n_ops = padded_flops.size, jit.op_count(n_ops)
    out = jit.staggered(6, n)
    for p in range(n // n_ops):
        ce = ceff[p]
        for j in range(n_ops):
            i = p * n_ops + j
            out[0, i], out[1, i], out[2, i], out[3, i], out[4, i], out[5, i] = operator_times(
                padded_flops[i], flops[i], rate[i], cr[i], ce, wave_eff[i], t_vector1[i], t_l2_1[i], t_loc_1[i],
                t_memory[i])
    return out[:, :n]


#: the per-point sums and extremes of :func:`_energy_kernel` (its last output, one row each)
POINT_SUMS = ("e_compute", "e_fixed", "e_register", "e_local", "e_l2", "device", "bound_matrix", "bound_vector",
              "bound_memory", "bound_l2", "bound_local", "clock_flops", "clock_min", "voltage_flops", "voltage_min",
              "power_max", "bound_code")


@jit.rule
def operator_sums(w, e_comp, e_fixed, bound, e_scale, v, cr, t_op, padded_flops, reg_bytes, local_bytes, l2_bytes,
                  e_reg, e_loc, e_l2, s1):
    """One operator's terms of its point's sums (:data:`POINT_SUMS`, :func:`_energy_kernel`), ``w`` its count:
    its compute and fixed energies, the registers', local buffers' and L2's energies at its voltage's scale
    ``e_scale`` (their J/B at V_nom x s1, the design voltage's scale), its time (all, then by its bound: 5 terms,
    its time under the one it has), and its FLOP-weighted clock ratio and voltage."""
    tw = t_op * w
    pf = padded_flops * w
    return (e_comp * w, e_fixed * w, reg_bytes * e_reg * s1 * e_scale * w, local_bytes * e_loc * s1 * e_scale * w,
            l2_bytes * e_l2 * s1 * e_scale * w, tw, jit.where(bound == 0.0, tw, 0.0), jit.where(bound == 1.0, tw, 0.0),
            jit.where(bound == 2.0, tw, 0.0), jit.where(bound == 3.0, tw, 0.0), jit.where(bound == 4.0, tw, 0.0),
            cr * pf, v * pf)


@jit.rule(loops=True)
def bound_code(b_matrix, b_vector, b_memory, b_l2, b_local):
    """The bound with the most time, 0 .. 4 (matrix, vector, memory, L2, local buffer): the first of the largest, or
    of the first NaN, as numpy's argmax (numbers only; its branches are cheaper than selects here)."""
    code, top = 0.0, b_matrix
    for k, x in enumerate((b_vector, b_memory, b_l2, b_local)):
        take = (x > top) or (np.isnan(x) and not np.isnan(top))
        code, top = jit.where(take, k + 1.0, code), jit.where(take, x, top)
    return code


@jit.kernel
def _energy_kernel(cr, e_comp1, e_mem, t_op, t_matrix, t_vector, t_memory, t_l2, t_local, padded_flops, reg_bytes,
                   local_bytes, l2_bytes, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_reg, e_loc, e_l2, s1,
                   count, grouped, n_ops):
    """:func:`operating_energy` over a block (flat (points x operators) arrays, then per point the clock law,
    leakage, clock power, the on-chip levels' J/B and the design voltage's energy scale s1, then per operator its
    count and 1 where it is one of a fused attention block's). Returns the compute energy, the fixed power and
    energy and the bound (flat), and (len(POINT_SUMS), points): over the operators, the sums of their
    :func:`operator_sums`; the minima of the clock ratio and the voltage; the highest power of an operator outside
    the fused blocks (-inf without one); the :func:`bound_code` of the times by bound. A point's operators are
    evaluated, then summed one after another (numpy's pairwise sums differ in the last bits). One operator per
    point (``n_ops`` None, jit.of_op): one pass along the points, on the vector lanes with jit.LLVM_OPTIONS (without
    them a loop storing 17 sums per point ran one point at a time, and the kernel made seven passes: 100,000 GEMM
    points 2.3 -> 1.3 ms alone, 3.5 -> 1.9-2.1 ms in an evaluation, issue 20)."""
    n, k = cr.size, jit.op_count(n_ops)
    rows = n // k
    out = jit.staggered(4, n)  # e_comp, p_fixed, e_fixed, bound
    sums = np.empty((len(POINT_SUMS), rows))
    if n_ops is None:
        w, outside = jit.of_op(count, 0), jit.of_op(grouped, 0) < 0.5
        for i in range(n):
            v, e_scale, e_comp, p_fixed, e_fixed, bound, power = operating_energy(
                cr[i], d[i], v_min[i], v_nom[i], v_th[i], v1[i], scaling[i], leak[i], clk[i], e_comp1[i], e_mem[i],
                t_op[i], t_matrix[i], t_vector[i], t_memory[i], t_l2[i], t_local[i])
            out[0, i], out[1, i], out[2, i], out[3, i] = e_comp, p_fixed, e_fixed, bound
            t = operator_sums(w, e_comp, e_fixed, bound, e_scale, v, cr[i], t_op[i], padded_flops[i], reg_bytes[i],
                              local_bytes[i], l2_bytes[i], e_reg[i], e_loc[i], e_l2[i], s1[i])
            sums[0, i], sums[1, i], sums[2, i], sums[3, i], sums[4, i] = (
                0.0 + t[0], 0.0 + t[1], 0.0 + t[2], 0.0 + t[3], 0.0 + t[4])
            sums[5, i], sums[6, i], sums[7, i], sums[8, i], sums[9, i] = (
                0.0 + t[5], 0.0 + t[6], 0.0 + t[7], 0.0 + t[8], 0.0 + t[9])
            sums[10, i], sums[11, i], sums[13, i] = 0.0 + t[10], 0.0 + t[11], 0.0 + t[12]
            sums[12, i], sums[14, i] = jit.minimum(np.inf, cr[i]), jit.minimum(np.inf, v)
            sums[15, i] = jit.where(outside, jit.maximum(-np.inf, power), -np.inf)
            sums[16, i] = bound_code(t[6], t[7], t[8], t[9], t[10])
        return out[0, :n], out[1, :n], out[2, :n], out[3, :n], sums
    point = jit.staggered(3, k)  # a point's v, e_scale and power, to sum
    for p in range(rows):
        dd, a, b, c, e, f, g, h = d[p], v_min[p], v_nom[p], v_th[p], v1[p], scaling[p], leak[p], clk[p]
        base = p * k
        for j in range(k):
            i = base + j
            point[0, j], point[1, j], out[0, i], out[1, i], out[2, i], out[3, i], point[2, j] = operating_energy(
                cr[i], dd, a, b, c, e, f, g, h, e_comp1[i], e_mem[i], t_op[i], t_matrix[i], t_vector[i],
                t_memory[i], t_l2[i], t_local[i])
        er, el, e2, s = e_reg[p], e_loc[p], e_l2[p], s1[p]
        s_comp = s_fixed = s_reg = s_loc = s_l2 = s_dev = s_cr = s_v = 0.0
        b_mat = b_vec = b_mem = b_l2 = b_loc = 0.0
        cr_min, v_min_o, p_max = np.inf, np.inf, -np.inf
        for j in range(k):
            i = base + j
            t = operator_sums(jit.of_op(count, j), out[0, i], out[2, i], out[3, i], point[1, j], point[0, j], cr[i],
                              t_op[i], padded_flops[i], reg_bytes[i], local_bytes[i], l2_bytes[i], er, el, e2, s)
            s_comp, s_fixed, s_reg, s_loc, s_l2 = s_comp + t[0], s_fixed + t[1], s_reg + t[2], s_loc + t[3], s_l2 + t[4]
            s_dev, b_mat, b_vec, b_mem, b_l2 = s_dev + t[5], b_mat + t[6], b_vec + t[7], b_mem + t[8], b_l2 + t[9]
            b_loc, s_cr, s_v = b_loc + t[10], s_cr + t[11], s_v + t[12]
            cr_min = jit.minimum(cr_min, cr[i])
            v_min_o = jit.minimum(v_min_o, point[0, j])
            p_max = jit.where(jit.of_op(grouped, j) > 0.5, p_max, jit.maximum(p_max, point[2, j]))
        sums[0, p], sums[1, p], sums[2, p], sums[3, p], sums[4, p] = s_comp, s_fixed, s_reg, s_loc, s_l2
        sums[5, p] = s_dev
        sums[6, p], sums[7, p], sums[8, p], sums[9, p], sums[10, p] = b_mat, b_vec, b_mem, b_l2, b_loc
        sums[11, p], sums[12, p], sums[13, p], sums[14, p], sums[15, p] = s_cr, cr_min, s_v, v_min_o, p_max
        sums[16, p] = bound_code(b_mat, b_vec, b_mem, b_l2, b_loc)
    return out[0, :n], out[1, :n], out[2, :n], out[3, :n], sums


@jit.rule(loops=True)
def _settle(vals, lo, hi, dest, m, floor, steps, out):
    """:func:`_clock_kernel`'s gathered entries over TDP bisected (dse.model.power.bisect_chunk), each one's clock
    ratio and memory stretch laid on its operators (rows 0 and 1 of ``out``)."""
    if m > 0:
        pw.bisect_chunk(vals, lo, hi, m, floor, steps)
        for z in range(m):
            for q in range(3):
                out[0, dest[q, z]], out[1, dest[q, z]] = lo[z], hi[z]


@jit.kernel
def _clock_kernel(x, per_point, exps, groups, n_ops, floor, steps):
    """The block's times at the design clock (:func:`busy_at_design_clock`) and each operator's sustained clock and
    memory stretch under TDP (dse.model.power.sustained_operating_point; a fused attention block's three operators
    one operating point, :func:`fused_block_clock_inputs`), one point at a time, without the (points x operators)
    arrays of the passes it stands for (_busy_kernel, the power ceiling's kernel, _attention_clock): the same rules
    in the same order, so the same numbers. The entries over TDP at the design clock (operators outside the fused
    blocks, and the blocks) are gathered :data:`dse.model.power.BISECTION_CHUNK` at a time and bisected together
    (dse.model.power.bisect_chunk), their results laid on the operators (a block's on its three). Returns (5,
    points x operators): the clock ratio, the memory stretch, the vector, L2 and local-buffer times at the design
    clock. ``x``: the flat inputs (padded FLOPs, rate, wave efficiency, vector FLOPs, L2 bytes, local-buffer reads,
    compute and memory energies, memory time, the fused blocks' waves); ``per_point``: the compute efficiency, the
    vector, exponential, L2 and local-buffer rates, the local buffer, TDP, leakage, clock power and the clock law
    (d, V_min, V_nom, V_th, V1, scaling); ``exps`` per operator; ``groups`` the fused blocks' columns (blocks, 3).
    Its loops over a point's operators are apart, so that each runs on the vector lanes (a loop storing the 13
    results of the first two ran one operator at a time: 2.0 -> 0.94 ms for a decode step's block of 8,192 points
    x 16 operators; issue 20)."""
    (padded_flops, rate, wave_eff, vector_flops, l2_bytes, local_reads, e_comp, e_mem, t_memory, waves) = x
    (ceff, vector_rate, exp_rate, l2_rate, buf, local_rate, tdp, leak, clk, d, v_min, v_nom, v_th, v1,
     scaling) = per_point
    k = n_ops
    n = padded_flops.size
    rows = n // k
    n_groups = groups.shape[0]
    out = jit.staggered(5, n)
    b = np.empty((8, _ROW))  # a point's busy_at_design_clock results (rows a constant apart: jit.SCRATCH_ROW)
    hot = np.empty(k + n_groups)  # 1 where an operator (then a fused block) is over TDP at the design clock
    rates = np.empty((4, max(n_groups, 1)))  # the fused blocks' operator_power_rates
    chunk = pw.BISECTION_CHUNK
    vals, lo, hi = np.empty((13, chunk)), np.empty(chunk), np.empty(chunk)
    dest = np.empty((3, chunk), dtype=np.int64)  # the entries' operators (an operator's index three times)
    m = 0
    for p in range(rows):
        base = p * k
        ce, vr, xr, l2r, bf, lr = ceff[p], vector_rate[p], exp_rate[p], l2_rate[p], buf[p], local_rate[p]
        tp, lk, ck, dd, a, bb, c, f, h = tdp[p], leak[p], clk[p], d[p], v_min[p], v_nom[p], v_th[p], v1[p], scaling[p]
        for j in range(k):  # (no branch: on the vector lanes)
            i = base + j
            b[0, j], b[1, j], b[2, j], b[3, j], b[4, j], b[5, j], b[6, j], b[7, j] = busy_at_design_clock(
                padded_flops[i], rate[i], ce, wave_eff[i], vector_flops[i], exps[j], vr, xr, l2_bytes[i], l2r,
                local_reads[i], bf, lr)
        for j in range(k):  # (each loop on its own: together they ran one operator at a time, 2.1x slower)
            i = base + j
            out[0, i], out[1, i], out[2, i], out[3, i], out[4, i] = 1.0, 1.0, b[7, j], b[2, j], b[4, j]
        for j in range(k):
            i = base + j
            hot[j] = jit.where(pw.operator_power_core(1.0, e_comp[i], e_mem[i], b[5, j], b[6, j], t_memory[i], lk, ck,
                                                      dd, a, bb, c, f, h) > tp, 1.0, 0.0)
        for g in range(n_groups):
            c0, c1, c2 = groups[g, 0], groups[g, 1], groups[g, 2]
            i0, i1, i2 = base + c0, base + c1, base + c2
            busy, clocked, e_c, e_m, t_m = fused_block_clock_inputs(
                (b[0, c0], b[1, c0], b[7, c0], b[2, c0], b[3, c0], b[4, c0], b[5, c0], b[6, c0], e_comp[i0], e_mem[i0],
                 t_memory[i0]),
                (b[0, c1], b[1, c1], b[7, c1], b[2, c1], b[3, c1], b[4, c1], b[5, c1], b[6, c1], e_comp[i1], e_mem[i1],
                 t_memory[i1]),
                (b[0, c2], b[1, c2], b[7, c2], b[2, c2], b[3, c2], b[4, c2], b[5, c2], b[6, c2], e_comp[i2], e_mem[i2],
                 t_memory[i2]), waves[i0])
            hot[c0], hot[c1], hot[c2] = 0.0, 0.0, 0.0  # (the block's operating point is theirs)
            hot[k + g] = jit.where(pw.operator_power_core(1.0, e_c, e_m, busy, clocked, t_m, lk, ck, dd, a, bb, c, f,
                                                          h) > tp, 1.0, 0.0)
            rates[0, g], rates[1, g], rates[2, g], rates[3, g] = pw.operator_power_rates(e_c, e_m, busy, clocked, t_m)
        for e in range(k + n_groups):
            if hot[e] > 0.5:
                if e < k:
                    i = base + e
                    vals[9, m], vals[10, m], vals[11, m], vals[12, m] = pw.operator_power_rates(
                        e_comp[i], e_mem[i], b[5, e], b[6, e], t_memory[i])
                    dest[0, m], dest[1, m], dest[2, m] = i, i, i
                else:
                    g = e - k
                    vals[9, m], vals[10, m] = rates[0, g], rates[1, g]
                    vals[11, m], vals[12, m] = rates[2, g], rates[3, g]
                    dest[0, m], dest[1, m], dest[2, m] = base + groups[g, 0], base + groups[g, 1], base + groups[g, 2]
                vals[0, m], vals[1, m], vals[2, m], vals[3, m], vals[4, m] = tp, lk, ck, dd, a
                vals[5, m], vals[6, m], vals[7, m], vals[8, m] = bb, c, f, h
                lo[m], hi[m] = floor, 1.0
                m += 1
                if m == chunk:
                    _settle(vals, lo, hi, dest, m, floor, steps, out)
                    m = 0
    _settle(vals, lo, hi, dest, m, floor, steps, out)
    return out[:, :n]


#: :func:`_tail_kernel`'s per-point inputs (the compute efficiency, the clock law's d, V_min, V_nom, V_th, V1 and
#: scaling, leakage, clock power, the on-chip levels' J/B, the design voltage's energy scale) by their indices: a
#: group of numbers or arrays (:func:`_per_point_groups`), the technology's figures, which a search rarely changes;
#: the others, which follow the clock and the units, arrays (a group of them too compiled 9 signatures of the kernel
#: in the evaluator's tests, against 6, and gained nothing where the clock varies)
_TAIL_POINT_GROUPS = ((0, 2, 3, 4, 6, 9, 10, 11),)

#: the per-point rows of :func:`_tail_kernel`: :data:`POINT_SUMS`, then these sums of the operators' times (x count)
#: and 1 where an operator's memory traffic is slowed (memory_throttled)
TAIL_SUMS = ("t_matrix_s", "t_matrix_ideal_s", "t_vector_s", "t_memory_s", "t_roofline_s", "t_l2_s", "t_local_s",
             "memory_throttled")


@jit.rule
def tail_one(padded_flops, flops, rate, cr, ceff, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory1, stretch, law,
             leak, clk, e_comp1, e_mem, reg_bytes, local_bytes, l2_bytes, e_reg, e_loc, e_l2, s1, t_comp, w, outside):
    """:func:`_tail_kernel`'s numbers of a point of one operator (counted ``w`` times; ``outside`` true where it is
    not in a fused attention block; ``law`` the clock law's (d, V_min, V_nom, V_th, V1, scaling)), in the order of
    :data:`POINT_SUMS` + :data:`TAIL_SUMS`: its times at its clock (:func:`operator_times`), its memory traffic
    slowed where even the lowest clock is over TDP (:func:`memory_stretched`), its energies at the operating point
    (:func:`operating_energy`), their sums (:func:`operator_sums`, 0 + each: a sum of one term) and its times x
    ``w``. (A rule numba inlines takes at most 30 arguments.)"""
    d, v_min, v_nom, v_th, v1, scaling = law
    t_matrix, t_matrix_ideal, t_vector, t_l2, t_local, t_busy = operator_times(
        padded_flops, flops, rate, cr, ceff, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory1)
    t_busy, t_memory = memory_stretched(t_busy, t_memory1, stretch)
    v, e_scale, e_c, p_fixed, e_fixed, bound, power = operating_energy(
        cr, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_comp1, e_mem, t_busy, t_matrix, t_vector, t_memory, t_l2,
        t_local)
    y = operator_sums(w, e_c, e_fixed, bound, e_scale, v, cr, t_busy, padded_flops, reg_bytes, local_bytes, l2_bytes,
                      e_reg, e_loc, e_l2, s1)
    return (0.0 + y[0], 0.0 + y[1], 0.0 + y[2], 0.0 + y[3], 0.0 + y[4], 0.0 + y[5], 0.0 + y[6], 0.0 + y[7],
            0.0 + y[8], 0.0 + y[9], 0.0 + y[10], 0.0 + y[11], jit.minimum(np.inf, cr), 0.0 + y[12],
            jit.minimum(np.inf, v), jit.where(outside, jit.maximum(-np.inf, power), -np.inf),
            bound_code(0.0 + y[6], 0.0 + y[7], 0.0 + y[8], 0.0 + y[9], 0.0 + y[10]), 0.0 + t_matrix * w,
            0.0 + t_matrix_ideal * w, 0.0 + t_vector * w, 0.0 + t_memory * w,
            0.0 + pipeline.overlapped_core(t_matrix_ideal, t_comp) * w, 0.0 + t_l2 * w, 0.0 + t_local * w,
            jit.where(stretch > 1.0, 1.0, 0.0))


@jit.kernel
def _tail_kernel(x, per_point, count, grouped, groups, n_ops):
    """The block from the sustained clock on, one point at a time, without its (points, operators) arrays: each
    operator's times at its clock (:func:`operator_times`), its memory traffic slowed where even the lowest clock is
    over TDP (:func:`memory_stretched`), the fused attention blocks' pipelining (:func:`fused_block_share`), the
    energies at the operating point (:func:`operating_energy`) and their sums (:func:`operator_sums`, the power of
    the operators and of the fused blocks, :func:`fused_block_power`), and the sums of the times; the rows of
    :data:`POINT_SUMS` + :data:`TAIL_SUMS`, each (points,). The rules and their order are those of the passes it
    stands for (_times_kernel, _energy_kernel, _attention_overlap_kernel, _group_power_kernel), so its numbers are
    theirs, the sums of the times within rounding (added one after another here, by _sums_kernel in an order of
    LLVM's). A point's operators are taken in loops without sums, which run on the vector lanes, then summed
    (a decode step: ~2.2 ms a block of 8,192 points x 16 operators where those passes took ~2.6, and wrote and
    read ~25 arrays of the block's size; issue 20). ``x``: the flat (points x operators) inputs (padded FLOPs, FLOPs,
    rate, clock ratio, memory stretch, wave efficiency, the vector, L2, local-buffer and memory times at the design
    clock, compute and memory energies, register, local and L2 bytes, compulsory memory time, the fused blocks'
    waves); ``per_point``: the compute efficiency, the clock law (d, V_min, V_nom, V_th, V1, scaling), leakage,
    clock power, the register, local and L2 J/B and the design voltage's energy scale; ``count`` and ``grouped``
    per operator; ``groups``: the fused blocks' three columns, (blocks, 3). One operator per point (``n_ops`` None,
    ``count`` and ``grouped`` numbers, jit.of_op): the same rules in one pass along the points (jit.LLVM_OPTIONS)."""
    (padded_flops, flops, rate, cr, stretch, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory1, e_comp1, e_mem,
     reg_bytes, local_bytes, l2_bytes, t_comp, waves) = x
    ceff, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_reg, e_loc, e_l2, s1 = per_point
    k, at = jit.op_count(n_ops), jit.of_op
    rows = rate.size // k
    n_sums = len(POINT_SUMS) + len(TAIL_SUMS)
    sums = np.empty((n_sums, rows))
    if n_ops is None:  # (one operator a point, jit.of_op: one pass along the points, on the vector lanes)
        w, outside = jit.of_op(count, 0), jit.of_op(grouped, 0) < 0.5
        for p in range(rows):
            y = tail_one(at(padded_flops, p), at(flops, p), rate[p], cr[p], at(ceff, p), wave_eff[p], t_vector1[p],
                         t_l2_1[p], t_loc_1[p], t_memory1[p], stretch[p], (at(d, p), at(v_min, p), at(v_nom, p),
                         at(v_th, p), at(v1, p), at(scaling, p)), at(leak, p), at(clk, p), e_comp1[p], e_mem[p],
                         reg_bytes[p], local_bytes[p], l2_bytes[p], at(e_reg, p), at(e_loc, p), at(e_l2, p), at(s1, p),
                         t_comp[p], w, outside)
            sums[0, p], sums[1, p], sums[2, p], sums[3, p], sums[4, p] = y[0], y[1], y[2], y[3], y[4]
            sums[5, p], sums[6, p], sums[7, p], sums[8, p], sums[9, p] = y[5], y[6], y[7], y[8], y[9]
            sums[10, p], sums[11, p], sums[12, p], sums[13, p], sums[14, p] = y[10], y[11], y[12], y[13], y[14]
            sums[15, p], sums[16, p], sums[17, p], sums[18, p], sums[19, p] = y[15], y[16], y[17], y[18], y[19]
            sums[20, p], sums[21, p], sums[22, p], sums[23, p], sums[24, p] = y[20], y[21], y[22], y[23], y[24]
        return sums
    t = np.empty((8, _ROW))  # a point's matrix, vector, memory, L2, local-buffer and operator times, the ideal
    # matrix time and the roofline's
    e = np.empty((7, _ROW))  # its voltage, energy scale, compute energy, fixed power and energy, bound and power
    for p in range(rows):
        base = p * k
        ce = at(ceff, p)
        for j in range(k):  # (no sums in this loop: it runs on the vector lanes)
            i = base + j
            t_matrix, t_matrix_ideal, t_vector, t_l2, t_local, t_busy = operator_times(
                padded_flops[i], flops[i], rate[i], cr[i], ce, wave_eff[i], t_vector1[i], t_l2_1[i], t_loc_1[i],
                t_memory1[i])
            t_busy, t_memory = memory_stretched(t_busy, t_memory1[i], stretch[i])
            t[0, j], t[1, j], t[2, j], t[3, j], t[4, j], t[5, j] = t_matrix, t_vector, t_memory, t_l2, t_local, t_busy
            t[6, j], t[7, j] = t_matrix_ideal, pipeline.overlapped_core(t_matrix_ideal, t_comp[i])
        for g in range(groups.shape[0]):
            c0, c1, c2 = groups[g, 0], groups[g, 1], groups[g, 2]
            share = fused_block_share(t[5, c0], t[5, c1], t[5, c2], t[0, c0], t[0, c1], t[0, c2], t[1, c0], t[1, c1],
                                      t[1, c2], t[4, c0], t[4, c1], t[4, c2], t[2, c0], t[2, c1], t[2, c2], t[3, c0],
                                      t[3, c1], t[3, c2], 0.0, 0.0, 0.0, waves[base + c0])
            t[5, c0], t[5, c1], t[5, c2] = t[5, c0] * share, t[5, c1] * share, t[5, c2] * share
        dd, a, b, c, f, h = at(d, p), at(v_min, p), at(v_nom, p), at(v_th, p), at(v1, p), at(scaling, p)
        lk, ck = at(leak, p), at(clk, p)
        for j in range(k):  # (likewise)
            i = base + j
            e[0, j], e[1, j], e[2, j], e[3, j], e[4, j], e[5, j], e[6, j] = operating_energy(
                cr[i], dd, a, b, c, f, h, lk, ck, e_comp1[i], e_mem[i], t[5, j], t[0, j], t[1, j], t[2, j], t[3, j],
                t[4, j])
        er, el, e2, s = at(e_reg, p), at(e_loc, p), at(e_l2, p), at(s1, p)
        s_comp = s_fixed = s_reg = s_loc_e = s_l2_e = s_dev = s_cr = s_v_f = 0.0
        b_mat = b_vec = b_mem = b_l2 = b_loc = 0.0
        s_m = s_mi = s_v = s_mem = s_roof = s_l2 = s_loc = 0.0
        cr_min, v_min_o, p_max, slowed = np.inf, np.inf, -np.inf, 0.0
        for j in range(k):
            i = base + j
            w = count[j]
            y = operator_sums(w, e[2, j], e[4, j], e[5, j], e[1, j], e[0, j], cr[i], t[5, j], padded_flops[i],
                              reg_bytes[i], local_bytes[i], l2_bytes[i], er, el, e2, s)
            s_comp, s_fixed, s_reg, s_loc_e, s_l2_e = s_comp + y[0], s_fixed + y[1], s_reg + y[2], s_loc_e + y[3], \
                s_l2_e + y[4]
            s_dev, b_mat, b_vec, b_mem, b_l2 = s_dev + y[5], b_mat + y[6], b_vec + y[7], b_mem + y[8], b_l2 + y[9]
            b_loc, s_cr, s_v_f = b_loc + y[10], s_cr + y[11], s_v_f + y[12]
            s_m, s_mi, s_v, s_mem = s_m + t[0, j] * w, s_mi + t[6, j] * w, s_v + t[1, j] * w, s_mem + t[2, j] * w
            s_roof, s_l2, s_loc = s_roof + t[7, j] * w, s_l2 + t[3, j] * w, s_loc + t[4, j] * w
            cr_min = jit.minimum(cr_min, cr[i])
            v_min_o = jit.minimum(v_min_o, e[0, j])
            p_max = jit.where(grouped[j] > 0.5, p_max, jit.maximum(p_max, e[6, j]))
            slowed = jit.where(stretch[i] > 1.0, 1.0, slowed)
        for g in range(groups.shape[0]):
            c0, c1, c2 = groups[g, 0], groups[g, 1], groups[g, 2]
            i0, i1, i2 = base + c0, base + c1, base + c2
            p_max = jit.maximum(p_max, fused_block_power(e[2, c0] + e_mem[i0], e[2, c1] + e_mem[i1],
                                                         e[2, c2] + e_mem[i2], t[5, c0], t[5, c1], t[5, c2],
                                                         e[3, c0], e[3, c1], e[3, c2]))
        sums[0, p], sums[1, p], sums[2, p], sums[3, p], sums[4, p] = s_comp, s_fixed, s_reg, s_loc_e, s_l2_e
        sums[5, p] = s_dev
        sums[6, p], sums[7, p], sums[8, p], sums[9, p], sums[10, p] = b_mat, b_vec, b_mem, b_l2, b_loc
        sums[11, p], sums[12, p], sums[13, p], sums[14, p], sums[15, p] = s_cr, cr_min, s_v_f, v_min_o, p_max
        sums[16, p] = bound_code(b_mat, b_vec, b_mem, b_l2, b_loc)
        sums[17, p], sums[18, p], sums[19, p], sums[20, p] = s_m, s_mi, s_v, s_mem
        sums[21, p], sums[22, p], sums[23, p], sums[24, p] = s_roof, s_l2, s_loc, slowed
    return sums


#: points :func:`_tail_point_kernel` takes at a time (their sums that point_results alone reads in the L1 cache)
_TAIL_POINT_CHUNK = 512

#: the sums of :data:`POINT_SUMS` that :func:`point_results` alone reads (not written by :func:`_tail_point_kernel`)
_POINT_RESULTS_ALONE = ("e_fixed", "device", "clock_flops", "clock_min", "voltage_flops", "voltage_min")
#: :func:`point_results`' inputs :func:`_tail_point_kernel` finds in its own pass, in place of its arguments (NaN)
_NOT_PASSED = np.full(1, np.nan)
_FROM_THE_TAIL = {k: _NOT_PASSED for k in _POINT_RESULTS_ALONE + ("e_compute",)}
#: the rows of the sums :func:`_tail_point_kernel` does not write (those it gives as integers and booleans too)
_NOT_IN_THE_SUMS = _POINT_RESULTS_ALONE + ("bound_code", "memory_throttled")


@jit.rule(loops=True)
def _tail_point_chunk(x, per_point, px, w, outside, sums, out, codes, slowed, alone, m, tokens, flops):
    """:func:`_tail_point_kernel` of a chunk of ``m`` points (its arguments' views, jit.chunk; ``sums``, ``out``,
    ``codes`` and ``slowed`` the chunk's; ``alone`` the chunk's scratch)."""
    (padded_flops, flops_op, rate, cr, stretch, wave_eff, t_vector1, t_l2_1, t_loc_1, t_memory1, e_comp1, e_mem,
     reg_bytes, local_bytes, l2_bytes, t_comp, waves) = x
    ceff, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_reg, e_loc, e_l2, s1 = per_point
    (_steps, stages, step_oh, _device, launches, _e_fixed, fixed1, _e_compute, e_mem_ops, link_bytes, d2d_bytes, e_link,
     padded_tot, _clock_flops, _clock_min, _voltage_flops, _voltage_min, clock, bytes_mem, bw_raw, bytes_w, e_w,
     bytes_kv, e_mem_j, peak, leak_w, v_min_p, v_nom_p) = px
    at = jit.of_op
    for p in range(m):  # (each loop as the two kernels' own, on the vector lanes)
        y = tail_one(at(padded_flops, p), at(flops_op, p), rate[p], cr[p], at(ceff, p), wave_eff[p], t_vector1[p],
                     t_l2_1[p], t_loc_1[p], t_memory1[p], stretch[p], (at(d, p), at(v_min, p), at(v_nom, p),
                     at(v_th, p), at(v1, p), at(scaling, p)), at(leak, p), at(clk, p), e_comp1[p], e_mem[p],
                     reg_bytes[p], local_bytes[p], l2_bytes[p], at(e_reg, p), at(e_loc, p), at(e_l2, p), at(s1, p),
                     t_comp[p], w, outside)
        sums[0, p], sums[2, p], sums[3, p], sums[4, p] = y[0], y[2], y[3], y[4]
        sums[6, p], sums[7, p], sums[8, p], sums[9, p], sums[10, p] = y[6], y[7], y[8], y[9], y[10]
        sums[15, p], sums[17, p], sums[18, p], sums[19, p] = y[15], y[17], y[18], y[19]
        sums[20, p], sums[21, p], sums[22, p], sums[23, p] = y[20], y[21], y[22], y[23]
        codes[p], slowed[p] = np.int64(y[16]), y[24] > 0.5
        alone[0, p], alone[1, p], alone[2, p], alone[3, p], alone[4, p], alone[5, p] = \
            y[1], y[5], y[11], y[12], y[13], y[14]
    for p in range(m):
        device, lp = alone[1, p], at(launches, p)
        t = point_results(pipeline.overlapped_core(device, lp), at(stages, p), at(step_oh, p), device, lp,
                          alone[0, p], at(fixed1, p), sums[0, p], at(e_mem_ops, p), at(link_bytes, p),
                          at(d2d_bytes, p), at(e_link, p), at(padded_tot, p), alone[2, p], alone[3, p], alone[4, p],
                          alone[5, p], at(clock, p), at(bytes_mem, p), at(bw_raw, p), at(bytes_w, p), at(e_w, p),
                          at(bytes_kv, p), at(e_mem_j, p), at(peak, p), at(leak_w, p), at(v_min_p, p),
                          at(v_nom_p, p), tokens, flops)
        out[0, p], out[1, p], out[2, p], out[3, p] = t[0], t[1], t[2], t[3]
        out[4, p], out[5, p], out[6, p], out[7, p], out[8, p] = t[4], t[5], t[6], t[7], t[8]
        out[9, p], out[10, p], out[11, p], out[12, p] = t[9], t[10], t[11], t[12]
        out[13, p], out[14, p], out[15, p], out[16, p] = t[13], t[14], t[15], t[16]


@jit.kernel
def _tail_point_kernel(x, per_point, count, grouped, px, tokens, flops):
    """:func:`_tail_kernel` of one operator a point (``count`` and ``grouped`` numbers) and :func:`_point_kernel` of
    one chip whose step is one batch, in one pass along the points: each point's sums (:func:`tail_one`) go on to
    its results (:func:`point_results`; the step the device's work or the host's launches, whichever is longer)
    where they are found. The sums :func:`point_results` alone reads (:data:`_POINT_RESULTS_ALONE`) are not written
    (their rows of the sums hold nothing), and the step's time is not an array of its own: 100,000 GEMM points ~0.4
    ms less than the two kernels and the step's numpy pass, which wrote and read again 7 arrays of the points (issue
    20). The bound's code and the memory's throttling come as the integers and booleans they are reported as (not
    their rows of the sums: no pass to convert them). ``x`` and ``per_point``: :func:`_tail_kernel`'s; ``px``:
    :func:`_point_kernel`'s inputs (those it finds itself: NaN, not read). Returns (the sums, (results, >= points)
    of :data:`POINT_RESULTS`, the bound codes (int64), the memory throttled (bool))."""
    at = jit.of_op
    rows = x[2].size
    w, outside = at(count, 0), at(grouped, 0) < 0.5
    sums = np.empty((len(POINT_SUMS) + len(TAIL_SUMS), rows))
    out = jit.staggered(len(POINT_RESULTS), rows)
    codes, slowed = np.empty(rows, np.int64), np.empty(rows, np.bool_)
    alone = np.empty((6, jit.SCRATCH_ROW))  # (a chunk's sums that point_results alone reads: in the L1 / L2 cache)
    for c0 in range(0, rows, _TAIL_POINT_CHUNK):
        c1 = min(rows, c0 + _TAIL_POINT_CHUNK)
        _tail_point_chunk(jit.chunk(x, c0, c1), jit.chunk(per_point, c0, c1), jit.chunk(px, c0, c1), w, outside,
                          sums[:, c0:c1], out[:, c0:c1], codes[c0:c1], slowed[c0:c1], alone, c1 - c0, tokens, flops)
    return sums, out, codes, slowed


#: a point's results from its operators' sums (:func:`point_results`), in its order
POINT_RESULTS = ("time_s", "time_per_token_s", "tokens_per_s", "t_overhead_s", "energy_memory_j", "energy_static_j",
                 "energy_j", "energy_per_token_j", "power_w", "clock_ratio", "sustained_clock_hz", "voltage_v", "mbu",
                 "energy_weights_j", "energy_kv_j", "mfu", "idle_power_w")


@jit.rule
def point_results(steps, stages, step_oh, device, launches, e_fixed, fixed1, e_compute, e_mem_ops, link_bytes,
                  d2d_bytes, e_link, padded_flops, clock_flops, clock_min, voltage_flops, voltage_min, clock,
                  bytes_mem, bw_raw, bytes_w, e_w, bytes_kv, e_mem, peak, leak, v_min, v_nom, tokens, flops):
    """A point's :data:`POINT_RESULTS` from its operators' sums (:data:`POINT_SUMS`, dse.model.evaluator):

    - the step time: its ``steps`` (the device's work, or the system's step) and the step overhead, one after the
      other (seed 004 §4.8.1); per token and tokens per second; the overhead: the host's launches past the
      device's work, and the step's;
    - the memory energy: the operators' traffic and the bytes over the links and die-to-die links; the fixed
      (leakage and clock) energy: while each operator runs (``e_fixed``), and at the design clock (``fixed1``)
      outside them (overheads, links, and a pipeline's idle stages: each of its chips runs 1 / ``stages`` of the
      operators; none where the design cannot run); the step's energy (compute + memory + fixed), per token, its
      average power (seed 004 §4.1.3);
    - the sustained clock ratio and voltage reported: the FLOP-weighted means of the operators' (the lowest
      without FLOPs), the clock in Hz;
    - MBU (memory bytes over the time, over the raw bandwidth), the weights' and KV cache's energies, MFU (the
      workload's FLOPs over the time, over the FLOP-weighted peak rate; NaN without one), the idle power (leakage
      at V_min)."""
    time_s = pipeline.stages_core(steps, step_oh)
    e_memory = e_mem_ops + (link_bytes + d2d_bytes) * e_link
    outside = jit.where(np.isfinite(time_s), jit.maximum(time_s - device / stages, 0.0), 0.0)
    e_static = e_fixed / stages + pw.energy_at_power(fixed1, outside)
    energy = e_compute + e_memory + e_static
    cr = jit.where(padded_flops > 0, clock_flops / jit.maximum(padded_flops, 1.0), clock_min)
    voltage = jit.where(padded_flops > 0, voltage_flops / jit.maximum(padded_flops, 1.0), voltage_min)
    return (time_s, time_s / tokens, tokens / time_s, jit.maximum(launches - device, 0.0) + step_oh, e_memory,
            e_static, energy, energy / tokens, pw.average_power_core(energy, time_s), cr, clock * cr, voltage,
            bytes_mem / time_s / bw_raw, bytes_w * e_w, bytes_kv * e_mem,
            flops / time_s / jit.where(peak > 0, peak, np.nan), leak * pw.leakage_scale(v_min, v_nom))


#: :func:`_point_kernel`'s inputs (:func:`point_results`' but the workload's tokens and FLOPs) by their indices
#: in groups of numbers or arrays (:func:`_per_point_groups`): the stages, the step's overhead, the launches and the
#: links' and die-to-die bytes (one chip's: none); the technology's figures (J/B of the links and of memory, V_min,
#: V_nom) and the padded FLOPs (the same where the points' matrix units are); the memory's energy and its bytes of
#: all, of the weights and of the KV cache (the same where the tiles' re-reads are: a GEMM's compulsory bytes);
#: the others arrays
_POINT_GROUPS = ((1, 2, 4, 9, 10), (11, 12, 21, 23, 26, 27), (8, 18, 20, 22))


@jit.kernel
def _point_kernel(x, tokens, flops):
    """:func:`point_results` of a block's points (``x``: its inputs but the workload's tokens and FLOPs, in its order,
    each one value per point, (points,), or a number: jit.of_op): the results' rows of one (results, points) array,
    ~45 numpy passes over the points before (issue 20). One pass, on the vector lanes with jit.LLVM_OPTIONS. The
    inputs are taken out of their tuple before the loop: read as ``x[k]`` inside it, each array's data pointer
    is loaded from the tuple in memory, which the results' stores might overwrite for all LLVM knows, and the loop
    ran one point at a time (100,000 GEMM points 1.78 -> ~0.9 ms alone, 15.4 -> 4.1 ns a point where they sit in
    the caches)."""
    (steps, stages, step_oh, device, launches, e_fixed, fixed1, e_compute, e_mem_ops, link_bytes, d2d_bytes, e_link,
     padded_flops, clock_flops, clock_min, voltage_flops, voltage_min, clock, bytes_mem, bw_raw, bytes_w, e_w,
     bytes_kv, e_mem, peak, leak, v_min, v_nom) = x
    at = jit.of_op
    n = steps.size
    out = jit.staggered(len(POINT_RESULTS), n)
    for p in range(n):
        t = point_results(at(steps, p), at(stages, p), at(step_oh, p), at(device, p), at(launches, p), at(e_fixed, p),
                          at(fixed1, p), at(e_compute, p), at(e_mem_ops, p), at(link_bytes, p), at(d2d_bytes, p),
                          at(e_link, p), at(padded_flops, p), at(clock_flops, p), at(clock_min, p),
                          at(voltage_flops, p), at(voltage_min, p), at(clock, p), at(bytes_mem, p), at(bw_raw, p),
                          at(bytes_w, p), at(e_w, p), at(bytes_kv, p), at(e_mem, p), at(peak, p), at(leak, p),
                          at(v_min, p), at(v_nom, p), tokens, flops)
        out[0, p], out[1, p], out[2, p], out[3, p] = t[0], t[1], t[2], t[3]
        out[4, p], out[5, p], out[6, p], out[7, p], out[8, p] = t[4], t[5], t[6], t[7], t[8]
        out[9, p], out[10, p], out[11, p], out[12, p] = t[9], t[10], t[11], t[12]
        out[13, p], out[14, p], out[15, p], out[16, p] = t[13], t[14], t[15], t[16]
    return [out[k, :n] for k in range(len(POINT_RESULTS))]


def _full(x, shape) -> np.ndarray:
    """``x`` as a C-ordered float (points, operators) array of ``shape`` (a copy only where it broadcasts),
    read-only as :func:`dse.model.jit.points` gives them."""
    if type(x) is not np.ndarray or x.dtype is not jit.FLOAT:
        x = np.asarray(x, dtype=float)
    if not (x.shape == shape and x.flags.c_contiguous):
        x = _shrunk(x)
        if x.size == 1:  # (one value, or one row of operators, over the points: shared, jit.filled)
            return jit.filled(x.reshape(-1)[0], shape)
        if x.size == shape[1] and x.ndim <= 2 and x.shape[-1] == shape[1]:
            return jit.filled(x.reshape(-1), shape)
        x = np.ascontiguousarray(np.broadcast_to(x, shape))
    if x.flags.writeable:
        x = x.view()
        x.setflags(write=False)
    return x


def _shrunk(x):
    """``x``, or its first point's where it is one value (or row) laid over the points as a view (stride 0,
    jit.one_over): numpy then computes with it once, not once a point."""
    return x[:1] if type(x) is np.ndarray and x.ndim and x.shape[0] > 1 and x.strides[0] == 0 else x


def _per_point(x, rows: int) -> np.ndarray:
    """A per-point column ((points, 1) or (1, 1)) as a float (points,) array."""
    return jit.points(_per_point_column(x), rows)


def _per_point_groups(xs: tuple, groups: tuple, rows: int) -> tuple:
    """Per-point inputs ``xs`` (numbers, or arrays of 1 or ``rows`` values) as a kernel's arguments of ``rows``
    points read with jit.of_op: those in one of ``groups`` (tuples of their indices) numbers where each of the group
    has one value for every point, else arrays (jit.numbers_or_points: one decision a group); the others arrays
    (jit.points)."""
    out = [None] * len(xs)
    for group in groups:
        for i, v in zip(group, jit.numbers_or_points(tuple(xs[i] for i in group), rows)):
            out[i] = v
    return tuple(jit.points(x, rows) if v is None else v for x, v in zip(xs, out))


def _per_point_column(x):
    """A per-point column ((points, 1) or (1, 1), or a number) as a float array, its shape checked."""
    if type(x) is not np.ndarray or x.dtype is not jit.FLOAT:
        x = np.asarray(x, dtype=float)
    if x.ndim and x.shape[-1] != 1:
        raise ValueError(f"a per-point column has one value per point, got shape {x.shape}")
    return x


def _one_value(x) -> float:
    """The value of a one-value array (or number) as a Python float."""
    return x.item(0) if type(x) is np.ndarray else float(np.asarray(x).reshape(-1)[0])


def _block_shape(arrays: tuple, per_op: tuple) -> tuple[int, int]:
    """(points, operators) that ``arrays`` (numbers, (operators,) rows, (points or 1, operators or 1) arrays) and
    the per-operator ``per_op`` broadcast to: the largest extent along each (np.broadcast_shapes' result for
    shapes that broadcast, in a fraction of its time; the arrays' layout into the shape checks that they do)."""
    rows = cols = 1
    for x in arrays:
        s = x.shape if type(x) is np.ndarray else np.shape(x)
        if len(s) == 2:
            r, c = s
            if r > rows:
                rows = r
            if c > cols:
                cols = c
        elif len(s) == 1:
            if s[0] > cols:
                cols = s[0]
        elif len(s) > 2:
            raise ValueError(f"a block's array has up to 2 dimensions, got shape {s}")
    for x in per_op:
        c = x.size if type(x) is np.ndarray else np.size(x)
        if c > cols:
            cols = c
    return rows, cols


def _block_kernel(kernel, full: tuple, per_point: tuple, per_op: tuple = (), numbers: tuple = ()):
    """Run one of the block's kernels on its (points, operators), per-point and per-operator ((operators,))
    arguments, laid out as it takes them (the first flat): its flat outputs come back (points, operators), of the
    arguments' broadcast shape (as numpy would give); a last 2-D output (per-point sums) as it is. ``numbers``:
    groups of indices (in ``full`` + ``per_point``) of inputs the kernel reads with jit.of_op, a group numbers where
    each of it has one value for every point and operator (one decision a group: two signatures each), so that the
    kernel's loop loads only what varies (a chip's technology, a workload's one operator)."""
    shape = _block_shape(full + per_point, per_op)
    # (one operator per point: its per-operator values as numbers and None for the count, jit.of_op)
    one = shape[1] == 1
    xs = full + per_point
    as_numbers = {i for group in numbers if all(_one_number(xs[i]) for i in group) for i in group}
    n_full = len(full)
    # (numba's arithmetic raises no numpy warnings, its IEEE results are the model's: no jit.quiet around kernels)
    out = kernel(*(_one_value(x) if i in as_numbers else
                   _full(x, shape).reshape(-1) if i < n_full else _per_point(x, shape[0]) for i, x in enumerate(xs)),
                 *(_one_value(x) if one else jit.points(x, shape[1]) for x in per_op), None if one else shape[1])
    return tuple(x.reshape(shape) if x.ndim == 1 else x for x in out)


def _one_number(x) -> bool:
    """A block's input of one value for every point and operator: a number, one value, or a column ((points, 1))
    of one value laid over the points (stride 0)."""
    if type(x) is not np.ndarray:
        return np.size(x) == 1
    return x.size == 1 or (x.ndim > 0 and x.shape[-1] == 1 and x.strides[0] == 0)


def _itself(x):
    return x


def _first_points(first):
    """A per-point column ((rows or 1, 1), or a number) at the points ``first`` (a class's or a set's first points):
    its rows there where it varies; :func:`_itself` without ``first``."""
    if first is None:
        return _itself
    return lambda x: x if np.ndim(x) == 0 or np.shape(x)[0] == 1 else x[first]


#: a block's intermediate that no later rule reads (NaN, should one)
_UNREAD = np.full((1, 1), np.nan)
_UNREAD.flags.writeable = False


def _evaluate_block(c: ChipColumns, ops: OpTable, tiles, info: "WorkloadInfo", want_ops: bool) -> dict:
    """Every per-point quantity for one block of points (columns (1, 1) or (rows, 1))."""
    clock, units, ceff = c.clock, c.units, c.ceff
    fpc = _by_format(c.fpc, ops)
    e_flop = _by_format(c.ef, ops)
    im, inn, ik = c.im, c.inn, c.ik
    l2 = c.l2 * c.dies

    # ---- tiles, padding and wave quantization (seed 004 §4.2.1; seed 000 "Shape tails")
    l2_requests = None  # (the default tiles' L2 bytes, where every tile is visible)
    tile_class = None  # (the default tiles' class of each point: points of one class have the same tiles)
    # (by class: the default tiles, their traffic, L2 requests and re-reads one row per class of points, or per set
    # of points alike, laid over the points only where later rules read them per point: every input of those rules
    # is one of the classes' inputs (with one systolic flag and one R_M over the block, and causal attention's
    # visible tiles, which follow the instruction shape, on chips that are not systolic), so a point's numbers are
    # its class's, to the bit; issue 20)
    by_class = (not want_ops and c.sys.shape[0] == 1 and c.rm.shape[0] == 1
                and not (ops.causal_ops and (c.sys > 0.5).any()))
    if tiles is None:
        tm, tn, tk, split, l2_requests, tile_class = _tiles(im, inn, ik, c.buf, units, c.psum, c.acc, ops,
                                                            _tile_levels(c, fpc), laid=not by_class)
        by_class = by_class and tile_class is not None and tile_class[1].size > 1  # (one point is its class)
    else:
        by_class = False
        tm, tn, tk, split = tiles
    g = ops.is_gemm
    padded_flops = np.where(g, _padded_gemm_flops(ops, im, inn, ik), ops.flops)
    if (c.sys > 0.5).any():
        # a weight-stationary systolic array (``matrix.systolic``; seed 004 §4.7.1: weights of one k x n block sit
        # in the array, input rows stream through one per cycle): a block's weights take ``weight_load_cycles``
        # (default ik: one row shifted in per cycle, Jouppi et al. 2017) to load, double-buffered behind the
        # previous block's rows, so a block takes max(M, load) cycles; each array with work fills and drains
        # once per GEMM (ik + in cycles). An M below the load time under-fills the array. A format slower than
        # one ik x in MAC pass per cycle (Groq's FP16 at a quarter of INT8) takes r = 2 ik in / rate cycles per
        # row: the load and the fill, in cycles, are that many fewer rows.
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.maximum(np.where(fpc > 0, 2.0 * ik * inn / fpc, 1.0), 1.0)
        load = np.where(np.isnan(c.wload), ik, c.wload) / r
        blocks = _pad(ops.n, inn) / inn * _pad(ops.k, ik) / ik * ops.batch
        with np.errstate(divide="ignore", invalid="ignore"):
            rows = np.maximum(ops.m, load) + (ik + inn) / r * np.minimum(units, blocks) / np.maximum(blocks, 1.0)
        systolic = 2.0 * _pad(ops.n, inn) * _pad(ops.k, ik) * ops.batch * rows
        padded_flops = np.where(g & (c.sys > 0.5), systolic, padded_flops)
    visible = 1.0  # the share of its tiles an operator computes (causal attention: those on or below the diagonal)
    if ops.causal_ops:  # causal attention skips tiles above the diagonal (seed 004 §4.8.2)
        causal = c.causal
        rows = max(padded_flops.shape[0], *(v.shape[0] for v in causal.values()))
        full = np.broadcast_to(padded_flops, (rows, padded_flops.shape[1]))
        padded_flops = np.array(full)
        for col, v in causal.items():
            padded_flops[:, col] = v[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            visible = np.where(full > 0, padded_flops / full, 1.0)
    # the tiles' waves, their counts along M and N, the panels kept in the local buffers, what the local buffers move
    # (the matrix unit's reads; the fills too: local_bytes)
    block_rows = tile_class[1].size if by_class else None
    of_class = _first_points(tile_class[0] if by_class else None)
    visible_c = of_class(visible)
    tiles_out, group_waves, wave_eff, c_m, c_n, keep_a, keep_b, local_reads, local_bytes = _block_kernel(
        _traffic_kernel, (tm, tn, split, visible_c),
        tuple(of_class(x) for x in (units, ik, c.sys, np.maximum(c.rm, im), np.maximum(c.rn, inn),
                                    np.where(c.acc > 0, 0.0, tiling.ACCUMULATOR_BYTES), c.buf)),
        (ops.m, ops.n, ops.k, ops.batch, ops.emax, ops.ea, ops.eb, ops.is_gemm, ops.on_chip_a))
    laid_sums = {}  # (per-point sums over the operators found once per class or set, laid over the points)
    if by_class:  # (what the rules after read per point; the L2 requests of visible tiles only, by class too)
        if np.ndim(visible) != 0:
            l2_requests = _l2_request_bytes(ops, c_m, c_n, of_class(c.mcast), visible_c,
                                            tiling.partial_sum_bytes(ops.m, ops.n, ops.batch, split))
        laid_sums.update((k, jit.laid_over(_sum(x, ops.count), tile_class[1])) for k, x in (
            ("bytes_local", local_bytes), ("bytes_requested", l2_requests)))
        # (the waves of a fused attention block's kernel: read by such blocks alone, not laid over without them)
        group_waves = jit.laid_over(group_waves, tile_class[1]) if ops.attn_groups else _UNREAD
        wave_eff, local_reads, local_bytes, l2_requests = (jit.laid_over(x, tile_class[1]) for x in (
            wave_eff, local_reads, local_bytes, l2_requests))
    rate, rate_flops = _block_kernel(_rate_kernel, (fpc, padded_flops), (units, clock),  # FLOP/s at peak clock
                                     numbers=_RATE_NUMBERS)

    # ---- off-chip traffic from tiles (seed 004 §4.2.1, §4.3.2, §4.4.1): the units' concurrent block of output
    # tiles reads each operand slice once for the block; an operand is re-read once per block of the other
    # operand, or once per L2 panel where that is wider; with the whole operand in L2 it is read once.
    # (an operand panel that fits a unit's local buffer stays there, keep_a / keep_b: read once)
    a_read = np.where(ops.on_chip_a, 0.0, ops.a_gemm)
    # below the L2 (tiling.cache_reads): one pool for the package's units, or each die's own (l2_scope: die)
    dom = np.where(c.l2die > 0.5, c.dies / c.npart, 1.0)
    gemm_operands = (ops.a_gemm, ops.b_gemm, ops.m, ops.n, ops.k, ops.ea, ops.eb, a_read)
    alike_in = (dom, l2, c.acc, c.msc)
    alike, alike_sets = _alike_points(tile_class, alike_in,
                                      block_rows or max(c_m.shape[0], *(np.shape(x)[0] for x in alike_in)))
    tile_rows = (c_m, c_n, split, keep_a, keep_b)  # (by class: one row per class)
    per_set = by_class and alike_sets is not None  # (the re-reads once per set of points alike, its class's rows)
    if per_set:
        cls = tile_class[1][alike_sets[0]]
        tile_rows, alike = tuple(x[cls] for x in tile_rows), np.arange(float(cls.size))[:, None]
    elif by_class:
        tile_rows = tuple(jit.laid_over(x, tile_class[1]) for x in tile_rows)
    of_set = _first_points(alike_sets[0] if per_set else None)
    has_msc = c.msc > 0
    rom = (c.rom_bw, c.rom_e) if c.rom_bw is not None else None
    # (by set, main memory's bytes too, where no memory-side cache and no ROM enter them: laid over the points only
    # where read per point)
    by_set = per_set and rom is None and not has_msc.any()

    def cache_reads(pool, capacity):
        """r_A, r_B (tiling.cache_reads) of the block's points: ``pool`` units beside a cache of ``capacity`` (one
        row per set where the memory's bytes are by set too)."""
        r = _block_kernel(_cache_reads_kernel, tile_rows, tuple(of_set(x) for x in (pool, capacity, c.buf)) +
                          (alike,), gemm_operands)
        return tuple(jit.laid_over(x, alike_sets[1]) for x in r) if per_set and not by_set else r
    rA, rB = cache_reads(units / dom, l2 / dom)
    a_mem = np.where(ops.on_chip_a, 0.0, ops.a_bytes)
    c_mem = np.where(ops.on_chip_c, 0.0, ops.c_bytes)
    bytes_msc = 0.0
    if has_msc.any():  # a memory-side cache: what the L2s miss passes through it; main memory is read by the
        # package-wide block with the cache's capacity (tiling.cache_reads)
        bytes_msc = np.where(has_msc, operand_traffic(a_mem, rA, ops.b_bytes, rB, c_mem), 0.0)
        hA, hB = cache_reads(units, np.maximum(c.msc, l2))
        rA, rB = np.where(has_msc, hA, rA), np.where(has_msc, hB, rB)
    # compulsory traffic: every tensor moved once, no re-reads (the roofline's V, seed 004 §4.1.1, §4.8.1)
    bytes_comp = a_mem + ops.b_bytes + c_mem
    if rom is not None:  # weights read from their own memory (a ROM, seed 004 §4.7.3); the rest from main memory
        bytes_comp = bytes_comp - ops.weight_bytes
    # ---- what the local buffers read from the L2 (dse.model.hierarchy): each output tile's A and B panels
    # (requests shared by multicast within a cluster of units), C written once; operands that stay on chip (fused
    # attention's scores and probabilities) never pass through it
    # split-K adds partial sums, through L2 when they fit there, else through memory (0 for vector operators)
    spill = 0.0
    partial = None
    if tiles is not None:  # (the default split keeps them in L2)
        partial = tiling.partial_sum_bytes(ops.m, ops.n, ops.batch, split)
        spill = np.where(partial > l2, partial, 0.0)
        if has_msc.any():
            bytes_msc = bytes_msc + np.where(has_msc, spill, 0.0)
    if l2_requests is not None and (np.ndim(visible) == 0 or by_class):
        bytes_req = l2_requests
    else:
        if partial is None:
            partial = tiling.partial_sum_bytes(ops.m, ops.n, ops.batch, split)
        bytes_req = _l2_request_bytes(ops, c_m, c_n, c.mcast, visible, partial)
    # (what the matrix unit reads from its local buffer, dse.model.hierarchy: each operand element once per register
    # tile of the other's extent, a systolic array holding its weights for the tile's rows: local_reads; with the
    # fills the tile rule writes into it, tiling.local_buffer_bytes, local_bytes: its energy)

    # ---- memory bandwidth: interface x efficiency, capped by Little's law (seed 004 §4.3.3); main memory's bytes
    # and time (memory_traffic; the B operand is the weights or the KV cache: dse.workload.Op.weight_bytes /
    # kv_bytes)
    v_nom = c.v_nom
    law = pw.ClockLaw(c.d, c.v_min, v_nom, c.v_th, c.vscale > 0.5, c.v1)  # (V1: power_inputs')
    if (c.nsys == 1).all() and (c.npart == 1).all():  # (power_inputs' own: the same rule of the same numbers)
        fixed1 = c.fixed1
    else:  # (a system's or a partition's leakage and clock power: scaled columns)
        fixed1 = pw.fixed_power(c.leak, c.clk, law, 1.0)
    # (the figures at the design clock the operators share, one pass: the vector unit's, the L2's and the local
    # buffers' rates, the switching energies' scale, the leakage and clock power at V1 (reported apart:
    # static_power_w, clock_power_w), main memory's bandwidth)
    vrate, xrate, l2_rate, local_rate, s1, leak1, clk1, bw_eff = _design_clock_columns(c, fixed1)
    memory_in = (a_mem, ops.b_bytes, c_mem, ops.weight_bytes, ops.kv_bytes, bytes_comp)
    if by_set:  # (the bytes by set, laid over the points with the times and the energy each point reads from them:
        # memory_time, as memory_traffic gives them, and memory_energy)
        bytes_mem, bytes_w, bytes_kv = _block_kernel(_memory_kernel, (rA, rB, spill), (1.0, 0.0), memory_in)[:3]
        laid_sums.update((k, jit.laid_over(_sum(x, ops.count), alike_sets[1])) for k, x in (
            ("bytes_memory", bytes_mem), ("bytes_weights", bytes_w), ("bytes_kv", bytes_kv)))
        rows, n_op = alike_sets[1].size, len(ops.names)
        bytes_sets = _full(bytes_mem, (alike_sets[0].size, n_op)).reshape(-1)
        # (one operator, of the same bytes in every set, at one J/B: its bytes and their energy one value)
        same_bytes = n_op == 1 and jit.one_valued(c.e_mem) and jit.all_alike(bytes_sets)
        bytes_mem, t_memory, t_comp, E_mem_op = (x.reshape(rows, n_op) for x in _memory_by_set_kernel(
            bytes_sets, alike_sets[1], _per_point(bw_eff, rows),
            _one_value(bytes_comp) if n_op == 1 else jit.points(bytes_comp, n_op), _per_point(c.e_mem, rows),
            None if n_op == 1 else n_op, same_bytes))
        if same_bytes:
            bytes_mem = bytes_sets[:1].reshape(1, 1)
            E_mem_op = memory_energy(bytes_mem, _per_point_column(c.e_mem).reshape(-1)[:1].reshape(1, 1))
    else:
        bytes_mem, bytes_w, bytes_kv, t_memory, t_comp = _block_kernel(
            _memory_kernel, (rA, rB, spill), (bw_eff, 0.0 if rom is None else 1.0), memory_in)
    if has_msc.any():  # the memory-side cache's bandwidth beside main memory's: the memory system's time
        with np.errstate(divide="ignore", invalid="ignore"):
            t_memory = np.maximum(t_memory, np.where(c.msc_bw > 0, bytes_msc / c.msc_bw, 0.0))
    if rom is not None:  # two interfaces read at the same time: the slower one sets the time (seed 004 §4.7.3)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_memory = np.maximum(t_memory, np.where(bytes_w > 0, bytes_w / rom[0], 0.0))
            t_comp = np.maximum(t_comp, np.where(ops.weight_bytes > 0, ops.weight_bytes / rom[0], 0.0))

    # ---- vector unit (softmax, norms, activations)
    vector_flops = ops.vector_flops
    if c.dq and ops.dequant_flops.any():  # the dequantizing path of weight-only quantization
        vector_flops = vector_flops + _by_format(c.dq, ops) * ops.dequant_flops
    # (its time, vector_time, comes with the design clock's times below)

    # ---- energy per level (seed 004 §4.1.3): bytes x pJ/B + FLOPs x pJ/FLOP, every level that exists: the
    # register files (each instruction's operands and accumulators), the local buffer (fills and the matrix
    # unit's reads), the L2 (what the local buffers read), main memory
    e_mem = c.e_mem
    cnt = ops.count
    # (at the design clock's voltage: compute_energy)
    reg_bytes, l2_bytes, E_compute_op = _block_kernel(
        _compute_energy_kernel, (padded_flops, e_flop, _by_format(c.rbf, ops), vector_flops, local_bytes, bytes_req),
        (l2, c.e_vec, c.e_reg, c.e_loc, c.e_l2, s1), (ops.exps, g), _COMPUTE_ENERGY_NUMBERS)
    if not by_set:  # (by set: with the times, _memory_by_set_kernel)
        E_mem_op = memory_energy(bytes_mem, e_mem)
    if has_msc.any():
        E_mem_op = E_mem_op + bytes_msc * c.e_msc
    e_w = e_mem if rom is None else rom[1]
    if rom is not None:
        E_mem_op = E_mem_op + bytes_w * e_w

    # ---- power ceiling: sustained clock and voltage per operator (seed 004 §4.1.3; dse.model.power). While an
    # operator runs the chip draws leakage + clock power + its memory traffic's power + the compute units'
    # power, each at the operating point (dse.model.power.operator_power). The energy tables hold at the node's
    # nominal voltage; at the design clock every switching energy scales by (V1 / V_nom)^2, and at r x the
    # design clock by (V(r) / V_nom)^2. The clock is the highest r <= 1 whose power fits TDP (bisection), per
    # operator, so an operator's throttling does not depend on another's tiles (the CP-SAT tile optimum per
    # operator stays the workload's optimum). Where even the lowest clock (MIN_CLOCK_RATIO) does not fit, the
    # memory traffic is slowed as well, as far as the power fits (``memory_throttled``); a design whose leakage
    # and clock alone exceed its TDP cannot run (infinite time).
    tdp = c.tdp_limit
    tot_padded = _sum(padded_flops, cnt)[:, None]
    peak_main = _sum(rate_flops, cnt)[:, None] / np.maximum(tot_padded, 1.0)  # FLOP-weighted peak rate
    leak_run, clk_run = c.leak, c.clk
    if (c.pipe > 0.5).any():  # a pipeline runs each operator on one chip: that chip's TDP, leakage and clock power
        one = np.where(c.pipe > 0.5, c.nsys, 1.0)
        tdp, leak_run, clk_run = tdp / one, c.leak / one, c.clk / one
    # the times at the design clock: the matrix unit's, the on-chip levels' (they run on the core clock: the L2
    # shared by the units, each unit's local buffer wave by wave like its matrix unit; no wave loss for the busy
    # time), the units' busy time; the operating points from them
    fused = _FUSED and 1 < len(ops.names) <= _ROW and not want_ops  # (the kernels' scratch: _ROW operators)
    busy_rates = (ceff, vrate, xrate, l2_rate, c.buf, local_rate)
    if fused:  # (point by point: _clock_kernel)
        full = (padded_flops, rate, wave_eff, vector_flops, l2_bytes, local_reads, E_compute_op, E_mem_op, t_memory,
                group_waves)
        per_point = busy_rates + (tdp, leak_run, clk_run, law.d, law.v_min, law.v_nom, law.v_th, law.v1,
                                  law.scaling)
        shape = _block_shape(full + per_point, (ops.exps,))
        cr, stretch, t_vector, t_l2_1, t_loc_1 = (x.reshape(shape) for x in _clock_kernel(
            tuple(_full(x, shape).reshape(-1) for x in full), tuple(_per_point(x, shape[0]) for x in per_point),
            jit.points(ops.exps, shape[1]), _group_columns(ops), shape[1], float(MIN_CLOCK_RATIO),
            pw.BISECTION_STEPS))
    else:
        busy = _block_kernel(_busy_kernel, (padded_flops, rate, wave_eff, vector_flops, l2_bytes, local_reads),
                             busy_rates, (ops.exps,), _BUSY_NUMBERS)
        busy = dict(zip(range(8) if len(busy) == 8 else _BUSY_ONE_OP, busy))  # (one operator a point: 5, None the rest)
        t_c1, t_m1, t_l2_1, t_loc_c1, t_loc_1, busy1, clocked1, t_vector = (busy.get(k) for k in range(8))
        cr, stretch = pw.sustained_operating_point(tdp, E_compute_op, E_mem_op, busy1, clocked1, t_memory, leak_run,
                                                   clk_run, law, MIN_CLOCK_RATIO)
        if ops.attn_groups:  # a fused attention block's three operators run at once: one power ceiling for the three
            cr, stretch = _attention_clock(ops, cr, stretch, E_compute_op, E_mem_op,
                                           (t_c1, t_vector, t_l2_1, t_loc_c1), (t_m1, t_vector, t_l2_1, t_loc_1),
                                           busy1, clocked1, t_memory, group_waves, tdp, leak_run, clk_run, law)

    # ---- dies of one package (seed 004 §4.5.1): the work of each operator is placed where it is fastest, in
    # place (each die on its own memory's share; the others gather its output over the die-to-die link) or
    # centralized on one die (which reads the others' share over the link); the link is a resource beside the
    # others (its transfer streams with the tiles). A package without a die-to-die link acts as one pool.
    d2d_bw = c.d2d_bw
    dies = c.dies / c.npart  # the dies of one logical device (a partition is whole dies)
    multi = (dies > 1) & (d2d_bw > 0)  # (NaN: no link)
    expert_load = bool(info.random_routing and info.expert_cols and (c.ep > 1).any())
    grouped = np.zeros(len(ops.names))  # (1: an operator of a fused attention block)
    for cols in ops.attn_groups:
        grouped[list(cols)] = 1.0
    energy_point = (law.d, law.v_min, law.v_nom, law.v_th, law.v1, law.scaling, c.leak, c.clk, c.e_reg, c.e_loc,
                    c.e_l2, s1)
    t_central = ops_out = None
    d2d_bytes = t_d2d = central = np.zeros((1, 1))
    one_op = _FUSED and len(ops.names) == 1 and not want_ops  # (its operating points by the passes, the rest fused:
    # the tail's times, energies and sums in one pass along the points, 100,000 GEMM points ~2% faster than the passes)
    koh = c.koh
    step_oh = c.step_oh[:, 0]
    launches = (koh * cnt).sum(axis=1)
    p_sys, m_mb = c.nsys[:, 0], info.micro_batches
    one_step = m_mb == 1 and (c.nsys == 1).all()  # one chip, the step as one batch: no links
    bytes_mem_tot, bytes_w_tot, bytes_kv_tot = (laid_sums[k] if k in laid_sums else _sum(x, cnt) for k, x in (
        ("bytes_memory", bytes_mem), ("bytes_weights", bytes_w), ("bytes_kv", bytes_kv)))
    tokens, flops = info.tokens, info.flops

    def point_inputs(steps, stages, device, point, link_bytes, d2d_tot):
        """:func:`point_results`' inputs but the workload's tokens and FLOPs (:func:`_point_kernel`'s order)."""
        return (steps, stages, step_oh, device, launches, point["e_fixed"], fixed1, point["e_compute"],
                _sum(E_mem_op, cnt), link_bytes, d2d_tot, c.e_link, tot_padded, point["clock_flops"],
                point["clock_min"], point["voltage_flops"], point["voltage_min"], clock, bytes_mem_tot, c.bw_raw,
                bytes_w_tot, e_w, bytes_kv_tot, e_mem, peak_main, c.leak, c.v_min, v_nom)
    res = None  # (the point's results where they come with the tail's pass: _tail_point_kernel)
    if (fused or one_op) and not expert_load and not multi.any():
        # the rest of the operators' quantities, point by point, summed as they are found (_tail_kernel: the same
        # rules as the passes below, without their (points x operators) arrays)
        full = (padded_flops, ops.flops, rate, cr, stretch, wave_eff, t_vector, t_l2_1, t_loc_1, t_memory,
                E_compute_op, E_mem_op, reg_bytes, local_bytes, l2_bytes, t_comp, group_waves)
        op_shape = _block_shape(full + (ceff,) + energy_point, (cnt,))
        x_in = tuple(_full(x, op_shape).reshape(-1) for x in full[2 if one_op else 0:])
        if one_op:  # (the operator's FLOPs: numbers where every point has the same, jit.numbers_or_points)
            x_in = jit.numbers_or_points(full[:2], op_shape[0]) + x_in
        tail_in = (x_in, _per_point_groups(tuple(_per_point_column(x) for x in (ceff,) + energy_point),
                                           _TAIL_POINT_GROUPS, op_shape[0]),
                   *((_one_value(cnt), _one_value(grouped)) if one_op else
                     (jit.points(cnt, cnt.size), jit.points(grouped, grouped.size))))
        rows = op_shape[0]
        fuse = one_op and one_step  # (one operator, one chip: the point's results in the tail's pass, the sums they
        # alone read not written, _tail_point_kernel; where no input of them has more points than the tail)
        if fuse:
            inputs = point_inputs(_NOT_PASSED, 1.0, _NOT_PASSED, _FROM_THE_TAIL, np.zeros(1), np.zeros(1))
            fuse = max(np.shape(x)[0] if np.ndim(x) else 1 for x in inputs) <= rows
        if fuse:
            sums, res_rows, codes, slowed = _tail_point_kernel(
                *tail_in, _per_point_groups(inputs, _POINT_GROUPS, rows), float(tokens), float(flops))
            res = {k: res_rows[i, :rows] for i, k in enumerate(POINT_RESULTS)}
            point = {k: sums[i] for i, k in enumerate(POINT_SUMS + TAIL_SUMS) if k not in _NOT_IN_THE_SUMS}
            point["bound_code"], point["memory_throttled"] = codes, slowed
        else:
            sums = _tail_kernel(*tail_in, _group_columns(ops), None if one_op else op_shape[1])
            point = dict(zip(POINT_SUMS + TAIL_SUMS, sums))
        time_sums = {k: point[k] for k in TAIL_SUMS[:-1]}
        peak_power = point["power_max"]
        throttled = point["memory_throttled"]
        throttled = throttled if throttled.dtype == bool else throttled > 0.5
    else:
        # the resources' times at the sustained clock; independent resources overlap: the slowest sets the
        # operator's time (seed 004 §4.8.1)
        t_matrix, t_matrix_ideal, t_vector, t_l2, t_local, t_busy = _block_kernel(
            _times_kernel, (padded_flops, ops.flops, rate, cr, wave_eff, t_vector, t_l2_1, t_loc_1, t_memory),
            (ceff,))
        if multi.any():
            x_in, x_cen = links.die_link_bytes(dies, np.where(g, ops.c_bytes, 0.0), bytes_mem)
            with np.errstate(divide="ignore", invalid="ignore"):
                t_in = np.maximum(t_busy, np.where(multi, x_in / d2d_bw, 0.0))
                # (the units' work and their local buffers move to one die; each die's L2 stays in front of its
                # own memory, which it serves to the link)
                t_central = np.where(multi, np.maximum(pipeline.overlapped_core(t_matrix, t_vector, t_local) * dies,
                                                       pipeline.overlapped_core(t_memory, t_l2, x_cen / d2d_bw)),
                                     np.nan)
            central = multi & (t_central < t_in)
            t_busy = np.where(central, t_central, t_in)
            d2d_bytes = np.where(central, x_cen, np.where(multi, x_in, 0.0))
            with np.errstate(divide="ignore", invalid="ignore"):
                t_d2d = np.where(multi, d2d_bytes / d2d_bw, 0.0)
        mem_throttled = stretch > 1.0
        throttled = mem_throttled.any(axis=1) if mem_throttled.any() else np.zeros(1, dtype=bool)
        if throttled.any():  # the memory traffic slowed as well: the operator takes `stretch` x its floor time
            t_busy, t_memory = memory_stretched(t_busy, t_memory, stretch)
        # host launches overlap device work (independent resources take the max, seed 004 §4.8.1): a step
        # takes the longer of the device's busy time and the host's launch time for all its kernels
        t_op = t_busy
        if ops.attn_groups:  # a fused attention kernel's QK, softmax and PV pipeline across blocks (seed 004 §4.2.3)
            t_op = _attention_overlap(ops, t_op, (t_matrix, t_vector, t_memory, t_l2, t_local, t_d2d),
                                      np.where(central > 0, dies, 1.0), group_waves)
        if expert_load:  # the most loaded chip ends a MoE layer
            t_op = _expert_parallel_load(c, info, t_op, t_memory, (t_matrix, t_vector, t_l2, t_local))
        op_shape = t_op.shape
        # energy at the sustained voltage: switching ~ (V / V1)^2 of the design's; leakage and clock while it runs;
        # the bound (the first resource with the largest time), the power each operator draws; their sums over
        # the operators (_energy_kernel)
        E_compute_op, p_fixed_op, E_fixed_op, bound, sums = _block_kernel(
            _energy_kernel, (cr, E_compute_op, E_mem_op, t_op, t_matrix, t_vector, t_memory, t_l2, t_local,
                             padded_flops, reg_bytes, local_bytes, l2_bytes), energy_point, (cnt, grouped))
        point = dict(zip(POINT_SUMS, sums))
        time_sums = {"t_matrix_s": _sum(t_matrix, cnt), "t_matrix_ideal_s": _sum(t_matrix_ideal, cnt),
                     "t_vector_s": _sum(t_vector, cnt), "t_memory_s": _sum(t_memory, cnt),
                     "t_roofline_s": _sum(np.maximum(t_matrix_ideal, t_comp), cnt),
                     "t_l2_s": _sum(t_l2, cnt, op_shape), "t_local_s": _sum(t_local, cnt, op_shape)}
        # the highest power any operator draws at the sustained clock (a fused attention block's three operators
        # draw theirs together, over the block's time)
        peak_power = point["power_max"]  # (the operators outside the fused blocks)
        if ops.attn_groups:
            peak_power = np.array(peak_power)
            group_in = tuple(_full(x, op_shape) for x in (E_compute_op, E_mem_op, t_op, p_fixed_op))
            for cols in ops.attn_groups:
                _group_power_kernel(peak_power, *group_in, *(int(c) for c in cols))
        if want_ops:
            ops_out = dict(t_op=t_op, t_matrix=t_matrix, t_vector=t_vector, t_memory=t_memory,
                           bound=bound.astype(np.int64), t_l2=t_l2, t_local=t_local, bytes_l2=l2_bytes,
                           bytes_local=local_bytes, bytes_register=reg_bytes,
                           visible=np.broadcast_to(visible, op_shape), t_matrix_ideal=t_matrix_ideal,
                           t_memory_compulsory=t_comp, bytes_memory=bytes_mem, bytes_compulsory=bytes_comp,
                           padded_flops=padded_flops, tm=tm, tn=tn, split=split,
                           energy=E_compute_op + E_mem_op + E_fixed_op)
    E_compute = point["e_compute"]
    d2d_tot = _sum(d2d_bytes, cnt, op_shape)
    device = point.get("device")
    if one_step:  # (one chip, the step as one batch: no links)
        t_link = t_ar = t_a2a = link_bytes = bubble = ar_algo = np.zeros(1)
    if res is None:
        # ---- scale-up links (seed 004 §4.5.3: T = alpha + V / R per step), dependent stages after the device work
        work = pipeline.overlapped_core(device, launches)  # host launches overlap the device's work (seed 004 §4.8.1)
        if one_step:
            steps, stages = work, 1.0
        else:
            steps, stages, t_link, t_ar, ar_algo, t_a2a, link_bytes, bubble = _system_step(c, info, work)
        # the step's time, energy, power and rates of each point, from its operators' sums (point_results)
        inputs = point_inputs(steps, stages, device, point, link_bytes, d2d_tot)
        rows = max(x.shape[0] if type(x) is np.ndarray and x.ndim else 1 for x in inputs)  # (the points they
        # broadcast to)
        res = dict(zip(POINT_RESULTS, _point_kernel(_per_point_groups(inputs, _POINT_GROUPS, rows), float(tokens),
                                                    float(flops))))
    w = info
    time_s = res["time_s"]
    # read lower bound: the weight and KV bytes over the interface(s) alone (seed 004 §4.8.2, §4.7.3)
    bw1 = bw_eff[:, 0]
    if rom is None:
        t_read = (_shrunk(bytes_w_tot) + _shrunk(bytes_kv_tot)) / bw1
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            t_read = np.maximum(np.where(bytes_w_tot > 0, bytes_w_tot / rom[0][:, 0], 0.0), bytes_kv_tot / bw1)
    t_bound = sums[POINT_SUMS.index("bound_matrix"):POINT_SUMS.index("bound_local") + 1]
    out = {  # (the results in the order the columns have always had)
        "time_s": time_s,
        "time_per_token_s": res["time_per_token_s"],
        "tokens_per_s": res["tokens_per_s"],
        "ttft_s": time_s if w.phase == "prefill" else _NAN,
        **{k: time_sums[k] for k in ("t_matrix_s", "t_matrix_ideal_s", "t_vector_s", "t_memory_s")},
        "t_memory_compulsory_s": _sum(t_comp, cnt),
        "t_read_s": t_read,
        "t_roofline_s": time_sums["t_roofline_s"],
        "t_overhead_s": res["t_overhead_s"],
        "t_link_s": t_link,
        "t_allreduce_s": t_ar,
        "allreduce_algorithm": ar_algo.astype(float),
        "t_alltoall_s": t_a2a,
        "pipeline_bubble": bubble,
        "t_die_link_s": _sum(t_d2d, cnt, op_shape),
        "die_link_bytes": d2d_tot,
        "die_placement_centralized": (np.where(np.broadcast_to(central, op_shape) > 0, t_op * cnt, 0.0).sum(axis=1)
                                      / np.maximum(device, 1e-300) if np.any(central) else np.zeros(1)),
        "t_centralized_s": (_sum(t_central, cnt) if t_central is not None else np.full(1, np.nan)),
        "system_chips": p_sys,
        "time_matrix_bound_s": t_bound[0],
        "time_vector_bound_s": t_bound[1],
        "time_memory_bound_s": t_bound[2],
        "time_l2_bound_s": t_bound[3],
        "time_local_bound_s": t_bound[4],
        "t_l2_s": time_sums["t_l2_s"],
        "t_local_s": time_sums["t_local_s"],
        "bytes_l2": _sum(l2_bytes, cnt, op_shape),
        "bytes_local": laid_sums["bytes_local"] if "bytes_local" in laid_sums else _sum(local_bytes, cnt, op_shape),
        "bytes_register": _sum(reg_bytes, cnt, op_shape),
        "flops": np.array([flops]),
        "padded_flops": tot_padded[:, 0],
        "bytes_memory": bytes_mem_tot,
        "bytes_msc": _sum(bytes_msc, cnt, op_shape),
        "energy_msc_j": _sum(bytes_msc * c.e_msc, cnt, op_shape),
        "bytes_requested": laid_sums["bytes_requested"] if "bytes_requested" in laid_sums else _sum(bytes_req, cnt),
        "bytes_weights": bytes_w_tot,
        "bytes_kv": bytes_kv_tot,
        "bytes_compulsory": _sum(bytes_comp, cnt),
        "energy_j": res["energy_j"],
        "energy_memory_j": res["energy_memory_j"],
        "energy_compute_j": E_compute,
        "energy_static_j": res["energy_static_j"],
        "energy_register_j": point["e_register"],
        "energy_local_j": point["e_local"],
        "energy_l2_j": point["e_l2"],
        **{k: res[k] for k in ("energy_weights_j", "energy_kv_j", "energy_per_token_j", "power_w", "clock_ratio",
                               "sustained_clock_hz", "mbu")},
    }
    out["peak_power_w"] = peak_power
    out["tdp"] = c.tdp[:, 0]
    out["tdp_estimated"] = c.tdp_est[:, 0] > 0.5
    out["static_power_w"] = leak1[:, 0]
    out["clock_power_w"] = clk1[:, 0]
    out["fixed_power_w"] = fixed1[:, 0]
    out["idle_power_w"] = res["idle_power_w"]
    out["memory_throttled"] = throttled
    out["voltage_v"] = res["voltage_v"]
    out["quant_error"] = np.array([w.quant_error])
    out["mfu"] = res["mfu"]
    # bound: the resource whose operators took the most time (the first of BOUND_NAMES on a tie)
    out["bound_code"] = point["bound_code"].astype(np.int64, copy=False)
    # capacity (seed 004 §4.3.1)
    cap_bytes = c.cap[:, 0]
    resident = w.resident
    out["resident_bytes"] = np.array([resident])
    out["capacity_bytes"] = cap_bytes
    out["fits"] = cap_rules.fits(resident, cap_bytes)
    out["max_batch"] = cap_rules.max_batch(cap_bytes, w.fixed_bytes, w.context, w.kv_per_token)
    # the largest double-buffered working set of the tiles (seed 004 §4.3.2, §4.4.2): the buffer_fit constraint
    if alike_sets is not None:  # (each set of alike points once)
        first, inverse = alike_sets
        at_first = _first_points(first)
        tiles_at = (tm[tile_class[1][first]], tn[tile_class[1][first]]) if by_class else (at_first(tm), at_first(tn))
        out["tile_working_set_bytes"] = jit.laid_over(_working_set(*tiles_at, at_first(tk), ops, at_first(c.acc)),
                                                      inverse)
    else:
        if by_class:
            tm, tn = jit.laid_over(tm, tile_class[1]), jit.laid_over(tn, tile_class[1])
        out["tile_working_set_bytes"] = _working_set(tm, tn, tk, ops, c.acc)
    return out, ops_out



def _expert_parallel_load(c: ChipColumns, info: "WorkloadInfo", t_op, t_memory, others):
    """The routed experts' operators under expert parallelism with random routing: the system's summed resources
    time the average chip; the layer waits for the most loaded one (dse.model.experts.ep_load_factors): its active
    experts where the operator is memory-bound (the weights it reads), its rows otherwise."""
    p = np.where(c.ep > 1, c.ep, 1.0)
    f_active, f_rows = experts.ep_load_factors(info.moe_tokens, info.top_k, info.moe_experts, p)
    cols = list(info.expert_cols)
    shape = np.broadcast_shapes(np.shape(t_op), np.shape(t_memory), np.shape(p))
    mem = np.broadcast_to(t_memory, shape)[:, cols] >= np.broadcast_to(pipeline.overlapped_core(*others),
                                                                        shape)[:, cols]
    out = np.array(np.broadcast_to(t_op, shape))
    out[:, cols] *= np.where(mem, np.broadcast_to(f_active, (shape[0], 1)), np.broadcast_to(f_rows, (shape[0], 1)))
    return out


def _system_step(c: ChipColumns, info: "WorkloadInfo", work):
    """A system of chips' step from its chips' work (rows,): (step time before the step overhead, pipeline
    stages, link time on the critical path, all-reduce time, its algorithm code, all-to-all time, bytes over
    the links, the pipeline's bubble).

    Tensor parallelism: an all-reduce of the partial outputs after each reducing operator and each MoE layer
    by the cheapest algorithm the topology has (dse.model.links.collective); expert parallelism: each MoE
    layer's tokens go to their experts and back in two all-to-alls (dse.model.links.alltoall_time) instead of
    its all-reduce; both dependent stages after the work (seed 004 §4.8.1). Pipeline parallelism: the layers
    in p stages of one chip each (split evenly), the workload's m micro-batches flowing through them and the
    p - 1 links between (dse.model.pipeline.flow_core: GPipe's (m + p - 1) stage times).
    """
    p_sys = c.nsys[:, 0]
    pipe = c.pipe[:, 0] > 0.5
    link_bw, link_alpha = c.link_bw[:, 0], c.link_alpha[:, 0]
    topo, peers = c.topo[:, 0], c.peers[:, 0]
    ep = (c.ep[:, 0] > 1) & ~pipe
    ar_count = info.allreduces + np.where(ep, 0.0, info.moe_layers)
    ar_bytes = info.allreduce_bytes + np.where(ep, 0.0, info.moe_bytes)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_ar, ar_algo = links.collective("all_reduce", ar_bytes, p_sys, link_bw, link_alpha, ar_count, topo, peers)
        # dispatch and combine: each chip sends its 1 / E of the tokens' top-k activations, (E - 1) / E of them away
        a2a_bytes = np.where(ep, info.moe_bytes * info.top_k / p_sys * (p_sys - 1.0) / p_sys, 0.0)
        t_a2a, a2a_moved = links.alltoall_time(2.0 * a2a_bytes, p_sys, link_bw, link_alpha, 2.0 * info.moe_layers,
                                               topo, peers)
    t_a2a, a2a_moved = np.where(ep, t_a2a, 0.0), np.where(ep, a2a_moved, 0.0)
    m_mb = info.micro_batches
    stages = np.where(pipe, p_sys, 1.0)
    t_stage = work / (m_mb * stages)  # one micro-batch's layers of one stage
    with np.errstate(divide="ignore", invalid="ignore"):
        t_hop = np.where(pipe & (p_sys > 1), links.transfer_time(info.hop_bytes, link_bw, link_alpha), 0.0)
    t_flow = pipeline.flow_core(stages * t_stage + (stages - 1.0) * t_hop, np.maximum(t_stage, t_hop), m_mb)
    t_tp = t_ar + t_a2a
    # the link time on the critical path: the first micro-batch's hops and what the link adds to each later one
    t_link = np.where(pipe, (stages - 1.0) * t_hop + (m_mb - 1.0) * np.maximum(t_hop - t_stage, 0.0), t_tp)
    t_link = np.where(np.isnan(t_link), np.inf, t_link)  # a system without scale-up links cannot reduce
    steps = np.where(pipe, t_flow, work + t_tp)
    steps = np.where(np.isnan(steps), np.inf, steps)
    link_bytes = np.where(p_sys > 1, np.where(pipe, (p_sys - 1) * info.hop_bytes * m_mb,
                                              links.ring_allreduce_bytes(ar_bytes, p_sys) + a2a_moved), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):  # the share of the flow a stage waits (GPipe's bubble)
        bubble = np.where(pipe & (p_sys > 1) & np.isfinite(t_flow) & (t_flow > 0),
                          1.0 - m_mb * t_stage / np.where(t_flow > 0, t_flow, 1.0), 0.0)
    return steps, stages, t_link, t_ar, ar_algo, t_a2a, link_bytes, bubble

_NAN = np.array([np.nan])

#: The per-operator arrays of :class:`OperatorBreakdown`, (N, O) each.
_OP_FIELDS = ("t_op", "t_matrix", "t_vector", "t_memory", "t_l2", "t_local", "t_matrix_ideal", "t_memory_compulsory",
              "bytes_memory", "bytes_l2", "bytes_local", "bytes_register", "bytes_compulsory", "padded_flops", "energy",
              "visible", "tm", "tn", "split", "bound")


@dataclass(frozen=True)
class OperatorBreakdown:
    """One workload's per-operator figures for N points: (N, O) arrays, per instance of the operator.

    ``t_*`` in s; ``bytes_*`` in B; ``energy`` in J; ``visible`` the share of its tiles an operator computes
    (causal attention: those on or below the diagonal; 1 elsewhere); ``tm``/``tn``/``split`` the tiles;
    ``bound`` the index of the resource in :data:`BOUND_NAMES`; ``count`` instances of each operator.
    """

    workload: str
    names: tuple[str, ...]
    count: np.ndarray
    t_op: np.ndarray
    t_matrix: np.ndarray
    t_vector: np.ndarray
    t_memory: np.ndarray
    t_l2: np.ndarray
    t_local: np.ndarray
    t_matrix_ideal: np.ndarray
    t_memory_compulsory: np.ndarray
    bytes_memory: np.ndarray
    bytes_l2: np.ndarray
    bytes_local: np.ndarray
    bytes_register: np.ndarray
    bytes_compulsory: np.ndarray
    padded_flops: np.ndarray
    energy: np.ndarray
    visible: np.ndarray
    tm: np.ndarray
    tn: np.ndarray
    split: np.ndarray
    bound: np.ndarray

    def frame(self, chip_names) -> pd.DataFrame:
        """One row per point and operator (times per instance, in s)."""
        N, O = self.t_op.shape
        rows = {
            "point": np.repeat(np.arange(N), O),
            "chip": np.repeat(np.array(list(chip_names), dtype=object), O),
            "workload": self.workload,
            "op": np.tile(np.array(self.names, dtype=object), N),
            "count": np.tile(self.count, N),
        }
        for key in _OP_FIELDS[:-1]:
            rows[key + "_s" if key.startswith("t_") else key] = np.asarray(getattr(self, key)).reshape(-1)
        rows["bound"] = BOUND_NAMES[np.asarray(self.bound).reshape(-1).astype(int)]
        return pd.DataFrame(rows)


@dataclass(frozen=True)
class WorkloadMetrics:
    """The evaluator's answer for one workload: (N,) metric arrays and, when asked, the operators. A metric of one
    value at every point (the chips' inputs it reads are the same at every point) is that value laid over the
    points, a read-only view (stride 0), as the chips' own figures are: copy an array before changing it."""

    workload: str
    phase: str
    columns: dict[str, np.ndarray]
    operators: OperatorBreakdown | None = None


def evaluate_workload(chips: Chips, workload, tiles=None, breakdown: bool = False,
                      fused_attention: bool = True, weights_in_rom: bool = False, rom_bandwidth=np.inf,
                      rom_energy_per_byte=0.0, package=None, reference: bool = False,
                      chip_columns=None) -> WorkloadMetrics:
    """Metrics of N points on one workload as (N,) arrays (the fast path). See module docstring.

    ``package``: the points' PackageArea where the caller has it; ``chip_columns``: :func:`chip_values` of
    ``chips`` (and that package) where the caller evaluates several workloads of the same points (the reference
    computes each point's own).

    ``reference``: the numpy reference of the fast path (module docstring, "Speed"): each point evaluated on
    its own, as a batch of one, through the same functions, and the results stacked. The property test
    (tests/test_evaluate_fast.py) checks that the batched path gives the same numbers.

    ``weights_in_rom``: the what-if of seed 004 §4.7.3 -- the weights sit in a
    separate read-only memory of ``rom_bandwidth`` B/s (default unlimited) and
    ``rom_energy_per_byte`` J/B (scalars or (N,) arrays); main memory then
    carries the KV cache and activations only, each operator's memory time is
    the slower of the two interfaces, and the weights take no main-memory
    capacity (``resident_bytes``, ``fits``, ``max_batch``).
    """
    _tune_allocator()
    if reference and chips.n > 1:
        return _reference(chips, workload, tiles, breakdown, package,
                          dict(fused_attention=fused_attention, weights_in_rom=weights_in_rom,
                               rom_bandwidth=rom_bandwidth, rom_energy_per_byte=rom_energy_per_byte))
    ops, info = _tables(workload, fused_attention, tiles is None and not breakdown)
    N, O = chips.n, len(ops.names)
    cols = _chip_columns(chips, ops, (rom_bandwidth, rom_energy_per_byte) if weights_in_rom else None, package,
                         chip_columns)
    if weights_in_rom:
        weights = float(workload.weight_resident_bytes)
        info = dataclasses.replace(info, resident=info.resident - weights, fixed_bytes=info.fixed_bytes - weights)
    if tiles is not None:
        tiles = tuple(_column2(np.asarray(x, dtype=float), N, O) for x in tiles)
    block = max(1, _BLOCK_ELEMENTS // max(O, 1))
    op_arrays = None
    if N <= block:
        r, r_ops = _evaluate_block(cols, ops, tiles, info, breakdown)
        out = {k: (v if v.shape[0] == N else jit.one_over(v, N)) for k, v in r.items()}
        if breakdown:
            op_arrays = {k: np.broadcast_to(v, (N, O)) for k, v in r_ops.items()}
    else:  # block by block, each block's results written into the (N,) outputs while still in cache
        out, once = None, {}  # once: the results of one value so far (every point the same): laid over at the end
        for s in range(0, N, block):
            e = min(N, s + block)
            t = None if tiles is None else tuple(x if x.shape[0] == 1 else x[s:e] for x in tiles)
            r, r_ops = _evaluate_block(cols.rows(s, e), ops, t, info, breakdown)
            r = {k: _shrunk(v) for k, v in r.items()}  # (one value laid over: that value)
            if out is None:
                once = {k: v for k, v in r.items() if v.shape[0] == 1}
                out = {k: np.empty(N, dtype=v.dtype) for k, v in r.items() if k not in once}
                if breakdown:
                    op_arrays = {k: np.empty((N, O), dtype=np.asarray(v).dtype) for k, v in r_ops.items()}
            for k, v in r.items():
                if k in once:
                    if v.shape[0] == 1 and v.tobytes() == once[k].tobytes():
                        continue
                    out[k] = np.empty(N, dtype=v.dtype)  # (a block of other values: every point's from here)
                    out[k][:s] = once.pop(k)
                out[k][s:e] = v
            if breakdown:
                for k, v in r_ops.items():
                    op_arrays[k][s:e] = v
        out.update({k: jit.one_over(v, N) for k, v in once.items()})
    # the chip's own arrays (no copy), for a system of several chips their sum
    # capacity adds up under tensor and pipeline parallelism; a partition has its share of the package's
    nsys = chips.compact("system.chips", 1.0) / chips.compact("system.partitions", 1.0)
    out["capacity_bytes"] = chips.memory_capacity * nsys if np.any(nsys != 1) else chips.memory_capacity
    breakdown_rec = None
    if breakdown:
        breakdown_rec = OperatorBreakdown(workload=workload.name, names=ops.names, count=ops.count,
                                          **{k: op_arrays[k] for k in _OP_FIELDS})
    return WorkloadMetrics(workload.name, workload.phase, out, breakdown_rec)


_MERGED: dict = {}


@functools.lru_cache(maxsize=128)
def _tables(workload, fused: bool, merged: bool) -> tuple[OpTable, "WorkloadInfo"]:
    """A workload's :func:`op_table` and :func:`workload_info`, ``merged``: identical operators evaluated once,
    their counts added (:func:`_merged`). Kept per workload as the op table is (a search evaluates one workload
    batch after batch; ~40 us of a decode step's evaluation at N = 1)."""
    ops = op_table(workload, fused)
    info = workload_info(workload, ops)
    return _merged(ops, info) if merged else (ops, info)


def _merged(ops: OpTable, info: "WorkloadInfo") -> tuple[OpTable, "WorkloadInfo"]:
    """The op table with identical operators as one, their counts added (ARCHITECTURE rule 2, identical work
    evaluated once: a decode step's Q and O projections, K and V, gate and up, its norms and residuals), and
    ``info`` with its operator columns renumbered. Every per-operator rule depends only on an operator's own
    row, so the merged operator's numbers are each original's; the sums over operators add the same terms
    (x c1 + x c2 as x (c1 + c2): within rounding). The operators of a fused attention block, causal attention
    and routed experts stay as they are (the rules across operators address them by column)."""
    key = (id(ops), info.expert_cols)
    hit = _MERGED.get(key)
    if hit is not None and hit[0] is ops:
        return hit[1], dataclasses.replace(info, expert_cols=hit[2])
    O = len(ops.names)
    fixed = {i for g in ops.attn_groups for i in g} | {c for c, _ in ops.causal_ops} | set(info.expert_cols)
    arrays = [f.name for f in dataclasses.fields(ops) if f.name not in ("count", "gemm_cols")
              and isinstance(getattr(ops, f.name), np.ndarray) and getattr(ops, f.name).shape == (O,)]
    first: dict = {}
    new_index = np.empty(O, dtype=int)
    order: list[int] = []
    for i in range(O):
        row = ("#", i) if i in fixed else (ops.rate_keys[i], ops.formats[i],
                                           tuple(getattr(ops, a)[i].item() for a in arrays))
        if row not in first:
            first[row] = len(order)
            order.append(i)
        new_index[i] = first[row]
    merged = ops
    if len(order) < O:
        sel = np.array(order)
        count = np.zeros(len(order))
        np.add.at(count, new_index, ops.count)
        merged = dataclasses.replace(
            ops, count=count, **{a: getattr(ops, a)[sel] for a in arrays},
            **{t: tuple(getattr(ops, t)[i] for i in order) for t in ("names", "kinds", "formats", "rate_keys")},
            gemm_cols=np.flatnonzero(ops.is_gemm[sel]),
            causal_ops=tuple((int(new_index[c]), op) for c, op in ops.causal_ops),
            attn_groups=tuple(tuple(int(new_index[i]) for i in g) for g in ops.attn_groups))
    expert_cols = tuple(int(new_index[c]) for c in info.expert_cols)
    if len(_MERGED) > 256:
        _MERGED.clear()
    _MERGED[key] = (ops, merged, expert_cols)
    return merged, dataclasses.replace(info, expert_cols=expert_cols)


def _reference(chips: Chips, workload, tiles, breakdown: bool, package, options) -> WorkloadMetrics:
    """:func:`evaluate_workload` point by point (``reference=True``): each point a batch of one, stacked."""
    N = chips.n
    O = len(op_table(workload, options["fused_attention"]).names)
    rom = {k: np.broadcast_to(np.asarray(options[k], dtype=float), (N,)) for k in ("rom_bandwidth",
                                                                                  "rom_energy_per_byte")}
    tiles_n = None if tiles is None else tuple(np.broadcast_to(np.asarray(x, dtype=float), (N, O)) for x in tiles)
    parts = []
    for i in range(N):
        pkg = None if package is None else _package_rows(package, i)
        parts.append(evaluate_workload(
            chips.take(i), workload, None if tiles_n is None else tuple(x[i:i + 1] for x in tiles_n), breakdown,
            options["fused_attention"], options["weights_in_rom"], rom["rom_bandwidth"][i],
            rom["rom_energy_per_byte"][i], pkg))
    cols = {k: np.concatenate([p.columns[k] for p in parts]) for k in parts[0].columns}
    rec = None
    if breakdown:
        first = parts[0].operators
        rec = dataclasses.replace(first, **{k: np.concatenate([np.asarray(getattr(p.operators, k)) for p in parts])
                                            for k in _OP_FIELDS})
    return WorkloadMetrics(parts[0].workload, parts[0].phase, cols, rec)


def _package_rows(package, i: int):
    """One point of a PackageArea (dse.model.area)."""
    def one(v):
        return v[i:i + 1] if isinstance(v, np.ndarray) and v.ndim == 1 else v
    return dataclasses.replace(package, **{f.name: one(getattr(package, f.name)) for f in dataclasses.fields(package)
                                           if f.name not in ("parts", "alike")},
                               parts={k: one(v) for k, v in package.parts.items()}, alike=None)


def evaluate_arrays(chips: Chips, workload, **options) -> dict[str, np.ndarray]:
    """The (N,) metric arrays of :func:`evaluate_workload` (no breakdown)."""
    return evaluate_workload(chips, workload, **options).columns


#: Operators whose outputs are partial sums under tensor parallelism (row-parallel: all-reduced after).
ALLREDUCE_AFTER = ("o_proj", "down_proj")


@dataclass(frozen=True)
class WorkloadInfo:
    """Per-workload constants of one evaluation (built once per workload)."""

    workload: object
    phase: str
    tokens: float
    flops: float
    resident: float
    fixed_bytes: float  # what stays resident whatever the batch: weights (unless in a ROM) + workspace
    context: float  # tokens of context per request (the KV cache's S)
    kv_per_token: float  # KV-cache bytes per token of context (0: no cache)
    quant_error: float
    allreduces: float  # all-reduces per step under tensor parallelism
    allreduce_bytes: float  # bytes all-reduced per step
    hop_bytes: float  # activations handed from one pipeline stage to the next (one micro-batch's)
    micro_batches: float = 1.0  # the step as this many micro-batches (the counts include them)
    moe_layers: float = 0.0  # MoE layer instances per step (layers x micro-batches)
    moe_bytes: float = 0.0  # their input activations [tokens, hidden] summed: an all-reduce's V under TP
    top_k: float = 0.0  # experts per token
    moe_experts: float = 0.0  # routed experts per MoE layer
    moe_tokens: float = 0.0  # tokens one MoE layer instance routes (a micro-batch's)
    expert_cols: tuple[int, ...] = ()  # the routed experts' operators
    random_routing: bool = False  # routing: random (the EP chips' loads vary: dse.model.experts)


def workload_info(workload, ops: OpTable) -> WorkloadInfo:
    red = [i for i, name in enumerate(ops.names) if name in ALLREDUCE_AFTER or name.endswith(ALLREDUCE_AFTER)]
    # a MoE layer is one router (dse.workload.phases); its [tokens, hidden] input is the shape of its output too
    routers = [i for i, o in enumerate(workload.ops) if o.role == "router"]
    model = getattr(workload, "model", None)
    moe = getattr(model, "moe", None)
    return WorkloadInfo(
        workload=workload, phase=workload.phase, tokens=float(workload.tokens_per_step),
        flops=float((ops.flops * ops.count).sum()), resident=float(workload.resident_bytes),
        fixed_bytes=float(getattr(workload, "weight_resident_bytes", 0.0) or 0.0)
        + float(getattr(workload, "workspace_bytes", 0.0) or 0.0),
        context=float(getattr(workload, "context", 0) or getattr(workload, "tokens", 0) or 0),
        kv_per_token=float(getattr(workload, "kv_bytes_per_token", 0.0) or 0.0),
        quant_error=_quant_error(workload),
        allreduces=float(sum(ops.count[i] for i in red)),
        allreduce_bytes=float(sum(ops.c_bytes[i] * ops.count[i] for i in red)),
        hop_bytes=float(max((ops.c_bytes[i] for i in red), default=0.0)),
        micro_batches=float(getattr(workload, "micro_batches", 1) or 1),
        moe_layers=float(sum(ops.count[i] for i in routers)),
        moe_bytes=float(sum(ops.a_bytes[i] * ops.count[i] for i in routers)),
        top_k=float(moe.top_k) if moe is not None and routers else 0.0,
        moe_experts=float(moe.experts) if moe is not None and routers else 0.0,
        moe_tokens=float(workload.ops[routers[0]].m) if routers else 0.0,
        expert_cols=tuple(i for i, o in enumerate(workload.ops) if o.role == "expert"),
        random_routing=getattr(workload, "routing", None) == "random",
    )


def _column2(x: np.ndarray, N: int, O: int) -> np.ndarray:
    """A given tile array as (1, O) when the same for every point, else (N, O)."""
    x = np.broadcast_to(x, (N, O))
    if N > 1 and (x == x[:1]).all():
        return np.array(x[:1])
    return np.array(x)


@functools.lru_cache(maxsize=128)
def _quant_error(workload) -> float:
    """Relative L2 error of the outputs from the weight, activation and KV formats, compounded: the roles'
    round-trip errors (Gaussian data) add in quadrature, sqrt(e_w^2 + e_a^2 + e_kv^2). A product of two
    independently rounded operands, (W + dW)(x + dx) ~ W x + dW x + W dx, carries the two relative errors
    as independent terms, so their variances add (tests/model/test_power_physics.py checks it on a GEMM)."""

    f = getattr(workload, "formats", None)
    if f is None:
        return 0.0
    errs = [quant_error(getattr(f, role)) for role in ("weights", "activations", "kv") if getattr(f, role, None)]
    return float(np.sqrt(np.sum(np.square(errs)))) if errs else 0.0
