"""Throughput at an SLO: output tokens/s per chip where the time per output token meets the SLO, else 0.

Formula: where(tpot <= tpot_max and ttft <= ttft_max, tokens/s per chip, 0)      (tokens/s; maximize)
Source: dse.serve.model (continuous batching: the batch is limited by the TPOT SLO); seed 004 §4.8.2, §4.8.4.

``tpot``: the TPOT SLO (required); ``ttft``: a TTFT SLO (optional; rows without a TTFT, such as a decode
step of the join, fail it). For the serving layer's operating points computed with the same SLO
(``dse.serve.serve(..., tpot_slo=...)``) this is their throughput; for the join's fixed-batch steps, the
step's throughput when it meets the SLO.
"""

from __future__ import annotations

import numpy as np

from dse.registry import AUTO, column
from objectives._serving import output_rate_per_chip, tpot as tpot_of

NAME = "throughput_at_slo"
UNIT = "tokens/s"
DIRECTION = "maximize"
FORMULA = "where(tpot <= tpot_max [and ttft_s <= ttft_max], tokens/s per chip, 0)"
SOURCE = "dse.serve.model (batch limited by the TPOT SLO); seed 004 §4.8.4"
PARAMS = {"tpot": ("time", None), "ttft": ("time", AUTO)}


def objective(metrics, tpot, ttft=None) -> np.ndarray:
    rate = output_rate_per_chip(metrics, NAME)
    ok = tpot_of(metrics, NAME) <= tpot
    if ttft is not None:
        t = column(metrics, "ttft_s", NAME)
        ok &= np.nan_to_num(t, nan=np.inf) <= ttft
    return np.where(ok, rate, 0.0)
