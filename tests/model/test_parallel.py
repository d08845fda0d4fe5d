"""Systems of chips through the evaluator (issue 15 item 5): pipeline parallel with micro-batches, expert-parallel
all-to-all, and the collective algorithm each topology takes. Each expected number is computed here by hand from
the inputs it names (seed 004 §4.5.3's alpha + V / R per step, GPipe's (m + p - 1) stage times, the model files'
shapes), not read back from the code's formulas. The link cores alone are in tests/model/test_links.py, the flow
of micro-batches alone in tests/model/test_pipeline.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from dse import workload as W
from dse.errors import SpecError
from dse.evaluate import evaluate_design
from dse.hardware import Chips, load_chip, with_overrides
from dse.model.links import ALGORITHMS
from dse.workload.step import Workload
from tests.reference_cases import expected

ALPHA, NVLINK = 2e-6, 450e9  # seed 004 §4.5.3: H100 NVLink, 450 GB/s per direction, alpha 2 us
D = 4096  # hidden size of Qwen3-8B and Mixtral 8x7B (dse/data/models, from their HF config.json)


def _run(base, wl, **over):
    """The join's metrics of one design: ``base`` with the dotted ``over`` (numbers), one point."""
    chips = Chips.from_base(load_chip(base), 1, {k.replace("__", "."): np.array([float(v)]) for k, v in over.items()})
    return {k: np.asarray(v)[0] for k, v in evaluate_design(chips, wl).items()}


def _pipe(base, chips, wl, **over):
    return _run(base, wl, system__chips=chips, system__pipeline=1, **over)


def _stage_workload(m: int, layers: int = 32, rows: int = 4096) -> Workload:
    """A hand-made pipeline: ``layers`` layers of one [rows, 4096] x [4096, 4096] BF16 GEMM named o_proj (so its
    output is what a stage hands on), as ``m`` micro-batches each running every layer once."""
    op = W.gemm("o_proj", rows, D, D, count=layers * m)
    return Workload(name=f"stage:m={m}", phase="ops", ops=(op,), micro_batches=m, tokens_per_step=rows * m)


# ---------------------------------------------------------------- pipeline parallel with micro-batches


def test_gpipe_bubble_on_a_hand_made_stage():
    """PP = 4, m = 16 micro-batches: the first micro-batch passes the 4 stages (each a quarter of the layers) and
    the 3 links between them, each later one comes out one stage time after it: 19 stage times + 3 hops, where
    one chip runs the 16 micro-batches in 16 x 4 stage times. Without the hops the stages wait
    (p - 1) / (m + p - 1) = 3/19 of the step (GPipe, Huang et al. 2019). A hop is alpha + V / R (seed 004
    §4.5.3), V = 4096 x 4096 x 2 B, the o_proj output ([M, 4096] BF16 at M = 4096); alpha 0 here."""
    wl = _stage_workload(16)
    one = _run("h100", wl)
    stage = one["time_s"] / 16 / 4  # one micro-batch through a quarter of the layers
    hop = 4096 * D * 2 / NVLINK
    pp = _pipe("h100", 4, wl, links__scale_up__alpha=0.0)
    assert hop < stage
    assert pp["time_s"] == pytest.approx(19 * stage + 3 * hop, rel=1e-9)
    assert (pp["time_s"] - 3 * hop) / (16 * stage) == pytest.approx(19 / 16, rel=1e-9)  # bubble 1 - 16/19 = 3/19
    assert pp["pipeline_bubble"] == pytest.approx(1 - 16 * stage / (19 * stage + 3 * hop), rel=1e-9)
    assert 3 / 19 < pp["pipeline_bubble"] < 3 / 19 + 3 * hop / pp["time_s"]
    # over H100's NVLink with its alpha: each of the first micro-batch's 3 hops adds alpha + V / R; the later hops
    # hide behind the stages, so the link on the critical path is those 3
    hop = ALPHA + 4096 * D * 2 / NVLINK
    real = _pipe("h100", 4, wl)
    assert real["time_s"] == pytest.approx(19 * stage + 3 * hop, rel=1e-9)
    assert real["t_link_s"] == pytest.approx(3 * hop, rel=1e-9)
    assert real["tokens_per_s"] / one["tokens_per_s"] == pytest.approx(64 * stage / (19 * stage + 3 * hop), rel=1e-9)


def test_a_link_slower_than_a_stage_sets_the_pace():
    """At 10 GB/s each hop of 32 MiB (3.4 ms) outlasts a stage: the micro-batches come out one hop apart,
    4 stages + 3 hops for the first, 15 hops more for the rest."""
    wl = _stage_workload(16)
    stage = _run("h100", wl, links__scale_up__bandwidth=10e9)["time_s"] / 64
    hop = ALPHA + 4096 * D * 2 / 10e9
    slow = _pipe("h100", 4, wl, links__scale_up__bandwidth=10e9)
    assert hop > stage
    assert slow["time_s"] == pytest.approx(4 * stage + 3 * hop + 15 * hop, rel=1e-9)


