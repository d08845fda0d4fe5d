"""Tile arithmetic: padding, output tiles and waves, working sets, re-reads, split-K partial sums.

Each rule of the tile level lives here once. The evaluator (dse/model/evaluator.py), the CP-SAT tile
model's data step (dse/solvers/cpsat_tiles.py) and the workload builders (dse.workload) call these
functions; none of them writes the arithmetic again.

Every function is pure and vectorized: arguments may be Python numbers or numpy arrays (one entry per
design point or per operator, or any shapes that broadcast). The functions are the cores the
evaluator's inner loop calls, so they check nothing; :func:`pad` and :func:`ceil_div` are the checked
wrappers for user-facing calls (a SpecError for a quantum < 1), around the same cores. Integer inputs
stay integers (exact byte and row counts); float inputs that hold whole numbers below 2^53 give the
same values as integers would.

Sources:
    ceil_div, pad                        seed 004 §4.2.1 (eta_shape); seed 000 "Shape tails"
    output_tiles, waves, wave_efficiency seed 004 §4.2.1 (blocks over compute units, wave quantization)
    tile_working_set, square_tile        seed 004 §4.3.2, §4.4.2 (working set vs buffer, double buffering)
    gemm_traffic, local_buffer_bytes     seed 004 §4.4.1 (tiled input re-reads), §4.3.2
    l2_panel, operand_reads              seed 004 §4.3.2, §4.4.1 (an operand re-read once per L2 panel)
    block_span, block_reads              seed 004 §4.2.1, §4.3.2 (the units' concurrent output block shares
                                         its operand panels: re-reads per block, not per tile)
    resident_panels, resident_reads      seed 004 §4.3.2, §4.4.1 (an operand panel that fits a unit's local
                                         buffer stays there: read once; issue 15 item 2)
    cache_reads                          the reads below one cache level (an L2 shared or per die, a
                                         memory-side cache; issue 15 items 1 and 4)
    partial_sum_bytes, partial_sum_splits  seed 004 §4.4.2 (split-K: partial sums written and read back)
    strided_tile_span                    seed 004 §4.4.1 (a tile's bytes vs its address span; `dse tiles`)
    occupancy                            seed 000 "Worked occupancy example" (resident waves; `dse tiles`)

strided_tile_span and occupancy feed `dse tiles`' report rather than the inner loop, so they check their
arguments as people's input (SpecError, dse.model.args.checked).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from dse.errors import SpecError
from dse.model import jit
from dse.model.args import checked as _checked

__all__ = [
    "ceil_div",
    "pad",
    "ceil_div_core",
    "pad_core",
    "output_tiles",
    "waves",
    "wave_efficiency",
    "wave_efficiency_core",
    "tile_working_set",
    "square_tile",
    "tile_side_core",
    "ACCUMULATOR_BYTES",
    "gemm_traffic",
    "local_buffer_bytes",
    "l2_panel",
    "operand_reads",
    "block_span",
    "block_reads",
    "resident_panels",
    "resident_reads",
    "cache_reads",
    "partial_sum_bytes",
    "partial_sum_splits",
    "TileSpan",
    "strided_tile_span",
    "GFX950_OCCUPANCY",
    "Occupancy",
    "occupancy",
]

#: Bytes per accumulator element: partial sums and output tiles accumulate in FP32 (seed 004 §4.3.2).
ACCUMULATOR_BYTES = 4.0
_TINY = float(np.finfo(float).tiny)


# ------------------------------------------------------------------ padding


def ceil_div_core(x, q):
    """ceil(x / q) for x >= 0 and q > 0, unchecked: integer floor division on integers, else float.

    The one ceiling of the model (tile counts, waves, padding, re-reads). Exact on integers; on floats
    holding whole numbers below 2^53 the same values (x / q is correctly rounded, so an exact multiple
    divides exactly and any other quotient stays strictly between two integers).
    """
    if np.result_type(x, q).kind in "iub":
        return -(-x // q)
    return np.ceil(np.divide(x, q))


@jit.overload_numbers(ceil_div_core)
def _ceil_div_numbers(x, q):
    """:func:`ceil_div_core` in compiled kernels: its two branches by numba's argument types."""
    if jit.is_integer(x) and jit.is_integer(q):
        return lambda x, q: -(-x // q)
    return lambda x, q: np.ceil(np.divide(x, q))


@jit.rule
def pad_core(x, q):
    """``ceil(x / q) q``, unchecked (see :func:`pad`)."""
    return ceil_div_core(x, q) * q


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
    """ceil(x / q) for non-negative ``x`` and positive ``q`` (exact on integers); SpecError for q < 1."""
    return _out(ceil_div_core(np.asarray(x), _check_positive("quantum", q)))


def pad(x, q):
    """``ceil(x / q) * q``: ``x`` rounded up to a whole number of quanta ``q``; SpecError for q < 1.

    seed 000 "Shape tails": F_padded = 2 ceil(M/T_M) T_M ceil(N/T_N) T_N ceil(K/T_K) T_K;
    pad(257, 32) = 288. A zero stays zero (an expert with no rows runs nothing).
    """
    return _out(pad_core(np.asarray(x), _check_positive("quantum", q)))


# ------------------------------------------------------------------ tiles and waves


@jit.rule
def output_tiles(m, n, tm, tn, batch=1):
    """Output tiles of a GEMM: ceil(M / T_M) ceil(N / T_N) batch (seed 004 §4.2.1); 0 for an empty one."""
    return ceil_div_core(m, tm) * ceil_div_core(n, tn) * batch


@jit.rule
def waves(work, units):
    """Waves of work items (output tiles x split-K) over compute units: ``ceil(work / units)`` (seed 004 §4.2.1)."""
    return ceil_div_core(work, units)


def wave_efficiency(work, units, n_waves=None):
    """Busy fraction of the units over all waves: ``work / (waves x units)`` (wave quantization).

    132 tiles on 132 units: 1.0; 133 tiles: 133 / 264 = 0.504. No work: 1.0 (nothing to quantize).
    ``n_waves``: the :func:`waves` of the same arguments, when the caller has them already.
    """
    return wave_efficiency_core(work, units, waves(work, units) if n_waves is None else n_waves)


@jit.rule
def wave_efficiency_core(work, units, n_waves):
    """:func:`wave_efficiency` with its waves (numbers in kernels, arrays in Python)."""
    # (tiny / tiny = 1 without work; work >= 1 otherwise, so the floor changes nothing there)
    return jit.maximum(work, _TINY) / jit.maximum(n_waves * units, _TINY)


# ------------------------------------------------------------------ working set


def tile_working_set(tm, tn, tk, in_bytes, acc_bytes, slots=1, b_bytes=None):
    """On-chip bytes of one output tile: ``slots`` operand pairs plus the accumulator.

    seed 004 §4.3.2: ``slots x (tm tk a + tk tn b) + tm tn acc``. For
    m = n = 128, k = 64, BF16 operands and an FP32 accumulator: 32 KiB of
    operands + 64 KiB of accumulator = 96 KiB; a second operand pair prefetched
    (slots = 2, double buffering, seed 004 §4.4.2) needs 2 x 32 + 64 = 128 KiB. ``in_bytes`` is
    the bytes per element of the A operand (and of B unless ``b_bytes`` is
    given, for mixed-format operands); the accumulator is held once (``acc_bytes`` = 0 where a
    separate accumulator store holds it: TPU accumulators, TMEM, PSUM).
    """
    return tile_working_set_core(tm, tn, tk, in_bytes, in_bytes if b_bytes is None else b_bytes, acc_bytes, slots)


@jit.rule
def tile_working_set_core(tm, tn, tk, a_bytes, b_bytes, acc_bytes, slots):
    """:func:`tile_working_set` with every argument given (numbers in kernels, arrays in Python)."""
    st = slots * tk
    return tm * (a_bytes * st + tn * acc_bytes) + tn * (b_bytes * st)  # (ordered for the fewest full-size operations)


@jit.rule
def accumulator_spill(tm, tn, store):
    """Bytes of a T_M x T_N FP32 accumulator tile beyond a separate accumulator store of ``store`` bytes per unit
    (TMEM, PSUM, L0C, TPU accumulators; 0: none): the part the store does not hold takes local-buffer space, so a
    working set counts it beside its operands (0 where the tile fits the store, and on a chip without a store,
    whose working set counts the whole tile: :func:`tile_working_set`'s ``acc_bytes``). B200's 256 KiB of TMEM
    holds a 256 x 256 tile exactly; a 32 KiB store would leave 224 KiB of a 256 x 256 tile to the buffer."""
    return jit.where(store > 0.0, jit.maximum(ACCUMULATOR_BYTES * tm * tn - store, 0.0), 0.0)


def square_tile(budget_bytes, tk, elem_bytes, acc_bytes=ACCUMULATOR_BYTES, slots=2):
    """The side T of the square tile whose :func:`tile_working_set` (T, T, tk) is ``budget_bytes`` (real T).

    The inverse of :func:`tile_working_set` for tm = tn = T and one element size e:
    acc T^2 + 2 slots tk e T = budget, so T = (-b + sqrt(b^2 + 4 acc budget)) / (2 acc) with
    b = 2 slots tk e (T = budget / b without an accumulator in the buffer). The default tiles of the
    evaluator round it down to the instruction tile.
    """
    with jit.quiet():
        return square_tile_core(budget_bytes, tk, elem_bytes, acc_bytes, slots)


@jit.rule
def square_tile_core(budget_bytes, tk, elem_bytes, acc_bytes, slots):
    """:func:`square_tile`, unchecked (numbers or arrays; compiled inside kernels)."""
    return tile_side_core(budget_bytes, tk, elem_bytes, acc_bytes, slots, 1.0)


@jit.rule
def tile_side_core(budget_bytes, tk, elem_bytes, acc_bytes, slots, aspect):
    """T_M of the tile T_M x (``aspect`` T_M) whose :func:`tile_working_set` is ``budget_bytes`` (real T_M;
    unchecked, numbers or arrays): acc aspect T^2 + (1 + aspect) slots tk e T = budget (T = budget / b without an
    accumulator in the buffer, b = (1 + aspect) slots tk e). :func:`square_tile` at ``aspect`` 1."""
    a = acc_bytes * aspect
    b = (1.0 + aspect) * slots * tk * elem_bytes
    quad = (-b + np.sqrt(b * b + 4.0 * a * budget_bytes)) / jit.where(a > 0, 2.0 * a, 1.0)
    return jit.where(a > 0, quad, budget_bytes / b)


# ------------------------------------------------------------------ traffic


def gemm_traffic(a_bytes, b_bytes, c_bytes, m, n, tm, tn):
    """Bytes (A, B, C) requested from the level above by a tiling of C into T_M x T_N tiles.

    seed 004 §4.4.1, §4.3.2: each output tile reads its T_M rows of A (all K
    columns) and its T_N columns of B (all K rows) and writes its C tile once, so
    A (``a_bytes`` = M K a batch) is read ``ceil(N / T_N)`` times, B ``ceil(M / T_M)`` times, C once.
    [32,4096] x [4096,2048] FP8 with 16 blocks of 128 columns: A requests
    16 x 128 KiB = 2 MiB, B 8 MiB. These are *requests* at the tile's level (what L2 serves);
    what reaches main memory is :func:`operand_reads`. Edge tiles read only the real rows/columns.
    """
    return a_bytes * ceil_div_core(n, tn), b_bytes * ceil_div_core(m, tm), c_bytes


@jit.rule
def local_buffer_bytes(tiles, k, tm, tn, elem_bytes):
    """Operand bytes through the local buffer: every output tile streams its A and B panels,
    tiles x K (T_M + T_N) e (seed 004 §4.3.2); the energy of the local level counts these."""
    return tiles * k * (tm + tn) * elem_bytes


@jit.rule
def l2_panel(l2_bytes, k, a_elem_bytes, b_elem_bytes):
    """Rows (columns) of an operand panel the L2 holds beside a panel of the other operand:
    max(floor(L2 / (2 K (e_a + e_b))), 1) (seed 004 §4.3.2: the cache holds both panels, double-buffered)."""
    return jit.maximum(np.floor(l2_bytes / (2.0 * jit.maximum(k, 1.0) * (a_elem_bytes + b_elem_bytes))), 1.0)


@jit.rule
def operand_reads(operand_bytes, extent, tile, panel, l2_bytes):
    """Times an operand is read from main memory (seed 004 §4.3.2, §4.4.1).

    Once when it fits the L2 (``operand_bytes <= l2_bytes``); otherwise once per block of the other
    operand that L2 holds beside it: ceil(extent / max(tile, panel)), ``extent`` the other operand's
    dimension (N for A, M for B), ``tile`` the output tile along it, ``panel`` the :func:`l2_panel`.
    Note ceil(X / max(T, t_2)) = min(ceil(X / T), ceil(X / t_2)): the CP-SAT tile model uses the right side.
    """
    return jit.where(operand_bytes > l2_bytes, ceil_div_core(extent, jit.maximum(tile, panel)), 1.0)


def block_span(l2_bytes, local_buffer_bytes):
    """The most tile rows (or columns) a concurrent block may span: floor(L2 / local buffer), at least 1.

    The block's units share operand slices through the L2, which stages them: a block a x b tiles wide
    streams its a A-slices and b B-slices through the L2 at once, at most max(a, b) local buffers' worth
    (each unit's slices fit its own buffer). With no L2 every unit fetches its own operands (span 1: the
    per-tile rule); H100 (50 MB L2, 228 KiB shared memory per SM): 214, no limit for 132 SMs.
    """
    with jit.quiet():
        return block_span_core(np.asarray(l2_bytes, dtype=float), np.asarray(local_buffer_bytes, dtype=float))


@jit.rule
def block_span_core(l2_bytes, local_buffer_bytes):
    """:func:`block_span`, unchecked (numbers or arrays)."""
    span = jit.where(local_buffer_bytes > 0,
                     np.floor(l2_bytes / jit.where(local_buffer_bytes > 0, local_buffer_bytes, 1.0)),
                     jit.where(l2_bytes > 0, np.inf, 1.0))
    return jit.maximum(span, 1.0)


def block_reads(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span=np.inf):
    """Times A and B are read from main memory when the units compute a block of output tiles at once.

    The units work on ``a x b`` output tiles concurrently (a <= c_M tile rows, b <= c_N tile columns,
    a b s <= U for U units and split-K s; seed 004 §4.2.1: a wave's blocks run on all units at once). The
    block's units stream the same K slices of its ``a`` A-panels and ``b`` B-panels together, so each
    slice comes from memory once per block, not once per tile: A is read ceil(c_N / b) times and B
    ceil(c_M / a) times, each capped by its L2 rule ``cap_a`` / ``cap_b`` (:func:`operand_reads` with a
    1-wide tile: 1 where the operand fits L2, else ceil(X / t_2) for the L2 panel t_2; seed 004 §4.3.2).
    The kernel arranges the block (its rasterization) to move the fewest bytes, A r_A + B r_B: the exact
    integer optimum over the block's shape, found among a = ceil(c_M / r) (the smallest block height for
    r_B = r, which leaves the widest b = min(floor(U' / a), c_N)). H100 (132 SMs), 4096 x 12288 x 4096
    BF16 in 128 x 256 tiles (c_M = 32, c_N = 16): a block of 16 x 8 tiles reads each operand twice
    (436 MB with C, 1.86x compulsory) where one tile at a time reads each 9 times (the L2-panel cap). One unit
    (U = 1): a = b = 1, r_A = min(c_N, cap_a), r_B = min(c_M, cap_b), the per-tile rule. Returns
    (r_A, r_B) as float arrays of the broadcast shape.
    """
    with jit.quiet():
        return _block_reads_gu(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span)


@jit.rule
def block_reads_core(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span):
    """:func:`block_reads` of one element (numbers; compiled inside kernels). The candidate heights: every
    distinct ceil(c_M / r), r = 1..top directly and the values below ceil(c_M / top) as a itself. No block is
    taller than a_max, so top = min(ceil(sqrt(c_M)), a_max) steps find the optimum however large M is (a batch of
    2**53 rows took 154 s when the steps did not stop there, issue 21 item 6); the first of equal costs is kept."""
    u = jit.maximum(np.floor(units / jit.maximum(split, 1.0)), 1.0)  # output tiles in flight at once
    c_m, c_n = jit.maximum(c_m, 1.0), jit.maximum(c_n, 1.0)
    a_max = jit.minimum(jit.minimum(u, c_m), span)
    b_top = jit.minimum(c_n, span)
    # one operand fits L2 (read once): the block runs the full width along the other one
    r_a = jit.where(cap_a > 1.0, jit.minimum(np.ceil(c_n / jit.minimum(u, b_top)), cap_a), 1.0)
    r_b = jit.where(cap_b > 1.0, jit.minimum(np.ceil(c_m / a_max), cap_b), 1.0)
    if not ((cap_a > 1.0) & (cap_b > 1.0) & (u > 1.0)):
        return r_a, r_b
    best, r_a, r_b = np.inf, 1.0, 1.0
    for r in range(1, int(jit.minimum(np.ceil(np.sqrt(c_m)), a_max)) + 1):
        for i in range(2):
            a = jit.minimum(np.ceil(c_m / r) if i == 0 else float(r), a_max)
            b = jit.minimum(np.floor(u / a), b_top)
            ra = jit.minimum(np.ceil(c_n / b), cap_a)
            rb = jit.minimum(np.ceil(c_m / a), cap_b)
            cost = a_bytes * ra + b_bytes * rb
            if cost < best:
                best, r_a, r_b = cost, ra, rb
    return r_a, r_b


@jit.elementwise(9, 2)
def _block_reads_gu(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span, r_a, r_b):
    r_a[0], r_b[0] = block_reads_core(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span)


@jit.rule
def resident_panels(tm, tn, k, ik, a_elem_bytes, b_elem_bytes, acc_bytes, local_buffer_bytes):
    """(A fits, B fits): whether a unit's local buffer holds a whole operand panel beside the other operand's stream.

    An A panel is the T_M rows of A over all K (T_M K e_A bytes); kept in the buffer, the unit computes every
    output tile of those rows while B streams past it in instruction-deep slices, double-buffered (2 k_i T_N e_B),
    into the T_M x T_N accumulator tile (``acc_bytes`` per element, 0 with a separate accumulator store):
        T_M K e_A + 2 k_i T_N e_B + acc T_M T_N <= local buffer
    (B alike: K T_N e_B + 2 k_i T_M e_A + acc T_M T_N). ZigZag's tpu_like (2 MiB SRAM, 32 x 32 array, INT8) at
    M = 256, K = 4096: the 256 x 4096 input is 1 MiB, +2 x 32 x 256 + 0 = 1,064,960 B <= 2 MiB, so it stays
    while the 16 MiB of weights stream once (ZigZag 3.9.1 reads 18.9 MB, tests/model/test_zigzag.py). A T_K the
    tile was given is the streaming choice without a resident panel, so it does not enter (the kernel that keeps
    a panel streams at the instruction's depth); nor does split-K (the panel is the whole K: conservative).
    """
    acc_tile = acc_bytes * tm * tn
    fits_a = tm * k * a_elem_bytes + 2.0 * ik * tn * b_elem_bytes + acc_tile <= local_buffer_bytes
    fits_b = k * tn * b_elem_bytes + 2.0 * ik * tm * a_elem_bytes + acc_tile <= local_buffer_bytes
    return fits_a, fits_b


def resident_reads(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span=np.inf, keep_a=False, keep_b=False):
    """Times A and B are read from main memory: the best of :func:`block_reads` and a resident panel.

    Where A's panels fit the units' local buffers (``keep_a``, :func:`resident_panels`), each unit keeps its T_M
    rows of A and sweeps every tile column: A is read once, and B once per group of row panels in flight,
    r_B = min(ceil(c_M / min(U', span)), cap_B) (U' = floor(U / s) units, ``span`` the rows a block may share
    through the L2: :func:`block_span`; no L2, span 1: each unit streams B itself). B alike with ``keep_b``.
    The kernel takes the dataflow that moves the fewest bytes, A r_A + B r_B (a tie keeps the block). ZigZag's
    tpu_like at M = 256 (one unit, c_M = 1, c_N = 16): the block rule reads the 1 MiB input 16 times, the
    resident input once: 16 MiB + 1 MiB + 1 MiB of output = 18.9 MB. Returns (r_A, r_B) as float arrays.
    """
    with jit.quiet():
        return _resident_reads_gu(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span, keep_a, keep_b)


@jit.rule
def resident_reads_core(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span, keep_a, keep_b):
    """:func:`resident_reads` of one element (numbers; ``keep_a`` / ``keep_b`` 1 / 0)."""
    r_a, r_b = block_reads_core(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span)
    group = jit.minimum(jit.maximum(np.floor(units / jit.maximum(split, 1.0)), 1.0), span)  # panels in flight
    best = a_bytes * r_a + b_bytes * r_b
    if keep_a > 0.5:
        rb = jit.where(cap_b > 1.0, jit.minimum(np.ceil(jit.maximum(c_m, 1.0) / group), cap_b), 1.0)
        cost = a_bytes * 1.0 + b_bytes * rb
        if cost < best:
            best, r_a, r_b = cost, 1.0, rb
    if keep_b > 0.5:
        ra = jit.where(cap_a > 1.0, jit.minimum(np.ceil(jit.maximum(c_n, 1.0) / group), cap_a), 1.0)
        cost = a_bytes * ra + b_bytes * 1.0
        if cost < best:
            r_a, r_b = ra, 1.0
    return r_a, r_b


@jit.elementwise(11, 2)
def _resident_reads_gu(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span, keep_a, keep_b, r_a, r_b):
    r_a[0], r_b[0] = resident_reads_core(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span, keep_a, keep_b)


def cache_reads(a_bytes, b_bytes, m, n, k, a_elem_bytes, b_elem_bytes, c_m, c_n, units, split, capacity,
                local_buffer_bytes, keep_a=False, keep_b=False, a_read_bytes=None):
    """(r_A, r_B): times A and B are read from the level below a cache of ``capacity`` bytes that ``units``
    units share (seed 004 §4.3.2, §4.4.1): :func:`resident_reads` with the cache's re-read caps
    (:func:`operand_reads` over its :func:`l2_panel`) and block span (:func:`block_span`).

    The one rule of every cache level the evaluator and the tile model's data step apply it to:
      * an L2 shared by the package's units: ``units`` all of them, ``capacity`` all of the L2;
      * L2s private to each die (``l2_scope: die``, MI300X / MI355X XCDs): each die runs 1 / dies of the output
        tiles in blocks of its own units, through its own L2 (``units`` and ``capacity`` per die). The dies' blocks
        tile the output grid as one die's would, so the same counts hold for the package: A is read
        ceil(c_N / b) and B ceil(c_M / a) times for a die's a x b block, capped by what one die's L2 holds;
      * a memory-side cache shared by the dies (AMD Infinity Cache): main memory is read by the package-wide
        block (every unit) with the cache's capacity; what the L2s miss beyond that is served by the cache.
    ``a_read_bytes``: A's bytes in the block cost (0 for an A operand that stays on chip), default ``a_bytes``.
    """
    with jit.quiet():
        return _cache_reads_gu(a_bytes, b_bytes, m, n, k, a_elem_bytes, b_elem_bytes, c_m, c_n, units, split, capacity,
                               local_buffer_bytes, keep_a, keep_b, a_bytes if a_read_bytes is None else a_read_bytes)


@jit.rule
def cache_reads_core(a_bytes, b_bytes, m, n, k, a_elem_bytes, b_elem_bytes, c_m, c_n, units, split, capacity,
                     local_buffer_bytes, keep_a, keep_b, a_read_bytes):
    """:func:`cache_reads` of one element (numbers; compiled inside kernels: the evaluator runs it over a block of
    points x operators, dse.model.evaluator._cache_reads_kernel)."""
    if a_bytes <= 0.0 and b_bytes <= 0.0:  # (a vector operator: nothing to re-read, the rules below give 1, 1)
        return 1.0, 1.0
    t2 = l2_panel(capacity, k, a_elem_bytes, b_elem_bytes)
    cap_a, cap_b = operand_reads(a_bytes, n, 1.0, t2, capacity), operand_reads(b_bytes, m, 1.0, t2, capacity)
    return resident_reads_core(a_read_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b,
                               block_span_core(capacity, local_buffer_bytes), keep_a, keep_b)


@jit.elementwise(16, 2)
def _cache_reads_gu(a_bytes, b_bytes, m, n, k, a_elem_bytes, b_elem_bytes, c_m, c_n, units, split, capacity,
                    local_buffer_bytes, keep_a, keep_b, a_read_bytes, r_a, r_b):
    r_a[0], r_b[0] = cache_reads_core(a_bytes, b_bytes, m, n, k, a_elem_bytes, b_elem_bytes, c_m, c_n, units, split,
                                      capacity, local_buffer_bytes, keep_a, keep_b, a_read_bytes)


@jit.rule
def partial_sum_bytes(m, n, batch, split):
    """Extra bytes of split-K: (split - 1) FP32 partial outputs written and read back,
    (s - 1) x M N batch x 4 B x 2 (seed 004 §4.4.2); 0 without a split."""
    return (split - 1) * (m * n * batch * (ACCUMULATOR_BYTES * 2.0))


@jit.rule
def partial_sum_splits(capacity_bytes, m, n, batch):
    """The largest split-K whose partial sums fit ``capacity_bytes`` on chip:
    1 + floor(capacity / (M N batch x 4 B x 2)) (seed 004 §4.4.2; :func:`partial_sum_bytes` <= capacity)."""
    return 1.0 + np.floor(capacity_bytes / jit.maximum(m * n * batch * (ACCUMULATOR_BYTES * 2.0), 1.0))


# ------------------------------------------------------------------ layout and residency (checked: report inputs)


class TileSpan(NamedTuple):
    """Bytes of one tile cut from a row-major matrix (seed 004 §4.4.1); floats or arrays."""

    effective_bytes: object   # rows x cols x b: the data the tile holds
    span_bytes: object        # first row's start to the last row's end: (rows - 1) s_r + cols b
    row_bytes: object         # contiguous bytes of one tile row, cols x b
    row_stride_bytes: object  # distance between adjacent row starts, row_elems x b


def strided_tile_span(rows, cols, row_elems, elem_bytes) -> TileSpan:
    """Effective bytes and address span of a ``rows`` x ``cols`` tile of a row-major matrix whose rows hold
    ``row_elems`` elements of ``elem_bytes`` bytes: addr(i, j) = base + i s_r + j b (seed 004 §4.4.1).

    128 rows of 128 BF16 elements from rows of 4,096: 32 KiB of data, 256 B per row, row starts 8,192 B
    apart, a span of 127 x 8192 + 256 = 1,040,640 B; reading row by row moves only the 32 KiB (a
    descriptor: start, 128 rows, 256 B per row, 8,192 B stride). ``cols`` <= ``row_elems``.
    """
    r = _checked("rows", rows, positive=True)
    c = _checked("cols", cols, positive=True)
    w = _checked("row_elems", row_elems, positive=True)
    b = _checked("elem_bytes", elem_bytes, positive=True)
    if np.any(c > w):
        raise SpecError(f"cols: a tile row cannot be wider than the matrix row, got cols={cols!r}, "
                        f"row_elems={row_elems!r}")
    row_bytes = c * b
    stride = w * b
    return TileSpan(_out(r * row_bytes), _out((r - 1.0) * stride + row_bytes), _out(row_bytes), _out(stride))


#: gfx950 (MI355X) CU limits of seed 000 "Resource pressure and occupancy": one 512-entry VGPR + AccVGPR
#: budget per lane, at most 8 waves per SIMD, 4 SIMDs per CU.
GFX950_OCCUPANCY = {"vgpr_budget": 512, "max_waves_per_simd": 8, "simds_per_cu": 4}


class Occupancy(NamedTuple):
    """Resident-wave limits of one kernel on one compute unit (floats or arrays; inf: not limiting)."""

    waves_by_vgpr: object
    workgroups_by_lds: object
    waves_by_lds: object
    waves_per_simd: object
    occupancy: object


def occupancy(lds_per_workgroup, lds_per_cu, waves_per_workgroup=1, vgpr_per_lane=0, *, vgpr_budget=512,
              max_waves_per_simd=8, simds_per_cu=4) -> Occupancy:
    """Waves per SIMD = min of the VGPR, LDS and hardware limits; occupancy = that / max
    (seed 000 "Resource pressure and occupancy", "Worked occupancy example").

    W_VGPR = floor(budget / VGPR per lane); G_LDS = floor(LDS per CU / LDS per workgroup); a workgroup
    spreads its waves over the CU's SIMDs, so the LDS limit is floor(G_LDS waves_wg / SIMDs) waves per SIMD.
    ``vgpr_per_lane`` is the VGPR + AccVGPR entries per lane (one shared budget on gfx950), after the
    allocation granule; 0 where registers are not given (they do not limit). ``lds_per_workgroup`` 0:
    LDS does not limit. A 4-wave workgroup of 128 entries per lane and 32 KiB LDS on a 160 KiB CU: 4 waves
    by VGPR, 5 workgroups (5 waves per SIMD) by LDS, occupancy min(4, 5, 8) / 8 = 50 %. ``dse tiles``
    reports it for a tile whose working set is the workgroup's LDS (defaults: :data:`GFX950_OCCUPANCY`).
    """
    lds_wg = _checked("lds_per_workgroup", lds_per_workgroup)
    lds_cu = _checked("lds_per_cu", lds_per_cu, positive=True)
    w_wg = _checked("waves_per_workgroup", waves_per_workgroup, positive=True)
    vgpr = _checked("vgpr_per_lane", vgpr_per_lane)
    budget = _checked("vgpr_budget", vgpr_budget, positive=True)
    max_w = _checked("max_waves_per_simd", max_waves_per_simd, positive=True)
    simds = _checked("simds_per_cu", simds_per_cu, positive=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        waves_vgpr = np.where(vgpr > 0, np.floor(budget / np.where(vgpr > 0, vgpr, 1.0)), np.inf)
        wg_lds = np.where(lds_wg > 0, np.floor(lds_cu / np.where(lds_wg > 0, lds_wg, 1.0)), np.inf)
        waves_lds = np.where(np.isfinite(wg_lds), np.floor(np.where(np.isfinite(wg_lds), wg_lds, 0.0) * w_wg / simds),
                             np.inf)
    waves = np.minimum(np.minimum(waves_vgpr, waves_lds), max_w)
    return Occupancy(_out(waves_vgpr), _out(wg_lds), _out(waves_lds), _out(waves), _out(waves / max_w))
