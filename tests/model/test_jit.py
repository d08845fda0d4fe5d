"""The compiled rules (dse/model/jit.py, issue 20): one source, the same numbers in numpy and in numba kernels.

Each rule the evaluator compiles is run twice here on the same random inputs: as written, by numpy on arrays,
and compiled, in a numba loop over numbers; the two must agree to the bit. The rules with loops of their own
(the L2 cluster's request shape, the concurrent block of output tiles) are checked against a brute-force
search over every shape, written here; the bisection of the sustained clock against its definition. No test
here depends on speed.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import platform
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from dse.model import area, evaluator as ev, hierarchy, jit, power, tiling

RNG_SEED = 20


def _compiled(fn, n_out: int, tuples: tuple = ()):
    """fn compiled inside a numba loop over the elements of equal-length 1-D arrays; ``tuples``: the sizes of fn's
    first arguments that are tuples of numbers (each given as that many arrays)."""
    n_args = fn.__code__.co_argcount - len(tuples) + sum(tuples)
    args = ", ".join(f"a{i}" for i in range(n_args))
    parts, i = [], 0
    for size in tuples:
        parts.append("(" + ", ".join(f"a{x}[j]" for x in range(i, i + size)) + ")")
        i += size
    each = ", ".join(parts + [f"a{x}[j]" for x in range(i, n_args)])
    outs = ", ".join(f"o{i}[j]" for i in range(n_out))
    src = (f"def loop({args}, out):\n"
           f"    o0{''.join(f', o{i}' for i in range(1, n_out))} = {', '.join(f'out[{i}]' for i in range(n_out))}\n"
           f"    for j in range(a0.shape[0]):\n"
           f"        {outs}{',' if n_out == 1 else ''} = fn({each}){'' if n_out > 1 else ','}\n")
    if n_out == 1:  # (a single result is not a tuple)
        src = src.replace(f"        o0[j], = fn({each}),\n", f"        o0[j] = fn({each})\n")
    scope = {"fn": fn}
    exec(src, scope)
    loop = jit.compiler().njit(**jit.OPTIONS)(scope["loop"])

    def run(*arrays):
        arrays = [np.ascontiguousarray(np.asarray(a, dtype=float)) for a in arrays]
        out = np.empty((n_out, arrays[0].size))
        with jit.quiet():
            loop(*arrays, out)
        return out
    return run


def _same_bits(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    assert a.shape == b.shape
    same = (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))
    assert same.all(), (a[~same][:5], b[~same][:5])


SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan, 1e-300, 1e300])


def test_selects_follow_numpy_on_special_values():
    """jit.maximum / minimum / where compile to selects with numpy's semantics (NaN wins, a tie gives the
    second argument: maximum(-0.0, 0.0) = 0.0); numpy itself is the reference."""
    a, b = (x.ravel() for x in np.meshgrid(SPECIAL, SPECIAL))
    with np.errstate(invalid="ignore"):
        for rule_fn, ref in ((jit.maximum, np.maximum(a, b)), (jit.minimum, np.minimum(a, b))):
            _same_bits(_compiled(rule_fn, 1)(a, b)[0], ref)

    @jit.rule
    def pick(c, x, y):
        return jit.where(c > 0.5, x, y)
    cond = (np.arange(a.size) % 3 == 0).astype(float)
    _same_bits(_compiled(pick, 1)(cond, a, b)[0], np.where(cond > 0.5, a, b))


def test_sqrt_fmax_nan_to_num_follow_numpy():
    """jit.sqrt (LLVM's sqrt intrinsic in kernels), jit.fmax and jit.nan_to_num give numpy's np.sqrt, np.fmax
    (a NaN ignored) and np.nan_to_num to the bit, as written (numpy) and compiled, on the special values and on
    random magnitudes from 1e-300 to 1e300. (The tie of -0.0 and 0.0 is left out of fmax's: numpy's vector loop
    gives the second, its scalar loop the first, so which one depends on the array's length and the CPU.)"""
    rng = np.random.default_rng(RNG_SEED + 11)
    x = np.concatenate([SPECIAL, -SPECIAL, rng.random(2000) * 10.0 ** rng.uniform(-300, 300, 2000)])
    with np.errstate(invalid="ignore"):
        _same_bits(_compiled(jit.sqrt, 1)(x)[0], np.sqrt(x))
        _same_bits(jit.sqrt(x), np.sqrt(x))
    a, b = (v.ravel() for v in np.meshgrid(SPECIAL, SPECIAL))
    a, b = a[(a != 0) | (b != 0)], b[(a != 0) | (b != 0)]
    want = np.array([np.fmax(x, y) for x, y in zip(a, b)])
    _same_bits(_compiled(jit.fmax, 1)(a, b)[0], want)
    _same_bits(jit.fmax(a, b), want)
    for nan in (0.0, 1.0):
        _same_bits(_compiled(jit.nan_to_num, 1)(x, np.full(x.size, nan))[0], np.nan_to_num(x, nan=nan))
        _same_bits(jit.nan_to_num(x, nan), np.nan_to_num(x, nan=nan))


@pytest.mark.parametrize("base", ["h100", "a100-sxm-80gb", "b200", "mi300x", "groq-tsp", "rtx-4090", "tpu-v1"])
def test_package_kernel_equals_its_rules(base):
    """package_area runs die_terms, die_parts and package_outline in one kernel over the points; each of its
    arrays must be, to the bit, those rules run by numpy on the same inputs (random dies, units, L2, local buffers,
    memory-side caches; HBM, GDDR and SRAM main memory; monolithic, side-by-side and base-die layouts)."""
    from dse.hardware import Chips, load_chip
    from dse.model import area
    rng = np.random.default_rng(RNG_SEED + 12)
    n = 400
    over = {"units": rng.integers(1, 300, n).astype(float), "dies": rng.choice([1.0, 2.0, 4.0, 8.0], n),
            "l2": rng.choice([0.0, 2e6, 5e7, 2e8], n), "local_buffer": rng.choice([16e3, 228e3, 2e6], n)}
    if load_chip(base).hbm is not None:
        over["hbm.stacks"] = rng.integers(1, 13, n).astype(float)
    chips = Chips.from_base(load_chip(base), n, over)
    process, memory = area.process_and_memory(chips)
    aspect = rng.choice([1.0, 33.0 / 26.0, 2.0], n)
    pa = area.package_area(chips, process=process, memory=memory, aspect=aspect)
    procs, mems, dies, on_base, side, _, uphys = area._setup(chips, process, memory, area.DEFAULT_SPARE_FRACTION,
                                                             None, None)
    inputs = area._term_inputs(chips, procs=procs, mems=mems, uphys=uphys, base=on_base, dies=dies)
    coef = np.array([getattr(area._area_model().parameters, name).value for _, name in area.TERMS])
    pkg = area._packaging()
    fp = area._memory(memory).footprint if memory else None
    w_face, depth = (np.nan, np.nan) if fp is None else (min(fp.width, fp.height), max(fp.width, fp.height))
    with jit.quiet():
        q = area.die_terms(*inputs)
        p = area.die_parts(q, coef, q[11], q[12], chips.get("memory_side_cache.capacity", 0.0), inputs[3], dies,
                           on_base)
        g = area.package_outline(p[14], p[15], dies, on_base, side, q[13], aspect, w_face, depth,
                                 pkg.die_to_stack_gap, pkg.interposer_margin, area.BASE_COVERAGE)
    for k, name in enumerate(area.PARTS):
        _same_bits(pa.parts[name], np.broadcast_to(p[k], (n,)))
    _same_bits(pa.die_area_mm2, p[14])
    _same_bits(pa.hbm_stacks, np.broadcast_to(q[13], (n,)))
    for got, want in zip((pa.die_long_mm, pa.die_short_mm, pa.base_area_mm2, pa.hbm_shoreline_stacks,
                          pa.interposer_area_mm2, pa.total_silicon_area_mm2), g):
        _same_bits(got, np.broadcast_to(want, (n,)))
    assert on_base.any() and side.any() and (~on_base & ~side).any()  # (every layout drawn)


def _many_results(a, b, c, d, e, f, g, h):
    """A loop over points storing 12 results, each to its row of a jit.staggered array (as the one-operator kernels
    do), from 8 inputs."""
    out = jit.staggered(12, a.size)
    for i in range(a.size):
        x, y, z = a[i] * b[i] + c[i], d[i] / e[i] + f[i], g[i] * h[i]
        out[0, i], out[1, i], out[2, i], out[3, i] = x, y, z, x * y
        out[4, i], out[5, i], out[6, i], out[7, i] = x + z, y * z, x - y, z - x
        out[8, i], out[9, i], out[10, i], out[11, i] = x * x, y * y, z * z, x * y * z
    return out


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="reads x86-64 instructions")
def test_a_loop_storing_many_results_runs_on_the_vector_lanes():
    """jit.LLVM_OPTIONS, set when numba is loaded: a loop storing 12 results per point compiles to packed (vector)
    divisions, ``divpd``; with LLVM's default limit on run-time overlap checks it had only the scalar ``divsd`` (one
    point at a time, as dse/model/jit.py says). Its numbers are numpy's, to the bit."""
    loop = jit.compiler().njit(**jit.OPTIONS)(_many_results)
    rng = np.random.default_rng(RNG_SEED + 30)
    arrays = [rng.uniform(0.5, 2.0, 1000) for _ in range(8)]
    got = loop(*arrays)[:, :1000]
    asm = loop.inspect_asm(loop.signatures[0])
    assert re.search(r"\bv?divpd\b", asm), "the loop runs one point at a time"
    a, b, c, d, e, f, g, h = arrays
    x, y, z = a * b + c, d / e + f, g * h
    for row, want in zip(got, (x, y, z, x * y, x + z, y * z, x - y, z - x, x * x, y * y, z * z, x * y * z)):
        _same_bits(row, want)


def test_points_are_read_only_views_or_filled():
    """jit.points lays a kernel's per-point argument out: the array itself where it already is (n,) (a view: no
    copy), one value filled n times (jit.filled, shared), and read-only either way (numba compiles read-only and
    writable arrays apart)."""
    a = np.arange(5.0)
    v = jit.points(a, 5)
    assert np.shares_memory(v, a) and not v.flags.writeable and a.flags.writeable
    assert np.shares_memory(jit.points(a.reshape(5, 1), 5), a)
    f = jit.points(np.array([[2.5]]), 4)
    assert f.tolist() == [2.5] * 4 and not f.flags.writeable and f.flags.c_contiguous
    assert jit.points(3, 2).tolist() == [3.0, 3.0]
    with pytest.raises(ValueError):
        jit.points(np.arange(3.0), 5)
    # one value laid over the points (a chip figure no point changes: a stride of 0) is the shared filled array
    over = np.broadcast_to(np.array(-0.0), (6,))
    assert jit.points(over, 6) is jit.filled(-0.0, 6) and np.signbit(jit.points(over, 6)).all()
    with pytest.raises(ValueError):
        jit.points(np.broadcast_to(np.array(1.0), (3,)), 5)
    # a read-only array is passed as it is; integers and bools become floats (numba: one signature per kernel)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    assert np.shares_memory(jit.points(ro, 4), ro) and not jit.points(ro, 4).flags.writeable
    for other in (np.arange(4), np.array([True, False, True, True])):
        got = jit.points(other, 4)
        assert got.dtype == np.float64 and got.tolist() == other.astype(float).tolist() and not got.flags.writeable
        assert other.flags.writeable


def test_number_or_points_gives_a_shared_figure_as_a_number():
    """jit.number_or_points: a figure every point has (a number, one value, one value laid over the points with a
    stride of 0, a (1, 1) column) as a Python float (an integer's too), its bits kept (-0.0, NaN); anything that
    varies as jit.points lays it out (read-only, its values)."""
    for x in (2.5, np.float64(2.5), np.array(2.5), np.array([2.5]), np.array([[2.5]]),
              np.broadcast_to(np.array(2.5), (7,)), np.broadcast_to(np.array([[2.5]]), (7, 1))):
        got = jit.number_or_points(x, 7)
        assert type(got) is float and got == 2.5, x
    assert np.signbit(jit.number_or_points(np.broadcast_to(np.array(-0.0), (3,)), 3))
    assert np.isnan(jit.number_or_points(np.array([np.nan]), 3))
    assert type(jit.number_or_points(np.array([3]), 3)) is float  # (an integer figure a float: one signature)
    a = np.array([1.0, 2.0, 2.0])
    got = jit.number_or_points(a, 3)
    assert isinstance(got, np.ndarray) and got.tolist() == [1.0, 2.0, 2.0] and not got.flags.writeable
    col = jit.number_or_points(np.array([[1.0], [3.0]]), 2)
    assert isinstance(col, np.ndarray) and col.tolist() == [1.0, 3.0]
    with pytest.raises(ValueError):
        jit.number_or_points(np.arange(3.0), 5)


def test_numbers_or_points_decides_for_the_group():
    """jit.numbers_or_points: a group of figures every point has (numbers, one value, one value laid over the points
    with a stride of 0) as Python floats, their bits kept; one figure of the group that varies and all of them as
    jit.points lays them out (read-only, n values each): one decision for the group, two signatures a kernel."""
    shared = (2.5, np.array([[-0.0]]), np.broadcast_to(np.array(np.nan), (4,)), np.array([3]))
    got = jit.numbers_or_points(shared, 4)
    assert all(type(x) is float for x in got)
    assert got[0] == 2.5 and np.signbit(got[1]) and np.isnan(got[2]) and got[3] == 3.0
    varying = shared + (np.array([1.0, 2.0, 2.0, 5.0]),)
    got = jit.numbers_or_points(varying, 4)
    assert all(isinstance(x, np.ndarray) and x.shape == (4,) and not x.flags.writeable for x in got)
    assert got[0].tolist() == [2.5] * 4 and np.signbit(got[1]).all() and np.isnan(got[2]).all()
    assert got[4].tolist() == [1.0, 2.0, 2.0, 5.0]


def test_nan_to_num_gives_numpys_values_and_skips_the_copy_where_all_are_finite():
    """dse.model.args.nan_to_num: numpy's np.nan_to_num values (NaN -> the given number, +-inf -> the largest finite
    float, -0.0 kept), the array itself where every value is finite."""
    from dse.model.args import nan_to_num
    x = np.array([1.0, np.nan, np.inf, -np.inf, -0.0])
    for nan in (0.0, 1.0):
        _same_bits(nan_to_num(x, nan=nan), np.nan_to_num(x, nan=nan))
    assert np.isnan(x[1])  # (the input unchanged)
    _same_bits(nan_to_num(np.array([np.inf, 1.0])), [np.finfo(float).max, 1.0])  # (infinities without a NaN too)
    finite = np.array([2.0, -0.0, 3.5])
    assert nan_to_num(finite) is finite
    assert nan_to_num(3).tolist() == 3.0 and nan_to_num(np.array([np.nan])).tolist() == [0.0]


def test_filled_arrays_are_shared_read_only_and_exact(monkeypatch):
    """jit.filled, one value over the points: the same read-only array for the same value (to the bit: -0.0 is not
    0.0; every NaN is a NaN) and shape, another for another shape; at most jit.FILLED_BYTES kept (past that the
    store starts over), and an array over jit.FILLED_ARRAY_BYTES is made but not kept."""
    monkeypatch.setattr(jit, "_FILLED", {})
    monkeypatch.setattr(jit, "_filled_bytes", 0)
    a = jit.filled(1.5, 7)
    assert a.tolist() == [1.5] * 7 and not a.flags.writeable and jit.filled(1.5, 7) is a
    assert jit.filled(1.5, (7, 1)) is not a and jit.filled(1.5, (7, 1)).shape == (7, 1)
    zero, minus = jit.filled(0.0, 3), jit.filled(-0.0, 3)
    assert zero is not minus and np.signbit(minus).all() and not np.signbit(zero).any()
    assert np.isnan(jit.filled(np.nan, 3)).all() and jit.filled(float("nan"), 3) is jit.filled(np.nan, 3)
    assert jit.points(np.array([[1.5]]), 7) is a  # (jit.points fills through it)
    row = np.array([1.0, -0.0, np.inf])
    r = jit.filled(row, (4, 3))
    assert r.shape == (4, 3) and not r.flags.writeable and (r == row).all() and np.signbit(r[:, 1]).all()
    assert jit.filled(row.copy(), (4, 3)) is r and jit.filled(np.array([1.0, 0.0, np.inf]), (4, 3)) is not r
    _same_bits(ev._full(row[None, :], (5, 3)), np.broadcast_to(row, (5, 3)))  # (a block input's row of operators)
    # (a row, or one value, laid over the points as a view of stride 0: the shared array, not a copy made)
    assert ev._full(np.broadcast_to(row, (5, 3)), (5, 3)) is jit.filled(row, (5, 3))
    assert ev._full(jit.one_over(np.array([-0.0]), 5).reshape(5, 1), (5, 1)) is jit.filled(-0.0, (5, 1))
    monkeypatch.setattr(jit, "FILLED_BYTES", 8 * 40)
    monkeypatch.setattr(jit, "FILLED_ARRAY_BYTES", 8 * 5)
    big = jit.filled(2.0, 6)  # (48 bytes > 40: made, not kept)
    assert jit.filled(2.0, 5) is jit.filled(2.0, 5)  # (40 bytes: kept)
    assert big.tolist() == [2.0] * 6 and jit.filled(2.0, 6) is not big
    for v in range(20):
        jit.filled(float(v), 4)
        assert sum(x.nbytes for x in jit._FILLED.values()) == jit._filled_bytes <= jit.FILLED_BYTES


def test_distinct_points_by_their_bits():
    """jit.distinct against numpy's np.unique over the columns (an independent sort): the same number of distinct
    columns, each point mapped to a column equal to its own, the first points in order of first appearance; alike
    by their bits (0.0 and -0.0 apart, a NaN alike with itself); floats whose bits differ only high (small whole
    numbers, the chips' choices) and many inputs per point, where a poor hash would put them in few slots; and
    jit.laid_over, which lays the first points' values (or rows of values) back over the points."""
    rng = np.random.default_rng(RNG_SEED + 30)
    cases = [rng.integers(0, 233, (1, 7700)).astype(float), rng.integers(0, 4, (12, 5000)).astype(float),
             rng.random((3, 2000)), np.round(rng.uniform(1e9, 2e9, (2, 3000)), -8), np.zeros((4, 0)),
             np.array([[0.0, -0.0, np.nan, np.nan, 0.0, 1.0, -0.0]])]
    for keys in cases:
        first, inverse = jit.distinct(keys)
        bits = np.ascontiguousarray(keys).view(np.int64)
        assert first.size == np.unique(bits, axis=1).shape[1] if keys.size else first.size == 0
        _same_bits(keys[:, first][:, inverse], keys)
        if keys.size:  # (jit.laid_over: the first points' values over every point, as numpy's indexing; rows too)
            _same_bits(jit.laid_over(keys[-1, first], inverse), keys[-1])
            _same_bits(jit.laid_over(keys[:, first].T, inverse), keys.T)
        assert (np.diff(first) > 0).all() and (first.size == 0 or first[0] == 0)
        assert (inverse[first] == np.arange(first.size)).all()  # (each first point is its column's)
        assert all(inverse[p] == inverse[first[inverse[p]]] and first[inverse[p]] <= p for p in range(keys.shape[1]))
    first, inverse = jit.distinct(cases[-1])
    assert first.tolist() == [0, 1, 2, 5] and inverse.tolist() == [0, 1, 2, 2, 0, 3, 1]


def test_distinct_of_separate_inputs_equals_distinct_of_their_stack():
    """jit.distinct of k separate (n,) inputs (floats, integers by their own bits, columns of a wider array, one
    value laid over the points with a stride of 0) finds the sets of their stacked (k, n) floats: the same first
    points and inverse. The integers are set numbers (a class's inverse), which the stack held as floats; an
    input of one value tells no two points apart."""
    rng = np.random.default_rng(RNG_SEED + 31)
    n = 6000
    a = rng.integers(0, 7, n).astype(float)
    cls = rng.integers(0, 5, n)  # (int64)
    wide = rng.integers(0, 3, (n, 4)).astype(float)
    one = np.broadcast_to(np.array([2.5]), (n,))
    stacked = np.vstack([a, cls.astype(float), wide[:, 2], one])
    want = jit.distinct(stacked)
    for keys in ([a, cls, wide[:, 2], one], [one, a, cls, wide[:, 2]], (a, cls.astype(float), wide[:, 2])):
        got = jit.distinct(keys)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        got = jit.distinct(keys, most=n // 2)
        assert got is not None and got[1].tolist() == want[1].tolist()
    rows = np.vstack([a, cls.astype(float)])  # (a (k, n) array among the inputs: its rows, each an input)
    assert jit.distinct([rows, wide[:, 2], one])[1].tolist() == want[1].tolist()
    first, inverse = jit.distinct([one, one])  # (one value: one set)
    assert first.tolist() == [0] and (inverse == 0).all()
    assert jit.distinct([np.array([0.0, -0.0, 0.0]), np.ones(3)])[1].tolist() == [0, 1, 0]  # (by their bits)
    with pytest.raises(ValueError):
        jit.distinct([])




def test_distinct_by_codes_of_whole_numbers_equals_distinct_by_hashes():
    """jit._coded_distinct_kernel (inputs of small whole numbers numbered by a table of their codes, the others
    compared with their set's first point) gives jit._distinct_kernel's answer to the bit: the same first points
    in the same order, the same inverse, the same stop past ``most``; it answers where some input is whole numbers
    of a span the table holds and every other input is the same within their sets, and leaves the rest to the hash
    table (a fraction, -0.0 beside 0.0, NaN, inf, 2^52, whole numbers too far apart, another input that splits a
    set). Cases: the chips' choices (units, stacks and a bandwidth that follows the stacks), negative and int64
    numbers, a sweep of a continuous input beside them."""
    rng = np.random.default_rng(RNG_SEED + 33)
    n = 5000
    units, stacks = rng.integers(32, 265, n).astype(float), rng.integers(1, 9, n).astype(float)
    bw = stacks * 8.19e11 + 0.5  # (a fraction, one value per stack count: compared, not coded)
    cases = {  # (inputs, answered by codes)
        "units": ([units], True), "units stacks bw": ([units, stacks, bw], True),
        "int64 classes": ([rng.integers(0, 233, n)], True),
        "negative": ([rng.integers(-50, 50, n).astype(float)], True),
        "one value": ([np.full(n, 7.0)], True), "bw alone": ([bw], False),
        "a sweep beside": ([units, rng.uniform(1e9, 2e9, n)], False),
        "-0.0 by units": ([np.where(units > 100, 0.0, -0.0), units], True),  # (units coded, the zeros compared)
        "-0.0 apart": ([np.where(rng.random(n) < 0.5, 0.0, -0.0), units], False),  # (the zeros split the sets)
        "-0.0 alone": ([np.where(rng.random(n) < 0.5, 0.0, -0.0)], False),
        "nan": ([np.where(units > 100, units, np.nan)], False),
        "inf": ([np.where(units > 100, units, np.inf)], False), "2^52": ([units + 2.0 ** 52], False),
        "far apart": ([units * 1e6], False), "too many codes": ([units, units * 1000 + 1, stacks], True),
    }
    for name, (keys, answered) in cases.items():
        bits, floats = jit._key_bits(keys)
        for most in (n, 300, 233, 232, 0):
            want_first, want_inverse = jit._distinct_kernel(bits, floats.size, most)
            first, inverse, coded = jit._coded_distinct_kernel(bits, floats, most)
            stopped = want_first.size > most
            assert coded == answered or (stopped and not answered), (name, most)
            if coded:
                assert first.tolist() == want_first.tolist(), (name, most)
                if not stopped:
                    assert inverse.tolist() == want_inverse.tolist(), (name, most)
        got = jit.distinct(keys)
        _same_bits(np.vstack([np.asarray(k, dtype=float) for k in keys])[:, got[0]][:, got[1]],
                   np.vstack([np.asarray(k, dtype=float) for k in keys]))


def test_distinct_of_any_number_of_inputs_compiles_a_signature_per_power_of_two():
    """jit.distinct's kernels take the inputs as a tuple, a compiled signature of its own for each length: padded to
    a power of two with its last row (jit._key_bits), 3, 5, 6 and 7 inputs (whole numbers: the table of codes;
    fractions: the table of hashes) give the answers of their own columns (each point's set has its bits, the first
    points differ) and no signature of a length that is not a power of two."""
    rng = np.random.default_rng(RNG_SEED + 34)
    n = 3000
    for k in (3, 5, 6, 7):
        for keys in (rng.integers(0, 3, (k, n)).astype(float), rng.integers(0, 3, (k, n)) + 0.25):
            first, inverse = jit.distinct(list(keys))
            _same_bits(keys[:, first][:, inverse], keys)
            assert len({tuple(c) for c in keys[:, first].T.tolist()}) == first.size == len({tuple(c) for c in keys.T})
    for kern in (jit._coded_distinct_kernel, jit._distinct_kernel):
        lengths = {len(sig[0].types) for sig in kern.signatures}
        assert lengths and all(m & (m - 1) == 0 for m in lengths), (kern, lengths)


def test_one_value_in_every_set_is_laid_over_as_a_view():
    """jit.laid_over of sets that all hold one value (to the bit) gives that value over the points as a read-only
    view of it (stride 0, nothing written), as dse.hardware.chips holds a shared figure, for values and for a
    column; 0.0 and -0.0 (or two NaNs of other bits) are two values, laid over point by point. jit.one_over: any
    one value (floats, integers, booleans), never an array of more."""
    inverse = np.array([0, 2, 1, 1, 0, 2, 2])
    for one in (np.full(3, 2.5), np.full(3, -0.0), np.full(3, np.nan), np.full((3, 1), 7.0)):
        got = jit.laid_over(one, inverse)
        assert got.shape == (7,) + one.shape[1:] and got.strides[0] == 0 and not got.flags.writeable
        _same_bits(got, one[inverse])
    nan2 = np.array([np.nan, np.nan, np.nan])
    nan2.view(np.int64)[1] ^= 1  # (a NaN of other bits: not the same value)
    for mixed in (np.array([0.0, -0.0, 0.0]), nan2, np.array([1.0, 1.0, 2.0])):
        got = jit.laid_over(mixed, inverse)
        assert got.strides[0] != 0 and got.flags.writeable
        _same_bits(got, mixed[inverse])
    for a in (np.array([3.0]), np.array([4], dtype=np.int64), np.array([True]), np.zeros((2, 1))[1]):
        v = jit.one_over(a, 5)
        assert v.shape == (5,) and v.dtype == a.dtype and v.strides == (0,) and not v.flags.writeable
        assert (v == a[0]).all()
    with pytest.raises(ValueError):
        jit.one_over(np.arange(2.0), 5)


def test_one_over_shares_one_view_of_a_value_no_caller_can_change():
    """jit.one_over keeps its views: the same value (to the bit, of the same dtype) over the same number of points
    is the same read-only view; a view is of a copy (the caller's array changed after leaves it as it was) and no
    caller can make it writable; 0.0 and -0.0, two NaNs of other bits, 1.0 as a float and as an integer, and other
    numbers of points are other views. Past jit.ONE_OVER_VIEWS kept it starts over, its answers the same."""
    a = np.array([2.5])
    v = jit.one_over(a, 6)
    assert jit.one_over(np.array([2.5]), 6) is v
    a[0] = 9.0
    assert (v == 2.5).all() and jit.one_over(a, 6) is not v and (jit.one_over(a, 6) == 9.0).all()
    with pytest.raises(ValueError):
        v.flags.writeable = True
    nan2 = np.array([np.nan])
    nan2.view(np.int64)[0] ^= 1
    others = [jit.one_over(x, n) for x, n in ((np.array([2.5]), 7), (np.array([0.0]), 6), (np.array([-0.0]), 6),
                                              (np.array([np.nan]), 6), (nan2, 6), (np.array([1.0]), 6),
                                              (np.array([1], dtype=np.int64), 6))]
    assert len({id(x) for x in others + [v]}) == len(others) + 1
    assert np.signbit(others[2]).all() and not np.signbit(others[1]).any()
    assert others[4].view(np.int64)[0] == nan2.view(np.int64)[0] and others[6].dtype == np.int64
    for i in range(jit.ONE_OVER_VIEWS + 3):  # (more values than it keeps)
        w = jit.one_over(np.array([float(i)]), 3)
        assert w.shape == (3,) and (w == i).all() and not w.flags.writeable


def test_distinct_gives_up_where_few_points_repeat():
    """jit.distinct(keys, most): None where more than ``most`` columns differ, found by a sample of
    jit.DISTINCT_SAMPLE points (k columns of U distinct repeat ~k^2 / 2U times) or by the full pass; else the same
    answer as without ``most``. 100,000 points of 233, 1,864 and 30,000 distinct values (three random inputs of
    those cardinalities), and all distinct, against most = 50,000; and a hard limit the sample cannot see (a
    block of 5,000 repeating points, then all distinct)."""
    rng = np.random.default_rng(RNG_SEED + 32)
    n = 100_000
    for u in (233, 1864, 30_000):
        keys = rng.integers(0, u, n).astype(float)[None, :] * np.array([[1.0], [2.0], [3.0]])
        full = jit.distinct(keys)
        got = jit.distinct(keys, most=n // 2)
        assert got is not None and all((a == b).all() for a, b in zip(got, full)), u
    sizes = []
    kernel = jit._distinct_kernel
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jit, "_distinct_kernel", lambda bits, k, most: sizes.append(bits[0].size) or kernel(bits, k, most))
        assert jit.distinct(rng.random((3, n)), most=n // 2) is None
    assert sizes == [jit.DISTINCT_SAMPLE]  # (the sample alone: no pass over all points)
    head = np.concatenate([np.zeros(5000), np.arange(1.0, n - 4999)])[None, :]  # (the sample finds repeats, the
    assert jit.distinct(head, most=n // 2) is None  # pass over all points stops past most)
    assert jit.distinct(head, most=n)[0].size == n - 4999
    assert jit.distinct(np.zeros((2, 10)), most=0) is None and jit.distinct(np.zeros((2, 10)), most=1)[0].size == 1
    assert jit._distinct_kernel(jit._key_bits([np.arange(1000)])[0], 1, 10)[0].size == 11  # (stops past most)


@pytest.mark.parametrize("name", ["prefill", "gemm"])
def test_default_tiles_of_alike_points_evaluated_once(monkeypatch, name):
    """The default tiles evaluate each distinct set of a point's inputs once (evaluator._tiles, jit.distinct) and
    give every point its first alike point's tiles and L2 bytes: to the bit the tiles of every point evaluated
    (jit.distinct made to find no point alike), on points drawn from few values of every input the tiles read
    (units, L2, local buffer, multicast, compute efficiency: the unit rates of the operators), so that most
    points repeat an earlier one and many differ from one in a single input; a prefill's operators and a GEMM
    alone (one operator per point: the results laid over the points by a gather of their own)."""
    from dse.hardware import Chips, load_chip
    from tests.test_evaluate_fast import workload
    rng = np.random.default_rng(RNG_SEED + 31)
    n = 2000
    chips = Chips.from_base(load_chip("h100"), n, {
        "units": rng.choice([16.0, 132.0, 264.0], n), "l2": rng.choice([0.0, 5e7], n),
        "local_buffer": rng.choice([64e3, 228e3], n), "l2_multicast": rng.choice([1.0, 4.0], n),
        "calibration.compute_efficiency": rng.choice([0.7, 1.0], n), "clock": rng.uniform(1e9, 2e9, n)})
    ops = ev.op_table(workload(name))
    c = ev._chip_columns(chips, ops)
    args = (c.im, c.inn, c.ik, c.buf, c.units, c.psum, c.acc, ops, ev._tile_levels(c, ev._by_format(c.fpc, ops)))
    found = []
    distinct = jit.distinct
    monkeypatch.setattr(jit, "distinct", lambda keys, most=None: found.append(distinct(keys)[0].size)
                        or distinct(keys, most))
    once = ev._tiles(*args)
    assert found and found[0] <= 3 * 2 * 2 * 2 * 2
    monkeypatch.setattr(jit, "distinct", lambda keys, most=None: None)  # (no point alike another)
    for got, want in zip(once[:5], ev._tiles(*args)[:5]):
        _same_bits(got, np.broadcast_to(want, got.shape))


def test_per_operator_values_and_count():
    """jit.of_op / jit.op_count, a block kernel's per-operator argument and operator count: an array's entry j, a
    number as it is (one operator per point); None counts one operator."""
    assert jit.of_op(np.array([1.0, 2.5]), 1) == 2.5 and jit.of_op(4.0, 3) == 4.0
    assert jit.op_count(None) == 1 and jit.op_count(7) == 7
    assert jit.set_of(None, 3) == 3 and jit.set_of(np.array([2, 0, 1]), 1) == 0


def test_peak_power_kernel_is_the_largest_format_power():
    """The TDP estimate's compute power: per point the largest of format_power over the chip's formats (0 at the
    least; the kernel raises it in place, one call per format), to the bit what numpy gives applying the rule
    format by format with np.maximum (NaN included); the same with the inputs every point shares given as one
    number (the kernel then compiles with them in registers)."""
    rng = np.random.default_rng(RNG_SEED + 13)
    n, n_fmt = 500, 4
    e_flop = rng.choice([0.0, 0.3e-12, 1e-12, np.nan], (n_fmt, n))
    fpc = rng.choice([0.0, 512.0, 1024.0, 4096.0], (n_fmt, n))
    value_bytes = np.array([0.5, 1.0, 2.0, 4.0])
    im, inn, ik = rng.choice([8.0, 16.0, 64.0], n), rng.choice([8.0, 16.0, 256.0], n), rng.choice([8.0, 16.0], n)
    e_reg, systolic = rng.choice([0.0, 1e-13], n), rng.choice([0.0, 1.0], n)
    per_point = [rng.choice([1.0, 2.0], n), rng.integers(1, 200, n) * 1.0, rng.uniform(1e9, 2e9, n),
                 rng.uniform(0.5, 1.2, n)]
    dies, units, clock, s1 = per_point
    e_fmt = [ev.format_energy(e_flop[f], im, inn, ik, systolic, value_bytes[f], e_reg) for f in range(n_fmt)]
    want = np.zeros(n)
    for f in range(n_fmt):
        want = np.maximum(want, ev.format_power(dies, units, fpc[f], clock, e_fmt[f], s1))
    got = np.zeros(n)
    for f in range(n_fmt):
        ev._peak_power_kernel(got, jit.points(fpc[f], n), jit.points(e_fmt[f], n),
                              *(jit.points(x, n) for x in per_point))
    _same_bits(got, want)
    assert np.isnan(got).any() and (got > 0).any()
    # one die and one FLOP rate and J/FLOP per format at every point, as numbers
    want, got = np.zeros(n), np.zeros(n)
    for f in range(n_fmt):
        want = np.maximum(want, ev.format_power(2.0, units, fpc[f, 0], clock, e_fmt[f][0], s1))
        ev._peak_power_kernel(got, fpc[f, 0], e_fmt[f][0], 2.0, jit.points(units, n), jit.points(clock, n),
                              jit.points(s1, n))
    _same_bits(got, want)


def test_chip_power_kernel_equals_its_rules():
    """The chip's power figures in one pass (dse.model.evaluator._chip_power_kernel) against numpy applying the rules
    of dse.model.power on arrays as power_inputs' docstring composes them (leakage of the dies' logic and SRAM, or
    the chip's power.static; clock power at the rated clock, which is the clock where none is given, or the chip's
    power.clock; d = clock / rated; V1 by the voltage law; its dynamic-energy scale; the fixed power at the design
    clock), to the bit, on random inputs with NaNs (figures not given), infinite and NaN leakage densities and -0.0:
    sums of parts per set of points alike (an inverse) and per point (None), figures per point and as numbers.
    A wrong part summed, a given figure ignored or a select reversed fails here."""
    rng = np.random.default_rng(RNG_SEED + 17)
    n, sets = 400, 37
    logic, sram, clocked = (rng.choice([0.0, -0.0, 3.0, 250.0, 812.5], sets) for _ in range(3))
    inverse = rng.integers(0, sets, n)
    dies = rng.choice([1.0, 2.0, 8.0], n)
    leak_logic, leak_sram = rng.choice([0.0, 0.05, 0.2, np.inf, np.nan], n), rng.choice([0.0, 0.01, 0.03], n)
    static, given_clock = rng.choice([np.nan, 0.0, 80.0], n), rng.choice([np.nan, 40.0], n)
    rated_clock, clock = rng.choice([np.nan, 1.98e9, 1.5e9], n), rng.uniform(0.5e9, 3e9, n)
    clock_energy = rng.choice([0.0, 2e-12, 7e-12], n)
    v_min, v_nom, v_th = rng.uniform(0.5, 0.7, n), rng.choice([0.75, 0.9, 1.0], n), rng.choice([-0.0, 0.25, 0.3], n)
    inputs = (dies, leak_logic, leak_sram, static, rated_clock, clock, clock_energy, given_clock, v_min, v_nom, v_th)

    def rules(at, x):
        d_, ll, ls, st, rc, ck, ce, gc, vmin, vnom, vth = x
        with jit.quiet():
            leak = power.leakage_power(logic[at] * d_, sram[at] * d_, ll, ls)
            leak = np.where(np.isnan(st), leak, st)
            rated = np.where(np.isnan(rc), ck, rc)
            clk = power.clock_power(clocked[at] * d_, ce, rated)
            clk = np.where(np.isnan(gc), clk, gc)
            d = ck / rated
            v1 = power.voltage_at(d, vmin, vnom, vth)
            return np.array([leak, clk, rated, d, v1 + 0.0 * leak, power.dynamic_energy_scale(v1, vnom),
                             power.fixed_power_core(leak, clk, d, 1.0, v1, vnom)]), int((~np.isfinite(leak)).sum())

    def kernel(sums, inv, x, rows):
        out, unusual = ev._chip_power_kernel(*(jit.points(a, a.size) for a in sums), inv, *x, rows)
        return out[:, :rows], unusual

    want, unusual = rules(inverse, inputs)
    got, got_unusual = kernel((logic, sram, clocked), inverse, tuple(jit.points(x, n) for x in inputs), n)
    _same_bits(got, want)
    assert got_unusual == unusual > 0 and np.isnan(got[4]).any() and (got[0] > 0).any()
    # the sums per point (no sets), the figures every point shares as numbers
    numbers = tuple(x[0] if k in (0, 1, 2, 6, 8, 9, 10) else jit.points(x, n) for k, x in enumerate(inputs))
    want, unusual = rules(inverse, tuple(np.broadcast_to(x, n) for x in numbers))
    got, got_unusual = kernel(tuple(x[inverse] for x in (logic, sram, clocked)), None, numbers, n)
    _same_bits(got, want)
    assert got_unusual == unusual


def test_power_inputs_of_many_points_are_each_points_own():
    """power_inputs of N points (one pass of a kernel, the package's sums per set of points alike, a figure every
    point shares given back as one number) equals power_inputs of each point alone, to the bit: with the chip's own
    power figures or the model's, infinite leakage densities (NaN voltages: V + 0 x leakage) and -0.0 voltages; and
    the same with the package given (dse.model.area.package_area_for) as computed for its sums of parts alone."""
    from dse.hardware import Chips, load_chip
    rng = np.random.default_rng(RNG_SEED + 19)
    n = 60
    for base, over in (("h100-sxm", {"units": rng.choice([66.0, 132.0], n), "clock": rng.uniform(1e9, 2e9, n),
                                     "power.static": rng.choice([np.nan, 90.0], n),
                                     "power.clock": rng.choice([np.nan, 25.0], n)}),
                       ("mi355x", {"units": rng.choice([128.0, 256.0], n), "tech.leak_logic": np.full(n, np.inf),
                                   "tech.v_threshold": np.full(n, -0.0)}),
                       ("tpu-v1", {"clock": rng.uniform(0.5e9, 1e9, n), "power.rated_clock": np.full(n, 0.7e9)})):
        chips = Chips.from_base(load_chip(base), n, over)
        many = ev.power_inputs(chips)
        # (the package computed for the sums of its parts alone, or given whole: the same figures)
        for k, v in ev.power_inputs(chips, package=area.package_area_for(chips)).items():
            _same_bits(np.broadcast_to(many[k], n), np.broadcast_to(v, n))
        for i in range(0, n, 7):
            for k, v in ev.power_inputs(chips.take(i)).items():
                _same_bits(np.asarray(many[k], dtype=float)[i:i + 1], np.asarray(v, dtype=float))
        # (infinite leakage: every voltage figure + 0 x leakage is NaN; else each finite)
        law = np.array([np.broadcast_to(many[k], n) for k in ("v1", "v_min", "v_nom", "v_th")])
        assert np.isnan(law).all() if base == "mi355x" else np.isfinite(law).all()


def test_power_inputs_without_most_are_the_same_figures():
    """power_inputs(most=False), as the evaluator calls it, gives every figure of power_inputs(most=True) to the bit
    and leaves ``most`` (the formats' peak powers, the TDP's estimate) out where every point publishes its TDP; where
    some point does not (Trainium2 publishes none, dse/data/chips), its TDP is still the estimate: ``most``."""
    from dse.hardware import Chips, load_chip
    from tests.test_evaluate_fast import workload
    rng = np.random.default_rng(RNG_SEED + 23)
    n = 40
    for base, tdp in (("h100-sxm", rng.uniform(300.0, 900.0, n)), ("trainium2", None),
                      ("h100-sxm", rng.choice([np.nan, 700.0], n))):
        over = {"units": rng.choice([66.0, 132.0], n), "clock": rng.uniform(1e9, 2e9, n)}
        if tdp is not None:
            over["tdp"] = tdp
        chips = Chips.from_base(load_chip(base), n, over)
        full, lean = ev.power_inputs(chips), ev.power_inputs(chips, most=False)
        estimated = np.broadcast_to(full["tdp_est"], n) > 0.5
        assert set(full) - set(lean) == (set() if estimated.any() else {"most"}) and set(lean) <= set(full)
        for k, v in lean.items():
            _same_bits(np.broadcast_to(full[k], n), np.broadcast_to(v, n))
        if estimated.any():
            _same_bits(np.broadcast_to(lean["tdp"], n)[estimated], np.broadcast_to(full["most"], n)[estimated])
        assert estimated.any() == (tdp is None or bool(np.isnan(tdp).any()))
        # (the evaluator's TDP: the published one, else the estimate)
        _same_bits(np.broadcast_to(full["tdp"], n), np.asarray(ev.evaluate_arrays(chips, workload("gemm"))["tdp"]))


def test_group_power_kernel_is_the_fused_blocks_power():
    """The highest power of a fused attention block (its three operators' energies over their summed time, at each
    one's fixed power), raised into the other operators' highest: to the bit what numpy gives on the block's
    columns (sums along them, np.maximum), with no time (0 W), NaN energies and a NaN starting value among them."""
    rng = np.random.default_rng(RNG_SEED + 14)
    rows, n_ops, cols = 400, 16, (7, 8, 9)
    e_comp, e_mem = (rng.uniform(0.0, 1e-3, (rows, n_ops)) * 10 ** rng.uniform(-3, 3, (rows, n_ops)) for _ in range(2))
    t_op = rng.choice([0.0, 1e-6, 3e-5, 2e-3], (rows, n_ops))
    p_fixed = rng.uniform(50.0, 300.0, (rows, n_ops))
    e_comp[rng.random((rows, n_ops)) < 0.02] = np.nan
    start = rng.uniform(100.0, 900.0, rows)
    start[::37] = np.nan
    c = list(cols)
    with np.errstate(all="ignore"):
        p_g = power.average_power((e_comp[:, c] + e_mem[:, c]).sum(axis=1, keepdims=True),
                                  t_op[:, c].sum(axis=1, keepdims=True)) + p_fixed[:, c]
    want = np.maximum(start, p_g.max(axis=1))
    got = start.copy()
    ev._group_power_kernel(got, *(ev._full(x, x.shape) for x in (e_comp, e_mem, t_op, p_fixed)), *cols)  # (read-only,
    # as the evaluator gives them: a writable array is a compiled signature of its own)
    _same_bits(got, want)
    assert np.isnan(got).any() and (got > start).any() and (got == start).any()


def test_package_area_in_chunks_is_the_same(monkeypatch):
    """Past _CHUNK_POINTS points package_area runs its kernel chunk by chunk and joins the rows: the same arrays,
    to the bit, as one call (chunks of 7 points here, 50 random variants of two base chips)."""
    from dse.hardware import Chips, load_chip
    from dse.model import area
    rng = np.random.default_rng(RNG_SEED + 15)
    for base in ("h100", "mi300x"):
        chips = Chips.from_base(load_chip(base), 50, {"units": rng.integers(1, 300, 50).astype(float),
                                                      "dies": rng.choice([1.0, 2.0, 8.0], 50)})
        whole = area.package_area_for(chips)
        monkeypatch.setattr(area, "_CHUNK_POINTS", 7)
        chunked = area.package_area_for(chips)
        monkeypatch.undo()
        for name in ("die_area_mm2", "die_long_mm", "die_short_mm", "hbm_stacks", "hbm_shoreline_stacks",
                     "interposer_area_mm2", "base_area_mm2", "total_silicon_area_mm2"):
            _same_bits(getattr(chunked, name), getattr(whole, name))
        for name in area.PARTS:
            _same_bits(chunked.parts[name], whole.parts[name])


def _random_chip_op(rng, n):
    """Random per-point and per-operator inputs of the default tiles, zeros and skinny shapes included."""
    pick = rng.choice
    return dict(
        im=pick([1.0, 8.0, 16.0, 32.0, 64.0], n), inn=pick([1.0, 8.0, 16.0, 32.0, 128.0], n),
        ik=pick([1.0, 8.0, 16.0, 32.0], n), buf=pick([0.0, 64e3, 228e3, 2e6], n), units=rng.integers(1, 300, n) * 1.0,
        l2=pick([0.0, 2e6, 5e7], n), acc=pick([0.0, 0.0, 128.0 * 1024, 256.0 * 1024, 4.0 * 2**20], n),
        m=pick([0.0, 1.0, 4.0, 256.0, 4096.0, 32768.0], n),
        n=pick([0.0, 128.0, 1024.0, 4096.0, 151936.0], n), k=pick([0.0, 128.0, 4096.0, 12288.0], n),
        batch=pick([1.0, 8.0, 32.0], n), emax=pick([0.5, 1.0, 2.0, 4.0], n), ea=pick([0.5, 1.0, 2.0], n),
        eb=pick([0.5, 1.0, 2.0], n))


def test_tile_rules_compiled_equal_numpy():
    """The default tiles' two rules (dse.model.evaluator.tile_candidates, choose_tile) compiled and in numpy."""
    rng = np.random.default_rng(RNG_SEED)
    n = 4000
    d = _random_chip_op(rng, n)
    cand_args = [d[k] for k in ("im", "inn", "ik", "buf", "units", "l2", "acc", "m", "n", "k", "batch", "emax")]
    with jit.quiet():
        ref = ev.tile_candidates(*cand_args)
    got = _compiled(ev.tile_candidates, 9)(*cand_args)
    for r, g in zip(ref, got):
        _same_bits(g, np.broadcast_to(r, (n,)))
    tm, tn, split, tm2, tn2, split2, tm3, tn3, split3 = ref
    req = [rng.integers(1, 64, n) * 1.0 for _ in range(6)]
    rest = dict(units=d["units"], im=d["im"], inn=d["inn"], ik=d["ik"], m=d["m"], n=d["n"], k=d["k"], batch=d["batch"],
                ea=d["ea"], eb=d["eb"], a_l2=rng.choice([0.0, 8e3, 32e6], n), b_l2=rng.choice([8e3, 32e6, 1e9], n),
                b_bytes=rng.choice([8e3, 32e6, 1e9], n), c_bytes=rng.choice([0.0, 8e3, 32e6], n),
                on_chip_c=rng.choice([0.0, 1.0], n), unit_rate=rng.choice([0.0, 1e12, 4e12], n),
                l2_rate=rng.choice([0.0, 5e12], n), loc_rate=rng.choice([0.0, 1e11], n),
                rm=rng.choice([0.0, 16.0, 64.0], n), rn=rng.choice([16.0, 256.0], n))
    candidates = [(tm, tn, split, req[0], req[1]), (tm2, tn2, split2, req[2], req[3]),
                  (tm3, tn3, split3, req[4], req[5])]
    with jit.quiet():
        ref = ev.choose_tile(*candidates, *rest.values())
    got = _compiled(ev.choose_tile, 3, (5, 5, 5))(*(x for c in candidates for x in c), *rest.values())
    for r, g in zip(ref, got):
        _same_bits(g, r)


def test_power_rule_compiled_equal_numpy():
    """dse.model.power.operator_power_core (the power ceiling's power of an operator) compiled and in numpy."""
    rng = np.random.default_rng(RNG_SEED + 1)
    n = 4000
    args = [rng.uniform(0.05, 1.0, n), rng.choice([0.0, 0.1, 1.0], n), rng.choice([0.0, 0.05], n),
            rng.uniform(0, 1e-3, n), rng.uniform(0, 1e-3, n), rng.choice([0.0, 1e-4], n), rng.uniform(0, 100, n),
            rng.uniform(0, 100, n), rng.uniform(0.5, 1.3, n), np.full(n, 0.6), np.full(n, 0.9), np.full(n, 0.3),
            rng.uniform(0.6, 1.0, n), rng.choice([0.0, 1.0], n)]
    with jit.quiet():
        ref = power.operator_power_core(*args)
    _same_bits(_compiled(power.operator_power_core, 1)(*args)[0], ref)


def test_point_results_compiled_equal_numpy():
    """dse.model.evaluator.point_results (a point's step time, energy, power and rates from its operators' sums)
    run by numpy on arrays and by its kernel (_point_kernel: four passes of a few results each), on random inputs
    with zeros, infinities and NaN mixed in: the same bits, result by result."""
    rng = np.random.default_rng(RNG_SEED + 5)
    n = 3000
    n_in = len(inspect.signature(ev.point_results).parameters) - 2  # (all but tokens and FLOPs)
    cols = []
    for _ in range(n_in):
        x = rng.uniform(0.0, 2.0, n)
        pick = rng.random(n) < 0.1
        x[pick] = rng.choice(SPECIAL, pick.sum())
        x.flags.writeable = False
        cols.append(x)
    for tokens, flops in ((1.0, 2e9), (4096.0, 0.0)):
        with jit.quiet():
            ref = ev.point_results(*cols, tokens, flops)
        got = ev._point_kernel(tuple(cols), tokens, flops)
        assert len(got) == len(ref) == len(ev.POINT_RESULTS)
        for g, r in zip(got, ref):
            _same_bits(g, r)
    # the groups of inputs every point shares (evaluator._POINT_GROUPS: one chip, the technology's figures) given
    # as one value each: read as numbers, the same bits as numpy's on the values laid over the points
    args, laid = _shared_groups(rng, cols, ev._POINT_GROUPS, n)
    with jit.quiet():
        ref = ev.point_results(*laid, 8.0, 3e9)
    for g, r in zip(ev._point_kernel(args, 8.0, 3e9), ref):
        _same_bits(g, r)


def _shared_groups(rng, cols, groups, n):
    """``cols`` (a kernel's per-point inputs) with those of ``groups`` one value each, specials among them: (the
    kernel's arguments, the groups read as numbers, evaluator._per_point_groups; numpy's inputs, the values laid
    over the ``n`` points)."""
    shared = list(cols)
    for group in groups:
        for i in group:
            shared[i] = np.array([[rng.choice(SPECIAL) if rng.random() < 0.3 else rng.uniform(0.0, 2.0)]])
    args = ev._per_point_groups(tuple(shared), groups, n)
    assert sum(type(x) is float for x in args) == sum(len(g) for g in groups)
    return args, tuple(np.broadcast_to(x.reshape(-1), (n,)) for x in shared)


def test_design_clock_figures_compiled_equal_numpy():
    """dse.model.evaluator.design_clock_figures (a point's vector, L2 and local-buffer rates, energy scale, leakage and
    clock power at V1, main memory's bandwidth) run by numpy on arrays and by its kernel (_design_clock_kernel), on
    random inputs with zeros, infinities and NaN mixed in (a latency or a transaction count of 0: the interface
    alone): the same bits, result by result; its group of shared figures given as one value each, read as
    numbers, numpy's bits on the values laid over the points."""
    rng = np.random.default_rng(RNG_SEED + 11)
    n = 3000
    n_in = len(inspect.signature(ev.design_clock_figures).parameters)
    cols = []
    for _ in range(n_in):
        x = rng.uniform(0.0, 2.0, n)
        pick = rng.random(n) < 0.1
        x[pick] = rng.choice(SPECIAL, pick.sum())
        cols.append(x.reshape(n, 1))
    with jit.quiet():
        ref = ev.design_clock_figures(*(x[:, 0] for x in cols))
    got = ev._design_clock_kernel(ev._per_point_groups(tuple(cols), (), n))
    assert len(ref) == got.shape[0] == 8
    for g, r in zip(got, ref):
        _same_bits(g, r)
    args, laid = _shared_groups(rng, cols, ev._DESIGN_CLOCK_GROUPS, n)
    with jit.quiet():
        ref = ev.design_clock_figures(*laid)
    for g, r in zip(ev._design_clock_kernel(args), ref):
        _same_bits(g, r)


def _block_inputs(rng, rows, n_ops, n_full, n_point, special=SPECIAL[:6]):
    """Random (points, operators) and (points, 1) inputs with zeros, signed zeros and infinities mixed in."""
    def values(shape):
        x = rng.uniform(0.05, 2.0, shape)
        mask = rng.random(shape) < 0.15
        x[mask] = rng.choice(special, mask.sum())
        return x
    return [values((rows, n_ops)) for _ in range(n_full)], [values((rows, 1)) for _ in range(n_point)]


@pytest.mark.parametrize("n_ops", [5, 1])
@pytest.mark.parametrize("kernel, rule, order, numbers", [
    (ev._traffic_kernel, ev.tile_traffic, "ffffPPPPPPPOOOOOOOOO", ()),
    (ev._busy_kernel, ev.busy_at_design_clock, "ffPffOPPfPfPP", ()),
    (ev._busy_kernel, ev.busy_at_design_clock, "ffPffOPPfPfPP", ev._BUSY_NUMBERS),
    (ev._times_kernel, ev.operator_times, "ffffPfffff", ()),
    (ev._memory_kernel, ev.memory_traffic, "fffPPOOOOOO", ()),
    (ev._compute_energy_kernel, ev.compute_energy, "ffffffPPPPPPOO", ()),
    (ev._compute_energy_kernel, ev.compute_energy, "ffffffPPPPPPOO", ev._COMPUTE_ENERGY_NUMBERS),
    (ev._rate_kernel, ev.peak_rate, "PfPf", ()),
    (ev._rate_kernel, ev.peak_rate, "PfPf", ev._RATE_NUMBERS),
])
def test_block_kernels_equal_their_rules(kernel, rule, order, numbers, n_ops):
    """Each of the block's kernels (a loop over points, then operators) gives, to the bit, what numpy gives running
    its rule on the same arrays; ``order``: the rule's arguments, f a (points, operators) one, P a per-point one,
    O a per-operator one (the kernels take them in that order of kinds, each kind in the rule's order). With one
    operator per point the kernel runs compiled for per-operator numbers (dse.model.jit.of_op): checked with the
    per-operator values of each of 5 operators in turn (finite, zero and infinite ones). ``numbers``: the groups of
    inputs the kernel reads as numbers where each has one value for every point and operator (evaluator's
    _block_kernel), here each such input one value laid over the points (a view of stride 0, or a (1, 1) array)."""
    rng = np.random.default_rng(RNG_SEED + 5)
    full, per_point = _block_inputs(rng, 37, n_ops, order.count("f"), order.count("P") + order.count("O"))
    for k, i in enumerate(i for group in numbers for i in group):  # (alternately a view and one value)
        xs = full if i < len(full) else per_point
        j = i if i < len(full) else i - len(full)
        one = xs[j][:1, :1].copy()
        xs[j] = np.broadcast_to(one, xs[j].shape) if k % 2 else one
    per_ops = [x[:5, 0] for x in per_point[order.count("P"):]]
    per_point = per_point[:order.count("P")]
    for first in range(0, 5, n_ops):
        per_op = [x[first:first + n_ops] for x in per_ops]
        kinds = {"f": iter(full), "P": iter(per_point), "O": iter(x[None, :] for x in per_op)}
        args = [next(kinds[kind]) for kind in order]
        with jit.quiet():
            ref = rule(*args)
        if rule is ev.busy_at_design_clock and n_ops == 1:  # (one operator a point: the results it stores)
            ref = tuple(ref[k] for k in ev._BUSY_ONE_OP)
        got = ev._block_kernel(kernel, tuple(full), tuple(per_point), tuple(per_op), numbers)
        assert len(got) == len(ref)
        for r, g in zip(ref, got):
            _same_bits(g, np.broadcast_to(r, g.shape))


@pytest.mark.parametrize("n_ops", [5, 1])
def test_memory_by_set_kernel_lays_the_sets_bytes_and_their_rules(n_ops):
    """Main memory's bytes of 7 sets of points laid over 40 points (each point's set drawn at random) with what each
    point reads from them (evaluator._memory_by_set_kernel): to the bit, the set's bytes, and numpy running the
    rules (evaluator.memory_time of the bytes and of the per-operator compulsory bytes at the point's bandwidth,
    evaluator.memory_energy at its J/B) on the laid-over bytes; zeros, signed zeros and infinities mixed in; one
    operator a point compiled for it too (``n_ops`` None), the same bits; the times alone (``times_only``) too."""
    rng = np.random.default_rng(RNG_SEED + 9)
    sets, rows = 7, 40
    (bytes_sets, comp), (bw, e_mem) = _block_inputs(rng, sets, n_ops, 2, 0)[0], _block_inputs(rng, rows, 1, 2, 0)[0]
    comp = comp[0]
    inverse = rng.integers(0, sets, rows)
    inverse[:sets] = np.arange(sets)  # (every set read)
    # (read-only, as the evaluator gives them: a writable array is a compiled signature of its own)
    bytes_flat, bw1, e_mem1, comp1 = (jit.points(x, x.size) for x in (bytes_sets, bw, e_mem, comp))
    got = ev._memory_by_set_kernel(bytes_flat, inverse, bw1, comp1, e_mem1, n_ops, False)
    laid = bytes_sets[inverse]
    with jit.quiet():
        ref = (laid, ev.memory_time(laid, bw), ev.memory_time(comp[None, :], bw), ev.memory_energy(laid, e_mem))
    assert got.shape == (4, rows * n_ops)
    for g, r in zip(got, ref):
        _same_bits(g.reshape(rows, n_ops), np.broadcast_to(r, (rows, n_ops)))
    if n_ops == 1:  # (compiled for one operator a point: its compulsory bytes a number, jit.of_op; the same bits)
        one = ev._memory_by_set_kernel(bytes_flat, inverse, bw1, float(comp[0]), e_mem1, None, False)
        _same_bits(one, got)
    # (the times alone, where the caller has the bytes and their energy as one value: the same times' bits)
    times = ev._memory_by_set_kernel(bytes_flat, inverse, bw1, comp1 if n_ops > 1 else float(comp[0]), e_mem1,
                                     n_ops if n_ops > 1 else None, True)
    _same_bits(times[1:3], got[1:3])


@pytest.mark.parametrize("n_ops", [6, 1])
def test_energy_kernel_equals_its_rule_and_sums(n_ops):
    """The operating-point kernel: per element, to the bit, what numpy gives running dse.model.evaluator's
    operating_energy on the same arrays; per point, the sums over the operators (x their counts) of the energies,
    the times (all, and by bound), the FLOP-weighted clock and voltage, their minima and the highest power outside
    the fused blocks and the bound with the most time (numpy's argmax), computed here with numpy from the rule's
    outputs (within 1e-13: the kernel adds the operators one after another)."""
    rng = np.random.default_rng(RNG_SEED + 6)
    rows = 41
    full, per_point = _block_inputs(rng, rows, n_ops, 13, 12, special=np.array([0.0, 1.0, 2.5]))
    count = rng.choice([1.0, 2.0, 36.0], n_ops)
    grouped = np.array([0.0, 1.0, 1.0, 1.0, 0.0, 0.0])[:n_ops]
    (cr, e_comp1, e_mem, t_op, t_matrix, t_vector, t_memory, t_l2, t_local, padded, reg, loc, l2) = full
    d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_reg, e_loc, e_l2, s1 = per_point
    with jit.quiet():
        v, e_scale, e_comp, p_fixed, e_fixed, bound, power_op = ev.operating_energy(
            cr, d, v_min, v_nom, v_th, v1, scaling, leak, clk, e_comp1, e_mem, t_op, t_matrix, t_vector, t_memory,
            t_l2, t_local)
    *per_element, sums = ev._block_kernel(ev._energy_kernel, tuple(full), tuple(per_point), (count, grouped))
    for r, g in zip((e_comp, p_fixed, e_fixed, bound), per_element):
        _same_bits(g, r)
    tw = t_op * count
    with np.errstate(invalid="ignore"):  # (0 x inf: NaN in both)
        expected = _expected_sums(locals(), count, grouped)
    assert set(expected) == set(ev.POINT_SUMS)
    for i, name in enumerate(ev.POINT_SUMS):
        np.testing.assert_allclose(sums[i], expected[name], rtol=1e-13, atol=0, err_msg=name)
    assert (bound != bound.astype(int)).sum() == 0 and set(np.unique(bound)) <= {0.0, 1.0, 2.0, 3.0, 4.0}


def _expected_sums(x, count, grouped):
    """The energy kernel's per-point sums, with numpy, from the rule's outputs and the inputs (names in ``x``)."""
    cr, v, e_scale, bound, tw, padded = x["cr"], x["v"], x["e_scale"], x["bound"], x["tw"], x["padded"]
    s1 = x["s1"]
    by_bound = {f"bound_{name}": np.where(bound == i, tw, 0.0).sum(1)
                for i, name in enumerate(("matrix", "vector", "memory", "l2", "local"))}
    return dict(**by_bound, bound_code=np.argmax(np.array(list(by_bound.values())), axis=0).astype(float),
        e_compute=(x["e_comp"] * count).sum(1), e_fixed=(x["e_fixed"] * count).sum(1),
        e_register=(x["reg"] * x["e_reg"] * s1 * e_scale * count).sum(1),
        e_local=(x["loc"] * x["e_loc"] * s1 * e_scale * count).sum(1),
        e_l2=(x["l2"] * x["e_l2"] * s1 * e_scale * count).sum(1), device=tw.sum(1),
        clock_flops=(cr * padded * count).sum(1), clock_min=cr.min(1), voltage_flops=(v * padded * count).sum(1),
        voltage_min=v.min(1), power_max=x["power_op"][:, grouped == 0].max(1))


def test_fused_block_time_compiled_equals_numpy_and_pipelines():
    """dse.model.evaluator.fused_block_time (a fused attention block's time, seed 004 §4.2.3) compiled and in numpy,
    to the bit; and what it means: one block per unit (w = 1) takes the three operators' own resources one after
    the other (S = sum over operators of their slowest own resource), many blocks approach the slowest resource's
    sum (O), more blocks never take longer, and the result lies within [floor, cap] where floor <= cap."""
    rng = np.random.default_rng(RNG_SEED + 7)
    n = 3000
    times = [rng.choice([0.0, 1e-6, 3e-6, 1e-5], n) * rng.uniform(0.5, 2.0, n) for _ in range(9)]
    waves, floor = rng.choice([1.0, 2.0, 7.0, 1e9], n), rng.uniform(0.0, 1e-5, n)
    cap = floor + rng.uniform(0.0, 1e-4, n)
    args = [*times, waves, floor, cap]
    with jit.quiet():
        ref = ev.fused_block_time(*args)
    _same_bits(_compiled(ev.fused_block_time, 1)(*args)[0], ref)
    m, v, loc = np.array(times[0:3]), np.array(times[3:6]), np.array(times[6:9])
    s_serial = np.maximum(np.maximum(m, v), loc).sum(axis=0)
    o_overlap = np.maximum(np.maximum(m.sum(axis=0), v.sum(axis=0)), loc.sum(axis=0))
    clip = lambda x: np.minimum(np.maximum(x, floor), cap)  # noqa: E731
    one = ev.fused_block_time(*times, np.ones(n), floor, cap)
    np.testing.assert_allclose(one, clip(s_serial), rtol=1e-15)
    many = ev.fused_block_time(*times, np.full(n, 1e12), floor, cap)
    np.testing.assert_allclose(many, clip(o_overlap), rtol=1e-9)
    assert (ref >= floor).all() and (ref <= cap).all()
    more = ev.fused_block_time(*times, waves * 2.0, floor, cap)
    assert (more <= ref * (1 + 1e-15)).all()


@pytest.mark.parametrize("base", ["h100", "b200", "mi300x", "tpu-v1"])
def test_default_tiles_l2_bytes_are_the_rule(base):
    """The default tiles' kernel also gives the L2 bytes of the tiles it chose (from its candidates' cluster
    requests); the evaluator takes them where every tile is visible. To the bit what l2_request_bytes (the rule the
    evaluator applies to given tiles) gives on those tiles, over random chips (units, L2, local buffer, multicast
    clusters of 1 to 8 units) and a decode step's and a 4K prefill's operators; the vector operators' tiles (the
    kernel computes them once per shape) are tile_candidates' first candidate, to the bit."""
    from dse.hardware import Chips, load_chip
    from tests.test_evaluate_fast import workload
    rng = np.random.default_rng(RNG_SEED + 8)
    n = 300
    chips = Chips.from_base(load_chip(base), n, {
        "units": rng.integers(8, 300, n).astype(float), "l2": rng.choice([0.0, 2e6, 5e7, 2e8], n),
        "local_buffer": rng.choice([64e3, 228e3, 2e6], n), "l2_multicast": rng.choice([1.0, 2.0, 4.0, 8.0], n)})
    for name in ("decode", "prefill"):
        ops = ev.op_table(workload(name))
        c = ev._chip_columns(chips, ops)
        fpc = ev._by_format(c.fpc, ops)
        tm, tn, _, split, l2_bytes, _ = ev._tiles(c.im, c.inn, c.ik, c.buf, c.units, c.psum, c.acc, ops,
                                                  ev._tile_levels(c, fpc))
        c_m, c_n = tiling.ceil_div_core(ops.m, tm), tiling.ceil_div_core(ops.n, tn)
        partial = tiling.partial_sum_bytes(ops.m, ops.n, ops.batch, split)
        _same_bits(l2_bytes, ev._l2_request_bytes(ops, c_m, c_n, c.mcast, 1.0, partial))
        vector = np.flatnonzero(~ops.is_gemm)  # (their tiles: the first candidate; shared by operators of one shape)
        with jit.quiet():
            first = ev.tile_candidates(c.im, c.inn, c.ik, c.buf, c.units, c.psum, c.acc, ops.m[vector], ops.n[vector],
                                       ops.k[vector], ops.batch[vector], ops.emax[vector])[:3]
        for got, want in zip((tm[:, vector], tn[:, vector], split[:, vector]), first):
            _same_bits(got, np.broadcast_to(want, got.shape))


def test_default_tiles_kernel_vector_operators_of_one_shape():
    """The default tiles kernel computes a vector operator's tiles once per shape (M, N, K, batch, widest element)
    and copies them to the later operators of that shape: every operator's (T_M, T_N, split) must still be
    tile_candidates' first candidate for its own shape, to the bit, on random points and 12 operators drawn from 6
    shapes, each differing from the first in one field."""
    rng = np.random.default_rng(RNG_SEED + 14)
    rows = 257
    d = _random_chip_op(rng, rows)
    shapes = np.array([[64.0, 4096.0, 4096.0, 1.0, 2.0], [64.0, 4096.0, 4096.0, 1.0, 4.0],
                       [64.0, 4096.0, 4096.0, 8.0, 2.0], [64.0, 4096.0, 1024.0, 1.0, 2.0],
                       [256.0, 4096.0, 4096.0, 1.0, 2.0], [64.0, 1024.0, 4096.0, 1.0, 2.0]])
    pick = rng.integers(0, len(shapes), 12)
    pick[:6] = np.arange(6)
    op = np.zeros((12, 13))
    op[:, :5] = shapes[pick]
    op[:, 5:7] = 2.0  # ea, eb; is_gemm 0; bytes
    op[:, 8:11] = rng.choice([1e3, 1e6], (12, 3))
    point = np.array([d["im"], d["inn"], d["ik"], d["buf"], d["units"], d["l2"], np.zeros(rows), np.zeros(rows),
                      np.full(rows, 16.0), np.full(rows, 16.0), np.ones(rows), d["acc"]])
    rate = np.ones((12, rows))
    tm, tn, split, _ = ev._default_tiles_kernel(point, op, rate, ev._EVERY_POINT)
    for o in range(12):
        with jit.quiet():
            want = ev.tile_candidates(d["im"], d["inn"], d["ik"], d["buf"], d["units"], d["l2"], d["acc"],
                                      *op[o, :5])[:3]
        for got, w in zip((tm[:, o], tn[:, o], split[:, o]), want):
            _same_bits(got, w)


@pytest.mark.parametrize("ops", [7, 1])
def test_sustained_clock_meets_its_definition(ops):
    """dse.model.power.sustained_operating_point (compiled: _operating_points) on (points x operators) arrays: 1
    within TDP at the design clock; else the lower end of a 2^-steps bracket: the power there within TDP (or it is
    the floor, where the memory traffic stretches instead) and one bracket width above it over TDP (or it is 1).
    The powers are operator_power_core's, run by numpy here. (One operator per point compiles a kernel of its own,
    dse.model.jit.of_op.) Where no entry's memory traffic stretches, the stretches come back as one value over
    them (a read-only view), else an array of their own."""
    rng = np.random.default_rng(RNG_SEED + 2)
    rows = 400
    e_comp, e_mem = rng.uniform(0.01, 1.0, (rows, ops)), rng.choice([0.0, 0.05], (rows, ops))
    t_busy, t_clk = rng.uniform(1e-4, 1e-3, (rows, ops)), rng.uniform(1e-4, 1e-3, (rows, ops))
    t_mem = rng.uniform(0, 1e-3, (rows, ops))
    leak, clk = rng.uniform(10, 100, (rows, 1)), rng.uniform(10, 100, (rows, 1))
    law = power.ClockLaw(rng.uniform(0.6, 1.2, (rows, 1)), np.full((rows, 1), 0.6), 0.9, 0.3,
                         rng.random((rows, 1)) < 0.7)
    fields = (law.d, law.v_min, law.v_nom, law.v_th, law.v1, law.scaling)
    cols = (e_comp, e_mem, t_busy, t_clk, t_mem, leak, clk)
    p1 = power.operator_power_core(1.0, *cols, *fields)
    tdp = rng.uniform(0.3, 1.3, (rows, 1)) * p1.mean(axis=1, keepdims=True)
    r, stretch = power.sustained_operating_point(tdp, *cols, law)
    floor, steps = power.MIN_CLOCK_RATIO, power.BISECTION_STEPS
    hot = p1 > tdp
    assert hot.any() and (~hot).any()
    assert (r[~hot] == 1.0).all() and (stretch[~hot] == 1.0).all()
    width = (1.0 - floor) / 2 ** steps
    p_r = power.operator_power_core(r, *cols, *fields)
    p_up = power.operator_power_core(np.minimum(r + width, 1.0), *cols, *fields)
    assert ((p_r <= tdp) | (r == floor))[hot].all()
    assert ((p_up > tdp) | (r + width >= 1.0))[hot].all()
    assert ((r >= floor) & (r < 1.0))[hot].all()
    assert (stretch[hot & (r > floor)] == 1.0).all() and (stretch >= 1.0).all()
    # (no entry at the floor here: the stretches one value over the entries, a read-only view, not laid out)
    assert (r > floor).all() and stretch.shape == (rows, ops) and stretch.strides[0] == 0
    assert not stretch.flags.writeable
    # (a TDP a tenth of the design clock's power: entries at the floor, their traffic stretched, an array)
    r2, stretch2 = power.sustained_operating_point(0.1 * tdp, *cols, law)
    assert (r2 == floor).any() and (stretch2 > 1.0).any() and stretch2.strides[0] != 0
    assert (stretch2[r2 > floor] == 1.0).all() and (stretch2[p1 <= 0.1 * tdp] == 1.0).all()


def _brute_cluster(a_bytes, b_bytes, c_m, c_n, cluster):
    """The fewest bytes requested over every cluster shape a x b <= cluster (and the per-tile a = b = 1)."""
    c_m, c_n = max(c_m, 1.0), max(c_n, 1.0)
    costs = [a_bytes * np.ceil(c_n / b) + b_bytes * np.ceil(c_m / a)
             for a in range(1, int(cluster) + 1) for b in range(1, int(cluster) // a + 1)]
    return min(costs + [a_bytes * c_n + b_bytes * c_m])


def test_cluster_requests_is_the_cheapest_shape():
    rng = np.random.default_rng(RNG_SEED + 3)
    for _ in range(400):
        a_bytes, b_bytes = rng.choice([0.0, 1.0, 3e6, 8e7]), rng.choice([0.0, 1.0, 5e6, 1e8])
        c_m, c_n, cluster = float(rng.integers(0, 70)), float(rng.integers(0, 70)), float(rng.integers(1, 17))
        ra, rb = hierarchy.cluster_requests(a_bytes, b_bytes, c_m, c_n, cluster)
        assert a_bytes * ra + b_bytes * rb == _brute_cluster(a_bytes, b_bytes, c_m, c_n, cluster)


def test_block_reads_is_the_cheapest_block():
    """dse.model.tiling.block_reads: the concurrent block of a x b output tiles (a b <= U' units, a <= c_M, b <= c_N,
    both <= span) that reads the fewest bytes, found by trying every height here."""
    rng = np.random.default_rng(RNG_SEED + 4)
    for _ in range(400):
        a_bytes, b_bytes = rng.choice([1.0, 3e6, 8e7]), rng.choice([1.0, 5e6, 1e8])
        c_m, c_n = float(rng.integers(1, 300)), float(rng.integers(1, 300))
        units, split = float(rng.integers(2, 300)), float(rng.integers(1, 4))
        cap_a, cap_b = float(rng.integers(2, 40)), float(rng.integers(2, 40))
        span = float(rng.choice([np.inf, 4.0, 50.0]))
        ra, rb = tiling.block_reads(a_bytes, b_bytes, c_m, c_n, units, split, cap_a, cap_b, span)
        u = max(np.floor(units / split), 1.0)
        best = np.inf
        for a in range(1, int(min(u, c_m, span)) + 1):
            b = min(np.floor(u / a), c_n, span)
            best = min(best, a_bytes * min(np.ceil(c_n / b), cap_a) + b_bytes * min(np.ceil(c_m / a), cap_b))
        if u > 1.0:
            assert a_bytes * ra + b_bytes * rb == best


def test_vector_operators_read_once():
    """An operator without GEMM operands (a_bytes = b_bytes = 0) is read once below every cache."""
    ra, rb = tiling.cache_reads(0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 1.0, 1.0, 132.0, 1.0, 5e7, 228e3)
    assert (float(ra), float(rb)) == (1.0, 1.0)


@pytest.mark.parametrize("n_ops", [6, 1])
def test_cache_reads_kernel_equals_the_rule(n_ops):
    """The block's cache-read kernel (dse.model.evaluator._cache_reads_kernel: every operator's column in one loop)
    gives, to the bit, what dse.model.tiling.cache_reads gives (the rule run by numpy, as a generalized ufunc) on
    the same (points, operators) tile counts, splits and kept panels, per-point units, cache and local buffer, and
    per-operator GEMM operands; operators without GEMM operands (bytes 0) included, which read once (1, 1)."""
    rng = np.random.default_rng(RNG_SEED + 17)
    rows = 300
    c_m, c_n = (rng.integers(1, 300, (rows, n_ops)).astype(float) for _ in range(2))
    split = rng.choice([1.0, 2.0, 4.0, 13.0], (rows, n_ops))
    keep_a, keep_b = (rng.choice([0.0, 1.0], (rows, n_ops)) for _ in range(2))
    units, capacity = rng.integers(1, 265, (rows, 1)).astype(float), rng.choice([0.0, 4e6, 5e7, 2.6e8], (rows, 1))
    buf = rng.choice([0.0, 64e3, 228e3, 2e6], (rows, 1))
    a_bytes = rng.choice([0.0, 8e3, 2e6, 3e8], n_ops)
    b_bytes = np.where(a_bytes > 0, rng.choice([5e6, 3.3e7, 1e9], n_ops), 0.0)
    m, n, k = (rng.choice([1.0, 64.0, 4096.0, 12288.0], n_ops) for _ in range(3))
    ea, eb = rng.choice([1.0, 2.0], n_ops), rng.choice([0.5, 1.0, 2.0], n_ops)
    a_read = np.where(rng.random(n_ops) < 0.3, 0.0, a_bytes)
    if n_ops > 1:
        a_bytes[0] = b_bytes[0] = a_read[0] = 0.0  # (a vector operator)
    per_op = (a_bytes, b_bytes, m, n, k, ea, eb, a_read)
    want = tiling.cache_reads(a_bytes, b_bytes, m, n, k, ea, eb, c_m, c_n, units, split, capacity, buf, keep_a,
                              keep_b, a_read)
    itself = np.arange(float(rows))[:, None]
    got = ev._block_kernel(ev._cache_reads_kernel, (c_m, c_n, split, keep_a, keep_b), (units, capacity, buf, itself),
                           per_op)
    for g, w in zip(got, want):
        _same_bits(g, w)
    assert (np.concatenate(got) != 1.0).any()  # (the blocks re-read something)
    if n_ops > 1:
        assert (got[0][:, 0] == 1.0).all() and (got[1][:, 0] == 1.0).all()
    # a point given an earlier point alike (evaluator._alike_points) has that point's results, whatever its inputs
    alike = itself[:, 0].copy()
    later = np.flatnonzero(rng.random(rows) < 0.4)
    later = later[later > 0]
    for p in later:
        alike[p] = alike[rng.integers(0, p)]  # (the first alike: a point that has no earlier one alike)
    assert (alike[alike.astype(int)] == alike).all() and (alike != itself[:, 0]).sum() == later.size
    got = ev._block_kernel(ev._cache_reads_kernel, (c_m, c_n, split, keep_a, keep_b),
                           (units, capacity, buf, alike[:, None]), per_op)
    for g, w in zip(got, want):
        _same_bits(g, w[alike.astype(int)])


@pytest.mark.parametrize("n_ops,tk_per_op", [(6, False), (6, True), (1, False)])
def test_working_set_kernel_equals_the_largest_of_the_rule(n_ops, tk_per_op):
    """The block's working-set output (dse.model.evaluator._working_set, a kernel) is, to the bit, the largest of
    dse.model.tiling.tile_working_set (run by numpy, 2 slots) over each point's GEMM-like operators: the
    accumulator counted where the chip has no accumulator store (with one, what it does not hold:
    dse.model.tiling.accumulator_spill), a NaN tile giving NaN (as numpy's max), 0 for a
    point without a GEMM-like operator; T_K one per point (the default tiles) or per operator and point."""
    rng = np.random.default_rng(RNG_SEED + 23)
    rows = 200
    tm, tn = (rng.choice([16.0, 64.0, 128.0, 256.0], (rows, n_ops)) for _ in range(2))
    tm[5, 0] = np.nan
    tk = rng.choice([16.0, 64.0, 128.0], (rows, n_ops) if tk_per_op else (rows, 1))
    acc_store = rng.choice([0.0, 2e6, 32768.0], (rows, 1))  # (a 32 KiB store spills the larger tiles' accumulators)
    ea, eb = rng.choice([0.5, 1.0, 2.0], n_ops), rng.choice([0.5, 1.0, 2.0, 4.0], n_ops)
    is_gemm = np.where(rng.random(n_ops) < 0.6, 1.0, 0.0)
    is_gemm[0] = 1.0
    if n_ops > 1:
        is_gemm[1] = 0.0
    ops = SimpleNamespace(ea=ea, eb=eb, is_gemm=is_gemm)
    acc = np.where(acc_store > 0, 0.0, tiling.ACCUMULATOR_BYTES)
    each = np.broadcast_to(tiling.tile_working_set(tm, tn, tk, ea, acc, slots=2, b_bytes=eb)
                           + tiling.accumulator_spill(tm, tn, acc_store), (rows, n_ops))
    want = each[:, is_gemm > 0.5].max(axis=1)
    _same_bits(ev._working_set(tm, tn, tk, ops, acc_store), want)
    assert np.isnan(want[5]) and (want[~np.isnan(want)] > 0).all()
    none = SimpleNamespace(ea=ea, eb=eb, is_gemm=np.zeros(n_ops))
    _same_bits(ev._working_set(tm, tn, tk, none, acc_store), np.zeros(rows))


@pytest.mark.parametrize("n_ops", [16, 21, 1, 3])
def test_operator_sums_on_the_vector_lanes(n_ops):
    """The block's sums over operators (dse.model.evaluator._sum, a jit.sums_kernel whose additions LLVM may
    reorder): within 1e-15 of numpy's sum of x x count (math.fsum, exact, as the reference), NaN and infinities
    passed on as numpy passes them; each row summed alike whatever the rows around it (any row alone, or the rows
    reversed, gives its number to the bit); a row broadcast over the points summed once (one value: (1,)); (rows,
    1) values count once per operator."""
    import math
    rng = np.random.default_rng(RNG_SEED + 29)
    rows = 333
    x = rng.uniform(0.0, 3.0, (rows, n_ops)) * 10.0 ** rng.integers(-6, 7, (rows, n_ops))
    cnt = rng.choice([1.0, 36.0, 72.0, 0.0], n_ops)
    got = ev._sum(x, cnt)
    exact = np.array([math.fsum(v * w for v, w in zip(row, cnt)) for row in x])
    np.testing.assert_allclose(got, exact, rtol=1e-15, atol=0)
    for i in (0, 7, rows - 1):
        _same_bits(ev._sum(x[i:i + 1], cnt), got[i:i + 1])
    _same_bits(ev._sum(x[::-1], cnt), got[::-1])
    special = x.copy()
    special[3, 0], special[4, n_ops - 1], special[5, 0] = np.nan, np.inf, -np.inf
    if n_ops > 1:
        special[5, 1] = np.inf
    with np.errstate(invalid="ignore"):
        want = (special * cnt).sum(axis=1)
    _same_bits(np.isnan(ev._sum(special, cnt)), np.isnan(want))
    finite = ~np.isnan(want)
    assert (ev._sum(special, cnt)[finite & ~np.isfinite(want)] == want[finite & ~np.isfinite(want)]).all()
    row = np.broadcast_to(x[:1], (rows, n_ops))
    _same_bits(ev._sum(row, cnt), got[:1])  # (one value, laid over the points with the block's others)
    col = x[:, :1]
    np.testing.assert_allclose(ev._sum(col, cnt), col[:, 0] * cnt.sum(), rtol=1e-15)
    # a sum starts from +0: terms of -0.0 sum to +0.0 (IEEE 754: 0 + -0 = +0), one operator per point too
    _same_bits(ev._sum(np.full((3, n_ops), -0.0), np.full(n_ops, 2.0)), np.zeros(3))
    if n_ops > 1:
        _same_bits(ev._sum(np.full((3, n_ops), -0.0), np.ones(n_ops)), np.zeros(3))
    else:  # one operator counted once: its own values (-0.0 too), read-only, the caller's array left writable
        own = np.array([[-0.0], [1.5], [np.inf]])
        got = ev._sum(own, np.ones(1))
        _same_bits(got, own[:, 0])
        assert not got.flags.writeable and own.flags.writeable


def test_cache_folder_follows_every_model_source(tmp_path):
    """The kernels' cache folder is named by all of dse/model's sources: a change to a rule in one file gives a new
    folder even where the kernel that inlines it lives in another (numba checks the kernel's own file only)."""
    from pathlib import Path
    src = Path(jit.__file__).parent
    model = tmp_path / "model"
    model.mkdir()
    for f in src.glob("*.py"):
        (model / f.name).write_bytes(f.read_bytes())
    first = jit._cache_dir(model)
    assert Path(first).name.startswith("numba-") and Path(first).is_dir()
    assert jit._cache_dir(model) == first
    (model / "tiling.py").write_bytes((model / "tiling.py").read_bytes() + b"\n# changed\n")
    assert jit._cache_dir(model) != first


def test_build_lock_is_per_kernel():
    """A kernel's build lock keeps a second builder of the same kernel out (its cache files are written in two
    steps) and lets a builder of another kernel in (one lock for every kernel kept test workers waiting on each
    other's compiles). flock's locks belong to an open file, so a second open in this process stands for a second
    process. (Names of no kernel: a test worker building a real one does not get in the way.)"""
    fcntl = pytest.importorskip("fcntl")
    jit.compiler()  # (the cache folder, where the lock files are)

    def free(name):
        with open(jit._lock_path(name), "a+") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(other, fcntl.LOCK_UN)
            return True

    a, b = f"tests.lock-a-{os.getpid()}", f"tests.lock-b-{os.getpid()}"
    with jit._build_lock(a):
        assert not free(a)
        assert free(b)
    assert free(a)
    for name in (a, b):
        os.remove(jit._lock_path(name))


@jit.kernel
def _doubled(x):
    """A kernel of this file alone (its builds' locks are this file's tests'): ``x`` x 2, of any numba type."""
    return x * 2


def _doubled_now(x):
    """:func:`_doubled` as this module's callers call it: its first call replaces the name with numba's dispatcher."""
    return globals()["_doubled"](x)


def test_each_new_signature_of_a_kernel_is_built_under_its_lock(monkeypatch):
    """numba numbers a kernel's cached signatures from its index: two processes saving two signatures of one kernel
    at once can take the same number, and one then loads the other's code. So every build of a signature (compiled,
    or loaded from the cache), not the first call's alone, takes the kernel's lock; a call of known types takes
    none, and numba's build inside the first call's does not wait on the lock its thread holds."""
    name = f"{_doubled.__module__}.{_doubled.__qualname__}"
    taken = []
    real = jit._build_lock

    @contextlib.contextmanager
    def noted(n):
        with real(n):
            taken.append(n)
            yield
    monkeypatch.setattr(jit, "_build_lock", noted)
    # (types of this test's own: the kernel's first call, or a later signature where another test called it first)
    assert _doubled_now(np.float32(1.5)) == 3.0
    assert taken and set(taken) == {name}
    before = len(taken)
    assert _doubled_now(np.float32(2.5)) == 5.0  # (the same types: no build)
    assert len(taken) == before
    np.testing.assert_array_equal(_doubled_now(np.arange(3, dtype=np.int32)), [0, 2, 4])  # (a new signature)
    assert taken[before:] == [name]
    np.testing.assert_array_equal(_doubled_now(np.arange(4, dtype=np.int32)), [0, 2, 4, 6])
    assert taken[before:] == [name]


def test_a_new_signature_waits_for_the_kernels_lock_held_elsewhere():
    """Another process's build of a kernel (its lock held through an open file of its own, as flock's locks are)
    keeps a new signature's build waiting until it is done. (Nothing is timed: the build must not have finished
    while the lock is held, whatever the machine's speed, and finishes once it is released.)"""
    fcntl = pytest.importorskip("fcntl")
    assert _doubled_now(1.0) == 2.0  # (built: later types are later signatures)
    done = threading.Event()
    out = []

    def build():
        out.append(_doubled_now(np.int64(21)))  # (an integer: a signature of its own)
        done.set()
    with open(jit._lock_path(f"{_doubled.__module__}.{_doubled.__qualname__}"), "a+") as other:
        fcntl.flock(other, fcntl.LOCK_EX)
        worker = threading.Thread(target=build, daemon=True)
        worker.start()
        held = not done.wait(0.5)
        fcntl.flock(other, fcntl.LOCK_UN)
    worker.join(600)
    assert held, "a new signature was built while another process held the kernel's build lock"
    assert done.is_set() and out == [42]


#: :func:`test_two_processes_building_two_signatures_at_once_keep_each_its_own_code`'s builders: each builds the
#: kernel's first signature, then (both ready) one of its own, their saves to numba's cache interleaved the worst way
#: numba's code allows where nothing keeps them apart: both take a number from the index before either writes it,
#: a's index is written first and b's over it, a's code last. A builder whose process holds the kernel's build lock
#: waits for nothing (the other cannot be saving); the waits' cap (tests.scale.helpers) only stops a hung test.
_RACING_BUILDER = """
import os, sys
import numpy as np
work, me, other = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, work)
from numba.core import caching
from dse.model import jit
from tests.scale.helpers import wait_for as poll
import kmod
armed = False

def wait_for(name):
    if armed and not jit._holding.__dict__.get("names"):
        poll(lambda: os.path.exists(os.path.join(work, name)), name)

def mark(name):
    if armed:
        open(os.path.join(work, name), "w").close()

index, data = caching.IndexDataCacheFile._save_index, caching.IndexDataCacheFile._save_data

def save_index(self, overloads):  # (a number taken from the index as loaded: the other's too, then a's index first)
    mark("numbered-" + me)
    wait_for("numbered-" + other)
    if me == "b":
        wait_for("index-a")
    out = index(self, overloads)
    mark("index-" + me)
    return out

def save_data(self, name, payload):  # (a's code last)
    if me == "a":
        wait_for("data-b")
    out = data(self, name, payload)
    mark("data-" + me)
    return out
caching.IndexDataCacheFile._save_index, caching.IndexDataCacheFile._save_data = save_index, save_data
assert kmod.doubled(1.0) == 2.0
open(os.path.join(work, "ready-" + me), "w").close()
poll(lambda: os.path.exists(os.path.join(work, "ready-" + other)), "the other builder")
armed = True
kmod.doubled(np.int64(21) if me == "a" else np.arange(3.0))
"""


def _kernel_module(tmp_path, name: str, body: str) -> dict:
    """A module ``kmod`` in ``tmp_path`` with one kernel ``name(x)`` returning ``body``, and the environment of a
    fresh interpreter that imports it: dse from this tree, the kernels' cache in ``tmp_path`` (a fresh one)."""
    (tmp_path / "kmod.py").write_text(f"from dse.model import jit\n\n\n@jit.kernel\ndef {name}(x):\n"
                                      f"    return {body}\n")
    root = Path(jit.__file__).resolve().parents[2]
    return dict(os.environ, DSE_NUMBA_CACHE=str(tmp_path / "cache"),
                PYTHONPATH=os.pathsep.join([str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                                                          else [])))


def test_two_processes_building_two_signatures_at_once_keep_each_its_own_code(tmp_path):
    """Two processes (two test workers, a study's workers) build two new signatures of one kernel at once, their
    saves to numba's cache interleaved so that, unlocked, both take the same file number: a third process loading
    the signatures from the cache then ran one's code for the other (an int64 call ran the array code: "only
    0-dimensional arrays can be converted to Python scalars"; elsewhere a crash, or numbers of the wrong rule).
    With every build under the kernel's lock each signature keeps its own code."""
    pytest.importorskip("fcntl")
    env = _kernel_module(tmp_path, "doubled", "x * 2")
    builders = [subprocess.Popen([sys.executable, "-c", _RACING_BUILDER, str(tmp_path), me, other], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for me, other in (("a", "b"), ("b", "a"))]
    for b in builders:
        _, err = b.communicate(timeout=600)
        assert b.returncode == 0, err[-2000:]
    check = textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        import kmod
        print(kmod.doubled(np.int64(21)), kmod.doubled(np.arange(3.0)).tolist(), kmod.doubled(1.0))
    """)
    r = subprocess.run([sys.executable, "-c", check, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split(maxsplit=1) == ["42", "[0.0, 2.0, 4.0] 2.0\n"]


def test_numba_starts_up_before_a_first_kernel_takes_its_build_lock(tmp_path):
    """numba's start-up in a process (its registries' imports and typing tables, ~0.3 s) happens in jit.compiler(),
    before any kernel's build lock: a first kernel's lock is held for its own build only, so processes started
    together (a study's workers) do not load their first kernel one after another, each through numba's start-up
    (63 waits, up to 1.3 s, in the test suite's distributed tests). In a fresh interpreter, the first time numba
    loads its registries no build lock is held."""
    env = _kernel_module(tmp_path, "tripled", "x * 3")
    code = textwrap.dedent("""
        import sys
        sys.path.insert(0, sys.argv[1])
        from numba.core import cpu
        from dse.model import jit
        held, real = [], cpu.CPUContext.load_additional_registries
        def spy(self):
            held.append(sorted(getattr(jit._holding, "names", ())))
            return real(self)
        cpu.CPUContext.load_additional_registries = spy
        import kmod
        assert kmod.tripled(2.0) == 6.0
        print(held[0])
    """)
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


@pytest.mark.parametrize("name", ["tile_candidates", "choose_tile", "_tile_time", "_best_split", "padded_gemm_flops",
                                  "l2_operands", "l2_request_total"])
def test_evaluator_rules_are_marked(name):
    """The evaluator's per-element rules are numbers-and-arrays functions registered for kernels (calling one from
    Python runs the function as written)."""
    fn = getattr(ev, name)
    assert callable(fn) and fn.__module__ == "dse.model.evaluator"


def test_kernels_raise_no_numpy_warnings_even_where_numpy_raises():
    """The compiled kernels run outside np.errstate (dse.model.jit.quiet's docstring): numba's IEEE arithmetic sets
    no numpy warning, so an evaluation under np.errstate(all="raise") with warnings as errors runs through, over
    random designs that divide by 0 (designs that cannot run: infinite times; chips without a TDP; GEMM, decode,
    prefill and MoE, with fused attention blocks), and a kernel that divides 1 by 0 and takes sqrt(-1) leaves no
    flag that numpy's next operation would report."""
    import warnings
    from tests.test_evaluate_fast import random_points, workload
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            for wl in ("gemm", "decode", "prefill", "moe"):
                m = ev.evaluate_workload(random_points("h100", 40, seed=11, extra={"tdp": np.full(40, 60.0)}),
                                         workload(wl), breakdown=True)
                assert np.isinf(m.columns["time_s"]).any() or wl != "gemm"  # (some cannot run at 60 W)
            flat = np.array([1.0, -1.0])
            got = ev._sums_kernel(jit.points(flat / np.array([1.0, 1.0]), 2), np.array([1.0, 1.0]))
            assert got.tolist() == [0.0]
            bad = jit.compiler().njit(error_model="numpy")(lambda a, b: (a / b, np.sqrt(a - 2.0 * a)))
            q, r = bad(1.0, 0.0)
            assert np.isinf(q) and np.isnan(r)
            assert (np.ones(3) * 2.0).tolist() == [2.0] * 3  # (numpy's next operation: no stale flag reported)


def _first_chunk_sum(xs):
    c = jit.chunk(xs, 2, 5)
    return c[0].sum() + c[1] + c[2].sum()


def test_a_chunk_of_a_kernel_s_arguments_is_views_and_numbers():
    """jit.chunk: points start .. end of each array of a kernel's arguments (a view, nothing copied) and each
    number itself, in Python and in a compiled kernel (where it is written out for the tuple's types)."""
    a, b = np.arange(10.0), 2.0 * np.arange(10.0)
    got = jit.chunk((a, 3.5, b), 2, 5)
    assert got[0].tolist() == [2.0, 3.0, 4.0] and got[1] == 3.5 and got[2].tolist() == [4.0, 6.0, 8.0]
    assert np.shares_memory(got[0], a) and jit.chunk((a,), 0, 3)[0].tolist() == [0.0, 1.0, 2.0]
    compiled = jit.compiler().njit(**jit.OPTIONS)(_first_chunk_sum)
    assert compiled((a, 3.5, b)) == _first_chunk_sum((a, 3.5, b)) == 9.0 + 3.5 + 18.0
