"""Tests of dse.model.evaluator: properties of the time/energy model (hypothesis) and unit tests of its parts.

The seed cases that go through the evaluator are in tests/reference/test_evaluator_cases.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dse.model.evaluator as ev
from dse.model import power as pw
from dse import workload as W
from dse.evaluate import evaluate
from dse.model.evaluator import default_tiles, evaluate_arrays, evaluate_workload, op_table
from dse.hardware import Chips, load_chip

GiB = 2**30
BASES = ("h100", "a100", "rtx-4090", "b200", "apple-m3-ultra")
# derandomized: the same examples on every run, so CI is deterministic (explore with a larger max_examples)
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def _only_the_power_ceiling_slows(chips: Chips, wl, a) -> None:
    """Point 1 has more of a resource than point 0. Without a TDP it is never slower; with one, it may be
    slower only where the power ceiling binds (seed 004 §4.1.3): its time then exceeds its time without a TDP."""
    t0, t1 = a["time_s"]
    if t1 <= t0 * (1 + 1e-12):
        return
    free = Chips(dict(chips.arrays, tdp=np.full(2, np.inf)), chips.formats, base=chips.base)
    b = evaluate_arrays(free, wl)
    assert b["time_s"][1] <= b["time_s"][0] * (1 + 1e-12)
    assert t1 > b["time_s"][1] * (1 + 1e-12)


@pytest.fixture(scope="module")
def decode_8k():
    return W.decode("qwen3-8b", batch=1, context=8192)


def gemm_wl(m, n, k, batch=1, fmt="bf16", name="g"):
    formats = {"weights": fmt, "activations": fmt, "output": fmt}
    return W.Workload(name=name, phase="ops", ops=(W.gemm(name, m, n, k, batch=batch, formats=formats),))


# a small zoo of workloads: GEMMs of any shape, decode, causal prefill, MoE (uniform and concentrated)
_FIXED = {
    "decode": lambda: W.decode("qwen3-8b", batch=4, context=2048),
    "prefill": lambda: W.prefill("qwen3-8b", batch=1, tokens=300),
    "moe": lambda: W.decode("mixtral-8x7b", batch=8, context=1024),
    "moe_conc": lambda: W.decode("qwen3-235b-a22b", batch=4, context=512, routing="concentrated"),
    "fp8": lambda: W.decode("qwen3-8b", batch=2, context=1024, formats={"weights": "fp8", "activations": "fp8"}),
}
_CACHE: dict = {}


def _fixed(name):
    if name not in _CACHE:
        _CACHE[name] = _FIXED[name]()
    return _CACHE[name]


dims = st.integers(1, 5000)
workloads = st.one_of(
    st.builds(gemm_wl, dims, dims, dims, st.integers(1, 8)),
    st.sampled_from(sorted(_FIXED)).map(_fixed),
)
tdps = st.sampled_from([np.inf, 60.0, 300.0, 1000.0])


def _base(name):
    return load_chip(name)


def _pair(base, key, lo, hi, **fixed) -> Chips:
    """Two points of ``base`` that differ only in ``key`` (lo, hi)."""
    return Chips.from_base(_base(base), 2, {key: [lo, hi], **fixed})


# ---------------------------------------------------------------- properties


@settings(max_examples=40, **SETTINGS)
@given(base=st.sampled_from(BASES), wl=workloads, units=st.integers(1, 300), more=st.integers(1, 300),
       clock=st.floats(0.3e9, 3e9), tdp=tdps, voltage_scaling=st.sampled_from([0.0, 1.0]))
def test_more_units_are_never_slower(base, wl, units, more, clock, tdp, voltage_scaling):
    """More compute units never increase time, unless the power ceiling lowered the clock (seed 004 §4.1.3)."""
    chips = _pair(base, "units", units, units + more, clock=clock, tdp=tdp,
                  **{"power.voltage_scaling": voltage_scaling})
    a = evaluate_arrays(chips, wl)
    if not a["memory_throttled"].any():  # (under a TDP the memory traffic may be slowed for power)
        assert a["t_memory_s"][1] <= a["t_memory_s"][0] * (1 + 1e-12)
    assert a["t_matrix_ideal_s"][1] <= a["t_matrix_ideal_s"][0] * (1 + 1e-12)
    _only_the_power_ceiling_slows(chips, wl, a)


@settings(max_examples=40, **SETTINGS)
@given(base=st.sampled_from(BASES), wl=workloads, bw=st.floats(50e9, 10e12), factor=st.floats(1.0, 10.0),
       tdp=tdps)
def test_more_bandwidth_is_never_slower(base, wl, bw, factor, tdp):
    """More memory bandwidth never increases time, unless the power ceiling lowered the clock.

    (Under a TDP, memory traffic and compute share the power: moving the same bytes faster draws more
    memory power and leaves less for compute, seed 004 §4.1.3.)
    """
    chips = _pair(base, "memory.bandwidth", bw, bw * factor, tdp=tdp)
    a = evaluate_arrays(chips, wl)
    if not a["memory_throttled"].any():  # (under a TDP the memory traffic may be slowed for power)
        assert a["t_memory_s"][1] <= a["t_memory_s"][0] * (1 + 1e-12)
    assert a["t_read_s"][1] <= a["t_read_s"][0] * (1 + 1e-12)
    _only_the_power_ceiling_slows(chips, wl, a)


@settings(max_examples=15, **SETTINGS)
@given(stacks=st.integers(1, 7), more=st.integers(1, 4), wl=workloads)
def test_more_hbm_stacks_are_never_slower(stacks, more, wl):
    chips = Chips.from_base(load_chip("h100"), 2, {"hbm.stacks": [stacks, stacks + more], "tdp": np.inf})
    a = evaluate_arrays(chips, wl)
    assert a["time_s"][1] <= a["time_s"][0] * (1 + 1e-12)
    assert a["capacity_bytes"][1] > a["capacity_bytes"][0]


@settings(max_examples=30, **SETTINGS)
@given(base=st.sampled_from(("h100", "a100", "rtx-4090", "b200")), wl=workloads, units=st.integers(1, 300),
       clock=st.floats(0.3e9, 3e9), tdp=tdps, fused=st.booleans())
def test_every_operator_takes_at_least_its_roofline(base, wl, units, clock, tdp, fused):
    """t_op >= max(F / P, V / R) for every operator: useful FLOPs at the peak rate, its bytes at the bandwidth."""
    chips = Chips.from_base(_base(base), 1, {"units": units, "clock": clock, "tdp": tdp})
    df = evaluate(chips, wl, breakdown=True, fused_attention=fused)
    ops = df.attrs["operators"]
    on_chip = {"attention_qk": ("c",), "softmax": ("a", "c"), "attention_pv": ("a",)} if fused else {}
    rate = chips.memory_bandwidth[0]
    best = max(chips.peak_flops(f)[0] for f in chips.formats)
    # a fused attention block's QK, softmax and PV pipeline across resources (seed 004 §4.2.3, issue 15 item 6):
    # the roofline bounds the three together, each resource's work added
    kinds = [o.kind for o in wl.ops]
    group = {i + d: i for i in range(1, len(kinds) - 1) if fused and kinds[i] == "softmax"
             and kinds[i - 1] == "attention_qk" and kinds[i + 1] == "attention_pv" for d in (-1, 0, 1)}
    sums: dict[int, list[float]] = {}
    for j, (op, r) in enumerate(zip(wl.ops, ops.itertuples())):
        assert r.op == op.name
        # its format's peak; a format the chip lacks runs on another one, at most the chip's best rate
        peak = chips.peak_flops(op.fmt)[0] if op.fmt in chips.formats else best
        v = sum(getattr(op, f"{t}_bytes") for t in ("a", "b", "c") if t not in on_chip.get(op.kind, ()))
        f_t, v_t = op.flops / peak if op.flops else 0.0, v / rate
        if j in group:
            acc = sums.setdefault(group[j], [0.0, 0.0, 0.0, 0.0, 0.0])
            for k, x in enumerate((r.t_op_s, f_t, v_t, r.t_matrix_ideal_s, r.t_memory_compulsory_s)):
                acc[k] += x
        else:
            assert r.t_op_s >= max(f_t, v_t) * (1 - 1e-12), (op.name, r.t_op_s, f_t, v_t)
            assert r.t_op_s >= max(r.t_matrix_ideal_s, r.t_memory_compulsory_s) * (1 - 1e-12)
        assert r.bytes_memory >= r.bytes_compulsory * (1 - 1e-12)
        assert r.padded_flops >= op.flops * (1 - 1e-12)
    for t, f_t, v_t, ideal, comp in sums.values():
        assert t >= max(f_t, v_t, ideal, comp) * (1 - 1e-12)
    row = df.iloc[0]
    assert row.time_s >= row.t_roofline_s * (1 - 1e-12)
    assert row.time_s >= row.t_read_s * (1 - 1e-12)


@settings(max_examples=40, **SETTINGS)
@given(base=st.sampled_from(BASES), wl=workloads, units=st.integers(1, 300), clock=st.floats(0.3e9, 3e9),
       tdp=tdps, l2=st.sampled_from([0.0, 4e6, 50e6]), buf=st.sampled_from([0.0, 48e3, 228e3]),
       koh=st.sampled_from([0.0, 3e-6]))
def test_time_and_energy_are_positive_and_finite(base, wl, units, clock, tdp, l2, buf, koh):
    chips = Chips.from_base(_base(base), 1, {"units": units, "clock": clock, "tdp": tdp, "l2": l2,
                                             "local_buffer": buf, "calibration.kernel_overhead": koh})
    a = evaluate_arrays(chips, wl)
    if np.isinf(a["time_s"]).any():  # only a design whose leakage and clock alone exceed its TDP cannot run
        assert (a["fixed_power_w"] >= a["tdp"] * 0.5).all()
        return
    for key in ("time_s", "energy_j", "energy_memory_j", "energy_compute_j", "tokens_per_s", "power_w"):
        assert np.isfinite(a[key]).all() and (a[key] > 0).all(), key
    for key in ("t_matrix_s", "t_matrix_ideal_s", "t_vector_s", "t_memory_s", "t_read_s", "t_roofline_s",
                "t_memory_compulsory_s", "energy_static_j", "bytes_memory", "bytes_weights", "bytes_kv"):
        assert np.isfinite(a[key]).all() and (a[key] >= 0).all(), key
    assert (0 < a["clock_ratio"]).all() and (a["clock_ratio"] <= 1).all()
    assert (a["mbu"] <= 1 + 1e-9).all()
    # the step's time is the device time split over the resources that bound its operators, or the host's
    # launch time when that is longer (launches overlap device work, seed 004 §4.8.1)
    parts = sum(a[f"time_{r}_bound_s"] for r in ("matrix", "vector", "memory", "l2", "local"))
    launches = koh * sum(o.count for o in wl.ops)
    assert a["time_s"] == pytest.approx(np.maximum(parts, launches), rel=1e-9)
    assert a["t_overhead_s"] == pytest.approx(np.maximum(launches - parts, 0.0), rel=1e-9, abs=1e-15)
    assert a["energy_j"] == pytest.approx(a["energy_memory_j"] + a["energy_compute_j"] + a["energy_static_j"])


@settings(max_examples=25, **SETTINGS)
@given(base=st.sampled_from(BASES), wl=workloads, n=st.integers(2, 9), seed=st.integers(0, 2**31 - 1),
       block=st.sampled_from([1, 3, 10_000]), rom=st.booleans())
def test_n_points_at_once_equal_one_by_one(base, wl, n, seed, block, rom):
    """Vectorized evaluation (blocks, constant inputs kept as one value) gives the same numbers as one point."""
    rng = np.random.default_rng(seed)
    over = {"units": rng.integers(1, 300, n), "clock": rng.uniform(0.3e9, 3e9, n),
            "memory.bandwidth": rng.uniform(50e9, 9e12, n), "tdp": rng.choice([np.inf, 80.0, 700.0], n),
            "l2": rng.choice([0.0, 4e6, 60e6], n), "matrix.instruction.m": rng.choice([1, 8, 16, 64], n),
            "calibration.kernel_overhead": rng.choice([0.0, 2e-6], n),
            "calibration.step_overhead": rng.choice([0.0, 1e-5], n),
            "memory_system.latency": rng.choice([0.0, 600e-9], n), "memory_system.outstanding": 4096.0}
    if rng.random() < 0.3:  # sometimes only one input varies (the others are kept as one (1, 1) value): one the
        # operators see, or the step's overhead alone (the operators' results then one value, the step's not)
        key = "units" if rng.random() < 0.5 else "calibration.step_overhead"
        over = {key: over[key]}
    chips = Chips.from_base(_base(base), n, over)
    opts = dict(weights_in_rom=rom, rom_bandwidth=rng.uniform(1e12, 1e13, n) if rom else np.inf)
    saved = ev._BLOCK_ELEMENTS
    ev._BLOCK_ELEMENTS = max(1, block * len(wl.ops))  # points per block = block
    try:
        together = evaluate_workload(chips, wl, breakdown=True, **opts)
    finally:
        ev._BLOCK_ELEMENTS = saved
    for i in range(n):
        one_opts = dict(opts, rom_bandwidth=opts["rom_bandwidth"][i] if rom else np.inf)
        alone = evaluate_workload(chips.take([i]), wl, breakdown=True, **one_opts)
        assert set(alone.columns) == set(together.columns)
        for key, v in alone.columns.items():
            np.testing.assert_array_equal(np.asarray(together.columns[key])[i:i + 1], v, err_msg=key)
        for k in ev._OP_FIELDS:
            np.testing.assert_array_equal(getattr(together.operators, k)[i:i + 1], getattr(alone.operators, k),
                                          err_msg=k)


def test_points_alike_but_for_their_step_overhead_each_get_their_own(decode_8k):
    """Points alike in all their operators see, differing in the step's overhead alone (a calibration's sweep):
    the block's operator results are one value and its step results are not; each point gets the numbers it gets
    alone, and the overhead adds to the step time one for one (seed 004 §4.8.1: the step overhead follows the
    work)."""
    oh = np.array([0.0, 1e-5, 3e-5])
    chips = Chips.from_base(load_chip("h100"), 3, {"calibration.step_overhead": oh})
    together = evaluate_workload(chips, decode_8k).columns
    for i in range(3):
        alone = evaluate_workload(chips.take([i]), decode_8k).columns
        for key, v in alone.items():
            np.testing.assert_array_equal(np.asarray(together[key])[i:i + 1], v, err_msg=key)
    t = np.asarray(together["time_s"])
    np.testing.assert_allclose(t - t[0], oh, rtol=1e-9, atol=1e-15)


def test_a_designs_workloads_share_its_chip_values(monkeypatch, decode_8k):
    """evaluate_design and evaluate_each compute the chip's values the evaluator reads whatever the workload (its
    inputs, the power model's, a system's share: dse.model.evaluator.chip_values) once for all their workloads, and
    each workload gets the numbers of its own evaluation, to the bit: systems of 1, 2 and 4 chips, published and
    estimated TDPs, points in blocks of a few."""
    import dse.evaluate as de
    rng = np.random.default_rng(5)
    n = 8
    chips = Chips.from_base(load_chip("h100"), n, {
        "units": rng.integers(60, 200, n), "clock": rng.uniform(1e9, 2e9, n), "system.chips": rng.choice([1, 2, 4], n),
        "tdp": rng.choice([np.nan, 300.0, 700.0], n)})
    wls = [decode_8k, W.prefill("qwen3-8b", batch=1, tokens=512), W.decode("qwen3-30b-a3b", batch=4, context=2048)]
    calls = []
    values = ev.chip_values
    monkeypatch.setattr(ev, "chip_values", lambda *a, **k: calls.append(1) or values(*a, **k))
    monkeypatch.setattr(de, "chip_values", ev.chip_values)
    monkeypatch.setattr(ev, "_BLOCK_ELEMENTS", 60)  # (60 // operators points a block)
    m = de.evaluate_design(chips, wls)
    assert len(calls) == 1  # (three workloads, one computation of the chip's values)
    each = de.evaluate_each(chips, wls)  # (what the calibrations call: each workload's own metrics, no mix)
    assert len(calls) == 2
    for wl, (_, _, wm), em in zip(wls, m.per_workload, each):
        alone = evaluate_workload(chips, wl).columns
        assert set(alone) == set(wm.columns) == set(em.columns)
        for key, v in alone.items():
            np.testing.assert_array_equal(np.asarray(wm.columns[key]), np.asarray(v), err_msg=key)
            np.testing.assert_array_equal(np.asarray(em.columns[key]), np.asarray(v), err_msg=key)
    assert len(calls) == 2 + len(wls)


# ---------------------------------------------------------------- formats


def test_fp8_on_a100_runs_at_the_bf16_rate():
    """A100 has no FP8 matrix path: FP8 operands are up-converted and run at the FP16/BF16 rate, never on the
    (twice as fast) INT8 units (seed 004 §4.2.4)."""
    chips = Chips.from_specs([load_chip("a100"), load_chip("h100")])
    big = 8192
    df = evaluate(chips, [gemm_wl(big, big, big, fmt="fp8", name="fp8"), gemm_wl(big, big, big, name="bf16")])
    fp8, bf16 = df[df.workload == "fp8"], df[df.workload == "bf16"]
    a100_fp8, a100_bf16 = fp8.iloc[0], bf16.iloc[0]
    assert a100_fp8.t_matrix_ideal_s == pytest.approx(a100_bf16.t_matrix_ideal_s, rel=1e-12)
    assert chips.peak_flops("int8")[0] == 2 * chips.peak_flops("bf16")[0]  # the rate it must not take
    # H100 has FP8: twice the BF16 rate
    assert fp8.iloc[1].t_matrix_ideal_s == pytest.approx(bf16.iloc[1].t_matrix_ideal_s / 2, rel=1e-12)


def test_fallback_chain_keeps_float_on_float_units():
    chain = ev._fallback_chain("fp8_e4m3")
    assert chain.index("int8") > max(chain.index(f) for f in ("fp16", "bf16", "fp32", "mxfp4"))
    assert chain[:5] == ("fp8_e4m3", "fp8_e5m2", "mxfp8", "mxfp8_e5m2", "fp16")
    assert ev._fallback_chain("int8")[:3] == ("int8", "fp16", "bf16")  # 8-bit integers are exact in FP16/BF16
    assert ev._fallback_chain("bf16")[-2:] == ("int8", "int4")  # integer units only as the very last resort


def test_a_bf16_model_on_an_int8_only_chip_runs_quantized():
    """TPU v1 multiplies INT8 only: a BF16 workload runs there at the INT8 rate (the last resort)."""
    chips = Chips.from_specs([load_chip("tpu-v1")])
    a = evaluate_arrays(chips, gemm_wl(4096, 4096, 4096))
    assert a["t_matrix_ideal_s"][0] == pytest.approx(2 * 4096**3 / chips.peak_flops("int8")[0], rel=1e-12)


def test_a_chip_without_any_matrix_format_takes_forever():
    chips = Chips.from_base(load_chip("h100"), 1)
    for k in [k for k in chips.arrays if k.startswith("matrix.flops_per_cycle.")]:
        chips.arrays[k][:] = 0.0
    a = evaluate_arrays(chips, gemm_wl(64, 64, 64))
    assert np.isinf(a["time_s"]).all() and a["bound_code"][0] == 0


# ---------------------------------------------------------------- tiles and padding


def test_one_row_gemm_pads_to_the_narrow_side_of_the_instruction():
    """H100's wgmma is m64 n8 k16: a 1-row GEMM runs as C^T = B^T A^T and pads its row to 8, not 64."""
    df = evaluate(Chips.from_specs([load_chip("h100")]), [gemm_wl(1, 4096, 4096), gemm_wl(64, 4096, 4096)])
    assert df.padded_flops[0] == 8 * df.flops[0]
    assert df.padded_flops[1] == df.flops[1]


