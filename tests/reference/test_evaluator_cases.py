"""Seed cases of the time, memory and energy model, THROUGH the evaluator (tests/data/seed_cases.yaml).

Chips come from dse's own specs: catalog chips (``load_chip``) or a catalog
chip with the seed's stated figures written into its YAML (``variant``,
validated by ChipSpec like any user file). Workloads come from the
dse.workload builders. The numbers come out of ``dse.model.evaluator.evaluate``
(and, for the link cases, dse.model.links fed with the catalog chips' link
specs); expected values come from the case file via tests/reference_cases.py,
never re-typed here.

Where the seed's accounting leaves something out that the evaluator counts,
the chip says so explicitly: the seed's rooflines have no instruction-tile
padding (instruction tile 1 x 1 x 1), its energy tallies count only the HBM
row and the FMA row (on-chip level energies overridden to 0), its clock
arithmetic has no static power (``power.static: 0 W``).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from dse import technology
from dse import workload as W
from dse.evaluate import evaluate
from dse.hardware import Chips, chip_from_dict, load_chip, load_chip_dict
from dse.model import links
from dse.model import power as pw
from dse.precision import get_format
from tests.reference.test_workload_cases import INT4_G128
from tests.reference_cases import approx, case, expected

GiB, MiB = 2**30, 2**20
D = 4096  # Qwen3-8B hidden width: the Q projection is [M, 4096] x [4096, 4096]
ONE_BY_ONE = {"m": 1, "n": 1, "k": 1}  # no instruction-tile padding (the seed's rooflines)
#: the seed's energy tallies count the HBM row and the FMA row only (§4.1.3): on-chip levels cost nothing here
NO_ON_CHIP_ENERGY = {"energy.l2": 0.0, "energy.local": 0.0, "energy.vector_flop": 0.0, "energy.register_file": 0.0}
#: The seed's rooflines (seed 004 §4.8.1) have two resources, compute and memory: the variants that restate a
#: chip as one unit of the seed's figures leave out the on-chip levels (dse.model.hierarchy) as well
NO_ON_CHIP_LIMITS = {"local_bytes_per_cycle": float("inf"), "l2_bytes_per_cycle": float("inf")}


# ---------------------------------------------------------------- helpers


def variant(name: str, changes: dict, drop: tuple[str, ...] = ()):
    """Catalog chip ``name`` with YAML fields replaced (dotted keys, values with units), validated."""
    data = copy.deepcopy(load_chip_dict(name))
    for key in drop:
        data.pop(key, None)
    for dotted, value in changes.items():
        node = data
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return chip_from_dict(data)


def qproj(m: int, fmt: str = "bf16", weights: str | None = None, n: int = D, k: int = D):
    """The Q projection Y[M, 4096] = X[M, 4096] W[4096, 4096] as a one-operator workload spec."""
    formats = {"weights": weights or fmt, "activations": fmt, "output": fmt}
    op = {"name": "q_proj", "m": int(m), "n": n, "k": k, "formats": formats}
    return W.build({"name": f"q_proj:m={m}:{weights or fmt}", "ops": [{"gemm": op}]})


def chips_of(*names_or_specs) -> Chips:
    return Chips.from_specs([load_chip(s) if isinstance(s, str) else s for s in names_or_specs])


def row(df, chip: str, workload: str | None = None):
    sel = df[df.chip == chip] if workload is None else df[(df.chip == chip) & (df.workload == workload)]
    assert len(sel) == 1, (chip, workload, len(sel))
    return sel.iloc[0]


#: seed 004 §4.8.1: an RTX-4090-like roofline chip of exactly 165.2 TFLOP/s (BF16, FP32 accumulate) and
#: 1.008 TB/s: one unit of 165,200 FLOP/cycle at 1 GHz, no instruction padding (so no waves either), no TDP
SEED_4090 = variant("rtx-4090", {"name": "rtx-4090-seed", "units": 1, "clock": "1 GHz", **NO_ON_CHIP_LIMITS,
                                 "matrix": {"instruction": ONE_BY_ONE, "flops_per_cycle": {"bf16": 165200}}},
                    drop=("tdp",))


# ---------------------------------------------------------------- roofline (seed 004 §4.8.1, §4.6.1)


@pytest.mark.parametrize("chip", ["rtx-4090", SEED_4090], ids=["catalog", "seed-figures"])
def test_rtx4090_qproj_roofline(chip):
    cid = "rtx4090_qproj_roofline"
    chips = chips_of(chip)
    i = case(cid)["inputs"]
    assert chips.peak_flops(i["dtype"])[0] == pytest.approx(float(i["peak_flops"]), rel=case(cid)["rel_tol"])
    assert chips.memory_bandwidth[0] == float(i["bandwidth"])
    df = evaluate(chips, [qproj(1, i["dtype"], n=i["N"], k=i["K"]), qproj(256, i["dtype"], n=i["N"], k=i["K"])])
    for m, r in zip((1, 256), df.itertuples()):
        approx(cid, f"m{m}_compute_s", r.t_matrix_ideal_s)  # F / P, unpadded
        approx(cid, f"m{m}_memory_s", r.t_memory_s)  # X, W read once, Y written once (all fit the L2)
        approx(cid, f"m{m}_memory_s", r.t_memory_compulsory_s)
        approx(cid, f"m{m}_bound", r.bound)
        # "max of the two" column of the seed's table
        assert r.t_roofline_s == pytest.approx(max(r.t_matrix_ideal_s, r.t_memory_s), rel=1e-12)
        assert r.time_s >= r.t_roofline_s * (1 - 1e-12)


def test_ridge_point_rows():
    cid = "ridge_point_rows"
    i = case(cid)["inputs"]
    chips = chips_of(SEED_4090)
    assert chips.peak_flops("bf16")[0] == pytest.approx(float(i["peak_flops"]), rel=1e-12)
    assert chips.memory_bandwidth[0] == float(i["bandwidth"])
    approx(cid, "machine_balance", chips.machine_balance("bf16")[0])
    # a sweep of M through the evaluator; the bound flips once, from memory to compute
    ms = np.arange(1, 257)
    df = evaluate(chips, [qproj(m, n=i["d"], k=i["d"]) for m in ms])
    compute = df.bound.to_numpy() == "compute"
    first = int(ms[np.argmax(compute)])
    assert not compute[ms < first].any() and compute[ms >= first].all()
    approx(cid, "first_compute_bound_m", first)
    # compute and memory time are both linear in M (X, W and Y bytes): their difference crosses zero at M*
    gap = df.t_matrix_ideal_s.to_numpy() - df.t_memory_s.to_numpy()
    j = first - 1  # index of the first compute-bound M
    approx(cid, "m_star", ms[j - 1] + gap[j - 1] / (gap[j - 1] - gap[j]))
    # the catalog RTX 4090 (padded, wave-quantized tiles) turns compute-bound no later than the ideal roofline
    cat = evaluate(chips_of("rtx-4090"), [qproj(m, n=i["d"], k=i["d"]) for m in (first - 1, first)])
    approx(cid, "machine_balance", Chips.from_specs([load_chip("rtx-4090")]).machine_balance("bf16")[0])
    assert (cat.bound == "compute").all()


def test_v100_tensor_core_value():
    """Seed 004 §4.6.1: the same FP16 projection on V100's FP32 path and on its Tensor Cores."""
    cid = "v100_tensor_core_value"
    tc = load_chip("v100")
    # the ordinary path: no Tensor Core formats, so the FP16 GEMM falls back to the FP32 rate (CUDA cores)
    fp32_only = {"fp32": tc.matrix.flops_per_cycle["fp32"]}
    fp32_path = variant("v100", {"name": "v100-fp32-path", "matrix.flops_per_cycle": fp32_only})
    chips = chips_of(fp32_path, tc)
    assert chips.peak_flops("fp16")[0] == 0 and chips.peak_flops("fp16")[1] > 0
    df = evaluate(chips, [qproj(4096, "fp16", k=4096), qproj(1, "fp16")])
    for m in (4096, 1):
        wl = f"q_proj:m={m}:fp16"
        path, core = row(df, "v100-fp32-path", wl), row(df, "v100-sxm2", wl)
        approx(cid, f"m{m}_fp32_path_s", path.t_matrix_ideal_s)
        approx(cid, f"m{m}_tensor_core_s", core.t_matrix_ideal_s)
        # input, weights and output moved once (96 MiB at M = 4096, 32 MiB + 16 KiB at M = 1)
        approx(cid, f"m{m}_memory_s", core.t_memory_compulsory_s)
        approx(cid, f"m{m}_memory_s", path.t_memory_compulsory_s)
    # the Tensor Core helps the 4096-row call (compute-bound either way), not the single row (read-bound)
    big, one = df[df.workload == "q_proj:m=4096:fp16"], df[df.workload == "q_proj:m=1:fp16"]
    assert (big.t_matrix_ideal_s > big.t_memory_compulsory_s).all()
    assert (one.t_matrix_ideal_s < one.t_memory_compulsory_s).all()
    assert row(df, "v100-sxm2", "q_proj:m=1:fp16").bound == "memory"


