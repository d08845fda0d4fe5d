"""dse.model.pipeline: the attention block's interval (seed 004 §4.2.3, Example 4-1), the function the
what-if's attention table calls (inputs typed from the seed, expected values from the case file)."""

from __future__ import annotations

import numpy as np
import pytest

from dse.errors import SpecError
from dse.model.pipeline import attention_block_cycles
from tests.reference_cases import approx

KiB = 1024


def test_attention_block_pipeline():
    # seed 004 §4.2.3, Example 4-1: 128x128 block, head dim 128, B200 SM:
    # 8192 FLOP/cycle, 16 exp/cycle, 128 B/cycle shared memory, BF16 operands
    cid = "attention_block_pipeline"
    base = attention_block_cycles(128, 128, 128, matrix_flops_per_cycle=8192, exp_per_cycle=16,
                                  smem_bytes_per_cycle=128, operand_bytes=2)
    assert base.smem_bytes == 96 * KiB
    approx(cid, "matrix_cycles", base.matrix)
    approx(cid, "exp_cycles", base.exp)
    approx(cid, "smem_cycles", base.smem)
    approx(cid, "interval_cycles", base.interval)
    approx(cid, "interval_matrix_2x", attention_block_cycles(matrix_speedup=2).interval)
    approx(cid, "interval_matrix_and_exp_2x", attention_block_cycles(matrix_speedup=2, exp_speedup=2).interval)
    approx(cid, "interval_all_2x",
           attention_block_cycles(matrix_speedup=2, exp_speedup=2, smem_speedup=2).interval)
    # vectorized over design points
    many = attention_block_cycles(matrix_speedup=np.array([1, 2, 2, 2]), exp_speedup=np.array([1, 1, 2, 2]),
                                  smem_speedup=np.array([1, 1, 1, 2]))
    np.testing.assert_array_equal(many.interval, [1024, 1024, 768, 512])


def test_bad_arguments_raise_spec_error():
    with pytest.raises(SpecError):
        attention_block_cycles(rows=0)
    with pytest.raises(SpecError):
        attention_block_cycles(matrix_speedup=-1.0)
