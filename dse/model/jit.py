"""Compiled rules: the model's per-element rules, written once, run by numpy and by numba (issue 20).

A rule the evaluator applies to every (point, operator) element is written once as a plain Python function of
numbers (arithmetic, ``np.floor``, ``np.sqrt`` ... and the selects below; no ``with`` blocks), marked
:func:`rule`:

* called from Python it is the function as written (numpy arrays broadcast through it, scalars give scalars):
  tests, the CP-SAT data steps and the what-if call it so;
* called from a compiled kernel (:func:`kernel`, a loop over points), numba compiles the same source for
  numbers, inlined into the loop;
* :func:`elementwise` turns a kernel of numbers into a numpy generalized ufunc over broadcast arrays (for rules
  with loops of their own: the L2 cluster's shapes, the blocks of output tiles);
* :func:`staggered` holds a kernel's results, one row each, at different offsets in their memory pages (loops
  that store to arrays at the same page offset as they load from run several times slower);
* :func:`points` lays out a kernel's per-point argument (a view where it can, read-only always: one signature).

Rules select with :func:`where`, :func:`maximum` and :func:`minimum`: numpy's own functions in Python; in kernels
one ``select`` instruction each (numba's ``np.where`` of numbers allocates a 0-d array, 160 ns; its
``np.maximum`` branches), so that a loop over points has no branch and LLVM runs it on the CPU's vector lanes
(the default tiles' candidates: 1.8 ns per point instead of 33); :func:`fmax` and :func:`nan_to_num` are built
from them, and :func:`sqrt` is LLVM's sqrt intrinsic in kernels. Division follows numpy (``error_model="numpy"``:
x / 0 = inf, 0 / 0 = nan, no exception) and NaN propagates as in numpy, so a compiled rule gives numpy's
numbers to the bit (tests/model/test_jit.py).

numba is imported when the first kernel is built, not with dse (``dse validate`` loads it: it evaluates one design
to check a study's terms; so does ``dse.model.area.package_area``, a kernel since issue 20's third step). Kernels are
cached on disk (``cache=True``) in a folder named by a digest of dse/model's sources (:func:`_cache_dir`): the
first run after a change compiles them (about a minute for a study; :func:`announce_compiling` says so first),
later ones load them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import tempfile
import threading
from pathlib import Path

import numpy as np

__all__ = ["OPTIONS", "LLVM_OPTIONS", "announce_compiling", "rule", "kernel", "sums_kernel", "elementwise",
           "overload_numbers", "staggered", "SCRATCH_ROW", "where", "maximum", "minimum", "sqrt", "fmax",
           "nan_to_num", "points", "one_valued", "one_over", "all_alike", "number_or_points", "numbers_or_points",
           "filled", "distinct", "sets_alike", "laid_over", "rows_laid_over", "set_of", "of_op", "chunk",
           "op_count", "is_integer", "is_array", "quiet", "compiler"]

#: numba options of every compiled rule: numpy's division semantics
OPTIONS = {"error_model": "numpy"}
#: LLVM options set when numba is loaded (process-wide; this file's digest names the cache, so a change recompiles).
#: A loop that stores many results, each to its own row of a jit.staggered array, needs LLVM to check at run time,
#: once before the loop, that the rows and the inputs do not overlap: one check per pair of pointers. Past
#: LLVM's default of 128 checks the loop ran one point at a time, and kernels stored 4 or 5 results a pass, each
#: pass loading the inputs again; with the limit raised, a kernel of one operator per point stores all its results
#: in one pass on the vector lanes (a loop of 8 inputs and 12 results, 5,000 points: 3.9 -> 2.2 ns a point; the
#: operating points' energies of 100,000 GEMM points 2.3 -> 1.3 ms) (issue 20, twentieth step). Loops over a point's
#: operators keep their passes: there the checks run once per point (a decode step's traffic in one pass: 18 ms
#: against 12.5-13.4 in three).
LLVM_OPTIONS = ("-vectorize-memory-check-threshold=65536",)

_rules: list = []  # (function, inline) marked before numba was loaded
_overloads: list = []  # (python function, numba implementation) likewise
_numba = None  # the numba module, once loaded
_log = logging.getLogger(__name__)


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


def compiler():
    """The numba module, loaded on first use with the kernels' cache folder and every rule registered."""
    global _numba
    if _numba is not None:
        return _numba
    folder = _cache_dir()
    os.environ["NUMBA_CACHE_DIR"] = folder
    announce_compiling(folder)
    import numba
    from numba.extending import overload

    numba.core.config.reload_config()  # (numba loaded earlier by another package reads NUMBA_CACHE_DIR again)
    import llvmlite.binding as llvm
    for option in LLVM_OPTIONS:  # (LLVM 22 ignores one it does not know: the same kernels, slower)
        llvm.set_option("dse", option)
    _numba = numba
    _register_selects(numba)
    for py_fn, impl in _overloads:
        overload(py_fn, jit_options=OPTIONS)(impl)
    for fn, inline in _rules:
        _register_rule(fn, inline)
    # numba's own start-up (its registries' imports and typing tables, ~0.3 s once a process), here and not in the
    # first kernel's build, under its lock: a study's workers, started together, loaded their first kernel one
    # after another, each holding the lock through it (the test suite's distributed tests: 63 waits, up to 1.3 s)
    from numba.core.registry import cpu_target
    cpu_target.target_context.refresh()
    return numba


