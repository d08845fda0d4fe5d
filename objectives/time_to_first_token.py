"""Time to first token: the prefill of a request, until its first output token.

Formula: ttft_s      (s; minimize)
Source: seed 004 §4.8.2 (prefill time before the first token).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "time_to_first_token"
UNIT = "s"
DIRECTION = "minimize"
FORMULA = "ttft_s"
SOURCE = "seed 004 §4.8.2 (prefill time before the first token)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "ttft_s", NAME)