def test_weight_read_by_format():
    """Seed 004 §4.6.1: the 4096 x 4096 weights in BF16 and MXFP4, on the RTX 4090 and RTX 5090."""
    cid = "weight_read_by_format"
    df = evaluate(chips_of("rtx-4090", "rtx-5090"), [qproj(1, "bf16"), qproj(1, "bf16", weights="mxfp4")])
    approx(cid, "bf16_rtx4090_s", row(df, "rtx-4090", "q_proj:m=1:bf16").t_read_s)  # the weights alone
    approx(cid, "bf16_rtx5090_s", row(df, "rtx-5090", "q_proj:m=1:bf16").t_read_s)
    mx = row(df, "rtx-5090", "q_proj:m=1:mxfp4")
    approx(cid, "mxfp4_rtx5090_s", mx.t_read_s)
    assert mx.bytes_weights == 8.5 * MiB


# ---------------------------------------------------------------- decode read bounds (seed 004 §4.8.2, §4.6.3)


DEVICES = {"rtx4090_s": "rtx-4090", "rtx5090_s": "rtx-5090", "m1_ultra_s": "m1-ultra", "m3_ultra_s": "m3-ultra",
           "m4_max_s": "m4-max", "h100_s": "h100"}


@pytest.fixture(scope="module")
def qwen3_8b_decode():
    i = case("qwen3_8b_decode_step")["inputs"]
    dtype = i["dtype"]
    return W.decode(i["model"], batch=i["batch"], context=i["context"],
                    formats={"weights": dtype, "activations": dtype, "kv": dtype, "output": dtype})