def test_split_k_stops_where_partial_sums_leave_the_l2():
    """One 64 x 64 output tile over a long K: split-K spreads it over the units only as far as the L2 holds the
    partial sums (more units must never mean partial sums spilled to memory)."""
    wl = gemm_wl(64, 64, 65536)
    chips = Chips.from_base(load_chip("h100"), 2, {"l2": [1e4, 50e6]})
    df = evaluate(chips, wl, breakdown=True)
    split = df.attrs["operators"].split.to_numpy()
    assert split[0] == 1 and split[1] > 1
    # no partial sums in memory either way: each operand read once
    assert (df.bytes_memory == df.bytes_compulsory).all()
    assert df.bytes_requested[1] > df.bytes_requested[0]  # the partial sums go through the L2
    assert df.t_matrix_s[1] < df.t_matrix_s[0] / 10


def test_split_k_partial_sums_live_in_an_sram_only_chips_memory():
    """An SRAM-only chip (groq-tsp: memory.kind sram, 230 MB, no L2) keeps split-K partial sums in its SRAM. With
    100 units, a 256 x 4096 x 4096 GEMM has 16 output tiles of 256 x 256 for 100 units, so the default tiles split
    K; the partial sums, 256 x 4096 x 4 B = 4 MB a split, fit the SRAM, where an L2 of 0 B would hold none."""
    chips = Chips.from_base(load_chip("groq-tsp"), 1, {"units": [100.0]})
    assert chips.get("l2", 0.0)[0] == 0 and chips.get("memory.kind")[0] == 2.0
    df = evaluate(chips, gemm_wl(256, 4096, 4096), breakdown=True)
    split = df.attrs["operators"].split.to_numpy()[0]
    assert split > 1 and 256 * 4096 * 4.0 * split <= float(chips.memory_capacity[0])


