"""Argument handling shared by the vectorized model functions (one place, not one per module).

Model functions take scalars or numpy arrays, check them as people's input
(SpecError, never assert), and give back a Python float for scalar input.
"""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError


def scalar_or_array(x):
    """0-d arrays become Python floats; arrays stay arrays."""
    x = np.asarray(x)
    return float(x) if x.ndim == 0 else x


def checked(name: str, value, *, positive: bool = False) -> np.ndarray:
    """Float array of ``value``; SpecError if not a number, NaN, negative (or non-positive)."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"{name}: expected a number or array of numbers, got {value!r}") from exc
    if np.any(np.isnan(a)):
        raise SpecError(f"{name}: must be a number, got NaN")
    if positive and np.any(a <= 0):
        raise SpecError(f"{name}: must be > 0, got {value!r}")
    if not positive and np.any(a < 0):
        raise SpecError(f"{name}: must be >= 0, got {value!r}")
    return a


def nan_to_num(x, nan: float = 0.0) -> np.ndarray:
    """``np.nan_to_num(x, nan=nan)`` for the model's figures (NaN -> ``nan``, +-inf -> the largest finite float),
    ``x`` itself (a float array) where every value is finite, as a chip's figures mostly are: numpy's copies
    every time (4 us a call at one design point; 0.9 us to look) (issue 20). Read the result, do not write it."""
    a = np.asarray(x, dtype=float)
    return a if np.isfinite(a).all() else np.nan_to_num(a, nan=nan)
