"""Energy-delay product per token: penalizes designs that save energy by running slowly.

Formula: energy_per_token_j x time_per_token_s      (J*s; minimize)
Source: Horowitz and Gonzalez, "Energy dissipation in general purpose microprocessors", JSSC 1996 (EDP);
energy and time per token from seed 004 §4.1.3 and §4.8.2.
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "edp"
UNIT = "J*s"
DIRECTION = "minimize"
FORMULA = "energy_per_token_j * time_per_token_s"
SOURCE = "Gonzalez & Horowitz, JSSC 1996 (energy-delay product); seed 004 §4.1.3, §4.8.2"
PARAMS: dict = {}


def objective(metrics) -> np.ndarray:
    return column(metrics, "energy_per_token_j", NAME) * column(metrics, "time_per_token_s", NAME)
