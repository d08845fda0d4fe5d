"""Total logic silicon of the package: dies x die area (HBM stacks and interposer not included).

Formula: total_silicon_area_mm2      (mm^2; minimize)
Source: dse.model.area (dies x die area).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "total_silicon_area"
UNIT = "mm^2"
DIRECTION = "minimize"
FORMULA = "total_silicon_area_mm2"
SOURCE = "dse.model.area (dies x die area)"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "total_silicon_area_mm2", NAME)
