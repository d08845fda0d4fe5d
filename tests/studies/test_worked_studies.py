"""Worked studies in studies/: each runs with a reduced budget and its stated conclusion holds.

The expected conclusions are the ones written in each study's comment block;
the numbers they rest on come from independent sources named inline.
"""

from pathlib import Path

import pytest

from dse.precision import quant_error
from dse.study import run_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"


@pytest.fixture(scope="module")
def precision(tmp_path_factory):
    return run_study(STUDIES / "precision-vs-error.yaml", out=tmp_path_factory.mktemp("prec"), write=False)


def test_precision_four_bit_weights_exceed_the_limit(precision):
    t = precision
    four_bit = t["p.workload.formats.weights"].isin(["mxfp4", "nvfp4", "int4_g128"])
    assert four_bit.any()
    assert not t[four_bit]["feasible"].any()
    # independent check of the premise: each 4-bit format's round-trip error on Gaussian data exceeds 5%
    for f in ("mxfp4", "nvfp4", "int4_g128"):
        assert quant_error(f) > 0.05


def test_precision_fastest_feasible_uses_narrowest_format_within_limit(precision):
    feas = precision[precision.feasible]
    best = feas.nsmallest(1, "obj.latency_per_token").iloc[0]
    assert best["p.workload.formats.weights"] == "mxfp6"  # 6.25 bits/value, error 2.8% (< 5%)
    assert best["p.hbm.stacks"] == 8
    # narrower weights are faster and cheaper in energy at equal stacks and KV format (bandwidth-bound decode)
    sub = feas[(feas["p.hbm.stacks"] == 8) & (feas["p.workload.formats.kv"] == "fp8_e4m3")
               & (feas["p.workload.formats.activations"] == "bf16")].set_index("p.workload.formats.weights")
    assert sub.loc["mxfp6", "obj.latency_per_token"] < sub.loc["fp8_e4m3", "obj.latency_per_token"] \
        < sub.loc["bf16", "obj.latency_per_token"]
    assert sub.loc["mxfp6", "obj.energy_per_token"] < sub.loc["bf16", "obj.energy_per_token"]


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    return run_study(STUDIES / "moe-235b-serving.yaml", out=tmp_path_factory.mktemp("moe"), write=False)


def test_moe_is_capacity_bound(moe):
    t = moe
    # resident bytes: 123.1 GB of 4-bit weights + 12.6 GB KV + 2 GiB (seed 004 §4.3.3: 137.9 GB)
    resident = t["m.resident_bytes"].iloc[0]
    assert resident == pytest.approx(137.9e9, rel=0.01)
    small = t["m.capacity_bytes"] < resident
    assert small.any() and not t[small]["feasible"].any()
    assert t[~small]["feasible"].any()


def test_moe_cheapest_feasible_uses_fewest_largest_stacks(moe):
    feas = moe[moe.feasible]
    cheapest = feas.nsmallest(1, "obj.chip_cost").iloc[0]
    need = cheapest["m.resident_bytes"]
    # the fewest stacks of the largest size (48 GB) that hold the resident bytes: ceil(137.9 / 48) = 3
    assert cheapest["p.hbm.capacity_per_stack"] == 48e9
    assert cheapest["p.hbm.stacks"] == 3
    assert cheapest["p.dies"] == 1
    # more stacks buy throughput on the front
    front = feas[feas.pareto_rank == 0].sort_values("obj.chip_cost")
    assert front["obj.throughput"].is_monotonic_increasing
    assert front["obj.throughput"].iloc[-1] > 1.5 * front["obj.throughput"].iloc[0]


@pytest.fixture(scope="module")
def sram(tmp_path_factory):
    t = run_study(STUDIES / "sram-only-vs-hbm.yaml", out=tmp_path_factory.mktemp("sram"), write=False)
    return t[t.feasible]


def test_sram_chip_count_is_set_by_capacity(sram):
    b1 = sram[(sram["p.workload.batch"] == 1) & (sram["p.base"] == "groq-tsp")]
    # resident bytes / 230 MB per chip (seed 001: the chip count is set by capacity, not compute)
    need = b1["m.resident_bytes"].iloc[0] / 230e6
    assert 77 < need < 96
    assert b1["p.system.chips"].min() == 96  # the smallest system in the space that holds the model


