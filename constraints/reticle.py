"""Reticle limit: each die must fit one lithography exposure.

Formula: die_area_mm2 - max      (mm^2; <= 0 feasible)
Default max: the reticle area of the technology tables (technology.packaging(), 26 x 33 mm = 858 mm^2).
Source: seed 004 §4.1.3 ("a single die cannot exceed" the reticle limit); TSMC 26 x 33 mm field.
"""

from __future__ import annotations

import numpy as np

from dse.registry import AUTO, column

NAME = "reticle"
UNIT = "mm^2"
FORMULA = "die_area_mm2 - max"
SOURCE = "seed 004 §4.1.3; reticle 26 x 33 mm = 858 mm^2 (TSMC via AnandTech)"
PARAMS = {"max": ("area", AUTO)}


def constraint(metrics, max=None) -> np.ndarray:  # noqa: A002 - the YAML name
    if max is None:
        from dse.model.area import reticle_area_mm2

        max = reticle_area_mm2()  # noqa: A001
    return column(metrics, "die_area_mm2", NAME) - max
