"""Latency ceiling: the time per output token must not exceed a deadline.

Formula: time_per_token_s - max      (s; <= 0 feasible)
Source: seed 004 §4.8.2-4.8.3 (decode step time per token); service-level objective given by the study.
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "max_latency"
UNIT = "s"
FORMULA = "time_per_token_s - max"
SOURCE = "seed 004 §4.8.2 (time per decode step); the study's latency target"
PARAMS = {"max": ("time", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    return column(metrics, "time_per_token_s", NAME) - max
