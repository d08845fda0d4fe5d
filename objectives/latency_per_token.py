"""Latency per output token (time between tokens of one request).

Formula: time_per_token_s      (s; minimize)
Source: seed 004 §4.8.2 (decode step time per output token).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "latency_per_token"
UNIT = "s"
DIRECTION = "minimize"
FORMULA = "time_per_token_s"
SOURCE = "seed 004 §4.8.2 (decode step time per output token)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "time_per_token_s", NAME)