def test_device_decode_bounds(qwen3_8b_decode):
    cid = "device_decode_bounds"
    assert set(DEVICES) == set(case(cid)["expected"])
    chips = chips_of(*DEVICES.values())
    df = evaluate(chips, qwen3_8b_decode)
    nbytes = float(case(cid)["inputs"]["bytes"])
    approx("qwen3_8b_decode_step", "bytes_read", df.bytes_weights[0] + df.bytes_kv[0])
    tol = case(cid)["rel_tol"]
    for key, r in zip(DEVICES, df.itertuples()):
        approx(cid, key, r.t_memory_s)  # all modelled traffic (activations add 0.08 %)
        approx(cid, key, r.t_read_s)  # weights + KV only: the seed's payload
        assert r.bound == "memory"
        # the catalog chip has the bandwidth the seed uses (16.345 GB / its time)
        assert chips.memory_bandwidth[r.point] == pytest.approx(nbytes / expected(cid, key), rel=tol)


def _qwen3_235b(batch: int, routing: str = "uniform"):
    # the seed's 4-bit storage scheme: 4-bit values + a 16-bit scale per 128 on attention and expert matrices,
    # BF16 embedding, LM head, routers and norms (tests/reference/test_workload_cases.py); multiplied in BF16
    assert get_format("int4_g128").bits_per_value == INT4_G128.bits_per_value
    formats = W.Formats(weights="int4_g128", embedding="bf16", router="bf16", compute="bf16")
    return W.decode("qwen3-235b-a22b", batch=batch, context=8192, formats=formats, routing=routing)


def test_moe_step_reads():
    cid = "moe_step_reads"
    wls = {"dispersed": _qwen3_235b(8), "concentrated": _qwen3_235b(8, "concentrated"), "single": _qwen3_235b(1)}
    chips = {"h200": "h200-sxm", "b200": "b200", "m3_ultra": "apple-m3-ultra"}
    df = evaluate(chips_of(*chips.values()), list(wls.values()))  # rows: workload-major, then chip
    for key in case(cid)["expected"]:
        kind, chip = key.removesuffix("_s").split("_", 1)
        r = df.iloc[list(wls).index(kind) * len(chips) + list(chips).index(chip)]
        assert r.chip == chips[chip]
        approx(cid, key, r.t_read_s)  # weights, scales and KV: the seed's per-step reads
        assert r.t_memory_s >= r.t_read_s  # + activations
    for i, w in enumerate(wls.values()):
        r = df.iloc[i * len(chips)]
        assert r.bytes_weights + r.bytes_kv == pytest.approx(w.bytes_read, rel=1e-12)


# ---------------------------------------------------------------- Little's law (seed 004 §4.3.3, Example 4-2)


def _kv_read_8k():
    """Reading one request's 8K KV cache (Qwen3-8B, 36 layers of decode attention): 1.125 GiB."""
    m = W.load_model("qwen3-8b")
    ops = W.attention(m.heads, m.kv_heads, m.head_dim, queries=1, context=8192, count=m.layers)
    return W.Workload(name="kv-read-8k", phase="ops", ops=ops)


def test_littles_law():
    cid = "littles_law"
    kv = _kv_read_8k()
    assert kv.kv_bytes_read == 1.125 * GiB
    txn, lat = "128 B", "500 ns"

    def run(chip, outstanding, latency=lat):
        spec = variant(chip, {"memory_system": {"latency": latency, "outstanding": 1, "transaction": txn}})
        n = np.size(outstanding)
        out = evaluate(Chips.from_base(spec, n, {"memory_system.outstanding": outstanding}), kv)
        return out, spec.memory_bandwidth

    def fewest(chip, latency=lat):
        """The fewest in-flight transactions at which the KV read runs at the interface bandwidth."""
        n = np.arange(1, 20001)
        df, bw = run(chip, n, latency)
        full = df.t_read_s.to_numpy() <= df.bytes_kv.to_numpy() / bw * (1 + 1e-9)
        return int(n[np.argmax(full)])

    approx(cid, "transactions_for_1008GBps", fewest("rtx-4090"))
    df, _ = run("rtx-4090", [128, 4096])
    r128, r4096 = df.iloc[0], df.iloc[1]
    approx(cid, "bw_with_128_transactions", r128.bytes_kv / r128.t_read_s)
    approx(cid, "time_with_128_transactions_s", r128.t_read_s)
    approx(cid, "time_with_128_transactions_s", r128.t_memory_s)
    approx(cid, "time_with_4096_at_1008GBps_s", r4096.t_read_s)
    df, _ = run("rtx-5090", [4096])
    approx(cid, "bw_with_4096_transactions", df.bytes_kv[0] / df.t_read_s[0])
    approx(cid, "time_with_4096_at_1792GBps_s", df.t_read_s[0])
    approx(cid, "transactions_for_1792GBps", fewest("rtx-5090"))
    approx(cid, "transactions_for_1792GBps_at_800ns", fewest("rtx-5090", "800 ns"))


