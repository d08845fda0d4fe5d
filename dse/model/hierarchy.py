"""The on-chip levels between the matrix datapath and main memory: traffic, time and energy of each.

Each rule lives here once; the evaluator (dse/model/evaluator.py) and the CP-SAT tile model's data step
(dse/solvers/tile_data.py, dse/solvers/tile_model.py) call these functions.

Levels (issue 15 item 1), from the datapath out:

    registers     per unit   the matrix instruction's operands and accumulators: every instruction reads its
                             A and B fragments and reads and writes its accumulators (seed 004 §4.1.3's energy
                             hierarchy; the register files of Dally, Hot Chips 2023, p. 12)
    local buffer  per unit   shared memory / LDS / SBUF / unified buffer: written by the fills from the level
                             above (the tile rule's per-tile panels, dse.model.tiling.local_buffer_bytes) and
                             read by the matrix unit, each operand element once per register tile of the other
                             operand's extent (below)
    L2            per die    what the local buffers read: each output tile's A and B panels (the tile rule of
                             dse.model.tiling.gemm_traffic), shared by multicast within a cluster of units
                             (Hopper / Blackwell TMA multicast), plus C and the split-K partial sums
    main memory              the off-chip rule (dse.model.tiling.block_reads; an operand panel that fits a
                             unit's local buffer is read once: tiling.resident_reads)

Register tile (R_M x R_N): the output block one reader -- a warp group, a wave, the systolic array -- holds in
registers while it streams a K slice of the tile's panels out of the local buffer. It reads its R_M rows of
A and R_N columns of B once per K step, so over a T_M x T_N tile the local buffer delivers
    K e (T_M ceil(T_N / R_N) + T_N ceil(T_M / R_M))
bytes (e the operand element size). H100's wgmma m64n256k16: R = 64 x 256 (A and B from shared memory),
0.0195 B per BF16 FLOP; a weight-stationary array reads each input row once per array width (R_N = the
array's n) and its weights once per tile (R_M = T_M).

Time of a level = its bytes / (bytes per cycle x clock x the sustained clock ratio): the on-chip levels run
on the core clock. The local buffers are per unit, so their time is wave-quantized like the matrix time
(each unit reads its own tiles); the L2 is shared, total bytes over the total bandwidth.
"""

from __future__ import annotations

import numpy as np

from dse.model import jit
from dse.model.tiling import ACCUMULATOR_BYTES, ceil_div_core

__all__ = ["instruction_k", "register_bytes_per_flop", "local_read_bytes", "level_time", "level_time_core",
           "cluster_requests"]


#: the operand size the catalog's matrix instructions are quoted at (their 16-bit forms: BF16 / FP16)
INSTRUCTION_QUOTED_BYTES = 2.0


@jit.rule
def instruction_k(ik, elem_bytes, systolic):
    """K of a matrix instruction at operand size ``elem_bytes``, from ``ik``, its K at 16 bits (the catalog's
    ``matrix.instruction.k``). A GPU's MMA instruction takes a fixed number of operand bytes along K, so narrower
    formats take more elements: PTX wgmma m64nNk16 for BF16, k32 for FP8, k8 for TF32 (PTX ISA, wgmma.mma_async
    shapes); tcgen05.mma K = 16 for kind::f16, 32 for kind::f8f6f4 (64 for kind::mxf4); CDNA 3 MFMA 16x16x16 BF16,
    16x16x32 FP8 (AMD CDNA 3 ISA); Ascend's cube 16x16x16 FP16, 16x32x16 INT8 (CANN). A weight-stationary
    array's K (``systolic`` 1) is its rows, whatever the format. ``elem_bytes`` counts a block-scaled format's
    scales (dse.model.evaluator's value bytes), so its K comes out a little short of the ISA's (MXFP4 60.2 and
    NVFP4 56.9 against kind::mxf4's 64; MXFP6 41.0 where kind::f8f6f4 holds FP6 in byte containers, K = 32):
    within the accumulators' share of the register bytes, and on the side of more bytes for FP4."""
    return jit.where(systolic > 0.5, ik, ik * INSTRUCTION_QUOTED_BYTES / elem_bytes)


@jit.rule
def register_bytes_per_flop(im, inn, ik, elem_bytes, acc_bytes=ACCUMULATOR_BYTES):
    """Register-file bytes per FLOP of an (m, n, k) matrix instruction: read A (m k) and B (k n) in the input
    format, read and write the m n accumulators, over its 2 m n k FLOPs.

    ``ik``: the instruction's K at this operand size (:func:`instruction_k`). The accumulators dominate: 2 x 4 B
    per m n over 2 m n k FLOPs, 4 / k B/FLOP, so a format whose instruction takes twice the K moves half the
    register bytes per FLOP.

    H100 wgmma 64x8x16 BF16: (2048 + 256 + 4096) / 16384 = 0.39 B/FLOP. A weight-stationary array's
    instruction (1 x n x k: one input row through the k x n weights) reads each weight once per row, e / 2 per
    FLOP: the weight-register reads of ZigZag's tpu_like (one 8-bit read per MAC).
    """
    return (im * ik * elem_bytes + ik * inn * elem_bytes + 2.0 * im * inn * acc_bytes) / (2.0 * im * inn * ik)


