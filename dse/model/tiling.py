"""Tile arithmetic: padding, working sets, strided spans, re-reads, waves.

Every function is pure and vectorized: arguments may be Python numbers or
numpy arrays (one entry per design point, or any shapes that broadcast), and
the result has the broadcast shape (a plain number when every argument was a
scalar). Integer inputs stay integers where the arithmetic allows, so that
byte and row counts are exact.

Sources:
    pad, padding_overhead       seed 004 §4.2.1 (eta_shape); seed 000 "Shape tails"
    tile_working_set            seed 004 §4.3.2
    strided_span                seed 004 §4.4.1
    gemm_traffic                seed 004 §4.4.1 (tiled input re-reads), §4.3.2
    waves, wave_efficiency      seed 004 §4.2.1 (blocks over compute units)
    conv_unroll                 seed 004 §4.6.2 (img2col through HBM)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import SpecError

__all__ = [
    "pad",
    "ceil_div",
    "padding_overhead",
    "shape_efficiency",
    "tile_working_set",
    "strided_span",
    "gemm_traffic",
    "waves",
    "wave_efficiency",
    "ConvUnroll",
    "conv_unroll",
]


def _out(x):
    """A 0-d array back to a Python scalar; arrays unchanged."""
    a = np.asarray(x)
    return a.item() if a.ndim == 0 else a


def _check_positive(name: str, q) -> np.ndarray:
    q = np.asarray(q)
    if np.any(q <= 0):
        raise SpecError(f"{name} must be >= 1, got {q if q.ndim == 0 else q[q <= 0][0]!r}")
    return q


def ceil_div(x, q):
    """ceil(x / q) for non-negative ``x`` and positive ``q`` (exact on integers)."""
    x = np.asarray(x)
    q = _check_positive("quantum", q)
    return _out(-(-x // q))


def pad(x, q):
    """``ceil(x / q) * q``: ``x`` rounded up to a whole number of quanta ``q``.

    seed 000 "Shape tails": F_padded = 2 ceil(M/T_M) T_M ceil(N/T_N) T_N ceil(K/T_K) T_K;
    pad(257, 32) = 288. A zero stays zero (an expert with no rows runs nothing).
    """
    x = np.asarray(x)
    q = _check_positive("quantum", q)
    return _out(-(-x // q) * q)


def padding_overhead(m, q):
    """Padded work over useful work minus one: ``pad(m, q) / m - 1`` (seed 000 "Shape tails").

    M = 257 with a 32-row step pads to 288 rows: 288/257 - 1 = 0.121.
    """
    m = np.asarray(m, dtype=float)
    if np.any(m <= 0):
        raise SpecError(f"padding_overhead: m must be >= 1, got {m!r}")
    return _out(np.asarray(pad(m, q), dtype=float) / m - 1.0)


def shape_efficiency(m, n, k, tm, tn, tk):
    """eta_shape = M N K / (pad(M, m_t) pad(N, n_t) pad(K, k_t)) (seed 004 §4.2.1)."""
    m, n, k = (np.asarray(v, dtype=float) for v in (m, n, k))
    padded = (np.asarray(pad(m, tm), dtype=float) * np.asarray(pad(n, tn), dtype=float)
              * np.asarray(pad(k, tk), dtype=float))
    return _out(m * n * k / padded)


def tile_working_set(tm, tn, tk, in_bytes, acc_bytes, slots=1, b_bytes=None):
    """On-chip bytes of one output tile: ``slots`` operand pairs plus the accumulator.

    seed 004 §4.3.2: ``slots x (tm tk a + tk tn b) + tm tn acc``. For
    m = n = 128, k = 64, BF16 operands and an FP32 accumulator: 32 KiB of
    operands + 64 KiB of accumulator = 96 KiB; a second operand pair prefetched
    (slots = 2, double buffering) needs 2 x 32 + 64 = 128 KiB. ``in_bytes`` is
    the bytes per element of the A operand (and of B unless ``b_bytes`` is
    given, for mixed-format operands); the accumulator is held once.
    """
    a = np.asarray(in_bytes, dtype=float)
    b = a if b_bytes is None else np.asarray(b_bytes, dtype=float)
    tm, tn, tk, slots = (np.asarray(v) for v in (tm, tn, tk, slots))
    operands = tm * tk * a + tk * tn * b
    return _out(slots * operands + tm * tn * np.asarray(acc_bytes, dtype=float))


def strided_span(rows, cols, row_stride_elems, elem_bytes):
    """(effective bytes, address span) of a ``rows x cols`` block inside a row-major matrix.

    seed 004 §4.4.1: effective = rows x cols x b; the span runs from the first
    row's start to the last row's end, ``(rows - 1) x s_r + cols x b`` with the
    row stride ``s_r = row_stride_elems x b``. 128 rows of 128 BF16 elements
    from rows of 4096: 32,768 effective bytes over a 1,040,640-byte span.
    """
    rows, cols, stride = (np.asarray(v) for v in (rows, cols, row_stride_elems))
    b = np.asarray(elem_bytes)
    if np.any(cols > stride):
        raise SpecError("strided_span: cols must be <= row_stride_elems (the block lies inside a row)")
    effective = rows * cols * b
    span = np.where(rows > 0, (rows - 1) * stride * b + cols * b, 0)
    return _out(effective), _out(span)


def gemm_traffic(M, N, K, TM, TN, a_elem_bytes, b_elem_bytes, c_elem_bytes, batch=1):
    """Bytes (A, B, C) requested from the level above by a tiling of C into TM x TN tiles.

    seed 004 §4.4.1, §4.3.2: each output tile reads its TM rows of A (all K
    columns) and its TN columns of B (all K rows) and writes its C tile once, so
    A is read ``ceil(N / TN)`` times, B ``ceil(M / TM)`` times, C written once:

        A = M K a ceil(N/TN),  B = K N b ceil(M/TM),  C = M N c   (x batch)

    [32,4096] x [4096,2048] FP8 with 16 blocks of 128 columns: A requests
    16 x 128 KiB = 2 MiB, B bytes 8 MiB. These are *requests* at the tile's
    level; whether the level above serves them from a cache or from DRAM is
    the memory model's business. Edge tiles read only the real rows/columns.
    """
    M, N, K, batch = (np.asarray(v) for v in (M, N, K, batch))
    a_reads = ceil_div(N, TN)
    b_reads = ceil_div(M, TM)
    a = M * K * np.asarray(a_elem_bytes) * a_reads * batch
    b = K * N * np.asarray(b_elem_bytes) * b_reads * batch
    c = M * N * np.asarray(c_elem_bytes) * batch
    return _out(a), _out(b), _out(c)


def waves(tiles, units):
    """Waves of output tiles over compute units: ``ceil(tiles / units)`` (seed 004 §4.2.1)."""
    return ceil_div(tiles, units)


def wave_efficiency(tiles, units):
    """Busy fraction of the units over all waves: ``tiles / (waves x units)`` (wave quantization).

    132 tiles on 132 units: 1.0; 133 tiles: 133 / 264 = 0.504. Zero tiles: 1.0
    (nothing to quantize).
    """
    t = np.asarray(tiles, dtype=float)
    u = np.asarray(units, dtype=float)
    w = np.asarray(waves(tiles, units), dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        eff = np.where(w > 0, t / (w * u), 1.0)
    return _out(eff)


@dataclass(frozen=True)
class ConvUnroll:
    """A convolution lowered to a GEMM by unrolling windows (im2col), seed 004 §4.6.2.

    The GEMM is ``[m, k] x [k, n]`` with m = output positions, k = kh kw c_in
    (one unrolled window per row), n = c_out. ``unrolled_bytes`` is the size
    of the im2col matrix; when it is materialized in off-chip memory it is
    written once and read back once, so ``extra_traffic_bytes = 2 x
    unrolled_bytes`` (the original input and the weights are read either way,
    so they are not extra). An on-chip unroller (Ascend MTE img2col) removes
    exactly this extra traffic.
    """

    out_h: int
    out_w: int
    m: int
    k: int
    n: int
    elem_bytes: float
    input_bytes: float
    unrolled_bytes: float
    weight_bytes: float
    flops: float

    @property
    def extra_traffic_bytes(self) -> float:
        """Write + read of the unrolled matrix through off-chip memory (seed 004 §4.6.2)."""
        return 2.0 * self.unrolled_bytes

    def extra_traffic_s(self, bandwidth_bytes_per_s):
        """Time the extra write and read take at ``bandwidth_bytes_per_s`` (seed 004 §4.6.2)."""
        return _out(self.extra_traffic_bytes / np.asarray(bandwidth_bytes_per_s, dtype=float))

    def matrix_cycles(self, flops_per_cycle):
        """Matrix-unit service cycles: flops / (FLOPs per cycle) (seed 004 §4.6.2)."""
        return _out(self.flops / np.asarray(flops_per_cycle, dtype=float))


def conv_unroll(h: int, w: int, c_in: int, c_out: int, kh: int = 3, kw: int = 3,
                stride: int = 1, padding: int | str = "same", elem_bytes: float = 2.0) -> ConvUnroll:
    """im2col of a ``kh x kw`` convolution over an ``h x w x c_in`` input (seed 004 §4.6.2).

    3x3, 56x56x64 FP16 input, 64 outputs, stride 1, 'same' padding: input
    401,408 B; unrolled matrix 3136 x 576 = 3.445 MiB (9x the input); extra
    write + read 6.891 MiB, 6.02 us at 1.2 TB/s; 2 x 3136 x 576 x 64 = 231.2
    MFLOPs, 28,224 cycles at 8,192 FLOPs/cycle.
    """
    for name, v in (("h", h), ("w", w), ("c_in", c_in), ("c_out", c_out), ("kh", kh), ("kw", kw),
                    ("stride", stride)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise SpecError(f"conv_unroll: {name} must be an integer >= 1, got {v!r}")
    if padding == "same":
        ph, pw = (kh - 1) // 2, (kw - 1) // 2
    elif padding == "valid":
        ph = pw = 0
    elif isinstance(padding, (int, np.integer)) and padding >= 0:
        ph = pw = int(padding)
    else:
        raise SpecError(f"conv_unroll: padding must be 'same', 'valid' or an integer >= 0, got {padding!r}")
    out_h = (h + 2 * ph - kh) // stride + 1
    out_w = (w + 2 * pw - kw) // stride + 1
    if out_h < 1 or out_w < 1:
        raise SpecError(f"conv_unroll: kernel {kh}x{kw} does not fit a {h}x{w} input with padding {padding!r}")
    m, k, n = out_h * out_w, kh * kw * c_in, c_out
    return ConvUnroll(
        out_h=out_h, out_w=out_w, m=m, k=k, n=n, elem_bytes=float(elem_bytes),
        input_bytes=float(h * w * c_in * elem_bytes),
        unrolled_bytes=float(m * k * elem_bytes),
        weight_bytes=float(k * n * elem_bytes),
        flops=2.0 * m * k * n,
    )