# ---------------------------------------------------------------- energy and power (seed 004 §4.1.3, §4.8.4)


def _pj(key: str, unit: str) -> str:
    return f"{expected('energy_per_byte_levels', key)} {unit}"


def test_energy_per_byte_levels():
    """The seed's energy table, as the technology tables give it to a 45 nm chip with HBM2."""
    cid = "energy_per_byte_levels"
    chip45 = variant("h100", {"name": "seed-45nm", "process": "n45", "hbm.generation": "hbm2",
                              "local_buffer": "8 KiB", "l2": "1 MiB"})
    a = Chips.from_specs([chip45]).arrays
    pj = 1e12
    approx(cid, "kb_sram", a["energy.local"][0] * pj)
    approx(cid, "mb_sram", a["energy.l2"][0] * pj)
    approx(cid, "nvlink_c2c", a["energy.link"][0] * pj)
    approx(cid, "hbm2", a["energy.memory"][0] * pj)
    approx(cid, "fp16_fma_per_flop", a["tech.flop.fp16"][0] * pj)  # the node's arithmetic row (before overheads)
    approx(cid, "lpddr", technology.memory("lpddr2").energy_per_byte * pj)  # no ChipSpec DRAM kind (45 nm DRAM)


#: seed 004 §4.1.3: H100 (3.35 TB/s, 700 W) whose energies are the table's HBM2 row and FP16-FMA row, and no
#: static power; unpadded instructions (the tally counts useful FLOPs)
SEED_ENERGY_H100 = variant("h100", {"name": "h100-seed-energy", "matrix.instruction": ONE_BY_ONE, **NO_ON_CHIP_LIMITS,
                                    "energy": {"memory": _pj("hbm2", "pJ/B"),
                                               "flop": {"bf16": _pj("fp16_fma_per_flop", "pJ/FLOP")}},
                                    "power": {"static": "0 W", "clock": "0 W"}})


def _seed_energy_chips(n: int = 1, **overrides) -> Chips:
    return Chips.from_base(SEED_ENERGY_H100, n, {**NO_ON_CHIP_ENERGY, **overrides})


def test_qwen3_8b_decode_energy(qwen3_8b_decode):
    cid = "qwen3_8b_decode_energy"
    r = evaluate(_seed_energy_chips(), qwen3_8b_decode).iloc[0]
    approx(cid, "weights_j", r.energy_weights_j)
    approx(cid, "kv_j", r.energy_kv_j)
    approx(cid, "compute_j", r.energy_compute_j)
    approx(cid, "total_j", r.energy_j)  # + activations (0.08 %)
    approx(cid, "total_j", r.energy_weights_j + r.energy_kv_j + r.energy_compute_j)
    approx(cid, "step_time_s", r.time_s)
    approx(cid, "step_time_s", r.t_read_s)
    approx(cid, "average_power_w", r.power_w)
    assert r.energy_static_j == 0
    # batch 32: the weights are read once for 32 tokens
    b32 = W.decode("qwen3-8b", batch=32, context=8192)
    r32 = evaluate(_seed_energy_chips(), b32).iloc[0]
    approx(cid, "per_token_batch32_j", (r32.energy_weights_j + r32.energy_kv_j + r32.energy_compute_j) / 32)
    # the same 16.345 GB from one level at a time: five points, main-memory energy per byte varied
    t = technology.default()
    n45 = t.process("n45")  # the table's 45 nm rows
    levels = {"kb_sram": n45.sram_energy_per_byte(8 * 1024), "mb_sram": n45.sram_energy_per_byte(MiB),
              "c2c": t.packaging.link_energy, "hbm": t.memory("hbm2").energy_per_byte,
              "lpddr": t.memory("lpddr2").energy_per_byte}
    df = evaluate(_seed_energy_chips(len(levels), **{"energy.memory": list(levels.values())}), qwen3_8b_decode)
    for (level, _), r in zip(levels.items(), df.itertuples()):
        got = r.energy_weights_j + r.energy_kv_j
        if level == "kb_sram":
            # 16.345 GB x 1.25 pJ/B = 0.0204 J, which the seed prints as 0.020 (2 significant figures);
            # the case's 1 % tolerance is tighter than that rounding
            assert round(got, 3) == expected(cid, "single_level_kb_sram_j")
        else:
            approx(cid, f"single_level_{level}_j", got)