def announce_compiling(folder: str) -> bool:
    """Say (INFO on this module's logger; the CLI prints it) that the kernels are about to be compiled, where
    ``folder``, their cache, holds none yet: the first run after an install or a change of dse/model compiles
    them for ~1 minute (the default study: 72 s instead of ~9 on the 2-core machine of the README's benchmarks)
    before its first line of progress. True where it said so."""
    for _, _, files in os.walk(folder):
        if any(f.endswith(".nbi") for f in files):  # (numba's index of a kernel's compiled signatures)
            return False
    _log.info("compiling the model's kernels for this machine: about a minute, once after an install or an "
              "update of dse (they are kept in %s)", folder)
    return True


def _register_rule(fn, inline: str) -> None:
    from numba.extending import register_jitable
    register_jitable(inline=inline, **OPTIONS)(fn)


def rule(fn=None, *, loops: bool = False):
    """Mark a per-element rule: unchanged for Python, compiled from the same source inside kernels.

    A rule is inlined into its caller in numba's IR (``inline="always"``): LLVM inlines small functions only, and a
    loop over points that calls a function stays one point at a time (33 ns instead of 1.8 per point for the
    default tiles' candidates). ``loops=True`` for a rule with a loop of its own (numba's IR inlining does not
    take loops with ``continue``): compiled as a function, LLVM inlines it where it pays."""
    def mark(f):
        inline = "never" if loops else "always"
        if _numba is None:
            _rules.append((f, inline))
        else:
            _register_rule(f, inline)
        return f
    return mark if fn is None else mark(fn)


def overload_numbers(py_fn):
    """Register the numba version of a rule whose Python body handles arrays of any dtype in a way numba cannot
    compile (``np.result_type``): the decorated function returns the implementation for numba's argument types."""
    def register(impl_for_types):
        if _numba is None:
            _overloads.append((py_fn, impl_for_types))
        else:
            from numba.extending import overload
            overload(py_fn, jit_options=OPTIONS)(impl_for_types)
        return impl_for_types
    return register


def _lock_path(name: str) -> str:
    """The lock file of kernel ``name`` (its module and qualified name) in the kernels' cache folder."""
    return os.path.join(os.environ["NUMBA_CACHE_DIR"], f".build-{name}.lock")


#: the build locks (kernel names) this thread holds: numba's compile inside a first call's build (under the lock
#: already) does not wait on the lock it holds (flock's locks belong to an open file: a second open would)
_holding = threading.local()


@contextlib.contextmanager
def _build_lock(name: str):
    """One process at a time builds (compiles, or loads) kernel ``name``, whatever the signature: numba writes a
    kernel's cache index and then the code of a signature in a file it numbers from the index, so two processes
    saving two signatures at once can both take the same number, and a process then loads one signature's code
    for the other's (seen here as a segmentation fault with two pytest workers on a fresh cache). An advisory
    lock on a file of the kernel's own in the cache folder (POSIX; elsewhere no lock): processes building
    different kernels do not wait for each other (one lock for every kernel kept a test worker waiting while the
    other compiled: on a fresh cache, tests/model and the evaluator's tests on two workers waited 60 s in all and
    ran 93-95 s; with a lock per kernel 24 s and 78 s). Taken again by the thread that holds it: passes."""
    compiler()
    held = _holding.__dict__.setdefault("names", set())
    if name in held:
        yield
        return
    try:
        import fcntl
        handle = open(_lock_path(name), "a+")
    except (ImportError, OSError):
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held.add(name)
        try:
            yield
        finally:
            held.discard(name)
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compiles_locked(dispatcher, name: str):
    """``dispatcher`` (numba's) with each new signature's build (numba's ``_compile_for_args``: compiled, or loaded
    from the cache; a call of known types never gets there) under :func:`_build_lock`, as the first call's is:
    a search's or a test's later calls bring signatures of their own (numbers or arrays of the points, one
    operator or several: a kernel had 12 in the tests), compiled while other processes compile theirs."""
    compile_for_args = getattr(dispatcher, "_compile_for_args", None)
    if compile_for_args is None:  # (a generalized ufunc: compiled for its one signature when built)
        return dispatcher

    def locked(*args, **kws):
        with _build_lock(name):
            return compile_for_args(*args, **kws)
    dispatcher._compile_for_args = locked
    return dispatcher


def _on_first_call(fn, build):
    """``fn`` compiled by ``build(fn)`` on its first call, which (compiling it, or loading it from the cache) runs
    under :func:`_build_lock`, as each later call of new types does (:func:`_compiles_locked`)."""
    compiled = None

    @functools.wraps(fn)
    def call(*args):
        nonlocal compiled
        if compiled is None:
            name = f"{fn.__module__}.{fn.__qualname__}"
            with _build_lock(name):
                built = _compiles_locked(build(fn), name)
                out = built(*args)  # (numba's njit compiles here, at the first call with these types)
            compiled = built
            if fn.__globals__.get(fn.__name__) is call:  # (its module's callers call it directly from now on:
                fn.__globals__[fn.__name__] = built     # ~1 us less a call, issue 20's N = 1)
            return out
        return compiled(*args)
    return call