def test_one_micro_batch_is_the_old_pipeline():
    """m = 1: the layers one chip after the other, at one chip's rates, plus p - 1 hops: one chip's time (the
    model before micro-batches) plus 3 x (alpha + V / R) with V = 8 x 4096 x 2 B, and its throughput for that."""
    dec = W.decode("qwen3-8b", batch=8, context=8192)
    one = _run("h100", dec)
    pp = _pipe("h100", 4, dec)
    hops = 3 * (ALPHA + 8 * D * 2 / NVLINK)
    assert pp["time_s"] == pytest.approx(one["time_s"] + hops, rel=1e-9)
    assert pp["tokens_per_s"] == pytest.approx(8 / (one["time_s"] + hops), rel=1e-9)
    assert pp["pipeline_bubble"] == pytest.approx(0.75, abs=1e-3)  # 3 of 4 chips wait: (p - 1) / (1 + p - 1)


def test_a_pipeline_runs_each_operator_within_one_chips_power():
    """Each operator of a pipeline runs on one of its chips, under that chip's TDP: a throttled prefill (H100 at
    700 W) is as slow on a 4-chip pipeline of one micro-batch as on one chip (plus the hops of 4 x 1024 x 4096 x
    2 B), not faster for the system's 4 x 700 W."""
    pre = W.prefill("qwen3-8b", batch=4, tokens=1024)
    one = _run("h100", pre)
    assert one["clock_ratio"] < 1.0  # the power ceiling binds
    pp = _pipe("h100", 4, pre)
    assert pp["time_s"] == pytest.approx(one["time_s"] + 3 * (ALPHA + 4 * 1024 * D * 2 / NVLINK), rel=1e-9)
    assert pp["clock_ratio"] == pytest.approx(one["clock_ratio"], rel=1e-12)


def test_micro_batches_raise_a_pipelines_throughput():
    """Prefill of 16 prompts of 1024 tokens on 4 H100s: as one batch the pipeline has one chip's throughput; as 16
    micro-batches of one prompt, nearly 4 x 16 / 19 = 3.37x (the ideal when a micro-batch takes 1/16 of the
    batch's time; each micro-batch re-reads its stage's weights, so a little less)."""
    one = _run("h100", W.prefill("qwen3-8b", batch=16, tokens=1024))
    pp = [_pipe("h100", 4, W.prefill("qwen3-8b", batch=16, tokens=1024, micro_batches=m)) for m in (1, 4, 16)]
    speedup = [r["tokens_per_s"] / one["tokens_per_s"] for r in pp]
    assert speedup[0] == pytest.approx(1.0, rel=0.01)  # + the 3 hops of 128 MiB
    assert speedup[0] < speedup[1] < speedup[2]
    assert 3.0 < speedup[2] <= 64 / 19 * (1 + 1e-9)
    assert pp[2]["pipeline_bubble"] == pytest.approx(3 / 19, rel=0.01)


def test_more_micro_batches_of_the_same_stage_time_never_lower_throughput():
    """The same stage time per micro-batch (each micro-batch the hand-made stage of 1024 rows): m micro-batches
    come out in (m + 3) stage times + the hops, so throughput m / (m + 3) never falls with m."""
    tps = [_pipe("h100", 4, _stage_workload(m, rows=1024))["tokens_per_s"] for m in (1, 2, 4, 8, 16, 32)]
    assert all(b >= a * (1 - 1e-12) for a, b in zip(tps, tps[1:]))


def test_more_link_bandwidth_is_never_slower():
    """Pipeline hops, tensor-parallel all-reduces and expert all-to-alls: a faster scale-up link never slows the
    step (H100 with its NVLink at 50 to 900 GB/s)."""
    cases = [("h100", dict(system__chips=4, system__pipeline=1), W.decode("qwen3-8b", batch=16, context=4096,
                                                                          micro_batches=4)),
             ("h100", dict(system__chips=8), W.decode("qwen3-8b", batch=16, context=4096)),
             ("h100", dict(system__chips=8, system__expert_parallel=8), W.decode("mixtral-8x7b", batch=64,
                                                                                 context=4096))]
    for base, over, wl in cases:
        times = [_run(base, wl, links__scale_up__bandwidth=bw, **over)["time_s"] for bw in (50e9, 150e9, 450e9, 900e9)]
        assert all(b <= a * (1 + 1e-12) for a, b in zip(times, times[1:])), (over, times)