def test_energy_batch_crossover():
    cid = "energy_batch_crossover"
    batches = list(range(1, 41))
    df = evaluate(_seed_energy_chips(), [W.decode("qwen3-8b", batch=b, context=8192) for b in batches])
    tokens = np.array(batches, dtype=float)
    weights_per_token = df.energy_weights_j.to_numpy() / tokens
    compute_per_token = df.energy_compute_j.to_numpy() / tokens
    below = weights_per_token < compute_per_token
    first = batches[int(np.argmax(below))]
    assert below[first - 1:].all() and not below[:first - 1].any()
    approx(cid, "batch", first)


def test_tdp_energy_budget():
    cid = "tdp_energy_budget"
    base = Chips.from_specs([SEED_ENERGY_H100])
    p_mem = pw.memory_power(base.memory_bandwidth, base["energy.memory"])[0]
    approx(cid, "memory_power_w", p_mem)
    # the seed's budget b = (TDP - P_mem) / F_peak, checked below through the evaluator: at e = b the clock holds
    b = float(expected(cid, "budget_pj_per_flop")) * 1e-12
    # The seed's scenario: HBM streams at full bandwidth (106 W) while the matrix unit runs at peak.
    # An operator does both when it sits exactly at the ridge point: give the chip the bandwidth that makes
    # this GEMM's memory time equal its compute time (bytes x F / FLOPs, from the workload's own counts), and
    # the energy per byte that makes full-bandwidth memory power the seed's 106.4 W.
    gemm = qproj(128, n=128 * 132, k=4096)  # 132 output tiles of 128 x 128: one full wave on 132 SMs
    op = gemm.ops[0]
    ridge_bw = (op.a_bytes + op.b_bytes + op.c_bytes) * base.peak_flops("bf16")[0] / op.flops
    e_mem = p_mem / ridge_bw
    for scaling, key in ((False, "sustained_clock_fixed_voltage"), (True, "sustained_clock_voltage_scaling")):
        spec = variant("h100", {"name": f"h100-e1.5b-vs{int(scaling)}", "l2": "1 GB",
                                "power": {"static": "0 W", "clock": "0 W", "voltage_scaling": scaling}})
        # the seed's voltage law: V ~ f (P ~ f^3): no threshold, no voltage floor
        chips = Chips.from_base(spec, 2, {**NO_ON_CHIP_ENERGY, "tech.v_min": 0.0, "tech.v_threshold": 0.0,
                                          "memory.bandwidth": ridge_bw,
                                          "energy.memory": e_mem, "energy.flop.bf16": [b, 1.5 * b]})
        df = evaluate(chips, gemm, tiles=(128, 128, 64, 1))
        peak_clock_matrix_s = df.t_matrix_s * df.clock_ratio
        assert df.t_memory_s[0] == pytest.approx(peak_clock_matrix_s[0], rel=1e-9)  # at the ridge at peak clock
        assert df.clock_ratio[0] == pytest.approx(1.0, rel=case(cid)["rel_tol"])  # e = b: the peak clock holds
        # the seed's rule: the memory's 106.4 W held while compute draws 1.5x its budget at the peak clock
        law = pw.ClockLaw(1.0, 0.0, 1.0, 0.0, scaling)
        approx(cid, key, pw.sustained_clock_ratio(700.0 - p_mem, 1.5 * (700.0 - p_mem), law)[()])
        # the evaluator (issue 14) holds the memory's power to the operator's time: throttled, the operator takes
        # longer than its memory time, its HBM power falls below 106.4 W, and the clock the 700 W allow is a
        # little higher than the seed's; the power at that clock is the TDP
        seed_clock = float(expected(cid, key))
        assert seed_clock < df.clock_ratio[1] < 1.0
        assert df.peak_power_w[1] == pytest.approx(700.0, rel=1e-5)  # (bisection to 1e-6 of the clock)
        # the throttled chip's matrix time grows by the clock ratio
        assert peak_clock_matrix_s[1] == pytest.approx(peak_clock_matrix_s[0], rel=1e-12)


def test_per_step_energy_cards(qwen3_8b_decode):
    cid = "per_step_energy_cards"
    df = evaluate(chips_of("rtx-4090", "rtx-5090"), qwen3_8b_decode)
    for key, r in zip(("rtx4090_j", "rtx5090_j"), df.itertuples()):
        approx(cid, key, pw.energy_at_power(r.tdp, r.t_read_s))  # power cap x read-bound step time
    # the RTX PRO 6000's 600 W cap over the measured Q projection calls (seed 004 §4.8.3, §4.8.4)
    tdp = evaluate(chips_of("rtx-pro-6000"), qproj(1)).tdp[0]
    for m in (1, 256):
        measured = expected("measured_qproj", f"measured_m{m}_reuse_s")
        approx(cid, f"rtx_pro_6000_qproj_m{m}_mj", pw.energy_at_power(tdp, measured) * 1e3)


# ---------------------------------------------------------------- fixed weights (seed 004 §4.7.3)