def kernel(fn):
    """A compiled loop over arrays (numba ``njit``, cached on disk) that calls :func:`rule` functions. Built on its
    first call (compiled, or loaded from the cache), under :func:`_build_lock`."""
    return _on_first_call(fn, lambda f: compiler().njit(cache=True, **OPTIONS)(f))


def sums_kernel(fn):
    """A :func:`kernel` whose floating-point additions LLVM may reassociate (numba's fastmath flag ``reassoc`` and no
    other), so that a sum along a row runs on the vector lanes, in an order of its own that depends only on the
    row's length: every row of a length is summed alike, so N rows give each row the number it gets alone (the
    same loop, the same bits). For sums only: no rule belongs in one (a rule's arithmetic keeps numpy's order)."""
    return _on_first_call(fn, lambda f: compiler().njit(cache=True, fastmath={"reassoc"}, **OPTIONS)(f))


def elementwise(n_in: int, n_out: int):
    """A generalized ufunc of ``n_in`` float64 inputs and ``n_out`` float64 outputs, all scalar elements
    (layout ``(),()...->(),()...``): the decorated kernel ``f(x1, ..., xn, out1, ..., outm)`` writes
    ``out[0]``. numpy broadcasts the inputs (bools and ints are cast to float64) and allocates the outputs.
    Built on its first call, under :func:`_build_lock`."""
    sig = "void(" + ", ".join(["float64"] * n_in + ["float64[:]"] * n_out) + ")"
    layout = ",".join(["()"] * n_in) + "->" + ",".join(["()"] * n_out)
    # (numba compiles a ufunc's kernel with numpy's error model: no option to give)
    return lambda fn: _on_first_call(fn, lambda f: compiler().guvectorize([sig], layout, nopython=True,
                                                                            cache=True)(f))


#: bytes one staggered array starts further into a 4 KiB page than the one before (:func:`staggered`)
STAGGER_BYTES = 320


@rule
def staggered(count, n):
    """A (count, >= n) float array whose rows start :data:`STAGGER_BYTES` apart modulo 4 KiB, for a kernel's
    results: store result k of element i as ``out[k, i]``. Arrays allocated one after another start at the same
    offset in their pages, and a loop that stores to one while it loads from another at the same offset stalls
    (4K aliasing: the CPU matches loads to earlier stores by the address's low 12 bits): a loop over 131,072
    points storing four results took 1.56 ms so, 0.067 ms staggered. Stored as ``out[k, i]`` (one array, not a
    view per result), LLVM also sees that the stores go to one array and runs the loop on the vector lanes (the
    operating point's 7 results: 1.45 ns per element; 5.2 stored through views of the rows) (issue 20)."""
    step = STAGGER_BYTES // 8
    stride = n + (step - n) % 512  # (a multiple of 512 doubles, 4 KiB, plus the step)
    return np.empty((count, stride))


#: the length (doubles) of the rows of a kernel's scratch for one point's operators, ``np.empty((rows,
#: SCRATCH_ROW))`` inside the kernel (up to SCRATCH_ROW operators a point; rows STAGGER_BYTES apart modulo 4 KiB, as
#: :func:`staggered`'s). The rows of a jit.staggered array lie a stride apart that LLVM learns only at run time, so a
#: loop that stores to several of them is checked, before it runs, against each array it loads (one check per
#: pair: 88 before the tail kernel's loop over a point's times), and the block kernels enter such loops once per
#: point, each ~16 operators long: most of their time went to the checks. Rows a constant apart are one object to
#: LLVM, checked once against each input: a decode block (8,192 points x 16 operators) 2.5 -> 2.1 ms in the tail
#: kernel, 1.14 -> 0.96 ms in the clock kernel, the same bits (issue 20).
SCRATCH_ROW = 4096 + STAGGER_BYTES // 8


def where(condition, x, y):
    """``np.where`` for rules: arrays broadcast in Python; in kernels one ``select`` of two numbers."""
    return np.where(condition, x, y)


def maximum(a, b):
    """``np.maximum`` for rules: in Python itself; in kernels a compare and a ``select``."""
    return np.maximum(a, b)


def minimum(a, b):
    """``np.minimum`` for rules (see :func:`maximum`)."""
    return np.minimum(a, b)


def sqrt(x):
    """``np.sqrt`` for rules: in kernels LLVM's ``llvm.sqrt`` (IEEE's correctly rounded root, as libm's, NaN below
    0) rather than a call to libm's ``sqrt``, which may set ``errno`` and so keeps a loop off the vector lanes."""
    return np.sqrt(x)


#: the largest finite float (np.nan_to_num's stand-in for an infinity)
_FLOAT_MAX = float(np.finfo(np.float64).max)


@rule
def fmax(a, b):
    """``np.fmax`` for rules: the larger, a NaN ignored (NaN where both are). (Of -0.0 and 0.0 numpy's own loops
    give either, its vector loop the second and its scalar loop the first; here the second.)"""
    return where((a > b) | (b != b), a, b)


