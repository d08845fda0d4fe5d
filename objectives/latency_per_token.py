"""Latency per token: deprecated name of ``tpot``, the time per output token of one user.

Formula: tpot_s, else time_s      (s; minimize)
Source: seed 004 §4.8.2 (decode step time per user); use the objective ``tpot``.

It used to be ``time_per_token_s``, the step time divided by the batch: an H100 decode step at batch 64
took 28.04 ms while it reported 438 us, the time a *system* spends per token, not what a user waits.
It now computes what its name promised (the same as ``tpot``); ``throughput`` covers the other.
"""

from __future__ import annotations

import warnings

import numpy as np

from objectives._serving import tpot

NAME = "latency_per_token"
UNIT = "s"
DIRECTION = "minimize"
FORMULA = "tpot_s, else time_s (deprecated alias of tpot)"
SOURCE = "seed 004 §4.8.2 (decode step time per user); deprecated: use tpot"
PARAMS: dict = {}
#: the objective to use instead (dse.registry leaves a replaced name out of its suggestions)
REPLACED_BY = "tpot"
_warned = False


def objective(metrics) -> np.ndarray:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("objective 'latency_per_token' is deprecated: it is the time per output token of a user, "
                      "use 'tpot' (or 'throughput' for the system's tokens per second)", DeprecationWarning,
                      stacklevel=2)
    return tpot(metrics, NAME)
