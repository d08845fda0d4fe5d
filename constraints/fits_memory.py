"""Capacity: weights, KV cache and workspace must fit the main memory.

Formula: resident_bytes + reserve - capacity_bytes      (bytes; <= 0 feasible)
reserve (default 0 B) holds back memory for the runtime (CUDA context, fragmentation).
Source: seed 004 §4.3.1 (memory budget: resident weights + KV per token x context x batch <= capacity).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "fits_memory"
UNIT = "bytes"
FORMULA = "resident_bytes + reserve - capacity_bytes"
SOURCE = "seed 004 §4.3.1 (capacity budget)"
PARAMS = {"reserve": ("bytes", 0.0)}


def constraint(metrics, reserve=0.0) -> np.ndarray:
    return column(metrics, "resident_bytes", NAME) + reserve - column(metrics, "capacity_bytes", NAME)
