"""TPOT SLO: the time per output token of one user must not exceed a limit.

Formula: tpot - max, tpot = tpot_s (serving operating point) or time_s (a decode step)      (s; <= 0 feasible)
Source: seed 004 §4.8.2 (decode step time); dse.serve.model (TPOT = iteration time); the study's SLO.
"""

from __future__ import annotations

import numpy as np

from objectives._serving import tpot

NAME = "max_tpot"
UNIT = "s"
FORMULA = "(tpot_s, else time_s) - max"
SOURCE = "seed 004 §4.8.2 (decode step time); dse.serve.model; the study's TPOT SLO"
PARAMS = {"max": ("time", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    return tpot(metrics, NAME) - max