@jit.rule
def local_read_bytes(tiles, k, tm, tn, rm, rn, a_elem_bytes, b_elem_bytes):
    """Bytes the matrix unit reads from the local buffer: tiles x K x (T_M ceil(T_N / R_N) e_A + T_N
    ceil(T_M / R_M) e_B), for a register tile R_M x R_N (see the module doc; e_A = 0 for an A operand that is
    already in registers, fused attention's probabilities). A tile no wider than the register tile is read once
    (T_M + T_N per K step, the bytes its fill wrote); 0 for vector operators (no tiles).

    H100, 128 x 256 tiles, R = 64 x 256, BF16: per K step 128 x 1 + 256 x 2 = 640 elements, 1280 B for
    2 x 128 x 256 FLOPs: 0.0195 B/FLOP, 80 B per cycle of an SM's 4096 BF16 FLOPs (of its 128).
    """
    return tiles * k * (tm * ceil_div_core(tn, rn) * a_elem_bytes + tn * ceil_div_core(tm, rm) * b_elem_bytes)


def level_time(nbytes, bytes_per_cycle, clock_hz):
    """Seconds to move ``nbytes`` through a level of ``bytes_per_cycle`` at ``clock_hz``: 0 without traffic;
    a level without bandwidth (0) never limits (it is not modelled, inf bytes/cycle is the same)."""
    nbytes, rate = np.asarray(nbytes, dtype=float), np.asarray(bytes_per_cycle, dtype=float) * clock_hz
    with np.errstate(divide="ignore", invalid="ignore"):
        return level_time_core(nbytes, rate)


@jit.rule
def level_time_core(nbytes, rate):
    """:func:`level_time` at ``rate`` = bytes per cycle x clock (B/s): nbytes / rate, 0 without traffic or
    without bandwidth (numbers in kernels, arrays in Python)."""
    return jit.where((nbytes > 0) & (rate > 0), nbytes / rate, 0.0)


def cluster_requests(a_bytes, b_bytes, c_m, c_n, cluster):
    """(r_A, r_B): times each operand's panels are requested from L2 when ``cluster`` units share one request
    by multicast (Hopper / Blackwell thread-block clusters, TMA multicast; NVIDIA H100 whitepaper).

    The cluster computes a x b output tiles (b = floor(cluster / a)); each A panel is requested once per
    cluster column, each B panel once per cluster row: r_A = ceil(c_N / b), r_B = ceil(c_M / a), and the
    kernel takes the shape that requests the fewest bytes, A r_A + B r_B (ties: the smaller a). Cluster 1:
    r_A = c_N, r_B = c_M, the per-tile rule of :func:`dse.model.tiling.gemm_traffic`. The down projection of a
    4K prefill (4096 x 4096 x 12288 BF16, A and B 100.7 MB each) in 128 x 128 tiles (c_M = c_N = 32): 6.44 GB of
    panel requests one tile at a time, 4.83 GB with a cluster of 2 (one operand's requests halved).
    Arguments broadcast; ``cluster`` >= 1 (a whole number).
    """
    with jit.quiet():
        return _cluster_requests_gu(a_bytes, b_bytes, c_m, c_n, cluster)


@jit.rule(loops=True)
def cluster_requests_core(a_bytes, b_bytes, c_m, c_n, cluster):
    """:func:`cluster_requests` of one element (numbers; compiled inside kernels): every cluster height a in turn
    (:func:`cluster_request_step`), from the per-tile requests."""
    c_n1, c_m1 = jit.maximum(c_n, 1.0), jit.maximum(c_m, 1.0)
    best, r_a, r_b = a_bytes * c_n1 + b_bytes * c_m1, c_n1, c_m1
    for a in range(1, int(cluster) + 1):
        best, r_a, r_b = cluster_request_step(a_bytes, b_bytes, c_m1, c_n1, cluster, float(a), best, r_a, r_b)
    return r_a, r_b


@jit.rule
def cluster_request_step(a_bytes, b_bytes, c_m1, c_n1, cluster, a, best, r_a, r_b):
    """One cluster height ``a`` of :func:`cluster_requests`: (the fewest bytes, r_A, r_B) so far, the shape a x
    floor(cluster / a) taken where it exists and requests fewer bytes (the first of equal ones kept). ``c_m1``,
    ``c_n1``: the tile counts, at least 1. Without a branch: a kernel runs it for every point at once."""
    b = np.floor(cluster / a)
    ra, rb = ceil_div_core(c_n1, jit.maximum(b, 1.0)), ceil_div_core(c_m1, a)
    cost = a_bytes * ra + b_bytes * rb
    better = (b >= 1.0) & (cost < best)
    return jit.where(better, cost, best), jit.where(better, ra, r_a), jit.where(better, rb, r_b)


@jit.elementwise(5, 2)
def _cluster_requests_gu(a_bytes, b_bytes, c_m, c_n, cluster, r_a, r_b):
    r_a[0], r_b[0] = cluster_requests_core(a_bytes, b_bytes, c_m, c_n, cluster)
