"""Tile arithmetic (dse/model/tiling.py): the cores the evaluator and the CP-SAT tile model call.

The seed cases themselves (padding_tail_m257, tile_working_set, tiled_input_rereads) are in
tests/reference/test_workload_cases.py. Expected numbers here are counted by hand in the comments
(independent of the formulas), or are properties (inverse, bounds, integer-vs-float agreement).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import SpecError
from dse.model import tiling


def test_pad_scalar_and_zero():
    assert tiling.pad(257, 32) == 288
    assert tiling.pad(256, 32) == 256
    assert tiling.pad(0, 16) == 0
    assert isinstance(tiling.pad(257, 32), int)


def test_pad_vectorized_broadcasts():
    out = tiling.pad(np.array([1, 16, 17]), np.array([[16], [8]]))
    assert out.shape == (2, 3)
    assert out.tolist() == [[16, 16, 32], [8, 16, 24]]


def test_pad_rejects_zero_quantum():
    with pytest.raises(SpecError):
        tiling.pad(10, 0)
    with pytest.raises(SpecError):
        tiling.ceil_div(10, np.array([4, 0]))


@given(x=st.integers(0, 10**6), q=st.integers(1, 512))
@settings(max_examples=50, deadline=None)
def test_pad_properties(x, q):
    p = tiling.pad(x, q)
    assert p % q == 0 and x <= p < x + q


@given(x=st.integers(0, 2**40), q=st.integers(1, 2**20))
@settings(max_examples=200, deadline=None)
def test_core_float_path_equals_integer_path(x, q):
    """The evaluator calls the core on whole-number floats; it must give the integer answers."""
    assert tiling.ceil_div_core(float(x), float(q)) == tiling.ceil_div_core(x, q)
    assert tiling.pad_core(np.array([float(x)]), float(q))[0] == tiling.pad_core(x, q)


def test_output_tiles_and_waves():
    # a 257 x 300 output in 128 x 128 tiles: 3 x 3 = 9 tiles per batch entry, 2 entries: 18 work items
    assert tiling.output_tiles(257, 300, 128, 128, batch=2) == 18
    assert tiling.output_tiles(0, 300, 128, 128) == 0  # a vector operator has no tiles
    assert tiling.waves(132, 132) == 1
    assert tiling.waves(133, 132) == 2
    assert tiling.wave_efficiency(133, 132) == pytest.approx(133 / 264)
    assert tiling.wave_efficiency(0, 132) == 1.0
    eff = tiling.wave_efficiency(np.array([1.0, 132.0, 264.0]), 132.0)
    assert eff == pytest.approx([1 / 132, 1.0, 1.0])


def test_tile_working_set_mixed_operands_and_arrays():
    # FP8 A (1 B), BF16 B (2 B), FP32 accumulator: 128x64 + 64x128x2 + 128x128x4 bytes
    assert tiling.tile_working_set(128, 128, 64, 1, 4, b_bytes=2) == 8192 + 16384 + 65536
    got = tiling.tile_working_set(np.array([64, 128]), 128, 64, 2, 4, slots=np.array([1, 3]))
    # 64x128 tile, one slot: (64x64 + 64x128) x 2 + 64x128x4 = 57,344; 128x128, three slots: 3 x 32 KiB + 64 KiB
    assert got.tolist() == [57344, 3 * 32768 + 65536]
    # a separate accumulator store: the accumulator does not count
    assert tiling.tile_working_set(128, 128, 64, 2, 0, slots=2) == 65536


def test_accumulator_spill_is_what_the_store_does_not_hold():
    """A T_M x T_N FP32 accumulator tile is 4 T_M T_N bytes: a 256 x 256 tile (256 KiB) fits B200's 256 KiB TMEM
    exactly (0 spilled); a 32 KiB store leaves 262,144 - 32,768 = 229,376 B to the local buffer; a 4 MiB store
    (TPU v1) holds it; a chip without a store (0) counts the tile in its working set instead (tile_working_set's
    acc_bytes), so the spill is 0 there."""
    assert tiling.accumulator_spill(256, 256, 256 * 1024) == 0.0
    assert tiling.accumulator_spill(256, 256, 32 * 1024) == 229376.0
    assert tiling.accumulator_spill(256, 256, 4 * 2**20) == 0.0
    assert tiling.accumulator_spill(256, 256, 0.0) == 0.0
    got = tiling.accumulator_spill(np.array([128.0, 256.0]), np.array([128.0, 256.0]), np.array([32768.0, 32768.0]))
    assert got.tolist() == [65536.0 - 32768.0, 229376.0]


@given(budget=st.floats(16 * 1024, 4e6), tk=st.sampled_from([16, 32, 64, 128]), e=st.sampled_from([0.5, 1, 2, 4]),
       acc=st.sampled_from([0.0, 4.0]))
@settings(max_examples=100, deadline=None)
def test_square_tile_inverts_the_working_set(budget, tk, e, acc):
    t = tiling.square_tile(budget, tk, e, acc_bytes=acc, slots=2)
    assert tiling.tile_working_set(t, t, tk, e, acc, slots=2) == pytest.approx(budget, rel=1e-9)


@given(budget=st.floats(16 * 1024, 4e6), tk=st.sampled_from([16, 32, 64, 128]), e=st.sampled_from([0.5, 1, 2, 4]),
       acc=st.sampled_from([0.0, 4.0]), aspect=st.sampled_from([0.5, 1.0, 2.0, 3.0]))
@settings(max_examples=100, deadline=None)
def test_tile_side_inverts_the_working_set_of_a_rectangle(budget, tk, e, acc, aspect):
    """The default tiles' wide candidate T x 2T (dse.model.evaluator.tile_candidates) and the square (aspect 1,
    the same numbers as square_tile's) fill the budget with their double-buffered working set."""
    t = tiling.tile_side_core(budget, tk, e, acc, 2.0, aspect)
    assert tiling.tile_working_set(t, aspect * t, tk, e, acc, slots=2) == pytest.approx(budget, rel=1e-9)
    if aspect == 1.0:
        assert t == tiling.square_tile(budget, tk, e, acc_bytes=acc, slots=2)


