"""HBM shoreline: the stacks must fit along the usable die edges.

Formula: hbm_stacks - hbm_shoreline_stacks      (stacks; <= 0 feasible)
hbm_shoreline_stacks is the area model's count of stack sites along the die edges
(stack footprint edge + spacing per site; 3 per 33 mm edge, 2 per 26 mm edge).
Source: seed 004 §4.1.3 ("HBM stacks line the edges of the die", reversal condition on stacks a die can attach).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "hbm_shoreline"
UNIT = "stacks"
FORMULA = "hbm_stacks - hbm_shoreline_stacks"
SOURCE = "seed 004 §4.1.3 (stacks per die edge); docs/technology.md (3 per 33 mm edge)"
PARAMS: dict = {}


def constraint(metrics) -> np.ndarray:
    return column(metrics, "hbm_stacks", NAME) - column(metrics, "hbm_shoreline_stacks", NAME)
