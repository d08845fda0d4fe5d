"""Area of one die (the largest die of the package).

Formula: die_area_mm2      (mm^2; minimize)
Source: dse.model.area (seed 004 §4.1.3: compute, SRAM, HBM PHYs, I/O per die).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "die_area"
UNIT = "mm^2"
DIRECTION = "minimize"
FORMULA = "die_area_mm2"
SOURCE = "dse.model.area (seed 004 §4.1.3: compute, SRAM, HBM PHYs, I/O per die)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "die_area_mm2", NAME)