def test_given_tiles_equal_the_default_ones(decode_8k):
    chips = Chips.from_base(load_chip("h100"), 3, {"units": [32, 132, 264]})
    tiles = default_tiles(chips, op_table(decode_8k))
    # (to the bit with every operator on its own, as given tiles evaluate them, and by the same passes: without a
    # breakdown the evaluator merges identical operators and sums a point's operators in one kernel of its own,
    # evaluator._tail_kernel, and its sums over operators agree within rounding)
    a = evaluate_arrays(chips, decode_8k, breakdown=True)
    b = evaluate_arrays(chips, decode_8k, tiles=tiles, breakdown=True)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    merged = evaluate_arrays(chips, decode_8k)
    given = evaluate_arrays(chips, decode_8k, tiles=tiles)  # (given tiles without a breakdown: the fused kernels)
    for key in a:
        np.testing.assert_allclose(merged[key], a[key], rtol=1e-14, atol=0.0, err_msg=key)
        np.testing.assert_allclose(given[key], a[key], rtol=1e-14, atol=0.0, err_msg=key)


def test_one_more_unit_never_slows_a_small_gemm():
    """The default tiling keeps the faster of its candidate tilings, each non-increasing in units."""
    wl = W.Workload(name="g", phase="ops", ops=(W.gemm("g", 1, 2017, 1, batch=2),))
    t = evaluate_arrays(Chips.from_base(load_chip("a100"), 2, {"units": [30, 31], "tdp": np.inf}), wl)["time_s"]
    assert t[1] <= t[0]


