"""Reticle limit: each reticle field of a die must fit one lithography exposure.

Formula: die_area_mm2 / reticle_fields - max      (mm^2; <= 0 feasible)
An ordinary die is one field (reticle_fields = 1: the die itself must fit the
reticle). A wafer-scale die is stitched across several fields (Cerebras WSE-3:
84 fields of ~550 mm^2 joined by metal laid across the scribe lines, seed 001),
so the limit applies to the area per field, not to the whole die. The area model
reports ``reticle_fields`` (``area.reticle_fields`` of a chip spec, default 1);
metrics without that column are read as one field per die.
Default max: the reticle area of the technology tables (technology.packaging(), 26 x 33 mm = 858 mm^2).
Source: seed 004 §4.1.3 ("a single die cannot exceed" the reticle limit); TSMC 26 x 33 mm field;
seed 001 (Cerebras: 84 reticle fields, 46,225 mm^2).
"""

from __future__ import annotations

import numpy as np

from dse.registry import AUTO, column, has_column

NAME = "reticle"
UNIT = "mm^2"
FORMULA = "die_area_mm2 / reticle_fields - max"
SOURCE = "seed 004 §4.1.3; reticle 26 x 33 mm = 858 mm^2 (TSMC via AnandTech); seed 001 (stitched wafer: 84 fields)"
PARAMS = {"max": ("area", AUTO)}


def constraint(metrics, max=None) -> np.ndarray:  # noqa: A002 - the YAML name
    if max is None:
        from dse.model.area import reticle_area_mm2

        max = reticle_area_mm2()  # noqa: A001
    area = column(metrics, "die_area_mm2", NAME)
    if has_column(metrics, "reticle_fields"):
        fields = np.asarray(column(metrics, "reticle_fields", NAME), dtype=float)
        fields = np.where(np.isfinite(fields) & (fields >= 1.0), fields, 1.0)
        area = area / fields
    return area - max
