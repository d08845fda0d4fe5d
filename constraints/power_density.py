"""Power density: average power per die area must stay within what cooling removes.

Formula: power_density_w_per_mm2 - max      (W/mm^2; <= 0 feasible)
Default max: 1.0 W/mm^2 (liquid cooling, est.; air ~0.6). H100 runs at ~0.86, A100 ~0.48.
Source: seed 004 §4.1.3 (heat leaves through the die area; 0.75 / 0.60 = 1.25x density);
docs/technology.md (power density row, est.).
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "power_density"
UNIT = "W/mm^2"
FORMULA = "power_density_w_per_mm2 - max"
SOURCE = "seed 004 §4.1.3 (power density); technology.md: air 0.6, liquid 1.0 W/mm^2 (est.)"
PARAMS = {"max": ("power_density", 1.0)}


def constraint(metrics, max=1.0) -> np.ndarray:  # noqa: A002
    return column(metrics, "power_density_w_per_mm2", NAME) - max
