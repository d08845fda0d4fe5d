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
rule gives the numbers numpy gives; NaN propagates as in numpy. Rules select with :func:`where`, :func:`maximum` and :func:`minimum`
(numpy's own functions in Python; in kernels one ``select`` instruction each, so that a loop over points has no
branch and LLVM runs it on the CPU's vector lanes: a loop whose body branches runs one point at a time, 10x
slower, measured on the tile rule). Kernels are cached on disk (``cache=True``, in a folder
named by a digest of dse/model's sources: :func:`_cache_dir`): the first run after a change compiles them
(seconds), later ones load them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path

import numpy as np


def _cache_dir(model: Path | None = None) -> str:
    """Where numba keeps the compiled kernels: a folder named by a digest of every source file of dse/model (and
    numba's version). numba checks a kernel's cache against its own file only, not the rules it inlines from
    other files: a digest of them all keeps a changed rule from running as the old compiled code. The base is
    ``DSE_NUMBA_CACHE`` if set, else dse/model/__pycache__, else the user's cache folder, else the temp folder."""
    import importlib.metadata
    model = Path(__file__).resolve().parent if model is None else model
    h = hashlib.sha256()
    for f in sorted(model.glob("*.py")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    try:
        h.update(importlib.metadata.version("numba").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    name = f"numba-{h.hexdigest()[:16]}"
    bases = [Path(os.environ["DSE_NUMBA_CACHE"])] if os.environ.get("DSE_NUMBA_CACHE") else []
    bases += [model / "__pycache__", Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dse",
              Path(tempfile.gettempdir()) / "dse"]
    for base in bases:
        folder = base / name
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return str(folder)
        except OSError:
            continue
    return str(bases[-1] / name)


os.environ["NUMBA_CACHE_DIR"] = _cache_dir()

import numba  # noqa: E402  (after NUMBA_CACHE_DIR)
from numba import guvectorize, njit, types  # noqa: E402

numba.core.config.reload_config()  # (numba imported earlier by another package reads NUMBA_CACHE_DIR again)
from numba.extending import intrinsic, overload, register_jitable  # noqa: E402

__all__ = ["OPTIONS", "rule", "kernel", "elementwise", "overload_numbers", "where", "maximum", "minimum", "is_integer",
           "quiet"]

#: numba options of every compiled rule: numpy's division semantics
OPTIONS = {"error_model": "numpy"}


def rule(fn=None, *, loops: bool = False):
    """Mark a per-element rule: unchanged for Python, compiled from the same source inside kernels.

    A rule is inlined into its caller in numba's IR (``inline="always"``): LLVM inlines small functions only, and a
    loop over points that calls a function stays one point at a time (33 ns instead of 1.8 per point for the
    default tiles' candidates). ``loops=True`` for a rule with a loop of its own (numba's IR inlining does not
    take loops with ``continue``): compiled as a function, LLVM inlines it where it pays."""
    def mark(f):
        return register_jitable(inline="never" if loops else "always", **OPTIONS)(f)
    return mark if fn is None else mark(fn)


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
    ``out[0]``. numpy broadcasts the inputs (bools and ints are cast to float64) and allocates the outputs.
    Built (compiled, or loaded from the cache) on its first call, so importing dse costs no kernel."""
    sig = "void(" + ", ".join(["float64"] * n_in + ["float64[:]"] * n_out) + ")"
    layout = ",".join(["()"] * n_in) + "->" + ",".join(["()"] * n_out)

    def build(fn):
        ufunc = None

        @functools.wraps(fn)
        def call(*args):
            nonlocal ufunc
            if ufunc is None:
                # (numba compiles a ufunc's kernel with numpy's error model: no option to give)
                ufunc = guvectorize([sig], layout, nopython=True, cache=True)(fn)
            return ufunc(*args)
        return call
    return build


def where(condition, x, y):
    """``np.where`` for rules: arrays broadcast in Python; in kernels one ``select`` of two numbers (numba's
    ``np.where`` of numbers returns a 0-d array, one allocation per call: 160 ns where the select takes 1)."""
    return np.where(condition, x, y)


def maximum(a, b):
    """``np.maximum`` for rules: in Python itself; in kernels a compare and a ``select`` (numba's version
    branches, and a loop with branches does not run on the vector lanes)."""
    return np.maximum(a, b)


def minimum(a, b):
    """``np.minimum`` for rules (see :func:`maximum`)."""
    return np.minimum(a, b)


@intrinsic
def _select(typingctx, condition, x, y):
    if not isinstance(condition, types.Boolean):
        return None
    sig = types.float64(condition, x, y)

    def codegen(context, builder, signature, args):
        c, a, b = args
        a = context.cast(builder, a, signature.args[1], types.float64)
        b = context.cast(builder, b, signature.args[2], types.float64)
        return builder.select(c, a, b)
    return sig, codegen


def _extremum(op: str):
    """numpy's maximum (op ">") / minimum ("<") of two float64 as a select: ``a`` where a op b or a is NaN, else
    ``b`` (NaN where either is; ``b`` on a tie, as numpy: maximum(-0.0, 0.0) = 0.0)."""
    @intrinsic
    def extremum(typingctx, a, b):
        sig = types.float64(a, b)

        def codegen(context, builder, signature, args):
            x = context.cast(builder, args[0], signature.args[0], types.float64)
            y = context.cast(builder, args[1], signature.args[1], types.float64)
            first = builder.or_(builder.fcmp_ordered(op, x, y), builder.fcmp_unordered("uno", x, x))
            return builder.select(first, x, y)
        return sig, codegen
    return extremum


_max, _min = _extremum(">"), _extremum("<")


@overload(where, jit_options=OPTIONS)
def _where_numbers(condition, x, y):
    return lambda condition, x, y: _select(condition, x, y)


@overload(maximum, jit_options=OPTIONS)
def _maximum_numbers(a, b):
    return lambda a, b: _max(a, b)


@overload(minimum, jit_options=OPTIONS)
def _minimum_numbers(a, b):
    return lambda a, b: _min(a, b)


def is_integer(t) -> bool:
    """numba type ``t`` is an integer or a boolean (for :func:`overload_numbers` implementations)."""
    return isinstance(t, (types.Integer, types.Boolean))


def quiet():
    """numpy's error state for compiled kernels: their IEEE infinities and NaNs are the model's (0 work / 0
    rate, a missing level), as in the numpy code's ``np.errstate`` blocks."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")