def test_weights_in_rom():
    cid = "weights_in_rom"
    chips = chips_of("h100")

    def reads(batch, context=8192, rom=False):
        return evaluate(chips, [W.decode("qwen3-8b", batch=b, context=context) for b in np.atleast_1d(batch)],
                        weights_in_rom=rom)

    for b in (1, 16):
        shared, rom = reads(b).iloc[0], reads(b, rom=True).iloc[0]
        assert rom.bytes_weights == shared.bytes_weights and rom.bytes_kv == shared.bytes_kv
        assert rom.bytes_memory == pytest.approx(shared.bytes_memory - shared.bytes_weights, rel=1e-12)
        approx(cid, f"hbm_read_reduction_b{b}", shared.t_read_s / rom.t_read_s)  # (W + BK) / BK
    # where the KV bytes overtake the weight bytes: both are linear in the batch
    for context, key in ((8192, "crossover_batch"), (32768, "crossover_batch_32k")):
        batches = np.arange(1, 21)
        df = reads(batches, context, rom=True)
        gap = df.bytes_kv.to_numpy() - df.bytes_weights.to_numpy()
        j = int(np.argmax(gap > 0))
        approx(cid, key, batches[j - 1] - gap[j - 1] / (gap[j] - gap[j - 1]))
        if context == 8192:
            assert batches[j] == 13  # "starting from integer batch size 13"
    # 10,000 token/s for one user: 100 us per step, and the KV alone still has to be read in it
    deadline = 1e-4
    one = reads(1, rom=True).iloc[0]
    need = chips.memory_bandwidth[0] * one.t_read_s / deadline
    approx(cid, "hbm_bw_for_10k_tokens_per_s", need)
    check = evaluate(Chips.from_base(load_chip("h100"), 1, {"memory.bandwidth": need}),
                     W.decode("qwen3-8b", batch=1, context=8192), weights_in_rom=True)
    assert check.t_read_s[0] == pytest.approx(deadline, rel=1e-12)
    # one 24 GB eight-high HBM3E stack as KV storage, 2 GiB workspace
    stack = variant("h100", {"name": "one-hbm3e-stack",
                             "hbm": {"generation": "hbm3e", "stacks": 1, "pin_rate": "9.6 Gb/s", "layers": 8,
                                     "capacity_per_layer": "3 GB"}})
    w = W.decode("qwen3-8b", batch=1, context=8192, workspace="2 GiB")
    rom = evaluate(chips_of(stack), w, weights_in_rom=True).iloc[0]
    approx(cid, "requests_in_one_24GB_stack", rom.max_batch)
    shared = evaluate(chips_of(stack), w).iloc[0]
    approx("rtx4090_max_requests", "max_requests_at_8192", shared.max_batch)  # the original design: 4
    assert rom.resident_bytes == pytest.approx(shared.resident_bytes - w.weight_resident_bytes)


def test_lanes_for_deadline():
    """15,134,641,792 operations on n lanes of 1 FMA per cycle at 1 GHz (one unit of 2n FLOP/cycle, unpadded)."""
    cid = "lanes_for_deadline"
    lanes = variant("rtx-4090", {"name": "fma-lanes", "units": 1, "clock": "1 GHz", **NO_ON_CHIP_LIMITS,
                                 "matrix": {"instruction": ONE_BY_ONE, "flops_per_cycle": {"bf16": 2}}},
                    drop=("tdp",))
    ops = W.build({"name": "ops", "ops": [{"gemm": {"m": 277, "n": 277, "k": 98624}}]})  # 2 m n k = the count
    assert ops.total_flops == 15_134_641_792

    def time(n_lanes, efficiency=1.0):
        n = np.atleast_1d(n_lanes)
        chips = Chips.from_base(lanes, n.size, {"matrix.flops_per_cycle.bf16": 2.0 * n,
                                                "calibration.compute_efficiency": efficiency})
        return evaluate(chips, ops).t_matrix_s.to_numpy()

    def fewest(deadline, efficiency=1.0):
        guess = int(np.ceil(time(1, efficiency)[0] / deadline))
        cand = np.arange(max(1, guess - 3), guess + 4)
        return int(cand[np.argmax(time(cand, efficiency) <= deadline)])

    approx(cid, "lanes_for_100us", fewest(100e-6))
    approx(cid, "time_with_256_lanes_s", time(256)[0])
    approx(cid, "lanes_for_40us_at_60pct", fewest(40e-6, 0.6))


# ---------------------------------------------------------------- measured vs bound (seed 004 §4.8.3)


def test_measured_decode_rtx_pro_6000():
    cid = "measured_decode_rtx_pro_6000"
    wls = {"8k_b1": W.decode("qwen3-8b", batch=1, context=8192), "2k_b64": W.decode("qwen3-8b", batch=64, context=2048)}
    df = evaluate(chips_of("rtx-pro-6000"), list(wls.values()))
    for key, r in zip(wls, df.itertuples()):
        approx(cid, f"bound_{key}_s", r.t_read_s)
        measured = expected(cid, f"measured_{key}_s")  # recorded (vLLM eager), not modelled
        assert measured > r.time_s >= r.t_read_s
        approx(cid, f"mbu_{key}", r.t_read_s / measured)  # MBU = read bound / measured step


def test_measured_qproj():
    cid = "measured_qproj"
    df = evaluate(chips_of("rtx-pro-6000"), [qproj(1), qproj(256)])
    for m, r in zip((1, 256), df.itertuples()):
        approx(cid, f"bound_m{m}_s", r.t_roofline_s)  # max(F / P, V / R), X, W, Y moved once
        for pattern in ("reuse", "rotate"):
            assert expected(cid, f"measured_m{m}_{pattern}_s") > r.t_roofline_s


