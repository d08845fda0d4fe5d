"""Interposer limit: dies + HBM stacks must fit the package's silicon interposer.

Formula: interposer_area_mm2 - max      (mm^2; <= 0 feasible)
Default max: the largest interposer of the technology tables (technology.packaging(); CoWoS-S ~3.3 x reticle).
A package on another interposer states its own limit: B200 is CoWoS-L (3.5 x reticle = 3,003 mm^2):
``interposer: {max: 3003 mm^2}`` (dse.model.area.interposer_limit_mm2("cowos_l")).
Source: seed 004 §4.1.3 (interposer carries dies and stacks, Figure 4-6); TSMC CoWoS sizes (via TrendForce).
"""

from __future__ import annotations

import numpy as np

from dse.registry import AUTO, column

NAME = "interposer"
UNIT = "mm^2"
FORMULA = "interposer_area_mm2 - max"
SOURCE = "seed 004 §4.1.3 Figure 4-6; CoWoS-S up to ~3.3x reticle (TSMC via TrendForce)"
PARAMS = {"max": ("area", AUTO)}


def constraint(metrics, max=None) -> np.ndarray:  # noqa: A002
    if max is None:
        from dse.model.area import interposer_limit_mm2

        max = interposer_limit_mm2()  # noqa: A001
    return column(metrics, "interposer_area_mm2", NAME) - max