@rule
def nan_to_num(x, nan):
    """``np.nan_to_num(x, nan=nan)`` for rules: NaN -> ``nan``, +-inf -> +-the largest finite float."""
    return where(x != x, nan, where(x == np.inf, _FLOAT_MAX, where(x == -np.inf, -_FLOAT_MAX, x)))


def _register_selects(numba) -> None:
    """The kernels' versions of :func:`where`, :func:`maximum` and :func:`minimum` (LLVM ``select`` instructions)
    and of :func:`sqrt` (LLVM's ``sqrt`` intrinsic)."""
    from numba import types
    from numba.extending import intrinsic, overload

    @intrinsic
    def select(typingctx, condition, x, y):
        if not isinstance(condition, types.Boolean):
            return None

        def codegen(context, builder, signature, args):
            a = context.cast(builder, args[1], signature.args[1], types.float64)
            b = context.cast(builder, args[2], signature.args[2], types.float64)
            return builder.select(args[0], a, b)
        return types.float64(condition, x, y), codegen

    def extremum(op: str):
        """numpy's maximum (op ">") / minimum ("<") of two numbers as a select: ``a`` where a op b or a is NaN,
        else ``b`` (NaN where either is; ``b`` on a tie, as numpy: maximum(-0.0, 0.0) = 0.0)."""
        @intrinsic
        def pick(typingctx, a, b):
            def codegen(context, builder, signature, args):
                x = context.cast(builder, args[0], signature.args[0], types.float64)
                y = context.cast(builder, args[1], signature.args[1], types.float64)
                first = builder.or_(builder.fcmp_ordered(op, x, y), builder.fcmp_unordered("uno", x, x))
                return builder.select(first, x, y)
            return types.float64(a, b), codegen
        return pick

    @intrinsic
    def root(typingctx, x):
        def codegen(context, builder, signature, args):
            value = context.cast(builder, args[0], signature.args[0], types.float64)
            return builder.call(builder.module.declare_intrinsic("llvm.sqrt", [value.type]), [value])
        return types.float64(x), codegen

    high, low = extremum(">"), extremum("<")
    overload(sqrt, jit_options=OPTIONS)(lambda x: lambda x: root(x))
    overload(where, jit_options=OPTIONS)(lambda condition, x, y: lambda condition, x, y: select(condition, x, y))
    overload(maximum, jit_options=OPTIONS)(lambda a, b: lambda a, b: high(a, b))
    overload(minimum, jit_options=OPTIONS)(lambda a, b: lambda a, b: low(a, b))


def is_integer(t) -> bool:
    """numba type ``t`` is an integer or a boolean (for :func:`overload_numbers` implementations)."""
    from numba import types
    return isinstance(t, (types.Integer, types.Boolean))


def is_array(t) -> bool:
    """numba type ``t`` is an array (for :func:`overload_numbers` implementations)."""
    from numba import types
    return isinstance(t, types.Array)


#: the float dtype kernels take (``x.dtype is FLOAT``: a quick check; numpy's float arrays share this instance, and
#: an equal dtype that is another instance takes the slower path)
FLOAT = np.dtype(float)


def points(x, n: int) -> np.ndarray:
    """``x`` (a number, or an array of 1 or ``n`` values) as a kernel's argument: a C-ordered float array of ``n``
    values, a view where ``x`` is one (no copy), else filled; always read-only (numba compiles a read-only
    array apart from a writable one: one signature per kernel). (np.broadcast_to costs ~1.5 us a call.)"""
    a = x if type(x) is np.ndarray and x.dtype is FLOAT else np.asarray(x, dtype=float)
    if a.size == n and a.flags.c_contiguous:
        a = a.reshape(n)  # (a view: the caller's array keeps its flags)
        a.setflags(write=False)  # (~0.2 us less a call than reading and setting a.flags, ~120 calls at N = 1)
        return a
    if a.size == 1 or (a.ndim == 1 and a.size == n and a.strides[0] == 0):  # (one value over them: shared)
        return filled(a.reshape(-1)[0], n)
    else:
        a = np.ascontiguousarray(np.broadcast_to(a.reshape(-1), (n,)))
    a = a.view()
    a.setflags(write=False)
    return a


#: :func:`one_over`'s views, shared: (the value's bytes, its dtype, the points) -> the read-only view
_ONE_OVER: dict = {}
#: the most views :func:`one_over` keeps (it starts over past that)
ONE_OVER_VIEWS = 4096


def one_over(a: np.ndarray, n: int) -> np.ndarray:
    """The one value of ``a`` (an array of one value) laid over ``n`` points as a read-only view (stride 0) of a
    read-only copy of it, as dse.hardware.chips holds a figure every point shares: np.broadcast_to's, made directly
    and kept (the same value over as many points shares its view, which no caller can make writable: its memory is
    read-only). Most are a chip's constants, the same call after call: ~0.5 us a call, ~1.6 made (each
    Chips.from_base made ~180, a GEMM evaluation of 100,000 points ~50) (issue 20)."""
    if a.size != 1:
        raise ValueError(f"one_over lays one value over the points, got {a.size}")
    if a.dtype.hasobject:  # (no bytes to know the value by)
        key = None
    else:
        key = (a.tobytes(), a.dtype, n)
        v = _ONE_OVER.get(key)
        if v is not None:
            return v
    c = a.reshape(1).copy()
    c.flags.writeable = False
    v = np.ndarray((n,), dtype=c.dtype, buffer=c, strides=(0,))
    if key is not None:
        if len(_ONE_OVER) >= ONE_OVER_VIEWS:
            _ONE_OVER.clear()
        _ONE_OVER[key] = v
    return v


