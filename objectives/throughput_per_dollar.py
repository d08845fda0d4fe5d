"""Throughput per dollar: output tokens per second per dollar of chips (the system's manufacturing cost).

Formula: (output_tokens_per_s, else tokens_per_s) / chip_cost_usd      (tokens/s/$; maximize)
Source: seed 004 §4.8.4 (cost per task ~ c t); dse.model.cost (chip cost, summed over a system's chips).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column
from objectives._serving import output_rate

NAME = "throughput_per_dollar"
UNIT = "tokens/s/$"
DIRECTION = "maximize"
FORMULA = "output_tokens_per_s / chip_cost_usd"
SOURCE = "seed 004 §4.8.4 (cost per task); dse.model.cost"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    rate = output_rate(metrics, NAME)
    cost = column(metrics, "chip_cost_usd", NAME)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(cost > 0, rate / cost, np.nan)
