"""The attention block's steady-state interval: matrix, exponential and shared-memory cycles overlap.

Seed 004 §4.2.3, Example 4-1: once attention blocks pipeline across the three independent resources of a
unit, adjacent blocks complete ``max(matrix, exp, smem)`` cycles apart. The what-if's attention table
(dse.whatif) calls :func:`attention_block_cycles`. Arguments broadcast as numpy arrays and are checked
as people's input (SpecError).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.model.args import checked as _arr, scalar_or_array as _out

__all__ = ["AttentionBlockCycles", "attention_block_cycles"]


# --------------------------------------------------------------- attention block interval


@dataclass(frozen=True)
class AttentionBlockCycles:
    """Per-resource cycles of one attention block and the steady-state interval (floats or arrays)."""

    matrix: object
    exp: object
    smem: object
    interval: object
    matrix_flops: object
    exps: object
    smem_bytes: object


def attention_block_cycles(
    rows=128,
    cols=128,
    head_dim=128,
    *,
    matrix_flops_per_cycle=8192,
    exp_per_cycle=16,
    smem_bytes_per_cycle=128,
    operand_bytes=2,
    matrix_speedup=1.0,
    exp_speedup=1.0,
    smem_speedup=1.0,
) -> AttentionBlockCycles:
    """Attention block on one SM: matrix, exp and shared-memory cycles; interval = their max (seed 004 §4.2.3, Example 4-1).

    Work per block of ``rows`` queries x ``cols`` keys with head dimension d:
    QK and PV FLOPs 2 * (2 rows cols d); ``rows*cols`` exponentials; shared
    memory reads of the Q, K and V operand tiles, (rows + 2 cols) d
    ``operand_bytes`` (96 KiB for 128x128, d = 128, BF16). Each rate is
    multiplied by its ``*_speedup``. Once blocks pipeline across the three
    independent resources, adjacent blocks complete at least
    ``max(matrix, exp, smem)`` apart. Arguments broadcast as numpy arrays.
    """
    rows = _arr("rows", rows, positive=True)
    cols = _arr("cols", cols, positive=True)
    d = _arr("head_dim", head_dim, positive=True)
    flops = 2.0 * 2.0 * rows * cols * d
    exps = rows * cols
    smem_bytes = (rows + 2.0 * cols) * d * _arr("operand_bytes", operand_bytes, positive=True)
    matrix = flops / (_arr("matrix_flops_per_cycle", matrix_flops_per_cycle, positive=True)
                      * _arr("matrix_speedup", matrix_speedup, positive=True))
    exp = exps / (_arr("exp_per_cycle", exp_per_cycle, positive=True)
                  * _arr("exp_speedup", exp_speedup, positive=True))
    smem = smem_bytes / (_arr("smem_bytes_per_cycle", smem_bytes_per_cycle, positive=True)
                         * _arr("smem_speedup", smem_speedup, positive=True))
    interval = np.maximum(np.maximum(matrix, exp), smem)
    return AttentionBlockCycles(
        _out(matrix), _out(exp), _out(smem), _out(interval), _out(flops), _out(exps), _out(smem_bytes)
    )
