"""Evaluator speed: design points per second, single thread (issue 20).

    .venv/bin/python benchmarks/bench_evaluate.py [--sizes 1,1000,100000,1000000] [--repeat 3] [--quick]
                                                  [--pin] [--tables] [--continuous] [--kernels]

Workloads: (a) ``gemm``: one 256 x 4096 x 4096 BF16 GEMM (the Q projection at M = 256), (b) ``decode``: a
full Qwen3-8B decode step (batch 1, context 8192, 22 operators), (c) ``prefill``: a Qwen3-8B 4K prefill
(batch 1, 4096 tokens), (d) ``moe``: a Qwen3-30B-A3B decode step (batch 1, context 8192: router and experts).
Design points: Chips.from_base over the H100 with random ``units``, ``clock`` and ``hbm.stacks`` per point
(everything else the H100's), the path every search takes; building them is not timed. ``--continuous`` draws
the L2 and the local buffer from continuous ranges too: no two points then share the default tiles' or the
package's inputs, the case where the evaluator finds no points alike to evaluate once.

For each N (default 1, 1,000, 100,000 and 1,000,000; ``--quick`` stops at 100,000) and workload: the wall
and CPU time of ``evaluate_arrays`` (the fast path solvers use), best of 3 x ``--repeat`` calls after one
warm-up call (N <= 10: 30 x; N >= 1e6: one timed call), designs/s on each, and the same for the numpy reference
(``evaluate_arrays(..., reference=True)``: dse.model.evaluator's docstring, "Speed") with the ratio of the
two CPU rates (the reference evaluates one point at a time, so it is timed on at most REF_POINTS points of the
N and its "ref CPU" is for those). ``--tables`` adds the per-operator breakdown and the ``evaluate`` DataFrame;
``--kernels`` one design's call split into its compiled kernels' calls, timed alone, and the rest
(:func:`kernel_share`).

Targets (issue 20: the evaluator is the inner loop of every search): >= 1e7 GEMM designs/s and >= 1e6
decode-step designs/s on one core at N >= 1e5, and N = 1 in <= 100 us, checked on the CPU time of the
process (one thread), which a busy machine disturbs less than the wall clock; both are printed, with the load
average before and after and the machine's speed that day (:func:`machine_speed`: memory streaming and a
Python call, to compare runs of different days). The last two lines, ``best gemm designs/s: N`` and ``best decode
designs/s: N`` (CPU time, the best N >= 1e5), are for scripts.
"""

from __future__ import annotations

import os

# one thread everywhere, before numpy is imported
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from dse import workload as W  # noqa: E402
from dse.evaluate import evaluate  # noqa: E402
from dse.hardware import Chips, load_chip  # noqa: E402
from dse.model.evaluator import evaluate_arrays, evaluate_workload  # noqa: E402

#: designs/s on one core (CPU time) at N >= 1e5, per workload; N = 1 within LATENCY_TARGET_S
TARGETS = {"gemm": 10_000_000, "decode": 1_000_000}
LATENCY_TARGET_S = 100e-6
#: the smallest N the throughput targets and the summary lines read
BIG = 100_000
#: points the reference (one point at a time) is timed on
REF_POINTS = 200


def pin_one_core() -> str:
    try:
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"pinned to CPU {cpu}"
    except (AttributeError, OSError):
        return "not pinned"


def machine_speed() -> str:
    """The machine's speed in the two regimes the evaluator runs in, to compare runs of different days on a shared
    machine (this one's ran ~25% apart from one day to the next): numpy streaming an add through 16 MB (the
    caches) and 160 MB (main memory), GB/s read + written, best of 5; and a Python function call (a call of one
    design is ~3,000 of them)."""
    def stream(n):
        a, b = np.random.default_rng(0).random(n), np.empty(n)
        np.add(a, 1.0, out=b)
        best = min(_seconds(lambda: np.add(a, 1.0, out=b)) for _ in range(5))
        return 16.0 * n / best / 1e9

    def call(x):
        return x

    def calls():
        for i in range(100_000):
            call(i)
    per_call = min(_seconds(calls) for _ in range(5)) / 100_000
    return (f"machine: numpy add streams {stream(1_000_000):.0f} GB/s through 16 MB, {stream(10_000_000):.0f} GB/s "
            f"through 160 MB; a Python call {per_call * 1e9:.0f} ns")