def test_wave_quantization():
    """129 output tiles on 128 units take two waves (seed 004 §4.2.1)."""
    chips = Chips.from_base(load_chip("rtx-4090"), 1)
    one, two = (evaluate_arrays(chips, gemm_wl(256, n, 4096), tiles=(128, 128, 64, 1))
                for n in (128 * 64, 128 * 64 + 1))
    # tiles: 2 x 64 = 128 (one wave) vs 2 x 65 = 130 (two waves): time nearly doubles for 1.6 % more work
    assert two["t_matrix_s"][0] / one["t_matrix_s"][0] > 1.9


# ---------------------------------------------------------------- traffic


def test_fused_attention_keeps_scores_on_chip(decode_8k):
    chips = Chips.from_specs([load_chip("h100")])
    fused = evaluate(chips, decode_8k, breakdown=True)
    unfused = evaluate(chips, decode_8k, breakdown=True, fused_attention=False)
    qk, sm, pv = (decode_8k.op(n) for n in ("attn_qk", "attn_softmax", "attn_pv"))
    on_chip = qk.count * (qk.c_bytes + sm.a_bytes + sm.c_bytes + pv.a_bytes)
    assert unfused.bytes_memory[0] - fused.bytes_memory[0] == pytest.approx(on_chip, rel=1e-12)
    ops = fused.attrs["operators"].set_index("op")
    assert ops.loc["attn_softmax", "bytes_memory"] == 0
    assert ops.loc["attn_qk", "bytes_memory"] == qk.a_bytes + qk.b_bytes  # Q and K in, no scores out
    assert ops.loc["attn_pv", "bytes_memory"] == pv.b_bytes + pv.c_bytes  # V in, output out
    # KV and weights are the same either way
    assert fused.bytes_kv[0] == unfused.bytes_kv[0] == decode_8k.kv_bytes_read