def all_alike(values: np.ndarray) -> bool:
    """Every one of ``values`` (a C-ordered float array, not empty) has the bits of the first (0.0 and -0.0 apart,
    a NaN alike with itself): one value, read from them (:func:`one_valued` knows it from the layout alone)."""
    bits = values.reshape(-1).view(np.int64)
    return bool(bits.size) and bits[0] == bits[-1] and bool((bits == bits[0]).all())


def one_valued(x) -> bool:
    """``x`` (a number or an array, points along its first axis) has one value for every point by its layout: a
    number, an array of one value, or one value laid over the points with a stride of 0 (as dse.hardware.chips holds
    a figure no point changes)."""
    if type(x) is not np.ndarray:
        x = np.asarray(x)
    return x.ndim == 0 or x.size == 1 or x.strides[0] == 0


def number_or_points(x, n: int):
    """``x`` as a kernel's argument of ``n`` points read with :func:`of_op`: one number where every point has the
    same value (:func:`one_valued`), so that the kernel's loop loads only what varies and keeps the number in a
    register; else :func:`points`. (Each pattern of numbers and arrays is a signature of its own.) A group of one
    (:func:`numbers_or_points`)."""
    return numbers_or_points((x,), n)[0]


def numbers_or_points(xs, n: int) -> tuple:
    """A group of a kernel's per-point arguments ``xs`` read with :func:`of_op`: numbers where every one of them has
    one value for every point (:func:`one_valued`: a chip's technology figures, the links' bytes of one chip), so
    that the kernel's loop loads only what varies; else all of them as :func:`points`. One decision for the group,
    not one per argument: two signatures of the kernel per group (the package's kernel, its inputs each a number
    or an array, compiled 43 in the test suite). A loop of one operator per point that streams ~55 arrays through
    main memory runs at ~15 GB/s where one of ~20 runs at ~65: each array a kernel does not read is time
    (issue 20)."""
    if all(one_valued(x) for x in xs):
        return tuple(float(np.asarray(x).item(0)) for x in xs)
    return tuple(points(x, n) for x in xs)


#: arrays of one value, or one row, over the points, shared (:func:`filled`): (the value's bytes, its shape, the
#: array's shape) -> read-only array
_FILLED: dict = {}
#: the most bytes :func:`filled` keeps (it starts over past that)
FILLED_BYTES = 64 << 20
#: the largest array :func:`filled` keeps: a block's (dse.model.evaluator._BLOCK_ELEMENTS); a larger one is made at
#: each call (arrays of all of a million points, 8 MB each, pushed the block's arrays out of the store at every
#: call, and a GEMM evaluation of a million points ran 1.8x slower)
FILLED_ARRAY_BYTES = 1 << 20
_filled_bytes = 0


def filled(value, shape) -> np.ndarray:
    """A read-only float array of ``shape`` holding ``value`` (a number, or a row: the last axis) everywhere, shared
    by every caller that asks for the same (values to the bit, shape). A kernel takes an input that is one value,
    or one row of operators, for all points as an array over them, and most such inputs are a chip's or a
    workload's constants, the same block after block and call after call: a GEMM evaluation of 100,000 points
    filled ~60 of them (np.full, ~4% of its time), a decode step copied 9 rows of operators per block (~3%)
    (issue 20). Up to :data:`FILLED_BYTES` are kept; an array over :data:`FILLED_ARRAY_BYTES` is made, not kept."""
    global _filled_bytes
    v = np.asarray(value, dtype=float)
    key = (v.tobytes(), v.shape, shape)
    a = _FILLED.get(key)
    if a is None:
        a = np.empty(shape)
        a[...] = v
        a.flags.writeable = False
        if a.nbytes <= FILLED_ARRAY_BYTES:
            if _filled_bytes + a.nbytes > FILLED_BYTES:
                _FILLED.clear()
                _filled_bytes = 0
            _FILLED[key] = a
            _filled_bytes += a.nbytes
    return a


#: points :func:`distinct` samples to judge whether enough points repeat
DISTINCT_SAMPLE = 1024


