"""Latency ceiling: deprecated name of ``max_tpot``, the time per output token of one user.

Formula: (tpot_s, else time_s) - max      (s; <= 0 feasible)
Source: seed 004 §4.8.2-4.8.3 (decode step time per user); service-level objective given by the study.

It used to bound ``time_per_token_s`` (the step time divided by the batch), which a batch of 64 users
met while each of them waited 64 times as long; it now bounds what a user waits, as ``max_tpot`` does.
"""

from __future__ import annotations

import numpy as np

from objectives._serving import tpot

NAME = "max_latency"
UNIT = "s"
FORMULA = "(tpot_s, else time_s) - max (deprecated alias of max_tpot)"
SOURCE = "seed 004 §4.8.2 (decode step time per user); the study's latency target; deprecated: use max_tpot"
PARAMS = {"max": ("time", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    return tpot(metrics, NAME) - max