def test_decode_reads_the_weights_and_kv_once(decode_8k):
    a = evaluate_arrays(Chips.from_specs([load_chip("h100")]), decode_8k)
    assert a["bytes_weights"][0] == pytest.approx(decode_8k.weight_bytes_read, rel=1e-12)
    assert a["bytes_kv"][0] == pytest.approx(decode_8k.kv_bytes_read, rel=1e-12)
    assert a["t_read_s"][0] == pytest.approx(decode_8k.bytes_read / load_chip("h100").memory_bandwidth, rel=1e-12)


def test_large_operands_are_re_read_when_the_l2_is_small():
    wl = gemm_wl(8192, 8192, 8192)
    chips = Chips.from_base(load_chip("h100"), 2, {"l2": [1e6, 1e9]})
    a = evaluate_arrays(chips, wl)
    assert a["bytes_memory"][1] == a["bytes_compulsory"][1]
    assert a["bytes_memory"][0] > 2 * a["bytes_compulsory"][0]


def test_littles_law_caps_the_bandwidth(decode_8k):
    chips = Chips.from_base(load_chip("h100"), 3, {"memory_system.latency": 500e-9,
                                                   "memory_system.outstanding": [0, 1024, 1e6]})
    a = evaluate_arrays(chips, decode_8k)
    bw = load_chip("h100").memory_bandwidth
    assert a["t_read_s"][0] == pytest.approx(decode_8k.bytes_read / bw)  # 0 outstanding: no cap given
    assert a["t_read_s"][1] == pytest.approx(decode_8k.bytes_read / (1024 * 128 / 500e-9))
    assert a["t_read_s"][2] == pytest.approx(a["t_read_s"][0])


