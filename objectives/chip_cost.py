"""Manufacturing cost of one chip (dies, HBM, interposer, packaging).

Formula: chip_cost_usd      ($; minimize)
Source: dse.model.cost (wafer cost / (DPW x yield), HBM $/GB, interposer, packaging).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "chip_cost"
UNIT = "$"
DIRECTION = "minimize"
FORMULA = "chip_cost_usd"
SOURCE = "dse.model.cost (wafer cost / (DPW x yield), HBM $/GB, interposer, packaging)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "chip_cost_usd", NAME)