def test_gemm_traffic_reads_each_operand_once_per_tile_of_the_other():
    # 64 x 64 x 128 BF16 in one 64 x 64 tile: every tensor once
    a, b, c = tiling.gemm_traffic(64 * 128 * 2, 128 * 64 * 2, 64 * 64 * 2, 64, 64, 64, 64)
    assert (a, b, c) == (64 * 128 * 2, 128 * 64 * 2, 64 * 64 * 2)
    # 256 x 4096 outputs in (64..256) x (128..512) tiles: A read 32, 16, 8 times; B 4, 2, 1 times
    A, B = 256 * 4096 * 2, 4096 * 4096 * 2
    a, b, _ = tiling.gemm_traffic(A, B, 0, 256, 4096, np.array([64, 128, 256]), np.array([128, 256, 512]))
    assert a.tolist() == [32 * A, 16 * A, 8 * A]
    assert b.tolist() == [4 * B, 2 * B, B]


def test_l2_panel_and_operand_reads():
    # 40 MB of L2, K = 4096, BF16 x BF16: panels of floor(40e6 / (2 x 4096 x 4)) = 1220 rows
    assert tiling.l2_panel(40e6, 4096, 2, 2) == 1220
    assert tiling.l2_panel(0.0, 4096, 2, 2) == 1  # never below one row
    # B = 32 MiB does not fit 25 MB: re-read once per 1220-row block of A (M = 4096: 4 blocks), whatever
    # the 128-row tile; a 4096-row tile reads it once; an operand that fits L2 is read once
    assert tiling.operand_reads(32 * 2**20, 4096, 128, 1220, 25e6) == 4
    assert tiling.operand_reads(32 * 2**20, 4096, 4096, 1220, 25e6) == 1
    assert tiling.operand_reads(1e6, 4096, 128, 1, 25e6) == 1