def test_weights_in_rom(decode_8k):
    chips = Chips.from_specs([load_chip("h100")])
    shared = evaluate_arrays(chips, decode_8k)
    rom = evaluate_arrays(chips, decode_8k, weights_in_rom=True, rom_bandwidth=2e12, rom_energy_per_byte=1e-12)
    assert rom["bytes_memory"][0] == pytest.approx(shared["bytes_memory"][0] - shared["bytes_weights"][0])
    assert rom["t_read_s"][0] == pytest.approx(max(decode_8k.weight_bytes_read / 2e12,
                                                   decode_8k.kv_bytes_read / chips.memory_bandwidth[0]))
    assert rom["t_memory_s"][0] >= rom["t_read_s"][0]
    assert rom["energy_weights_j"][0] == pytest.approx(decode_8k.weight_bytes_read * 1e-12)
    assert rom["resident_bytes"][0] == decode_8k.kv_resident_bytes + decode_8k.workspace_bytes
    assert rom["max_batch"][0] > shared["max_batch"][0]


# ---------------------------------------------------------------- power


def test_a_tiny_tdp_lowers_the_clock():
    wl = gemm_wl(8192, 8192, 8192)
    chips = Chips.from_base(load_chip("h100"), 4, {"tdp": [np.inf, 5000.0, 300.0, 300.0],
                                                  "power.voltage_scaling": [1, 1, 1, 0]})
    a = evaluate_arrays(chips, wl)
    cr = a["clock_ratio"]
    assert cr[0] == 1.0 and cr[1] == 1.0
    assert 0 < cr[3] < cr[2] < 1  # fixed voltage throttles harder than voltage scaling
    # the same power ratio x: fixed voltage runs at r = x, scaling at the r whose dynamic power ratio is x
    # (P ~ f V^2 with V = max(V_min, V_th + (V_nom - V_th) f / f_rated) from the node: dse.model.power)
    assert (a["peak_power_w"][2:] <= 300.0 * (1 + 1e-9)).all()
    assert a["time_s"][2] > a["time_s"][0]
    assert a["t_matrix_s"][2] == pytest.approx(a["t_matrix_s"][0] / cr[2], rel=1e-12)
    assert a["sustained_clock_hz"][3] == pytest.approx(load_chip("h100").clock * cr[3])


def test_static_power_adds_static_energy(decode_8k):
    chips = Chips.from_base(load_chip("h100"), 2, {"power.static": [0.0, 100.0], "power.clock": 0.0})
    a = evaluate_arrays(chips, decode_8k)
    assert a["energy_static_j"][0] == 0
    assert a["energy_static_j"][1] == pytest.approx(100.0 * a["time_s"][1])  # decode: the design voltage
    assert a["power_w"][1] == pytest.approx(a["energy_j"][1] / a["time_s"][1])


# ---------------------------------------------------------------- capacity


def test_capacity_and_max_batch():
    """RTX 4090, 24 GB: Qwen3-8B BF16 + 2 GiB workspace leaves room for 4 requests at 8K, 2 at 16K (§4.3.1)."""
    chips = Chips.from_specs([load_chip("rtx-4090"), load_chip("h100")])
    w1, w8 = W.decode("qwen3-8b", batch=1, context=8192), W.decode("qwen3-8b", batch=8, context=8192)
    a1, a8 = evaluate_arrays(chips, w1), evaluate_arrays(chips, w8)
    np.testing.assert_array_equal(a1["capacity_bytes"], [24e9, 80e9])
    np.testing.assert_array_equal(a1["max_batch"], [4, w1.max_requests(80e9)])
    assert a1["fits"].tolist() == [True, True] and a8["fits"].tolist() == [False, True]
    assert (a8["resident_bytes"] == w8.resident_bytes).all()
    a16 = evaluate_arrays(chips, W.decode("qwen3-8b", batch=1, context=16384))
    assert a16["max_batch"][0] == 2
    # weights alone larger than the memory: no request fits (max_batch 0, never negative: dse.model.capacity)
    small = Chips.from_base(load_chip("rtx-4090"), 1, {"dram.capacity": 8e9})
    a = evaluate_arrays(small, w1)
    assert a["max_batch"][0] == 0 and not a["fits"][0]
    assert w1.max_requests(8e9) == 0  # the workload's own count says the same
    # no KV cache: any number of requests, as long as the weights fit
    assert np.isinf(evaluate_arrays(chips, gemm_wl(16, 16, 16))["max_batch"]).all()


# ---------------------------------------------------------------- the table


def test_evaluate_table(decode_8k):
    chips = Chips.from_specs([load_chip("h100"), load_chip("rtx-4090")])
    df = evaluate(chips, [decode_8k, gemm_wl(4096, 4096, 4096)], breakdown=True)
    assert len(df) == 4 and list(df.chip[:2]) == ["h100-sxm", "rtx-4090"]
    assert set(df.bound) <= {"compute", "vector", "memory", "l2", "local"}
    # the 4096^3 GEMM on H100 in the heuristic's wide 128 x 256 tiles is compute-bound (1.107 GB of L2 requests,
    # 122 us at 9.06 TB/s, against 139 us of matrix time: the hand count of test_prefill_gemms_on_h100_...)
    assert df.bound[0] == "memory" and df.bound[2] == "compute"
    ops = df.attrs["operators"]
    assert len(ops) == 2 * len(decode_8k.ops) + 2
    for col in ("t_op_s", "t_matrix_s", "t_memory_s", "bytes_memory", "padded_flops", "energy", "bound"):
        assert col in ops
    arrs = evaluate_arrays(chips, decode_8k)
    for key, v in arrs.items():
        assert np.shape(v) == (2,), key


