"""Power ceiling: the peak power drawn must stay within the module power (TDP).

Formula: peak_power_w - max      (W; <= 0 feasible)
Default max: the chip's own "tdp" column when the metrics carry one (a chip without
a TDP has tdp = inf: no limit, value 0). Without either, a SpecError.
Source: seed 004 §4.1.3 ("Power ceiling": TDP is the maximum sustained power of a module).
"""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError
from dse.registry import AUTO, column, has_column

NAME = "tdp"
UNIT = "W"
FORMULA = "peak_power_w - max"
SOURCE = "seed 004 §4.1.3 (power ceiling: 700 W H100 SXM, 1000 W B200)"
PARAMS = {"max": ("power", AUTO)}


def constraint(metrics, max=None) -> np.ndarray:  # noqa: A002
    peak = column(metrics, "peak_power_w", NAME)
    if max is None:
        if not has_column(metrics, "tdp"):
            raise SpecError("tdp: give max (e.g. {tdp: {max: 700 W}}) or metrics with the chip's 'tdp' column")
        limit = column(metrics, "tdp", NAME)
    else:
        limit = np.broadcast_to(np.asarray(max, dtype=float), peak.shape)
    with np.errstate(invalid="ignore"):
        # (the evaluator throttles to exactly the TDP: a rounding error of the last bits is not a violation)
        return np.where(np.isfinite(limit), np.where(np.abs(peak - limit) <= 1e-9 * limit, 0.0, peak - limit), 0.0)
