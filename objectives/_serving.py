"""Helpers of the serving objectives and constraints: which metrics column holds TPOT and output rates.

Two kinds of metrics tables reach the catalog: the serving layer's operating points
(dse.serve.ServingPoint.metrics: ``tpot_s``, ``ttft_s``, ``output_tokens_per_s``,
``output_tokens_per_s_per_chip``) and the join's step metrics (dse.evaluate.evaluate_design on workloads
of a fixed batch: ``time_s``, ``tokens_per_s``, ``system_chips``). In a decode step every one of the
batch's users gets one token, so the time per output token of a user (TPOT) is the step time ``time_s``,
not ``time_per_token_s`` (the step time divided by the batch, a throughput figure; seed 004 §4.8.2).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column, has_column


def tpot(metrics, who: str) -> np.ndarray:
    """Time per output token of one user (s): ``tpot_s`` where the table has it, else the step time ``time_s``.

    For a workload mix of the join, ``time_s`` is the weighted mean step time of its workloads.
    """
    return column(metrics, "tpot_s" if has_column(metrics, "tpot_s") else "time_s", who)


def output_rate(metrics, who: str) -> np.ndarray:
    """Output tokens per second of the whole system: ``output_tokens_per_s``, else ``tokens_per_s``."""
    key = "output_tokens_per_s" if has_column(metrics, "output_tokens_per_s") else "tokens_per_s"
    return column(metrics, key, who)


def output_rate_per_chip(metrics, who: str) -> np.ndarray:
    """Output tokens per second per chip: ``output_tokens_per_s_per_chip``, else the system rate over
    ``system_chips`` (1 where the table has no such column)."""
    if has_column(metrics, "output_tokens_per_s_per_chip"):
        return column(metrics, "output_tokens_per_s_per_chip", who)
    rate = output_rate(metrics, who)
    chips = column(metrics, "system_chips", who) if has_column(metrics, "system_chips") else np.ones_like(rate)
    return rate / chips