# ---------------------------------------------------------------- links (seed 004 §4.5), from the catalog link specs


def test_cross_die_placement():
    """Seed 004 §4.5.1 through the evaluator: a GEMV reading 64 GiB of weights split 32 / 32 over two dies.
    In place (each die reads its own half) Ascend 910C takes 21.47 ms; centralized on die 0 (the other half over
    the 270 GB/s die-to-die link) 127.3 ms, and the evaluator places the work in place; B200 (4 TB/s per die,
    10 TB/s NV-HBI) takes 8.59 ms either way. The link alone: 64 MiB over it."""
    cid = "cross_die_placement"
    gemv = W.build({"name": "gemv-64GiB", "ops": [{"gemm": {"m": 1, "n": 131072, "k": 262144,
                                                            "formats": {"weights": "bf16", "activations": "bf16"}}}]})
    asc = load_chip("ascend-910c")
    r = evaluate(Chips.from_specs([asc]), gemv).iloc[0]
    approx(cid, "ascend_local_s", r.time_s)
    approx(cid, "ascend_compute_in_place_s", r.time_s)
    approx(cid, "ascend_cross_s", r.t_centralized_s)
    assert r.die_placement_centralized == 0.0
    b = evaluate(chips_of("b200"), gemv).iloc[0]
    approx(cid, "b200_stage_s", b.time_s)
    approx(cid, "b200_stage_s", b.t_centralized_s)
    link = asc.links.die_to_die
    approx(cid, "ascend_64mib_over_link_s", links.transfer_time(64 * MiB, link.rate, link.alpha))


def test_a_slow_die_to_die_link_slows_the_package():
    """issue 15: B200 with NV-HBI at 1 GB/s instead of 10 TB/s. Decode's outputs cross the link in place: each
    of its ~250 operators' output rows (a few KiB) is gathered from the other die, so the step is link-bound;
    at 10 TB/s the link is never the bound."""
    b200 = load_chip("b200")
    dec = W.decode("qwen3-8b", batch=1, context=8192)
    fast, slow = (evaluate(Chips.from_base(b200, 1, {"links.die_to_die.bandwidth": np.array([bw])}), dec).iloc[0]
                  for bw in (10e12, 1e9))
    assert fast.t_die_link_s < 0.01 * fast.time_s
    assert slow.time_s > 5 * fast.time_s
    # the link time is the gathered bytes over the link (half of each GEMM output crosses)
    assert slow.t_die_link_s == pytest.approx(slow.die_link_bytes / 1e9, rel=1e-9)


def test_host_upload():
    cid = "host_upload"
    chip = load_chip("rtx-4090")
    approx(cid, "h2d_s", links.transfer_time(64 * MiB, chip.links.host.rate))
    approx(cid, "read_s", links.transfer_time(64 * MiB, chip.memory_bandwidth))


def test_link_alpha_beta():
    cid = "link_alpha_beta"
    row_bytes = W.gemm("o_proj", 1, D, D).c_bytes  # one [1, 4096] BF16 activation row
    for name in ("h100", "a100"):
        link = load_chip(name).links.scale_up
        for m in (1, 256):
            activations = W.gemm("o_proj", m, D, D).c_bytes
            approx(cid, f"{name}_m{m}_s", links.transfer_time(activations, link.rate, link.alpha))
    h100 = load_chip("h100").links.scale_up
    # the seed's crossover volume: the byte term of the catalog link equals its fixed overhead
    v_star = float(expected(cid, "crossover_bytes"))
    assert links.transfer_time(v_star, h100.rate) == pytest.approx(h100.alpha, rel=case(cid)["rel_tol"])
    approx(cid, "crossover_rows", v_star / row_bytes)
    # the same transfer through the evaluator: a two-chip pipeline hands one [M, 4096] row per step over
    for m in (1, 256):
        wl = W.build({"name": f"o_proj:m={m}", "ops": [{"gemm": {"name": "o_proj", "m": m, "n": D, "k": D}}]})
        pipe = Chips.from_base(load_chip("h100"), 1, {"system.chips": np.array([2.0]),
                                                      "system.pipeline": np.array([1.0])})
        approx(cid, f"h100_m{m}_s", evaluate(pipe, wl).t_link_s[0])