def _seconds(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def design_points(n: int, seed: int = 0, continuous: bool = False) -> Chips:
    """H100 variants: random units (32 .. 264), clock and HBM stacks; ``continuous``: the L2 and the local buffer
    drawn from continuous ranges too, so that no two points share the tiles' or the package's inputs (the
    evaluator's search for alike points, dse.model.jit.distinct, then finds none and gives up)."""
    rng = np.random.default_rng(seed)
    over = {"units": rng.integers(32, 265, n), "clock": rng.uniform(1.0e9, 2.6e9, n),
            "hbm.stacks": rng.integers(1, 9, n)}
    if continuous:
        over.update({"l2": rng.uniform(1e7, 1e8, n), "local_buffer": rng.uniform(1e5, 5e5, n)})
    return Chips.from_base(load_chip("h100"), n, over)


def workloads() -> dict[str, W.Workload]:
    gemm = W.build({"name": "gemm-256x4096x4096", "ops": [{"gemm": {"name": "q_proj", "m": 256, "n": 4096,
                                                                    "k": 4096}}]})
    return {"gemm": gemm, "decode": W.decode("qwen3-8b", batch=1, context=8192),
            "prefill": W.prefill("qwen3-8b", batch=1, tokens=4096),
            "moe": W.decode("qwen3-30b-a3b", batch=1, context=8192)}


def timed(fn, repeat: int, warm: bool = True) -> tuple[float, float]:
    """(best wall, best CPU) seconds of ``repeat`` calls, after one warm-up call when ``warm``."""
    if warm:
        fn()
    best, best_cpu = np.inf, np.inf
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        fn()
        best, best_cpu = min(best, time.perf_counter() - t), min(best_cpu, time.process_time() - c)
    return best, best_cpu


def _repeats(n: int, repeat: int) -> int:
    """More calls for small N (a call of one point takes a millisecond or less), and 3x ``repeat`` below a million
    points (the targets' N = 1e5 rows: on a shared machine one call in three or four ran 10-30% slower than the
    others, and the best of three often missed the quiet ones; a call there takes 0.01-0.14 s)."""
    return repeat * 30 if n <= 10 else repeat * 3 if n < 1_000_000 else 1


#: the modules whose compiled kernels :func:`kernel_share` times
KERNEL_MODULES = ("dse.model.evaluator", "dse.model.power", "dse.model.area", "dse.model.jit", "dse.model.capacity",
                  "dse.model.tiling", "dse.model.hierarchy")


def kernel_share(chips: Chips, wl, calls: int = 2000) -> tuple[float, float, int]:
    """(CPU seconds of one ``evaluate_arrays(chips, wl)``, CPU seconds of its compiled kernels' calls alone, their
    number): each kernel a call makes (numba dispatchers, module globals, as the evaluator calls them) is recorded
    with its arguments in one call, then called alone with them, best of 5 x ``calls``. The rest of the call is
    Python and numpy around the kernels (issue 20: where one design's time goes)."""
    import importlib

    evaluate_arrays(chips, wl)  # (every kernel built and in its module's globals)
    seen, saved = [], []
    for name in KERNEL_MODULES:
        mod = importlib.import_module(name)
        for key, fn in list(vars(mod).items()):
            if hasattr(fn, "py_func") and callable(fn):
                def recording(*a, _fn=fn, **k):
                    seen.append((_fn, a, k))
                    return _fn(*a, **k)
                saved.append((mod, key, fn))
                setattr(mod, key, recording)
    try:
        evaluate_arrays(chips, wl)
    finally:
        for mod, key, fn in saved:
            setattr(mod, key, fn)

    def best(fn):  # (CPU seconds a call: the best of 5 runs of ``calls`` calls, after one such run)
        return timed(lambda: [fn() for _ in range(calls)], 5)[1] / calls
    whole = best(lambda: evaluate_arrays(chips, wl))
    kernels = sum(best(lambda f=f, a=a, k=k: f(*a, **k)) for f, a, k in seen)
    return whole, kernels, len(seen)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,1000,100000,1000000", help="numbers of design points")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="sizes up to 100,000 only, 1 repeat")
    ap.add_argument("--pin", action="store_true", help="pin the process to one CPU (the numpy threads are 1 anyway)")
    ap.add_argument("--no-reference", action="store_true", help="skip the numpy reference (no ratio column)")
    ap.add_argument("--tables", action="store_true", help="also the breakdown and evaluate() DataFrame timings")
    ap.add_argument("--continuous", action="store_true",
                    help="points whose L2 and local buffer vary continuously too (no two alike)")
    ap.add_argument("--kernels", action="store_true",
                    help="also one design's call split: its compiled kernels alone, and the Python and numpy around")
    args = ap.parse_args(argv)
    sizes = [int(float(s)) for s in args.sizes.split(",")]
    repeat = args.repeat
    if args.quick:
        sizes, repeat = [n for n in sizes if n <= BIG] or [BIG], 1

    print(f"dse evaluator benchmark -- python {platform.python_version()}, numpy {np.__version__}, "
          f"{platform.machine()}, {pin_one_core() if args.pin else 'not pinned'}, threads=1, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(machine_speed())
    wls = workloads()
    print(f"workloads: {', '.join(f'{k} ({len(w.ops)} operators)' for k, w in wls.items())}; "
          f"points: H100 with random units, clock, hbm.stacks{', L2, local buffer' if args.continuous else ''}")
    print("times: best of the timed calls, CPU = process time (one thread); ref = the numpy reference "
          f"(reference=True: point by point, timed on <= {REF_POINTS} points), ratio = fast / reference designs "
          "per CPU second\n")
    header = (f"{'workload':<8} {'N':>9} {'wall':>10} {'designs/s':>12} {'CPU':>10} {'designs/s':>12} "
              f"{'ref CPU':>10} {'ref des/s':>12} {'ratio':>6} {'target':>11}  ok")
    print(header)
    print("-" * len(header))
    results, latency, failed = {}, {}, []
    for n in sizes:
        chips = design_points(n, continuous=args.continuous)
        reps = _repeats(n, repeat)
        for name, wl in wls.items():
            wall, cpu = timed(lambda: evaluate_arrays(chips, wl), reps)
            rate = n / cpu
            results[(name, n)] = rate
            if args.no_reference:
                ref_cpu_s, ref_rate_s, ratio_s = "-", "-", "-"
            else:
                # (point by point: its rate does not depend on N, so it is timed on REF_POINTS points at most)
                n_ref = min(n, REF_POINTS)
                sample = chips if n_ref == n else chips.take(np.arange(n_ref))
                _, ref_cpu = timed(lambda: evaluate_arrays(sample, wl, reference=True), 1, warm=n_ref == 1)
                ref_rate = n_ref / ref_cpu
                ref_cpu_s, ref_rate_s, ratio_s = f"{ref_cpu:.4f}s", f"{ref_rate:,.0f}", f"{rate / ref_rate:.1f}"
            if n == 1:
                latency[name] = cpu
                target, ok = f"{LATENCY_TARGET_S * 1e6:.0f} us", cpu <= LATENCY_TARGET_S
            elif n >= BIG and name in TARGETS:
                target, ok = f"{TARGETS[name]:,}", rate >= TARGETS[name]
            else:
                target, ok = "", None
            if ok is False:
                failed.append(f"{name} N={n:,}")
            print(f"{name:<8} {n:>9,} {wall:>9.4f}s {n / wall:>12,.0f} {cpu:>9.4f}s {rate:>12,.0f} "
                  f"{ref_cpu_s:>10} {ref_rate_s:>12} {ratio_s:>6} {target:>11}  "
                  f"{'' if ok is None else 'yes' if ok else 'NO'}", flush=True)
        del chips
    if latency:
        print("\nN = 1 latency (CPU): " + ", ".join(f"{k} {v * 1e6:,.0f} us" for k, v in latency.items()))
    if args.kernels:
        print("\none design (N = 1), CPU: the call, its compiled kernels' calls alone (recorded, called again with "
              "the same arguments), the rest (Python and numpy between them)")
        one = design_points(1, continuous=args.continuous)
        for name, wl in wls.items():
            whole, kernels, count = kernel_share(one, wl)
            print(f"{name:<8} {whole * 1e6:>7,.0f} us a call: {count:>3} kernel calls {kernels * 1e6:>6,.1f} us "
                  f"({kernels / whole:.0%}), the rest {(whole - kernels) * 1e6:>6,.0f} us")

    if args.tables:
        print("\nper-operator breakdown (evaluate_workload(..., breakdown=True): (N, O) arrays of every operator)")
        for n in [s for s in sizes if 1000 <= s <= BIG][:2]:
            chips = design_points(n)
            for name, wl in wls.items():
                wall, cpu = timed(lambda: evaluate_workload(chips, wl, breakdown=True), repeat)
                print(f"{name:<8} {n:>9,} {wall:>9.4f}s wall {n / wall:>12,.0f} designs/s, {cpu:>9.4f}s CPU "
                      f"{n / cpu:>12,.0f}")
            del chips
        n = 10_000
        print(f"\nevaluate() DataFrame, N = {n:,} (the table users get; with the per-operator table attached)")
        chips = design_points(n)
        for name, wl in wls.items():
            for bd in (False, True):
                wall, cpu = timed(lambda: evaluate(chips, wl, breakdown=bd), repeat)
                print(f"{name:<8} breakdown={str(bd):<5} {wall:>8.3f}s wall {n / wall:>11,.0f} designs/s, "
                      f"{n / cpu:>11,.0f} per CPU second")

    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")
    print("all targets met" if not failed else f"BELOW TARGET: {', '.join(failed)}")
    # for scripts (issue 20): the best CPU-time rate at N >= 1e5 per workload
    for name in ("gemm", "decode"):
        big = [rate for (w, n), rate in results.items() if w == name and n >= BIG]
        if big:
            print(f"best {name} designs/s: {max(big):.0f}")
    return 0 if not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