def _block_brute_force(A, B, cm, cn, units, split, cap_a, cap_b, span=10**9):
    """The definition of block_reads, enumerated: every block of a x b output tiles with a b s <= U."""
    best = None
    for a in range(1, min(cm, span) + 1):
        for b in range(1, min(cn, span) + 1):
            if a * b * split > max(units, split):  # (U < s: one tile in flight)
                continue
            ra = 1 if cap_a <= 1 else min(-(-cn // b), cap_a)
            rb = 1 if cap_b <= 1 else min(-(-cm // a), cap_b)
            cost = A * ra + B * rb
            if best is None or cost < best[0]:
                best = (cost, ra, rb)
    return best


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 200), st.integers(1, 4),
       st.integers(1, 50), st.integers(1, 50), st.floats(0.1, 10.0), st.integers(1, 60))
def test_block_reads_is_the_least_traffic_block(cm, cn, units, split, cap_a, cap_b, ratio, span):
    """block_reads returns the least-traffic block of the brute force over every block shape."""
    A, B = 1e6 * ratio, 1e6
    ra, rb = tiling.block_reads(A, B, cm, cn, units, split, cap_a, cap_b, span)
    cost, _, _ = _block_brute_force(A, B, cm, cn, units, split, cap_a, cap_b, span)
    assert A * float(ra) + B * float(rb) == pytest.approx(cost, rel=1e-12)
    assert 1 <= float(ra) <= max(cap_a, 1) and 1 <= float(rb) <= max(cap_b, 1)  # compulsory is the floor


def test_block_reads_by_hand():
    # H100 (132 SMs), down projection 4096 x 12288 x 4096 BF16 in 128 x 256 tiles: c_M = 32, c_N = 16; neither
    # 100.7 MB operand fits the 50 MB L2 (L2 panels of floor(50e6 / (2 x 12288 x 4)) = 508 rows: caps
    # ceil(4096 / 508) = 9). A block of 16 x 8 = 128 tiles (<= 132) reads A ceil(16 / 8) = 2 and B
    # ceil(32 / 16) = 2 times; 32 x 4 reads 4 + 1 = 5, 11 x 12 reads 2 + 3 = 5: the least is 2 + 2
    A = B = 4096 * 12288 * 2
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 132, 1, 9, 9)] == [2.0, 2.0]
    # one unit: the per-tile rule, min(c_N, cap) and min(c_M, cap)
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 1, 1, 9, 9)] == [9.0, 9.0]
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 1, 1, 40, 40)] == [16.0, 32.0]
    # B fits L2 (cap 1): B once, A once per block of min(132, 16) = 16 tile columns: once
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 132, 1, 9, 1)] == [1.0, 1.0]
    # split-K 4 leaves floor(132 / 4) = 33 output tiles in flight: 8 x 4 reads A 4 and B 4 times (8);
    # 4 x 8: 2 + 8; 11 x 3: 6 + 3; 5 x 6: 3 + 7; 2 x 16: 1 + 16 -- the least is 8 x 4
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 132, 4, 40, 40)] == [4.0, 4.0]
    # no L2 to share slices through: every unit reads its own (span 1), the per-tile rule
    assert tiling.block_span(0.0, 228 * 1024) == 1.0
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 132, 1, 9, 9, tiling.block_span(0.0, 2**20))] \
        == [9.0, 9.0]
    # H100: 50 MB L2 / 228 KiB = 214 local buffers' worth of slices: no limit on a 132-tile block
    assert tiling.block_span(50e6, 228 * 1024) == 214.0
    # 1 MB L2 with 228 KiB buffers stages 4: a block of at most 4 x 4 -> A 16 / 4 = 4, B 32 / 4 = 8 times
    assert [float(x) for x in tiling.block_reads(A, B, 32, 16, 132, 1, 40, 40, tiling.block_span(1e6, 228 * 1024))] \
        == [4.0, 8.0]
    # arrays broadcast: per-point units
    ra, rb = tiling.block_reads(A, B, 32, 16, np.array([1.0, 132.0]), 1, 9, 9)
    assert ra.tolist() == [9.0, 2.0] and rb.tolist() == [9.0, 2.0]


def test_partial_sums():
    # split 4 of a 128 x 256 FP32 output: 3 partial outputs of 128 KiB, written and read back: 768 KiB
    assert tiling.partial_sum_bytes(128, 256, 1, 4) == 3 * 128 * 1024 * 2
    assert tiling.partial_sum_bytes(128, 256, 1, 1) == 0
    # 1 MiB of L2 holds the partials of 1 + floor(1 MiB / 256 KiB) = 5 splits, and not of 6
    s = tiling.partial_sum_splits(2**20, 128, 256, 1)
    assert s == 5
    assert tiling.partial_sum_bytes(128, 256, 1, s) <= 2**20 < tiling.partial_sum_bytes(128, 256, 1, s + 1)
    assert tiling.partial_sum_splits(2**20, 0, 0, 1) > 1e5  # no output (a vector operator): no limit to speak of