def distinct(keys, most: int | None = None):
    """The points that differ: ``keys`` one row of n values per input (a (k, n) array, or a sequence of k (n,)
    arrays of floats or integers: no stacked copy is made of them). Returns (first, inverse): the first point of
    each distinct column, in order, and each point's distinct column, so that ``keys[:, first][:, inverse]`` is
    ``keys``. Columns are alike when their bits are (0.0 and -0.0 apart, a NaN like itself), so a rule of these
    inputs gives a point the numbers of its first point, to the bit. A pass of open addressing over the columns
    (each point hashed, compared with the points of its slot), or, where some inputs are small whole numbers, a
    table of their codes (:func:`_coded_distinct_kernel`).

    ``most``: None where more than ``most`` columns differ (a caller that gains only from fewer). Judged first on
    :data:`DISTINCT_SAMPLE` points spread over the n: k columns drawn from U distinct ones repeat about k^2 / 2U
    times, so fewer repeats than k^2 / (2 most) mean more than ``most`` distinct (likely), and the pass over all
    points is not made; else the pass stops once more than ``most`` are found. (All distinct, 100,000 points of
    three inputs: 0.5 ms for the pass, 0.006 for the sample.)"""
    bits, floats = _key_bits(keys)
    n = bits[0].size
    if most is None:
        most = n
    elif n > 2 * DISTINCT_SAMPLE:
        step = n // DISTINCT_SAMPLE
        sample, _ = _key_bits([b[::step][:DISTINCT_SAMPLE] for b in bits])
        repeats = DISTINCT_SAMPLE - _distinct_kernel(sample, floats.size, DISTINCT_SAMPLE)[0].size
        if 2.0 * repeats * most < DISTINCT_SAMPLE ** 2:
            return None
    first, inverse, coded = _coded_distinct_kernel(bits, floats, most)
    if not coded:
        first, inverse = _distinct_kernel(bits, floats.size, most)
    return None if first.size > most else (first, inverse)


def _key_bits(keys) -> tuple:
    """:func:`distinct`'s keys as its kernels read them: a tuple of the inputs' bits, each a contiguous read-only
    (n,) int64 view (a (k, n) array among them gives its k rows), and (k,) booleans, true where an input's bits are
    a float's (false: int64 integers). Stacking them into one (k, n) array copied them: 100,000 GEMM points ~0.4 ms
    of the call's ~11 (issue 20). The tuple is padded to a power of two with its last row, which the kernels never
    read (they read the booleans' k): a tuple of k arrays is a compiled signature of its own for each k, and the
    test suite's fresh cache compiled 23 and 19 of the two kernels, ~1 s each; padded, one per power of two. (The
    kernels loop over the tuple's length, known when compiled, and stop at k: a loop to k itself, known only when
    run, took 100,000 points 3-15% longer.)"""
    rows = []
    for x in (keys,) if type(keys) is np.ndarray else keys:
        x = np.asarray(x)
        rows.extend(x if x.ndim == 2 else (x,))
    if not rows:
        raise ValueError("distinct takes at least one input")
    varying = [x for x in rows if not (x.ndim == 1 and x.size > 1 and x.strides[0] == 0)]
    out, floats = [], []
    for x in varying or rows[:1]:  # (an input of one value laid over the points tells none apart)
        x = np.ascontiguousarray(x)
        b = (x if x.dtype == np.int64 else x.astype(FLOAT, copy=False)).view(np.int64).reshape(-1)
        b.flags.writeable = False
        out.append(b)
        floats.append(x.dtype != np.int64)
    size = 1
    while size < len(out):
        size *= 2
    return tuple(out + out[-1:] * (size - len(out))), np.array(floats)


