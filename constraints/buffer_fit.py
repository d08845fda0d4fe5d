"""Buffer fit: a tile's working set (all input slots, accumulators) must fit the local buffer.

Formula: tile_working_set_bytes - local_buffer_bytes      (bytes; <= 0 feasible)
tile_working_set_bytes: the evaluator's largest double-buffered working set of the chosen tiles over the
GEMM-like operators (dse.model.tiling.tile_working_set, 2 input slots, the FP32 accumulator unless the chip
has an accumulator store, and then the part of it the store does not hold: dse.model.tiling.accumulator_spill);
local_buffer_bytes: the chip's local buffer per unit (dse.evaluate).
Source: seed 004 §4.4.2 (tile working set vs on-chip buffer capacity, double buffering).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "buffer_fit"
UNIT = "bytes"
FORMULA = "tile_working_set_bytes - local_buffer_bytes"
SOURCE = "seed 004 §4.4.2 (working set of a tile vs buffer capacity)"
PARAMS: dict = {}


def constraint(metrics) -> np.ndarray:
    return column(metrics, "tile_working_set_bytes", NAME) - column(metrics, "local_buffer_bytes", NAME)
