"""Throughput: output tokens per second of one chip at the evaluated batch.

Formula: tokens_per_s      (tokens/s; maximize)
Source: seed 004 §4.8.4 (generation rate q).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "throughput"
UNIT = "tokens/s"
DIRECTION = "maximize"
FORMULA = "tokens_per_s"
SOURCE = "seed 004 §4.8.4 (generation rate q)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "tokens_per_s", NAME)