def sets_alike(varying: list, n: int):
    """(first, inverse) of :func:`distinct` over the inputs of ``n`` points that vary (a list of (n,) arrays), where
    a rule of them is worth computing once per set: one set where none varies, None where fewer than half the points
    repeat (``most`` = n // 2). The package's and the cost's sets of points alike (dse.model.area, dse.model.cost)."""
    if not varying:
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    return distinct(varying, most=n // 2)


#: the most codes :func:`_coded_distinct_kernel` numbers the points' sets by (a table of int32: 256 KiB)
DISTINCT_CODES = 1 << 16
#: the bits of -0.0 as an int64 (a whole number, but not 0.0's bits)
_NEGATIVE_ZERO_BITS = -(1 << 63)
#: whole numbers :func:`_coded_distinct_kernel` codes lie strictly within +-2^52 (a float holds each, exactly)
_WHOLE_LIMIT = 1 << 52


@kernel
def _coded_distinct_kernel(bits, floats, most):
    """:func:`distinct` where some inputs are small whole numbers (the chips' choices: units, stacks, dies; the
    tiles' classes): each such input's values less its least, their product with the others' spans a code below
    :data:`DISTINCT_CODES`, and a table indexed by the codes numbers the sets as they are first met, without
    hashing the points or comparing them (100,000 GEMM points: of 1,864 sets 0.39 -> 0.30 ms alone, ~0.55 ->
    ~0.40 in place; of 233 classes 0.19 -> 0.14 alone, ~0.27 -> ~0.17 in place; issue 20). The other inputs (a
    fraction, -0.0, NaN, inf, beyond 2^52, whole numbers too far apart) are compared with the first point of the
    set the codes give, as the table of hashes compares: a point whose other input differs ends the pass,
    unanswered. Returns (first, inverse, answered): the answer of :func:`_distinct_kernel` (the same numbering,
    the same stop past ``most``) where answered is true. ``bits`` as :func:`_key_bits` gives them: its first k
    (``floats``' length) are read."""
    k, n = floats.size, bits[0].size
    low, stride, other = np.zeros(k, np.int64), np.zeros(k, np.int64), np.ones(k, np.bool_)
    size = 1
    for j in range(len(bits)):  # (each input's least and greatest value, where all are whole numbers below 2^52)
        if j >= k:
            break
        row = bits[j]
        broken, lo, hi = 0, np.int64(_WHOLE_LIMIT), np.int64(-_WHOLE_LIMIT)
        if floats[j]:  # (whole floats as int64, their least and greatest as integers: loops on the vector lanes)
            v = row.view(np.float64)
            for p in range(n):
                x = v[p]
                broken += (x != np.floor(x)) | (np.abs(x) >= _WHOLE_LIMIT) | (row[p] == _NEGATIVE_ZERO_BITS)
            if broken == 0:
                for p in range(n):
                    w = np.int64(v[p])
                    lo, hi = min(lo, w), max(hi, w)
        else:
            for p in range(n):
                w = row[p]
                lo, hi = min(lo, w), max(hi, w)
        whole = n > 0 and broken == 0 and lo > -_WHOLE_LIMIT and hi < _WHOLE_LIMIT
        if whole and hi - lo + 1 <= DISTINCT_CODES // size:
            low[j], stride[j], other[j] = lo, size, False
            size *= hi - lo + 1
    if n == 0 or size == 1 and other.all():
        return np.empty(0, np.int64), np.empty(0, np.int64), False
    codes = np.zeros(n, np.int64)
    for j in range(len(bits)):  # (one input after another along the points: on the vector lanes)
        if j < k and not other[j]:
            row, lo, st = bits[j], low[j], stride[j]
            if floats[j]:
                v = row.view(np.float64)
                for p in range(n):
                    codes[p] += (np.int64(v[p]) - lo) * st
            else:
                for p in range(n):
                    codes[p] += (row[p] - lo) * st
    table = np.full(size, -1, np.int32)  # a set's number by its code, -1 none yet
    first, inverse = np.empty(n, np.int64), np.empty(n, np.int64)
    count = 0
    for p in range(n):
        u = table[codes[p]]
        if u < 0:
            table[codes[p]], first[count], inverse[p] = count, p, count
            count += 1
            if count > most:
                break
        else:
            q = first[u]
            for j in range(len(bits)):
                if j < k and other[j] and bits[j][q] != bits[j][p]:
                    return first[:0].copy(), inverse, False
            inverse[p] = u
    return first[:count].copy(), inverse, True


@kernel
def _distinct_kernel(bits, k, most):
    """:func:`distinct` of the inputs' bits (the first ``k`` of a tuple of (n,) int64 arrays: :func:`_key_bits`),
    stopping once more than ``most`` columns differ (the first ``most`` + 1 then come back, and an unfinished
    inverse). The points' hashes first, one input after another along the points (a loop on the vector lanes:
    100,000 points of 3 inputs 0.29 -> 0.05 ms), then the table's pass (its loads then wait on no hash: 0.75 ->
    0.35 ms in all). The table holds at most ``most`` + 1 columns at half load, as int32: 512 KiB for 100,000
    points where half must repeat, not 2 MiB (the GEMM's two calls 0.88 -> 0.84 ms) (issue 20)."""
    n = bits[0].size
    size = 2
    while size < 2 * min(n, most + 1):
        size *= 2
    hashes = np.zeros(n, np.int64)
    for j in range(len(bits)):  # (each input folded (a float's bits sit high) and mixed in, then murmur3's finalizer;
        if j >= k:  # int64 products wrap)
            break
        row = bits[j]
        for p in range(n):
            b = row[p]
            h = (hashes[p] ^ b ^ (b >> 32)) * -7046029254386353131
            hashes[p] = h ^ (h >> 32)
    for p in range(n):
        h = hashes[p]
        h ^= h >> 33
        h *= -49064778989728563
        h ^= h >> 33
        h *= -4265267296055464877
        h ^= h >> 33
        hashes[p] = h & (size - 1)
    slots = np.full(size, -1, np.int32)  # a distinct column's number, -1 empty
    first, inverse = np.empty(n, np.int64), np.empty(n, np.int64)
    count = 0
    for p in range(n):
        s = hashes[p]
        while True:
            u = slots[s]
            if u < 0:
                slots[s], first[count], inverse[p] = count, p, count
                count += 1
                break
            q = first[u]
            same = True
            for j in range(len(bits)):
                if j >= k:
                    break
                row = bits[j]
                if row[q] != row[p]:
                    same = False
                    break
            if same:
                inverse[p] = u
                break
            s = (s + 1) & (size - 1)
        if count > most:
            break
    return first[:count].copy(), inverse


def laid_over(values, inverse) -> np.ndarray:
    """The values of the distinct points (:func:`distinct`'s first points) laid over all points: point i takes
    ``values[inverse[i]]`` (a compiled loop: numpy's ``take`` of a small table ran ~3x slower); of (distinct
    points, columns) values, its row (:func:`rows_laid_over`). One value (or column of one value) in every set:
    :func:`one_over` that value, a read-only view."""
    values = np.ascontiguousarray(values, dtype=float)
    if (values.ndim == 1 or values.shape[1] == 1) and all_alike(values):  # (one value in every set: that value
        # over the points, read-only, nothing written: a GEMM's bytes of memory, weights and KV cache, issue 20)
        one = one_over(values.reshape(-1)[:1], inverse.size)
        return one if values.ndim == 1 else one[:, None]
    if values.ndim == 2 and values.shape[1] == 1:  # (a column: laid over as numbers, 2.3-3.6x the rows' speed, whose
        # loop over a row's one value is entered once a point: 100,000 GEMM points of 233 classes 222 -> 61 us)
        return _laid_over_kernel(values.reshape(-1), inverse).reshape(-1, 1)
    if values.ndim == 2:
        return _laid_over_rows_kernel(values, inverse)
    return _laid_over_kernel(values, inverse)


@rule(loops=True)
def rows_laid_over(table, inverse):
    """(len(inverse), columns): row i is ``table[inverse[i]]`` (a table of distinct points' rows laid over the points,
    each point copying one contiguous row)."""
    rows, cols = inverse.size, table.shape[1]
    out = np.empty((rows, cols))
    for r in range(rows):
        c = inverse[r]
        for o in range(cols):
            out[r, o] = table[c, o]
    return out


@kernel
def _laid_over_rows_kernel(table, inverse):
    return rows_laid_over(table, inverse)


@kernel
def _laid_over_kernel(values, inverse):
    out = np.empty(inverse.size)
    for i in range(inverse.size):
        out[i] = values[inverse[i]]
    return out


def set_of(inverse, i: int) -> int:
    """Point i's set of points alike: ``inverse[i]`` (:func:`distinct`'s inverse), ``i`` itself where ``inverse`` is
    None (each point its own set)."""
    return i if inverse is None else int(inverse[i])


def of_op(x, j):
    """Operator ``j``'s value of a per-operator kernel argument (or point ``j``'s of a per-point one,
    :func:`numbers_or_points`): ``x[j]`` of an array, ``x`` itself of a number. A block of one operator per point
    passes its per-operator values as numbers and ``None`` for the operator count (:func:`op_count`): that call
    compiles a kernel of its own, where the loop over a point's operators is one step long and its values sit in
    registers, so LLVM runs the loop over the points on the vector lanes (an array load inside the loop might alias
    the results' stores and keeps it one point at a time: the design-clock kernel on 100,000 GEMM points 0.70 ->
    0.19 ms) (issue 20)."""
    return x if np.ndim(x) == 0 else x[j]


def chunk(xs: tuple, start: int, end: int) -> tuple:
    """Points ``start`` .. ``end`` of a kernel's arguments ``xs`` (a tuple of arrays along the points, read with
    :func:`of_op`, and numbers): each array's slice (a view), each number itself. A kernel that takes its points a
    chunk at a time runs each chunk's loops from 0 over these views: numba's loop over ``range(start, end)`` inside
    another loop ran one point at a time, a loop over a chunk's views runs on the vector lanes (issue 20)."""
    return tuple(_chunk_of(x, start, end) for x in xs)


def op_count(n_ops):
    """Operators per point of a block kernel's ``n_ops`` argument: 1 for ``None`` (see :func:`of_op`; in a kernel
    compiled for ``None`` it is the constant 1)."""
    return 1 if n_ops is None else n_ops


@overload_numbers(of_op)
def _of_op_numbers(x, j):
    if is_array(x):
        return lambda x, j: x[j]
    return lambda x, j: x


@overload_numbers(set_of)
def _set_of_numbers(inverse, i):
    if is_array(inverse):
        return lambda inverse, i: inverse[i]
    return lambda inverse, i: i


@overload_numbers(chunk)
def _chunk_numbers(xs, start, end):
    """:func:`chunk` for a tuple of these types: its arguments one by one (a tuple of arrays and numbers is not one
    type numba can loop over; the code for its length is written out)."""
    names = ", ".join(f"_chunk_of(xs[{i}], start, end)" for i in range(len(xs)))
    scope = {"_chunk_of": _chunk_of}
    exec(f"def impl(xs, start, end):\n    return ({names}{',' if len(xs) == 1 else ''})\n", scope)
    return scope["impl"]


def _chunk_of(x, start, end):
    """One argument of :func:`chunk`."""
    return x[start:end] if np.ndim(x) else x


@overload_numbers(_chunk_of)
def _chunk_of_numbers(x, start, end):
    if is_array(x):
        return lambda x, start, end: x[start:end]
    return lambda x, start, end: x


@overload_numbers(op_count)
def _op_count_numbers(n_ops):
    from numba import types
    if isinstance(n_ops, (types.NoneType, types.Omitted)):
        return lambda n_ops: 1
    return lambda n_ops: n_ops


def quiet():
    """numpy's error state for rules numpy runs (called from Python on arrays): their IEEE infinities and NaNs are
    the model's (0 work / 0 rate, a missing level), as in the numpy code's ``np.errstate`` blocks, and for the
    generalized ufuncs of :func:`elementwise` (numpy's ufunc machinery checks the CPU's flags after their loops).
    A :func:`kernel` needs none: numba's arithmetic raises no numpy warnings (numpy clears the CPU's flags before
    each of its own operations; tests/model/test_jit.py), and ``np.errstate`` costs ~1.5 us a call (issue 20)."""
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")
