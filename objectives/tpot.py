"""Time per output token (TPOT): the time between two tokens of one user.

Formula: tpot_s (a serving operating point), else time_s (a decode step: one token per user per step)  (s; minimize)
Source: seed 004 §4.8.2 (decode step time); dse.serve.model (continuous batching: TPOT = iteration time).
"""

from __future__ import annotations

import numpy as np

from objectives._serving import tpot

NAME = "tpot"
UNIT = "s"
DIRECTION = "minimize"
FORMULA = "tpot_s, else time_s"
SOURCE = "seed 004 §4.8.2 (decode step time); dse.serve.model (iteration time of continuous batching)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return tpot(metrics, NAME)