def test_micro_batch_errors():
    with pytest.raises(SpecError, match=r"micro_batches: 5 does not divide batch 64.*1, 2, 4, 8, 16, 32, 64"):
        W.decode("qwen3-8b", batch=64, context=1024, micro_batches=5)
    with pytest.raises(SpecError, match="micro_batches"):
        W.prefill("qwen3-8b", batch=2, tokens=128, micro_batches=0)
    spec = W.parse_workload("qwen3-8b:decode:batch=64:context=8192:micro_batches=16")
    wl = W.build(spec)
    assert wl.micro_batches == 16 and wl.batch == 64 and wl.tokens_per_step == 64
    assert wl.name == "qwen3-8b:decode:batch=64:context=8192:micro_batches=16"
    assert W.build(W.parse_workload(wl.name)) == wl
    # the operators are one micro-batch's (4 requests), counted 16 times; the KV cache is the whole batch's
    q = wl.op("q_proj")
    assert q.m == 4 and q.count == 36 * 16
    assert wl.kv_resident_bytes == W.decode("qwen3-8b", batch=64, context=8192).kv_resident_bytes
    with pytest.raises(SpecError, match="does not divide batch 6"):
        W.parse_workload("qwen3-8b:decode:batch=6:context=8192:micro_batches=4")
    with pytest.raises(SpecError, match="only for model workloads"):
        W.build({"name": "x", "micro_batches": 2, "ops": [{"gemm": {"m": 1, "n": 8, "k": 8}}]})


# ---------------------------------------------------------------- expert parallel


def _mixtral_tp8(ep: int, base="h100", batch=64, **over):
    wl = W.decode("mixtral-8x7b", batch=batch, context=4096)
    extra = {"system__expert_parallel": ep} if ep > 1 else {}
    return _run(base, wl, system__chips=8, **extra, **over)


def test_mixtral_expert_all_to_all_by_hand():
    """Mixtral 8x7B (32 layers, hidden 4096, 8 experts, top-2; dse/data/models/mixtral-8x7b.yaml), decode batch 64
    on 8 H100s, EP = 8: each chip holds 64 / 8 = 8 of the tokens and sends each to its 2 experts, 7/8 of them on
    other chips: 8 x 2 x 4096 x 2 B x 7/8 = 114,688 B per all-to-all; dispatch and combine per layer, each one
    step through the NVSwitch port: 32 x 2 x (2 us + 114,688 B / 450 GB/s)."""
    per_chip = 8 * 2 * D * 2 * 7 / 8
    assert per_chip == 114_688
    ep = _mixtral_tp8(8)
    assert ep["t_alltoall_s"] == pytest.approx(32 * 2 * (ALPHA + per_chip / NVLINK), rel=1e-9)
    # the all-reduces left are the attention outputs': 32 of [64, 4096] BF16 = 512 KiB each, direct through the
    # switch (2 steps of 7/8 of it)
    ar = 2 * (ALPHA + 7 / 8 * 64 * D * 2 / NVLINK)
    assert ep["t_allreduce_s"] == pytest.approx(32 * ar, rel=1e-9)
    assert ALGORITHMS[int(ep["allreduce_algorithm"])] == "direct"
    # tensor parallel instead: each MoE layer's partial sums are all-reduced too (64 all-reduces, no all-to-all)
    tp = _mixtral_tp8(1)
    assert tp["t_allreduce_s"] == pytest.approx(64 * ar, rel=1e-9) and tp["t_alltoall_s"] == 0.0
    assert ep["time_s"] < tp["time_s"]  # top-2 of 8: the all-to-alls move 2/8 x 7/8 of what the all-reduce does


def test_expert_all_to_all_energy_by_hand():
    """The link energy (energy.link J/B) counts every byte the links carry: the attention all-reduces move
    2 (p - 1) V (14 x 32 x 512 KiB) and the all-to-alls each chip's 114,688 B from all 8 chips, twice per layer."""
    on, off = _mixtral_tp8(8), _mixtral_tp8(8, energy__link=0.0)
    e_link = float(Chips.from_specs([load_chip("h100")])["energy.link"][0])
    link_bytes = 14 * 32 * 64 * D * 2 + 8 * 2 * 32 * 114_688
    assert on["energy_memory_j"] - off["energy_memory_j"] == pytest.approx(link_bytes * e_link, rel=1e-9)


def test_expert_all_to_all_over_a_mesh_and_a_ring():
    """MI355X's full mesh (7 xGMI links of 76.8 GB/s, seed 000 "Directional bandwidth"): each 1/7 of a chip's
    all-to-all on its own link, one step. The same chips wired as a ring: 7 steps, step j passing on the
    8 - j blocks not yet home, half each way."""
    per_chip, block = 114_688, 114_688 / 7
    mesh = _mixtral_tp8(8, base="mi355x")
    assert mesh["t_alltoall_s"] == pytest.approx(64 * (ALPHA + block / 76.8e9), rel=1e-9)
    ring = _mixtral_tp8(8, base="mi355x", links__scale_up__topology=2)
    steps = sum(ALPHA + (8 - j) * block / 2 / 76.8e9 for j in range(1, 8))
    assert ring["t_alltoall_s"] == pytest.approx(64 * steps, rel=1e-9)
    assert mesh["t_alltoall_s"] < ring["t_alltoall_s"]
    assert per_chip == pytest.approx(7 * block)


