"""The evaluator's fast path against its numpy reference (issue 20): the same numbers, relative 1e-9.

The fast path (:func:`dse.model.evaluator.evaluate_workload`) evaluates a batch of N points at once: chip
inputs the same for every point kept as one (1, 1) column, the points in blocks, sums over the operators as
one product, the power ceiling's bisection on the throttled operators only. The reference
(``reference=True``) evaluates every point on its own, as a batch of one, through the same functions (there is
one copy of the physics), so every column and every per-operator array must agree whatever the batch holds:
random designs over several base chips and workloads, with repeated points and constant inputs, systems of
chips, pipelines, dies and a weight ROM. No test here depends on speed.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse import workload as W
from dse.hardware import Chips, load_chip
import dse.model.evaluator as ev
from dse.model import jit
from dse.model.evaluator import evaluate_workload

RTOL = 1e-9


def _gemm():
    return W.build({"name": "gemm-256x4096x4096", "ops": [{"gemm": {"name": "q_proj", "m": 256, "n": 4096,
                                                                    "k": 4096}}]})


WORKLOADS = {
    "gemm": _gemm,
    "decode": lambda: W.decode("qwen3-8b", batch=1, context=8192),
    "prefill": lambda: W.prefill("qwen3-8b", batch=1, tokens=1024),
    "moe": lambda: W.decode("qwen3-30b-a3b", batch=4, context=2048),
}
_WL: dict = {}


def workload(name):
    if name not in _WL:
        _WL[name] = WORKLOADS[name]()
    return _WL[name]


def random_points(base: str, n: int, seed: int, extra: dict | None = None) -> Chips:
    """n random variants of ``base``; about a third of them repeat an earlier point."""
    rng = np.random.default_rng(seed)
    over = {
        "units": rng.integers(8, 300, n).astype(float),
        "clock": rng.uniform(0.6e9, 2.8e9, n),
        "tdp": rng.choice([300.0, 500.0, 700.0, 1500.0, np.nan], n),
    }
    if load_chip(base).hbm is not None:
        over["hbm.stacks"] = rng.integers(1, 9, n).astype(float)
    over.update(extra(rng, n) if callable(extra) else (extra or {}))
    rep = rng.random(n) < 0.3
    src = rng.integers(0, n, n)
    for k, v in over.items():
        v = np.asarray(v, dtype=float)
        v[rep] = v[src[rep]]
        over[k] = v
    return Chips.from_base(load_chip(base), n, over)


def assert_same(fast, ref, what=""):
    assert fast.columns.keys() == ref.columns.keys()
    for k, a in fast.columns.items():
        b = ref.columns[k]
        a, b = np.broadcast_to(a, b.shape), np.asarray(b)
        assert a.shape == b.shape, (what, k)
        if a.dtype.kind in "fc":
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=0.0, equal_nan=True, err_msg=f"{what} {k}")
        else:
            np.testing.assert_array_equal(a, b, err_msg=f"{what} {k}")
    if ref.operators is not None:
        for k in ("t_op", "t_matrix", "t_memory", "t_l2", "t_local", "energy", "bytes_memory", "tm", "tn", "split",
                  "bound"):
            np.testing.assert_allclose(np.asarray(getattr(fast.operators, k), dtype=float),
                                       np.asarray(getattr(ref.operators, k), dtype=float), rtol=RTOL, atol=0.0,
                                       equal_nan=True, err_msg=f"{what} operators.{k}")


@pytest.mark.parametrize("wl", sorted(WORKLOADS))
@pytest.mark.parametrize("base", ["h100", "b200", "tpu-v1", "mi300x"])
def test_fast_path_matches_reference(base, wl):
    chips = random_points(base, 24, seed=hash((base, wl)) % 1000)
    w = workload(wl)
    assert_same(evaluate_workload(chips, w), evaluate_workload(chips, w, reference=True), f"{base} {wl}")


@pytest.mark.parametrize("wl", ["decode", "moe"])
def test_systems_of_chips(wl):
    def extra(rng, n):
        p = rng.choice([1.0, 2.0, 4.0, 8.0], n)
        return {"system.chips": p, "system.pipeline": (rng.random(n) < 0.4).astype(float)}
    chips = random_points("h100", 20, seed=7, extra=extra)
    w = workload(wl)
    assert_same(evaluate_workload(chips, w), evaluate_workload(chips, w, reference=True), wl)


def test_more_operators_a_point_than_the_kernels_scratch_take_the_passes(monkeypatch):
    """A point of more operators than the clock and tail kernels' scratch rows hold (evaluator._ROW, jit.SCRATCH_ROW:
    4,136) is evaluated by the passes, within rounding of the kernels' numbers (the bound lowered here to 8 of a
    decode step's operators; the kernels compiled with the real one)."""
    chips = random_points("h100", 12, seed=31)
    w = workload("decode")
    fused = evaluate_workload(chips, w)
    calls = []
    real = ev._clock_kernel
    monkeypatch.setattr(ev, "_clock_kernel", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr(ev, "_ROW", 8)
    passes = evaluate_workload(chips, w)
    assert not calls
    for k, a in fused.columns.items():
        if np.asarray(a).dtype.kind == "f":
            np.testing.assert_allclose(a, passes.columns[k], rtol=1e-13, atol=0.0, equal_nan=True, err_msg=k)


@pytest.mark.parametrize("wl", ["decode", "gemm"])
def test_technology_that_varies_per_point(wl):
    """The technology's figures (voltages, the on-chip levels' and the links' J/B, the compute efficiency) differing
    from point to point, as in a search over process nodes: the kernels then read them as arrays where every point
    sharing them reads numbers (evaluator._TAIL_POINT_GROUPS, _POINT_GROUPS); against the reference."""
    def extra(rng, n):
        return {"tech.v_min": rng.choice([0.6, 0.7], n), "tech.v_nominal": rng.choice([0.85, 0.95], n),
                "energy.register_file": rng.choice([1e-12, 2e-12], n), "energy.l2": rng.choice([2e-12, 4e-12], n),
                "energy.link": rng.choice([5e-12, 1e-11], n),
                "calibration.compute_efficiency": rng.choice([0.8, 1.0], n), "tdp": rng.choice([300.0, 700.0], n)}
    chips = random_points("h100", 24, seed=29, extra=extra)
    w = workload(wl)
    assert_same(evaluate_workload(chips, w), evaluate_workload(chips, w, reference=True), wl)


def test_breakdown_and_rom():
    chips = random_points("h100", 16, seed=3, extra=lambda rng, n: {"l2": rng.choice([2e6, 5e7, 2e8], n),
                                                                    "local_buffer": rng.choice([64e3, 228e3], n)})
    w = workload("decode")
    kw = dict(breakdown=True, weights_in_rom=True, rom_bandwidth=np.linspace(1e12, 2e13, 16))
    assert_same(evaluate_workload(chips, w, **kw), evaluate_workload(chips, w, reference=True, **kw), "rom")


def test_large_batch_blocks_match_reference_rows():
    """More points than one block (the fast path cuts the batch): a sample of rows against the reference."""
    w = workload("decode")
    block = ev._BLOCK_ELEMENTS // len(w.ops)  # points per block
    chips = random_points("h100", 2 * block + 50, seed=11)
    fast = evaluate_workload(chips, w)
    idx = np.r_[0:5, block - 10:block + 10, 2 * block - 3:2 * block + 3, chips.n - 5:chips.n]
    ref = evaluate_workload(chips.take(idx), w, reference=True)
    sub = type(fast)(fast.workload, fast.phase, {k: np.broadcast_to(v, (chips.n,))[idx] for k, v in
                                                 fast.columns.items()})
    assert_same(sub, ref, "blocks")


def test_blocks_of_one_value_are_laid_over_and_other_blocks_kept(monkeypatch):
    """A result of one value for a whole block (every point the same, or one value laid over its points: jit.one_over)
    comes back once, laid over the points (a view of stride 0), where every block gives that value; a block that
    gives another value, or a value per point, has its own. The blocks' results here are made up (a wrapper of the
    block's evaluation), so that blocks differ."""
    w = workload("gemm")
    monkeypatch.setattr(ev, "_BLOCK_ELEMENTS", 8)  # (8 points a block: 20 points in three blocks)
    chips = random_points("h100", 20, seed=5)
    real = ev._evaluate_block
    seen = []

    def blocks(cols, *args):
        r, r_ops = real(cols, *args)
        k = len(seen)
        seen.append(k)
        r = dict(r, flops=np.array([1.0 + k]) if k == 2 else np.array([1.0]),  # the last block: another value
                 quant_error=np.full(r["time_s"].shape, 7.0) if k == 1 else np.array([7.0]),  # one per point
                 system_chips=np.array([3.0]),  # the same in every block
                 laid=jit.one_over(np.array([5.0]), r["time_s"].shape[0]))  # one value laid over a block's points
        return r, r_ops
    monkeypatch.setattr(ev, "_evaluate_block", blocks)
    out = evaluate_workload(chips, w).columns
    assert len(seen) == 3
    np.testing.assert_array_equal(out["flops"], [1.0] * 16 + [3.0] * 4)
    np.testing.assert_array_equal(out["quant_error"], [7.0] * 20)
    np.testing.assert_array_equal(out["system_chips"], [3.0] * 20)
    assert out["system_chips"].strides == (0,) and out["flops"].strides == (8,)
    assert out["laid"].strides == (0,) and out["laid"].tolist() == [5.0] * 20


@pytest.mark.parametrize("wl", ["prefill", "decode"])
def test_default_tiles_do_not_depend_on_the_clock(wl):
    """Each on-chip level runs on the chip's clock, so the default tiles compare their candidates in cycles
    (evaluator._tile_levels) and a point has the same tiles at every clock. Compared in seconds, two candidates
    of equal cycles (a tie: Qwen3-8B prefill's attention PV on one of these H100 systems, 7,626.007 cycles for
    128 x 128 with split-K 2 and for 64 x 64, by hand from the rules) went one way or the other with the rounding
    of each clock's seconds."""
    def systems(rng, n):
        return {"system.chips": rng.choice([1.0, 2.0, 4.0, 8.0], n),
                "system.pipeline": (rng.random(n) < 0.4).astype(float)}
    chips = random_points("h100", 150, seed=292, extra=systems)
    ops = ev.op_table(workload(wl))
    ref = ev.default_tiles(chips, ops)
    clock = chips.get("clock")
    for factor in np.linspace(0.37, 2.9, 23):
        other = Chips.from_base(load_chip("h100"), chips.n, {**{k: chips.get(k) for k in (
            "units", "tdp", "hbm.stacks", "system.chips", "system.pipeline")}, "clock": clock * factor})
        for a, b in zip(ev.default_tiles(other, ops), ref):
            np.testing.assert_array_equal(a, b, err_msg=f"clock x {factor}")


@pytest.mark.parametrize("wl", sorted(WORKLOADS))
def test_clock_sweep_matches_reference(wl):
    """A sweep of the clock alone: the default tiles' inputs are one for every point (they are compared in
    cycles), so the batch has one row of tiles for all points; every number as each point evaluated alone."""
    chips = Chips.from_base(load_chip("mi300x"), 30, {"clock": np.linspace(0.8e9, 2.5e9, 30)})
    w = workload(wl)
    for breakdown in (False, True):
        assert_same(evaluate_workload(chips, w, breakdown=breakdown),
                    evaluate_workload(chips, w, breakdown=breakdown, reference=True), f"{wl} clock sweep")


@pytest.mark.parametrize("base", ["mi355x", "h100"])
def test_points_alike_in_their_tiles_match_reference(base):
    """Points in pairs that differ in one input the cache re-reads read beside the tiles' own (the memory-side
    cache's capacity, the dies, the L2, the accumulator store), among points drawn from few values of the units
    and local buffer: the evaluator finds the points alike in their tiles (evaluator._tiles) and in those inputs
    (evaluator._alike_points) and evaluates the re-reads of each once; every number as each point evaluated
    alone, on a 16,384-cubed GEMM (whose main-memory bytes on MI355X differ with the memory-side cache's size, 64
    MB or 4 GB, and with its dies, 2 or 8) and a 4K prefill."""
    rng = np.random.default_rng(17)
    n = 64
    over = {"units": rng.choice([16.0, 132.0], n), "local_buffer": rng.choice([64e3, 228e3], n),
            "l2": rng.choice([2e6, 6.4e7], n), "accumulator": rng.choice([0.0, 256e3], n),
            "dies": rng.choice([2.0, 8.0], n), "clock": rng.uniform(1e9, 2.4e9, n)}
    if base == "mi355x":
        over["memory_side_cache.capacity"] = rng.choice([6.4e7, 4e9], n)
    for j, key in enumerate(k for k in over if k not in ("units", "local_buffer", "clock")):
        pair = np.arange(2 * j + 1, n, 8)  # (point p - 1 with only this input changed)
        over[key] = over[key].copy()
        for k, v in over.items():
            if k != key:
                v[pair] = v[pair - 1]
        over[key][pair] = np.where(over[key][pair - 1] == over[key].max(), over[key].min(), over[key].max())
    chips = Chips.from_base(load_chip(base), n, over)
    big = W.build({"name": "gemm-16k", "ops": [{"gemm": {"name": "g", "m": 16384, "n": 16384, "k": 16384}}]})
    for w in (big, workload("prefill")):
        assert_same(evaluate_workload(chips, w), evaluate_workload(chips, w, reference=True), f"{base} {w.name}")


@pytest.mark.parametrize("wl", sorted(WORKLOADS))
def test_identical_operators_merged(wl):
    """Without a breakdown the evaluator evaluates identical operators once, their counts added (issue 20): a
    Qwen3-8B decode step's 22 operators are 16 (Q = O, K = V, gate = up projections; the norms and residuals of
    one width), and every column agrees with the operators one by one (the breakdown path) within rounding."""
    w = workload(wl)
    ops = ev.op_table(w)
    info = ev.workload_info(w, ops)
    merged, minfo = ev._merged(ops, info)
    assert merged.count.sum() == ops.count.sum()
    assert len(merged.names) <= len(ops.names)
    if wl == "decode":
        assert (len(ops.names), len(merged.names)) == (22, 16)
    # the operators that rules address by column stay apart
    for g in ops.attn_groups:
        assert [ops.names[i] for i in g] == [merged.names[i] for i in merged.attn_groups[ops.attn_groups.index(g)]]
    assert [ops.names[i] for i in info.expert_cols] == [merged.names[i] for i in minfo.expert_cols]

    def extra(rng, n):
        return {"system.chips": rng.choice([1.0, 2.0, 8.0], n), "system.pipeline": (rng.random(n) < 0.3) * 1.0}
    chips = random_points("h100", 30, seed=5, extra=extra)
    a, b = evaluate_workload(chips, w), evaluate_workload(chips, w, breakdown=True)
    for k, x in a.columns.items():
        y = b.columns[k]
        if np.asarray(x).dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=1e-13, atol=0.0, equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(x, y, err_msg=k)


@pytest.mark.parametrize("wl", ["decode", "prefill", "moe", "gemm"])
@pytest.mark.parametrize("base", ["h100", "tpu-v1", "mi300x", "b200"])
def test_fused_kernels_match_the_passes(base, wl, monkeypatch):
    """A block point by point in two kernels (evaluator._clock_kernel: the design clock's times and the operating
    points; evaluator._tail_kernel: what follows) against the passes over the block's (points x operators) arrays
    they stand for (evaluator._FUSED = False): every column within rounding (the tail's sums of the times add a
    point's terms one after another, the passes' in the order the vector lanes give). The points throttle (TDP
    down to 300 W), some so far that their memory traffic is slowed too (a 50 W TDP), and the fused attention
    blocks pipeline; systems of chips and pipelines beside. MI300X's dies are one pool here and B200's two keep
    their link (with a die-to-die placement the block takes the clock kernel, then the passes)."""
    def extra(rng, n):
        out = {"tdp": rng.choice([50.0, 300.0, 700.0, np.nan], n), "system.chips": rng.choice([1.0, 1.0, 4.0], n),
               "system.pipeline": (rng.random(n) < 0.3) * 1.0}
        if base == "mi300x":
            out["dies"] = np.ones(n)
        return out
    chips = random_points(base, 40, seed=23, extra=extra)
    w = workload(wl)
    calls = {"_clock_kernel": 0, "_tail_kernel": 0}

    def counted(name):
        real = getattr(ev, name)

        def call(*args):
            calls[name] += 1
            return real(*args)
        return call
    for name in calls:
        monkeypatch.setattr(ev, name, counted(name))
    fused = evaluate_workload(chips, w)
    # (a GEMM alone, one operator: its operating points by the passes, what follows by the tail in one pass)
    assert (calls["_clock_kernel"] > 0) == (wl != "gemm") and (calls["_tail_kernel"] > 0) == (base != "b200"), calls
    monkeypatch.setattr(ev, "_FUSED", False)
    calls.update({k: 0 for k in calls})
    passes = evaluate_workload(chips, w)
    assert not any(calls.values())
    cols = fused.columns
    assert (np.asarray(cols["clock_ratio"]) < 0.999).any() and np.asarray(cols["memory_throttled"]).any()
    for k, a in cols.items():
        b = passes.columns[k]
        if np.asarray(a).dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=0.0, equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(a, b, err_msg=k)


def test_a_chip_column_is_one_value_only_where_every_point_has_it():
    """evaluator._column: a chip's figure becomes one value for the block ((1, 1)) where every point has it (a view of
    stride 0 without reading it; else after a look at 17 points spread over the column and a pass over it), and
    stays the points' own values ((N, 1)) where any point differs, between the points looked at or on one of them."""
    a = np.full(1000, 2.0)
    assert ev._column(a).shape == (1, 1) and ev._column(jit.one_over(np.array([2.0]), 1000)).shape == (1, 1)
    for at in (501, 62, 999):  # (between the points looked at, on one of them, the last)
        b = a.copy()
        b[at] = 3.0
        got = ev._column(b)
        assert got.shape == (1000, 1) and got[at, 0] == 3.0, at


@pytest.mark.parametrize("n", [1, 1300])
def test_one_pass_of_a_point_s_sums_and_results_equals_the_two_kernels(monkeypatch, n):
    """One operator on one chip: the tail's sums and the point's results come from one pass
    (evaluator._tail_point_kernel, a chunk of points at a time); on the same inputs they are, to the bit, those of
    the two kernels it stands for (evaluator._tail_kernel, then evaluator._point_kernel on the sums, the step the
    longer of the device's work and the host's launches), for 1 point and for 1,300 (two chunks of 512 and one of
    276), random designs with throttled points and repeated ones. The sums that the results alone read are not
    kept; the bound's code and the memory's throttling come as integers and booleans."""
    chips = random_points("h100", n, seed=31 + n)
    seen = []
    real = ev._tail_point_kernel
    monkeypatch.setattr(ev, "_tail_point_kernel", lambda *a: seen.append(a) or real(*a))
    out = evaluate_workload(chips, workload("gemm")).columns
    assert len(seen) == 1 and np.isfinite(out["time_s"]).all()
    x, per_point, count, grouped, px, tokens, flops = seen[0]
    sums, res, codes, slowed = real(*seen[0])
    two = ev._tail_kernel(x, per_point, count, grouped, np.zeros((0, 3), dtype=np.int64), None)
    names = ev.POINT_SUMS + ev.TAIL_SUMS
    px = list(px)
    for k, i in (("e_fixed", 5), ("device", 3), ("e_compute", 7), ("clock_flops", 13), ("clock_min", 14),
                 ("voltage_flops", 15), ("voltage_min", 16)):
        px[i] = jit.points(two[names.index(k)], n)  # (read-only, as the evaluator gives them: a writable array is
        # a compiled signature of its own)
    assert np.isnan(seen[0][4][3]).all()  # (the device's time: the one pass's own, not an argument)
    px[0] = jit.points(ev.pipeline.overlapped_core(px[3], px[4]), n)  # (the step: the device's work, or the launches)
    want = ev._point_kernel(tuple(px), tokens, flops)
    for i, k in enumerate(ev.POINT_RESULTS):
        np.testing.assert_array_equal(res[i, :sums.shape[1]].view(np.int64), want[i].view(np.int64), err_msg=k)
    for i, k in enumerate(names):
        if k not in ev._NOT_IN_THE_SUMS:
            np.testing.assert_array_equal(sums[i].view(np.int64), two[i].view(np.int64), err_msg=k)
    assert codes.dtype == np.int64 and slowed.dtype == bool  # (as reported: bound_code, memory_throttled)
    np.testing.assert_array_equal(codes, two[names.index("bound_code")].astype(np.int64))
    np.testing.assert_array_equal(slowed, two[names.index("memory_throttled")] > 0.5)
    assert (out["clock_ratio"] < 1.0).any() or n == 1