def test_weight_stationary_array_under_fills_at_small_m():
    """issue 15 / seed 004 §4.7.1: TPU v1's 256 x 256 weight-stationary array takes 256 cycles to shift in a block
    of weights (one row per cycle, Jouppi et al. 2017) and streams M input rows through it; the next block loads
    behind the current rows. A 4096 x 4096 INT8 GEMM is 16 x 16 = 256 blocks on one array, each max(M, 256)
    cycles, plus one fill and drain of 256 + 256 cycles: at M = 1, (256 x 256 + 512) / (256 x 1) = 258x the useful
    work; at M = 256, (256 x 256 + 512) / (256 x 256) = 1.0078x. A GPU's tensor core has no such load."""
    tpu = chips_of("tpu-v1")
    assert bool(tpu["matrix.systolic"][0])
    for m, want in ((1, (256 * 256 + 512) / 256), (256, (256 * 256 + 512) / (256 * 256))):
        wl = W.build({"name": f"int8-{m}", "ops": [{"gemm": {"m": m, "n": 4096, "k": 4096,
                                                             "formats": {"weights": "int8", "activations": "int8"}}}]})
        r = evaluate(tpu, wl).iloc[0]
        assert r.padded_flops / r.flops == pytest.approx(want, rel=1e-9)


# ---------------------------------------------------------------- attention pipeline (seed 004 §4.2.3, Example 4-1)


def test_attention_block_pipeline_through_the_evaluator():
    """Example 4-1 through the evaluator (issue 15 item 6): fused attention's QK, softmax and PV blocks pipeline
    across the matrix unit, the exponentials and the shared-memory interface (dse.model.evaluator.
    _attention_overlap), so once the pipeline runs each further 128 x 128 block (head dim 128) of one B200 SM
    adds the slowest resource's time: max(1024, 1024, 768) = 1024 cycles, 1024 with the matrix 2x, 768 with the
    exponentials 2x too, 512 with the shared memory 2x as well.

    The SM as a chip: one unit at 1 GHz (a ns is a cycle), 8192 BF16 FLOP/cycle, 16 exponentials per cycle,
    128 B/cycle of shared memory, B200's 128 x 256 register tile (tcgen05.mma: Q, K and V each read once per
    block, 96 KiB); the example counts the exponentials only (no vector ALU time), no L2 and an unlimited main
    memory. A query tile of 128 over 128 x B keys is B blocks: T(B) = one block serially + (B - 1) intervals,
    so T(B + 1) - T(B) is the interval. The blocks are the example's, 128 x 128 (T_M x T_N of QK, softmax and PV;
    T_K four k-steps, no split): B200's default tile is 128 x 256 since its accumulators live in TMEM (the
    evaluator's default tiles, as the CP-SAT tile model), not the example's block."""
    cid = "attention_block_pipeline"
    sm = variant("b200", {"name": "b200-one-sm", "dies": 1, "units": 1, "clock": "1 GHz", "l2": "0 B",
                          "vector": {"flops_per_cycle": 1e12, "exp_per_cycle": 16},
                          "local_bytes_per_cycle": 128, "power": {"static": "0 W", "clock": "0 W"}},
                 drop=("tdp",))
    configs = {"interval_cycles": (8192, 16, 128), "interval_matrix_2x": (16384, 16, 128),
               "interval_matrix_and_exp_2x": (16384, 32, 128), "interval_all_2x": (16384, 32, 256)}
    fpc, exp, smem = (np.array([c[i] for c in configs.values()], dtype=float) for i in range(3))
    chips = Chips.from_base(sm, len(configs), {"matrix.flops_per_cycle.bf16": fpc, "vector.exp_per_cycle": exp,
                                               "local_bytes_per_cycle": smem, "memory.bandwidth": np.full(4, 1e18)})

    def step(blocks):
        qk, softmax, pv = W.attention(1, 1, 128, 128, 128 * blocks, causal=False)
        return W.Workload(name=f"attention-{blocks}", phase="ops", ops=(qk, softmax, pv))

    block = ([128.0] * 3, [128.0] * 3, [64.0] * 3, [1.0] * 3)
    t = {b: evaluate(chips, step(b), breakdown=b == 8, tiles=block) for b in (8, 9)}
    interval = (t[9].time_s.to_numpy() - t[8].time_s.to_numpy()) * 1e9  # cycles
    for key, got in zip(configs, interval):
        approx(cid, key, round(got, 6))  # (a difference of two ~10^4-cycle times in seconds: 1e-10 of float noise)
    # the three resources of one block, per operator (cycles of 8 blocks / 8): QK and PV 512 each on the matrix,
    # 1024 of exponentials, shared memory 512 (QK: Q and K) + 256 (PV: V)
    ops = t[8].attrs["operators"]
    base = ops[ops.point == 0].set_index("op")
    assert base.loc["attn_qk", "t_matrix_s"] * 1e9 / 8 + base.loc["attn_pv", "t_matrix_s"] * 1e9 / 8 == pytest.approx(
        expected(cid, "matrix_cycles"))
    assert base.loc["attn_softmax", "t_vector_s"] * 1e9 / 8 == pytest.approx(expected(cid, "exp_cycles"), rel=1e-6)
    assert (base.loc["attn_qk", "t_local_s"] + base.loc["attn_pv", "t_local_s"]) * 1e9 / 8 == pytest.approx(
        expected(cid, "smem_cycles"))
    # without the pipeline the three operators would add, each at its own slowest resource: 512 + 1024 + 512 =
    # 2048 cycles per block, twice the pipelined interval
    assert base[["t_matrix_s", "t_vector_s", "t_local_s"]].max(axis=1).sum() * 1e9 / 8 == pytest.approx(2048, rel=1e-6)