def test_only_the_attention_softmax_is_fused(decode_8k):
    """The sampling softmax reads the LM head's logits from memory; the router's softmax its logits."""
    moe = W.decode("qwen3-235b-a22b", batch=2, context=1024)
    for wl in (decode_8k, moe):
        ops = evaluate(Chips.from_specs([load_chip("h100")]), wl, breakdown=True).attrs["operators"].set_index("op")
        assert ops.loc["attn_softmax", "bytes_memory"] == 0
        for name in ("sampling_softmax", "router_softmax"):
            if name in ops.index:
                op = wl.op(name)
                assert ops.loc[name, "bytes_memory"] == op.a_bytes + op.c_bytes > 0


# ---------------------------------------------------------------- tile working set (the buffer_fit metric)


def test_tile_working_set_of_given_tiles():
    """The largest double-buffered working set of the chosen tiles over the GEMM-like operators.

    H100 (no separate accumulator store), BF16: a 128 x 256 tile with T_K = 64 holds two slots of
    (128 x 64 + 64 x 256) x 2 B = 48 KiB each plus the 128 x 256 FP32 accumulator (128 KiB): 224 KiB;
    the 64 x 64 tile of the other GEMM needs 2 x 16 KiB + 16 KiB = 48 KiB; the softmax has no tile.
    """
    ops = (W.gemm("big", 512, 512, 512), W.gemm("small", 64, 64, 512))
    _, softmax, _ = W.attention(8, 8, 64, 16, 16)
    wl = W.Workload(name="two", phase="ops", ops=ops + (softmax,))
    tiles = (np.array([[128.0, 64.0, 16.0]]), np.array([[256.0, 64.0, 16.0]]), np.array([[64.0, 64.0, 16.0]]),
             np.ones((1, 3)))
    h100 = Chips.from_specs([load_chip("h100")])
    assert evaluate_arrays(h100, wl, tiles=tiles)["tile_working_set_bytes"][0] == 224 * 1024
    # a chip with an accumulator store (TPU v1's 4 MiB) keeps the accumulator out of the local buffer
    tpu = Chips.from_base(load_chip("h100"), 1, {"accumulator": np.array([4.0 * 2**20])})
    assert evaluate_arrays(tpu, wl, tiles=tiles)["tile_working_set_bytes"][0] == 96 * 1024
    # a store too small for the tile's accumulators leaves the rest in the local buffer: 32 KiB of the 128 x 256 x
    # 4 B = 128 KiB accumulator tile held, 96 KiB beside its 96 KiB of operands (the 64 x 64 tile's 16 KiB fit)
    small = Chips.from_base(load_chip("h100"), 1, {"accumulator": np.array([32.0 * 1024])})
    assert evaluate_arrays(small, wl, tiles=tiles)["tile_working_set_bytes"][0] == (96 + 96) * 1024


def test_default_tiles_fit_the_buffer_and_feed_buffer_fit(decode_8k):
    import constraints.buffer_fit as buffer_fit
    from dse.evaluate import evaluate_design

    chips = Chips.from_specs([load_chip(n) for n in ("h100", "a100", "rtx-4090", "b200", "mi355x")])
    m = evaluate_design(chips, [decode_8k, W.prefill("qwen3-8b", batch=1, tokens=2048)])
    assert (m["tile_working_set_bytes"] > 0).all()
    assert (buffer_fit.constraint(m) <= 0).all()  # the default tiles are sized to the local buffer
    # a buffer too small for even the instruction-sized tile violates it by the difference
    tiny = Chips.from_base(load_chip("h100"), 1, {"local_buffer": np.array([1024.0])})
    t = evaluate_design(tiny, decode_8k)
    assert buffer_fit.constraint(t)[0] == t["tile_working_set_bytes"][0] - 1024.0 > 0


@pytest.mark.parametrize("chip", ["b200", "ascend-910c", "trainium2", "tpu-v1"])
def test_default_tiles_keep_the_accumulators_in_an_accumulator_store(chip):
    """On a chip with a separate accumulator store (``accumulator``: TMEM, L0C, PSUM, TPU accumulators) the FP32
    accumulator tile lives there, not in the local buffer: the default tiles obey the CP-SAT tile model's limits
    (dse.solvers.tile_data.fits: operands in the buffer, 4 T_M T_N <= accumulator) and use them.

    B200 (TMEM 256 KiB, 228 KiB of shared memory, a 128 x 16 instruction): an 8192^3 FP8 GEMM's square tile is
    256 x 256: its accumulators take exactly the 256 KiB of TMEM, its two operand slots 2 x (256 x 64 + 64 x 256)
    x 1 B = 64 KiB of shared memory, and 256 is the heuristic's largest side. Counting the accumulators in shared
    memory (as before) gave 128 x 128 (4 T^2 + 256 T <= 228 KiB: T <= 210, down to a multiple of 128), four times
    the L2 requests per FLOP of the whole panel. Ascend 910C (L0C 128 KiB): 4 T^2 <= 128 KiB caps T at 181,
    176 as a multiple of 16; the old rule gave 256 x 256, a 256 KiB accumulator tile CP-SAT's limits refuse."""
    from dse.solvers.tile_data import fits, tile_data

    chips = Chips.from_specs([load_chip(chip)])
    fmt = "fp8_e4m3" if chip == "b200" else "int8" if chip == "tpu-v1" else "bf16"
    for m, n, k in ((8192, 8192, 8192), (4096, 4096, 4096), (256, 4096, 4096)):
        wl = W.build({"name": "g", "ops": [{"gemm": {"name": "g", "m": m, "n": n, "k": k,
                                                     "formats": {"weights": fmt, "activations": fmt}}}]})
        op = wl.ops[0]
        tm, tn, tk, _ = (float(np.asarray(x).reshape(-1)[0]) for x in default_tiles(chips, op_table(wl)))
        assert fits(tile_data(op, chips), tm, tn, tk, 2), (chip, m, n, k, tm, tn, tk)
        if chip == "b200" and m == 8192:
            assert (tm, tn) == (256.0, 256.0)
        if chip == "ascend-910c" and m == 8192:
            assert (tm, tn) == (176.0, 176.0)


