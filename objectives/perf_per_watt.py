"""Performance per watt: tokens per second per watt of average power (= tokens per joule).

Formula: tokens_per_s / power_w      (tokens/s/W; maximize)
Source: seed 004 §4.8.4 (energy = power x time; the same comparison as cost per task with power for cost).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "perf_per_watt"
UNIT = "tokens/s/W"
DIRECTION = "maximize"
FORMULA = "tokens_per_s / power_w"
SOURCE = "seed 004 §4.8.4 (power x time comparison)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    rate = column(metrics, "tokens_per_s", NAME)
    power = column(metrics, "power_w", NAME)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(power > 0, rate / power, np.nan)
