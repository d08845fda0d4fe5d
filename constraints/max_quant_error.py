"""Accuracy floor: the quantization error of the chosen number formats must stay below a bound.

Formula: quant_error - max      (relative RMS error, dimensionless; <= 0 feasible)
Source: seed 004 §4.2.4 (number formats: fewer bits, larger rounding error); dse.precision.quant_error.
"""

from __future__ import annotations

import numpy as np

from dse.registry import column

NAME = "max_quant_error"
UNIT = "1"
FORMULA = "quant_error - max"
SOURCE = "seed 004 §4.2.4 (precision vs error); dse.precision.quant_error"
PARAMS = {"max": ("dimensionless", None)}


def constraint(metrics, max) -> np.ndarray:  # noqa: A002
    return column(metrics, "quant_error", NAME) - max
