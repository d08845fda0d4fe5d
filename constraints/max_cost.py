"""Budget: the manufacturing cost of one chip (dies, HBM, interposer, packaging) must not exceed a limit.

Formula: chip_cost_usd - max      ($; <= 0 feasible)
Source: dse.model.cost (dies per wafer, negative-binomial yield, HBM $/GB; beyond the seeds).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "max_cost"
UNIT = "$"
FORMULA = "chip_cost_usd - max"
SOURCE = "dse.model.cost (wafer cost / (DPW x yield) + HBM + packaging); technology.md"
PARAMS = {"max": ("money", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    return column(metrics, "chip_cost_usd", NAME) - max