def test_expert_parallel_errors():
    with pytest.raises(SpecError, match=r"expected 1 or 8"):
        with_overrides(load_chip("h100"), {"system.chips": 8, "system.expert_parallel": 4})
    with pytest.raises(SpecError, match="pipeline"):
        with_overrides(load_chip("h100"), {"system.chips": 8, "system.pipeline": True, "system.expert_parallel": 8})
    with pytest.raises(SpecError, match="system.expert_parallel: 4 on a system of 8 chips"):
        _mixtral_tp8(4)


# ---------------------------------------------------------------- collective algorithm by topology


def test_ring_and_direct_all_reduce_on_a_mesh():
    """Qwen3-8B decode batch 8 (36 layers: 72 all-reduces of [8, 4096] BF16 = 64 KiB) on 8 MI355X. Over the full
    mesh the all-reduce is direct: 2 steps of 8 KiB per link. Wired as a ring, two rings of 14 steps of 4 KiB
    each way, or a tree of 2 x 3 levels of the whole 64 KiB: the tree's fewer steps win at this size."""
    dec = W.decode("qwen3-8b", batch=8, context=4096)
    v, link = 8 * D * 2, 76.8e9
    mesh = _run("mi355x", dec, system__chips=8)
    assert ALGORITHMS[int(mesh["allreduce_algorithm"])] == "direct"
    assert mesh["t_allreduce_s"] == pytest.approx(72 * 2 * (ALPHA + v / 8 / link), rel=1e-9)
    ring = _run("mi355x", dec, system__chips=8, links__scale_up__topology=2)
    ring_time, tree_time = 14 * (ALPHA + v / 16 / link), 6 * (ALPHA + v / link)
    assert tree_time < ring_time
    assert ALGORITHMS[int(ring["allreduce_algorithm"])] == "tree"
    assert ring["t_allreduce_s"] == pytest.approx(72 * tree_time, rel=1e-9)
    assert mesh["time_s"] < ring["time_s"]


def test_seed_crossover_through_the_evaluator():
    """seed 004 §4.5.3: V* = alpha R = 900,000 B (879 KiB) on H100 NVLink. One all-reduce of an [M, 4096] BF16
    activation on 8 chips of H100 NVLink wired as a ring: the tree (6 steps of the whole V) below
    8 / 5.125 V* = 1,404,878 B, M = 171.5 rows, and the ring (14 steps of V / 16) above."""
    v_star = float(expected("link_alpha_beta", "crossover_bytes"))
    m_x = 8 / 5.125 * v_star / (D * 2)
    assert 171 < m_x < 172
    for m, want in ((171, "tree"), (172, "ring")):
        wl = W.build({"name": f"o_proj:m={m}", "ops": [{"gemm": {"name": "o_proj", "m": m, "n": D, "k": D}}]})
        r = _run("h100", wl, system__chips=8, links__scale_up__topology=2, links__scale_up__peers=2)
        v = m * D * 2
        assert ALGORITHMS[int(r["allreduce_algorithm"])] == want
        hand = 6 * (ALPHA + v / NVLINK) if want == "tree" else 14 * (ALPHA + v / 16 / NVLINK)
        assert r["t_allreduce_s"] == pytest.approx(hand, rel=1e-9)
    # through the catalog switch the same buffer goes direct whatever M: 2 steps of 7/8 V through the port
    wl = W.build({"name": "o_proj:m=171", "ops": [{"gemm": {"name": "o_proj", "m": 171, "n": D, "k": D}}]})
    r = _run("h100", wl, system__chips=8)
    assert ALGORITHMS[int(r["allreduce_algorithm"])] == "direct"
    assert r["t_allreduce_s"] == pytest.approx(2 * (ALPHA + 7 / 8 * 171 * D * 2 / NVLINK), rel=1e-9)


def test_topology_in_a_chip_file():
    spec = with_overrides(load_chip("h100"), {"links.scale_up.topology": "ring", "system.chips": 8})
    assert spec.links.scale_up.topology == "ring"
    chips = Chips.from_specs([spec])
    assert chips["links.scale_up.topology"][0] == 2.0
    with pytest.raises(SpecError, match="topology"):
        with_overrides(load_chip("h100"), {"links.scale_up.topology": "hypercube"})