def _catalog_chips_with_a_local_buffer() -> list[str]:
    from dse.hardware import catalog

    return [c.name for c in catalog() if c.local_buffer > 0]


@pytest.mark.parametrize("chip", _catalog_chips_with_a_local_buffer())
def test_default_tiles_pass_the_tile_models_limits_on_every_catalog_chip(chip):
    """Every catalog chip with a local buffer (Groq has none: no tile fits anywhere): its default tiles of GEMMs
    from decode to prefill sizes, odd sizes and a vocabulary-wide one included, obey the CP-SAT tile model's
    limits (dse.solvers.tile_data.fits: the working set within the local buffer, the accumulator tile within the
    accumulator store or the register file). Ascend 910C's 256 x 256 default broke its 128 KiB L0C before the
    default tiles kept the accumulators in the store."""
    from dse.solvers.tile_data import fits, tile_data

    spec = load_chip(chip)
    chips = Chips.from_specs([spec])
    fmt = next(f for f in ("bf16", "fp16", "int8", "fp8_e4m3") if f in spec.matrix.flops_per_cycle)
    for m, n, k in ((8192, 8192, 8192), (256, 4096, 4096), (1, 4096, 4096), (300, 28672, 8192),
                    (2048, 151936, 4096)):
        wl = W.build({"name": "g", "ops": [{"gemm": {"name": "g", "m": m, "n": n, "k": k,
                                                     "formats": {"weights": fmt, "activations": fmt}}}]})
        tm, tn, tk, _ = (float(np.asarray(x).reshape(-1)[0]) for x in default_tiles(chips, op_table(wl)))
        assert fits(tile_data(wl.ops[0], chips), tm, tn, tk, 2), (chip, m, n, k, tm, tn, tk)


def test_prefill_gemms_on_h100_stay_near_compulsory_traffic_and_compute_bound():
    """Qwen3-8B 4K prefill on H100 (issue 15 item 2): the units' concurrent block of output tiles shares its
    operand panels (dse.model.tiling.block_reads), so an operand that fits the 50 MB L2 is read once and the
    others about twice; no GEMM with 4096 rows is memory-bound.

    The on-chip levels (issue 15 item 1, dse.model.hierarchy) made the heuristic's square 128 x 128 tiles L2-bound
    on the projections (the q projection requested 32 A and 32 B panels, 1.64 GB with H100's multicast, 181 us
    at the design clock against 139 us of matrix time); its wide 128 x 256 tiles (CUTLASS's Hopper GEMMs) are
    not: the q projection (4096^3 BF16, A = B = 33.55 MB, c_M = 32, c_N = 16) requests 16 A and 32 B panels, and
    H100's clusters of 2 multicast B's pairs: 16 + 16 panels, 1.07 GB + C 33.5 MB = 1.107 GB over 4950 B/clk x
    1.83 GHz = 9.06 TB/s is 122 us, under the 139 us of matrix time (137.4 GFLOP / 989.4 TFLOP/s).

    Hand counts: q/k/v/o, gate and up projections and attention have one operand (or both) in L2 and the
    other streamed once by a block spanning its whole extent -> exactly compulsory. The down projection
    (4096 x 12288 x 4096, both operands 100.7 MB): the heuristic 128 x 256 tiles give c_M = 32, c_N = 16; a
    block of at most 132 tiles, 16 x 8, reads A ceil(16 / 8) = 2 and B ceil(32 / 16) = 2 times:
    (4 x 100.66 + 33.55) / 234.9 MB = 1.857x compulsory (the per-tile rule read 7.9x; the square tiles' 11 x 12
    block 2.71x), as CP-SAT's tiles (solver.tiles: cpsat) read it: each operand twice (416 MiB).
    """
    from dse.solvers.cpsat_tiles import solve_tiles

    wl = W.prefill("qwen3-8b", batch=1, tokens=4096)
    r = evaluate(Chips.from_specs([load_chip("h100-sxm")]), wl, breakdown=True)
    o = r.attrs["operators"].set_index("op")
    gemms = [op.name for op in wl.ops if op.m >= 4096 and op.n > 0 and op.k > 0]
    assert {"q_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "attn_qk", "attn_pv"} <= set(gemms)
    for name in gemms:
        assert o.loc[name, "bound"] in ("compute", "l2"), name
        if name != "down_proj":
            assert o.loc[name, "bytes_memory"] <= (1.0 + 1e-12) * o.loc[name, "bytes_compulsory"], name
    operand, c = 4096 * 12288 * 2, 4096 * 4096 * 2
    assert o.loc["down_proj", "bytes_memory"] == pytest.approx(4 * operand + c, rel=1e-12)
    q = o.loc["q_proj"]
    assert q["bound"] == "compute" and q["bytes_l2"] == pytest.approx((16 + 16) * 4096**2 * 2 + 4096**2 * 2, rel=1e-12)
    down = wl.op("down_proj")
    best = solve_tiles(down, "h100-sxm")
    assert best.traffic_bytes == pytest.approx((4 * 4096 * 12288 * 2 + 4096 * 4096 * 2), rel=1e-9)
