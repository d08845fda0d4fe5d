"""Energy per output token.

Formula: energy_per_token_j      (J; minimize)
Source: seed 004 §4.1.3 (bytes x pJ/B + FLOPs x pJ/FLOP + static x time, per token).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "energy_per_token"
UNIT = "J"
DIRECTION = "minimize"
FORMULA = "energy_per_token_j"
SOURCE = "seed 004 §4.1.3 (bytes x pJ/B + FLOPs x pJ/FLOP + static x time, per token)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "energy_per_token_j", NAME)