def test_sram_system_wins_latency_at_batch_1_but_not_energy(sram):
    b1 = sram[sram["p.workload.batch"] == 1]
    fastest = b1.nsmallest(1, "obj.latency_per_token").iloc[0]
    assert fastest["p.base"] == "groq-tsp" and bool(fastest["p.system.pipeline"])
    hbm = b1[b1["p.base"] == "h100-sxm"]
    assert fastest["obj.latency_per_token"] < hbm["obj.latency_per_token"].min()
    single_gpu = hbm[hbm["p.system.chips"] == 1]["obj.energy_per_token"].min()
    assert b1[b1["p.base"] == "groq-tsp"]["obj.energy_per_token"].min() > single_gpu


def test_hbm_wins_latency_and_energy_at_batch_32(sram):
    b32 = sram[sram["p.workload.batch"] == 32]
    assert b32.nsmallest(1, "obj.latency_per_token").iloc[0]["p.base"] == "h100-sxm"
    assert b32.nsmallest(1, "obj.energy_per_token").iloc[0]["p.base"] == "h100-sxm"


@pytest.fixture(scope="module")
def qproj_tiles(tmp_path_factory):
    return run_study(STUDIES / "qproj-tile-shapes.yaml", out=tmp_path_factory.mktemp("tiles"), write=True)


def test_qproj_tiles_are_proven_optimal_and_legal(qproj_tiles):
    from dse.hardware import load_chip

    t = qproj_tiles
    assert len(t) == 8 and (t.status == "OPTIMAL").all()
    for r in t.itertuples():
        chip = load_chip(r.chip)
        ins = chip.matrix.instruction
        assert r.t_m % ins.m == 0 or r.t_m % ins.n == 0  # the skinny side may sit on the narrow instruction side
        assert r.t_k % ins.k == 0
        assert r.working_set_bytes <= chip.local_buffer


def test_qproj_small_m_is_a_weight_read(qproj_tiles):
    from dse.hardware import load_chip

    t = qproj_tiles
    weights = 4096 * 4096 * 2  # BF16 W (seed 004 §4.1.1: 32 MiB)
    for r in t[t.workload.isin(["qproj-m1", "qproj-m16", "qproj-m256"])].itertuples():
        m = int(r.workload.split("m")[-1])
        once = weights + 2 * m * 4096 * 2  # X and Y once (seed 004 §4.1.1)
        assert r.traffic_bytes == pytest.approx(once, rel=1e-9)
        assert r.time_s == pytest.approx(once / load_chip(r.chip).memory_bandwidth, rel=1e-6)


def test_qproj_large_m_beats_the_heuristic(qproj_tiles):
    t = qproj_tiles[qproj_tiles.workload == "qproj-m4096"]
    assert (t.workload_time_s <= t.workload_time_heuristic_s).all()
    assert (t.workload_time_s < t.workload_time_heuristic_s).any()


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    return run_study(STUDIES / "reticle-split.yaml", out=tmp_path_factory.mktemp("split"), write=True).iloc[0]


def test_reticle_split_is_optimal_at_the_limits(split):
    assert split["status"] == "OPTIMAL"
    assert split["p.hbm.stacks"] == 6  # 3 per 33 mm edge (technology.md): the most the shoreline allows
    assert 0.95 * 858 <= split["die_area_mm2"] <= 858  # the reticle is the binding limit
    assert split["power_w"] <= 700


def test_reticle_split_equals_the_grid():
    from dse.solvers.cpsat_split import split_grid
    from dse.study import design_space, group_workloads
    from dse.spec.study import load_study

    spec = load_study(STUDIES / "reticle-split.yaml")
    grid = split_grid(spec.base, group_workloads(spec, {}), design_space(spec), tdp=700.0)
    solved = run_study(STUDIES / "reticle-split.yaml", write=False).iloc[0]
    assert grid["best"] is not None
    assert solved["time_s"] == pytest.approx(float(grid["time_s"][grid["best"]]), rel=1e-9)
