"""Throughput per chip: output tokens per second of the system divided by its chips.

Formula: output_tokens_per_s_per_chip, else tokens_per_s / system_chips      (tokens/s; maximize)
Source: seed 004 §4.8.4 (generation rate q per machine); dse.serve.model (continuous batching at maximum load).
"""

from __future__ import annotations

import numpy as np

from objectives._serving import output_rate_per_chip

NAME = "throughput_per_chip"
UNIT = "tokens/s"
DIRECTION = "maximize"
FORMULA = "output_tokens_per_s_per_chip, else tokens_per_s / system_chips"
SOURCE = "seed 004 §4.8.4 (generation rate q); dse.serve.model"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return output_rate_per_chip(metrics, NAME)
