"""Throughput floor: the design must generate at least a given number of tokens per second.

Formula: min - tokens_per_s      (tokens/s; <= 0 feasible)
Source: seed 004 §4.8.4 (output rate q per machine); the study's throughput target.
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "min_throughput"
UNIT = "tokens/s"
FORMULA = "min - tokens_per_s"
SOURCE = "seed 004 §4.8.4 (generation rate q); the study's throughput target"
PARAMS = {"min": ("throughput", None)}


def constraint(metrics, min) -> np.ndarray:  # noqa: A002
    return min - column(metrics, "tokens_per_s", NAME)