def test_local_buffer_bytes():
    # 4 tiles of 128 x 64 over K = 1024 in BF16: 4 x 1024 x 192 x 2 bytes
    assert tiling.local_buffer_bytes(4, 1024, 128, 64, 2) == 4 * 1024 * 192 * 2


# ------------------------------------------------------------------ layout and residency (dse tiles' report)


def test_strided_tile_span():
    # seed 004 §4.4.1: 128 rows of 128 contiguous BF16 elements from a matrix with rows of 4,096
    from tests.reference_cases import approx

    span = tiling.strided_tile_span(128, 128, 4096, 2)
    approx("strided_tile_span", "effective_bytes", span.effective_bytes)
    approx("strided_tile_span", "span_bytes", span.span_bytes)
    assert (span.row_bytes, span.row_stride_bytes) == (256, 8192)  # the descriptor the seed describes
    full = tiling.strided_tile_span(np.array([1, 128]), 4096, 4096, 2)  # whole rows: no gaps
    np.testing.assert_array_equal(full.span_bytes, full.effective_bytes)
    with pytest.raises(SpecError):
        tiling.strided_tile_span(128, 8192, 4096, 2)
    with pytest.raises(SpecError):
        tiling.strided_tile_span(0, 128, 4096, 2)


def test_occupancy_mi355x():
    # seed 000 "Worked occupancy example": 4-wave workgroup, 128 VGPR entries per lane, 32 KiB LDS;
    # 160 KiB LDS per CU, 512-entry budget, at most 8 waves per SIMD, 4 SIMDs per CU
    from tests.reference_cases import approx

    occ = tiling.occupancy(32 * 1024, 160 * 1024, 4, 128, **tiling.GFX950_OCCUPANCY)
    approx("occupancy_mi355x", "waves_by_vgpr", occ.waves_by_vgpr)
    approx("occupancy_mi355x", "workgroups_by_lds", occ.workgroups_by_lds)
    approx("occupancy_mi355x", "occupancy", occ.occupancy)
    assert occ.waves_by_lds == 5  # each four-wave workgroup puts one wave on each of the four SIMDs


def test_occupancy_vectorized_and_unlimited():
    occ = tiling.occupancy(0, 160 * 1024, 4, np.array([64, 128, 256]))
    np.testing.assert_array_equal(occ.waves_per_simd, [8, 4, 2])
    np.testing.assert_array_equal(occ.occupancy, [1.0, 0.5, 0.25])
    lds_only = tiling.occupancy(80 * 1024, 160 * 1024)  # no registers given: LDS and the hardware limit
    assert lds_only.waves_by_vgpr == np.inf and lds_only.workgroups_by_lds == 2
    with pytest.raises(SpecError):
        tiling.occupancy(32 * 1024, 0)


