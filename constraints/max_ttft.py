"""TTFT SLO: the time to first token must not exceed a limit.

Formula: ttft_s - max      (s; <= 0 feasible)
Source: seed 004 §4.8.2 (prefill time before the first token); dse.serve.model (chunked prefill); the study's SLO.

A row without a TTFT (a decode step of the join has none) is infeasible by an infinite violation; a
table with no TTFT at all is a SpecError (the workloads need a prefill phase, or use dse.serve).
"""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError
from dse.registry import column

NAME = "max_ttft"
UNIT = "s"
FORMULA = "ttft_s - max"
SOURCE = "seed 004 §4.8.2 (prefill time); dse.serve.model; the study's TTFT SLO"
PARAMS = {"max": ("time", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    t = column(metrics, "ttft_s", NAME)
    if t.size and np.all(np.isnan(t)):
        raise SpecError("max_ttft needs a time to first token: the metrics column 'ttft_s' holds none (decode "
                        "workloads have no TTFT; add a prefill workload or use dse.serve)")
    return np.where(np.isnan(t), np.inf, t - max)
