"""Compiled rules: the model's per-element rules, written once, run by numpy and by numba (issue 20).

A rule the evaluator applies to every (point, operator) element is written once as a plain Python function of
numbers (``np.maximum``, ``np.where``, ``np.floor`` ... on scalars, no ``with`` blocks), marked :func:`rule`:

* called from Python it is the function as written (numpy arrays broadcast through it, scalars give scalars):
  tests, the CP-SAT data steps and the what-if call it so;
* called from a compiled kernel, numba compiles the same source for numbers (:func:`rule` registers it with
  ``numba.extending.register_jitable``);
* :func:`elementwise` turns a kernel into a numpy generalized ufunc over broadcast arrays: one compiled pass
  over the elements with every intermediate in registers, where the numpy path made one pass (and one
  temporary array) per operation. The evaluator calls its hot rules that way.

Division follows numpy (``error_model="numpy"``: x / 0 = inf, 0 / 0 = nan, no exception), so a compiled
rule gives the numbers numpy gives; ``np.maximum`` / ``np.minimum`` propagate NaN as numpy does (Python's
``max`` / ``min`` would not: they are not used in rules). Rules select with :func:`where`, not ``np.where``. Kernels are cached on disk beside the module
(``cache=True``): the first import after a change compiles them (seconds), later ones load them.
"""

from __future__ import annotations

import numpy as np
from numba import guvectorize, njit, types
from numba.extending import overload, register_jitable

__all__ = ["OPTIONS", "rule", "kernel", "elementwise", "overload_numbers", "where", "is_integer", "quiet"]

#: numba options of every compiled rule: numpy's division semantics
OPTIONS = {"error_model": "numpy"}


def rule(fn):
    """Mark a per-element rule: unchanged for Python, compiled from the same source inside kernels."""
    return register_jitable(**OPTIONS)(fn)


def kernel(fn):
    """A compiled loop over arrays (numba ``njit``, cached on disk) that calls :func:`rule` functions."""
    return njit(cache=True, **OPTIONS)(fn)


def overload_numbers(py_fn):
    """Register the numba version of a rule whose Python body handles arrays of any dtype in a way numba cannot
    compile (``np.result_type``): the decorated function returns the implementation for numba's argument types."""
    def register(impl_for_types):
        overload(py_fn, jit_options=OPTIONS)(impl_for_types)
        return impl_for_types
    return register


def elementwise(n_in: int, n_out: int):
    """A generalized ufunc of ``n_in`` float64 inputs and ``n_out`` float64 outputs, all scalar elements
    (layout ``(),()...->(),()...``): the decorated kernel ``f(x1, ..., xn, out1, ..., outm)`` writes
    ``out[0]``. numpy broadcasts the inputs (bools and ints are cast to float64) and allocates the outputs."""
    sig = "void(" + ", ".join(["float64"] * n_in + ["float64[:]"] * n_out) + ")"
    layout = ",".join(["()"] * n_in) + "->" + ",".join(["()"] * n_out)
    # (numba compiles a ufunc's kernel with numpy's error model: no option to give)
    return guvectorize([sig], layout, nopython=True, cache=True)


def where(condition, x, y):
    """``np.where`` for rules: arrays broadcast in Python; in kernels a number (numba's ``np.where`` of numbers
    returns a 0-d array, one allocation per call: 160 ns where the select takes 1)."""
    return np.where(condition, x, y)


@overload(where, jit_options=OPTIONS)
def _where_numbers(condition, x, y):
    return lambda condition, x, y: x if condition else y


def is_integer(t) -> bool:
    """numba type ``t`` is an integer or a boolean (for :func:`overload_numbers` implementations)."""
    return isinstance(t, (types.Integer, types.Boolean))


def quiet():
    """numpy's error state for compiled kernels: their IEEE infinities and NaNs are the model's (0 work / 0
    rate, a missing level), as in the numpy code's ``np.errstate`` blocks."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")
