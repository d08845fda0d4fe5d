"""Tile arithmetic (dse/model/tiling.py): exactness, vectorization, errors.

The seed cases themselves (padding_tail_m257, tile_working_set,
strided_tile_span, tiled_input_rereads, conv_unroll_traffic) are in
tests/reference/test_workload_cases.py.
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


@given(x=st.integers(0, 10**6), q=st.integers(1, 512))
@settings(max_examples=50, deadline=None)
def test_pad_properties(x, q):
    p = tiling.pad(x, q)
    assert p % q == 0 and x <= p < x + q


def test_padding_overhead_vectorized():
    got = tiling.padding_overhead(np.array([257, 256, 1]), 32)
    assert got == pytest.approx([288 / 257 - 1, 0.0, 31.0])


def test_shape_efficiency_single_row():
    # seed 004 §4.2.1: one real row of a 16-row instruction, other dims aligned
    assert tiling.shape_efficiency(1, 4096, 4096, 16, 16, 16) == pytest.approx(1 / 16)


def test_tile_working_set_mixed_operands_and_arrays():
    # FP8 A, BF16 B
    assert tiling.tile_working_set(128, 128, 64, 1, 4, b_bytes=2) == 128 * 64 + 64 * 128 * 2 + 128 * 128 * 4
    got = tiling.tile_working_set(np.array([64, 128]), 128, 64, 2, 4, slots=np.array([1, 3]))
    assert got.tolist() == [(64 * 64 + 64 * 128) * 2 + 64 * 128 * 4, 3 * 32768 + 65536]


def test_strided_span_contiguous_block_is_its_size():
    eff, span = tiling.strided_span(16, 4096, 4096, 2)
    assert eff == span == 16 * 4096 * 2


def test_strided_span_refuses_block_wider_than_row():
    with pytest.raises(SpecError):
        tiling.strided_span(4, 300, 256, 2)


def test_gemm_traffic_single_tile_reads_each_tensor_once():
    a, b, c = tiling.gemm_traffic(64, 64, 128, 64, 64, 2, 2, 2)
    assert (a, b, c) == (64 * 128 * 2, 128 * 64 * 2, 64 * 64 * 2)


def test_gemm_traffic_vectorized_over_tiles():
    a, b, _ = tiling.gemm_traffic(256, 4096, 4096, np.array([64, 128, 256]), np.array([128, 256, 512]), 2, 2, 2)
    assert a.tolist() == [256 * 4096 * 2 * 32, 256 * 4096 * 2 * 16, 256 * 4096 * 2 * 8]
    assert b.tolist() == [4096 * 4096 * 2 * 4, 4096 * 4096 * 2 * 2, 4096 * 4096 * 2]


def test_gemm_traffic_batch_multiplies():
    one = tiling.gemm_traffic(32, 64, 64, 16, 16, 1, 1, 2)
    four = tiling.gemm_traffic(32, 64, 64, 16, 16, 1, 1, 2, batch=4)
    assert [4 * x for x in one] == list(four)


def test_waves_and_efficiency():
    assert tiling.waves(132, 132) == 1
    assert tiling.waves(133, 132) == 2
    assert tiling.wave_efficiency(133, 132) == pytest.approx(133 / 264)
    assert tiling.wave_efficiency(0, 132) == 1.0
    eff = tiling.wave_efficiency(np.array([1, 132, 264]), 132)
    assert eff == pytest.approx([1 / 132, 1.0, 1.0])


def test_conv_unroll_valid_and_stride():
    cu = tiling.conv_unroll(8, 8, 3, 16, kh=3, kw=3, stride=2, padding="valid", elem_bytes=1)
    assert (cu.out_h, cu.out_w, cu.m, cu.k, cu.n) == (3, 3, 9, 27, 16)
    assert cu.extra_traffic_bytes == 2 * cu.unrolled_bytes


def test_conv_unroll_bad_inputs():
    with pytest.raises(SpecError):
        tiling.conv_unroll(0, 8, 3, 3)
    with pytest.raises(SpecError):
        tiling.conv_unroll(2, 2, 3, 3, kh=5, kw=5, padding="valid")
    with pytest.raises(SpecError):
        tiling.conv_unroll(8, 8, 3, 3, padding="full")