def _block_brute_force_small_units(A, B, cm, cn, units, cap_a, cap_b):
    """:func:`_block_brute_force` with split 1 and no span limit, enumerating only the blocks that fit the units
    (a b <= U), so a huge c_M costs nothing."""
    best = None
    for a in range(1, min(cm, units) + 1):
        for b in range(1, min(cn, units // a) + 1):
            ra = 1 if cap_a <= 1 else min(-(-cn // b), cap_a)
            rb = 1 if cap_b <= 1 else min(-(-cm // a), cap_b)
            cost = A * ra + B * rb
            if best is None or cost < best[0]:
                best = (cost, ra, rb)
    return best


@pytest.mark.parametrize("cm, cn, units", [(10**6, 7, 16), (2**46, 3, 132), (2**46, 2**40, 132), (97, 5, 3)])
def test_block_reads_of_a_huge_matrix(cm, cn, units):
    """issue 21 item 6: a batch of 2**53 rows (c_M = 2**46 tiles) looped sqrt(c_M) = 8 million times (154 s in
    `dse eval`); no block is taller than the units, so the search stops there, with the same least traffic."""
    A, B, cap = 3e6, 1e6, 10**9
    ra, rb = tiling.block_reads(A, B, cm, cn, units, 1, cap, cap)
    cost, _, _ = _block_brute_force_small_units(A, B, cm, cn, units, cap, cap)
    assert A * float(ra) + B * float(rb) == cost


def test_resident_panels_by_hand():
    """ZigZag 3.9.1's tpu_like (2 MiB SRAM, 32 x 32 array, INT8; tests/data/zigzag_tpu_like.yaml), M = 256,
    N = K = 4096, 256 x 256 tiles: the A panel 256 x 4096 x 1 B = 1 MiB, B streamed 2 x 32 x 256 B = 16 KiB, the
    accumulators in their own store (0): 1,064,960 B <= 2,097,152 -- kept. The B panel (4096 x 256) with A's
    stream is the same size and fits too. A 1 MiB buffer holds neither. H100's 228 KiB of shared memory does not
    hold a BF16 128-row panel even at K = 512: 128 x 512 x 2 = 128 KiB + 2 x 16 x 256 x 2 = 16 KiB + the FP32
    accumulators 128 x 256 x 4 = 128 KiB = 272 KiB > 228 KiB -- not kept (GPUs keep nothing at prefill sizes)."""
    ka, kb = tiling.resident_panels(256, 256, 4096, 32, 1.0, 1.0, 0.0, 2 * 2**20)
    assert bool(ka) and bool(kb)
    ka, kb = tiling.resident_panels(256, 256, 4096, 32, 1.0, 1.0, 0.0, 2**20)
    assert not bool(ka) and not bool(kb)
    assert 256 * 4096 + 2 * 32 * 256 == 1_064_960
    ka, _ = tiling.resident_panels(128, 256, 512, 16, 2.0, 2.0, 4.0, 228 * 1024)
    assert not bool(ka) and 128 * 512 * 2 + 2 * 16 * 256 * 2 + 128 * 256 * 4 == 272 * 1024


def test_resident_reads_by_hand():
    """tpu_like at M = 256 (one unit, no L2: span 1; c_M = 1, c_N = 16; A = 1 MiB, B = 16 MiB, neither fits an
    L2, caps 16 and 1 tile rows): the block rule reads A once per tile column, 16 times; the kept A is read once,
    and B once per row panel, c_M = 1 (ZigZag: 18,874,368 B with the output). Trainium2-like, 8 units and no L2
    (span 1): c_M = 2 row panels kept, B streamed by each unit on its own, twice; with an L2 to share it (span 8),
    once."""
    A, B = 2**20, 16 * 2**20
    assert [float(x) for x in tiling.block_reads(A, B, 1, 16, 1, 1, 16, 1)] == [16.0, 1.0]
    assert [float(x) for x in tiling.resident_reads(A, B, 1, 16, 1, 1, 16, 1, 1.0, True, False)] == [1.0, 1.0]
    assert [float(x) for x in tiling.resident_reads(A, B, 2, 16, 8, 1, 16, 2, 1.0, True, False)] == [1.0, 2.0]
    assert [float(x) for x in tiling.resident_reads(A, B, 2, 16, 8, 1, 16, 2, 8.0, True, False)] == [1.0, 1.0]
    # B kept instead (a wide B panel): A once per group of kept column panels, ceil(16 / 1) = 16 on one unit
    assert [float(x) for x in tiling.resident_reads(A, B, 1, 16, 1, 1, 16, 1, 1.0, False, True)] == [16.0, 1.0]


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 200), st.integers(1, 4),
       st.integers(1, 50), st.integers(1, 50), st.floats(0.1, 10.0), st.integers(1, 60), st.booleans(),
       st.booleans())
def test_resident_reads_never_move_more_than_the_block_and_never_below_compulsory(cm, cn, units, split, cap_a,
                                                                                  cap_b, ratio, span, ka, kb):
    """A resident panel is an option the kernel takes only when it moves fewer bytes: never more traffic than
    block_reads (its brute force above), each operand read at least once, at most its L2 cap."""
    A, B = 1e6 * ratio, 1e6
    ra, rb = tiling.resident_reads(A, B, cm, cn, units, split, cap_a, cap_b, span, ka, kb)
    cost, _, _ = _block_brute_force(A, B, cm, cn, units, split, cap_a, cap_b, span)
    assert A * float(ra) + B * float(rb) <= cost * (1 + 1e-12)
    assert 1 <= float(ra) <= max(cap_a, 1) and 1 <= float(rb) <= max(cap_b, 1)
    if not (ka or kb):
        assert A * float(ra) + B * float(rb) == pytest.approx(cost, rel=1e-12)
