"""dse.model.links, the cores the evaluator calls: seed cases (inputs typed from the seeds, expected values
from the case file) and properties. The evaluator's own use of them (a memory interface under Little's law,
tensor- and pipeline-parallel systems) is in tests/reference/test_evaluator_cases.py and tests/test_evaluate.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.model.links import effective_bandwidth, ring_allreduce_bytes, ring_allreduce_time, transfer_time
from tests.reference_cases import approx, expected

GiB, MiB = 2**30, 2**20


def _fewest_in_flight(bandwidth, txn, latency) -> int:
    """The fewest in-flight transactions at which Little's law no longer limits ``bandwidth``."""
    n = np.arange(1, 20001)
    full = effective_bandwidth(bandwidth, n, txn, latency) >= bandwidth * (1 - 1e-12)
    return int(n[np.argmax(full)])


def test_littles_law():
    # seed 004 §4.3.3, Example 4-2: 128 B transactions, 500 ns latency; 1.125 GiB of KV;
    # RTX 4090 1,008 GB/s, RTX 5090 1,792 GB/s; 800 ns variant
    cid, s, lat, kv = "littles_law", 128, 500e-9, 1.125 * GiB
    r4090, r5090 = 1008e9, 1792e9
    approx(cid, "transactions_for_1008GBps", _fewest_in_flight(r4090, s, lat))
    bw128 = effective_bandwidth(r4090, 128, s, lat)
    approx(cid, "bw_with_128_transactions", bw128)
    approx(cid, "time_with_128_transactions_s", transfer_time(kv, bw128))
    approx(cid, "time_with_4096_at_1008GBps_s", transfer_time(kv, effective_bandwidth(r4090, 4096, s, lat)))
    approx(cid, "bw_with_4096_transactions", effective_bandwidth(np.inf, 4096, s, lat))
    approx(cid, "time_with_4096_at_1792GBps_s", transfer_time(kv, effective_bandwidth(r5090, 4096, s, lat)))
    approx(cid, "transactions_for_1792GBps", _fewest_in_flight(r5090, s, lat))
    approx(cid, "transactions_for_1792GBps_at_800ns", _fewest_in_flight(r5090, s, 800e-9))


def test_unstated_latency_leaves_the_interface():
    np.testing.assert_array_equal(effective_bandwidth(3.35e12, np.array([0.0, 64.0]), 128.0, np.array([500e-9, 0.0])),
                                  [3.35e12, 3.35e12])


def test_link_alpha_beta():
    # seed 004 §4.5.3: alpha = 2 us; [M, 4096] BF16 activations = 8192 M bytes;
    # H100 NVLink 450 GB/s per direction, A100 300 GB/s
    cid, alpha, row_bytes = "link_alpha_beta", 2e-6, 4096 * 2
    for chip, bw in (("h100", 450e9), ("a100", 300e9)):
        for m in (1, 256):
            approx(cid, f"{chip}_m{m}_s", transfer_time(m * row_bytes, bw, alpha))
    # the seed's crossover volume is where the byte term equals the fixed overhead
    v_star = float(expected(cid, "crossover_bytes"))
    assert transfer_time(v_star, 450e9) == pytest.approx(alpha, rel=2e-3)
    approx(cid, "crossover_rows", v_star / row_bytes)


def test_transfers_of_the_link_cases():
    # seed 004 §4.5.2: 64 MiB over PCIe 4.0 x16 (32 GB/s per direction) vs one read at 1,008 GB/s
    approx("host_upload", "h2d_s", transfer_time(64 * MiB, 32e9))
    approx("host_upload", "read_s", transfer_time(64 * MiB, 1008e9))
    # seed 004 §4.5.1: 64 MiB over the Ascend 910C's 270 GB/s die-to-die link
    approx("cross_die_placement", "ascend_64mib_over_link_s", transfer_time(64 * MiB, 270e9))
    # seed 000 "Directional bandwidth": 1 GB to one peer over a 76.8 GB/s xGMI link
    approx("xgmi_links", "one_gb_to_peer_s", transfer_time(1e9, float(expected("xgmi_links", "per_link_one_direction"))))


def test_ring_allreduce():
    # Patarasuk & Yuan 2009: 2 (p-1) steps of V/p bytes; one device costs nothing
    assert ring_allreduce_time(1e9, 1, 76.8e9, 1e-6) == 0.0
    # 8 devices, 8 GB each at 100 GB/s: 14 steps of 1 GB = 0.14 s
    assert ring_allreduce_time(8e9, 8, 100e9, 0.0) == pytest.approx(0.14)
    np.testing.assert_allclose(ring_allreduce_time(1e6, np.array([2, 4]), 1e9, 1e-6),
                               [2 * (1e-6 + 0.5e-3), 6 * (1e-6 + 0.25e-3)])
    # three all-reduces of 1 MB each (3 MB in all) on 4 devices: 6 steps, each with three alphas
    assert ring_allreduce_time(3e6, 4, 1e9, 1e-6, count=3) == pytest.approx(6 * (3e-6 + 0.75e-3))
    # 4 devices each send 6 chunks of V / 4: 6 V in all
    assert ring_allreduce_bytes(1e6, 4) == 6e6 and ring_allreduce_bytes(1e6, 1) == 0


size = st.floats(min_value=0.0, max_value=1e15, allow_nan=False)
rate = st.floats(min_value=1e3, max_value=1e15, allow_nan=False)
alpha = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(v1=size, v2=size, r1=rate, r2=rate, a=alpha)
def test_transfer_time_monotone(v1, v2, r1, r2, a):
    lo_v, hi_v = sorted((v1, v2))
    lo_r, hi_r = sorted((r1, r2))
    assert transfer_time(lo_v, lo_r, a) <= transfer_time(hi_v, lo_r, a)   # more bytes, not faster
    assert transfer_time(lo_v, hi_r, a) <= transfer_time(lo_v, lo_r, a)   # more bandwidth, not slower
    assert transfer_time(lo_v, lo_r, a) >= a


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=0, max_value=10**6), s=st.sampled_from([32, 64, 128, 256]),
       lat=st.floats(min_value=1e-9, max_value=1e-5), r=rate)
def test_littles_law_consistent(n, s, lat, r):
    bw = effective_bandwidth(r, float(n), float(s), lat)
    assert bw <= r * (1 + 1e-12)
    # what is in flight over one latency is what the bandwidth moves (or the interface is the limit)
    if n > 0 and bw < r:
        assert bw * lat == pytest.approx(n * s, rel=1e-12)


def test_mesh_allreduce_uses_every_link():
    """A full mesh (seed 000 "Directional bandwidth": 7 xGMI links of 76.8 GB/s per MI355X) reduce-scatters and
    all-gathers in one step each: 2 (alpha + V / (p R)), where the ring over one link takes 2 (p - 1) steps."""
    from dse.model.links import allreduce_time, mesh_allreduce_time, per_peer_links, ring_allreduce_time

    v, p, r, a = 64e6, 8, 76.8e9, 2e-6
    assert mesh_allreduce_time(v, p, r, a) == pytest.approx(2 * (a + v / (8 * 76.8e9)))
    assert ring_allreduce_time(v, p, r, a) == pytest.approx(14 * (a + v / (8 * 76.8e9)))
    # per-peer links (lanes x lane rate) with a peer for each other device: the mesh
    assert bool(per_peer_links(16.0, float("nan"))) and not bool(per_peer_links(float("nan"), 450e9))
    assert allreduce_time(v, p, r, a, 1.0, True, 7) == pytest.approx(mesh_allreduce_time(v, p, r, a))
    # a switch total: the same two steps, the 7 chunks of V / 8 of each step sharing the port (the ring moves the
    # same 2 x 7/8 V in 14 steps: it lost only to its 12 extra alphas, the old rule's answer)
    assert allreduce_time(v, p, r, a, 1.0, False, 7) == pytest.approx(2 * (a + 7 * v / (8 * r)))
    assert allreduce_time(v, p, r, a, 1.0, False, 7) < ring_allreduce_time(v, p, r, a)
    # 9 devices on 7 links: no mesh; the ring (16 steps of V / 9) beats a tree (4 levels of the whole V, twice)
    assert allreduce_time(v, 9, r, a, 1.0, True, 7) == pytest.approx(ring_allreduce_time(v, 9, r, a))


def test_mi355x_tensor_parallel_prefill_gets_faster():
    """issue 15: MI355X's 7-link mesh all-reduced over one link made TP=8 4K prefill slower (36.5 -> 61.1 ms). Over
    the mesh the all-reduces of a TP=8 prefill take less than the TP=1 time saved."""
    from dse.evaluate import evaluate_design
    from dse.hardware import Chips, load_chip
    from dse.workload import prefill

    mi = load_chip("mi355x")
    pre = prefill("qwen3-8b", batch=1, tokens=4096)
    one, eight = (evaluate_design(Chips.from_base(mi, 1, {"system.chips": np.array([float(p)])}), pre)
                  for p in (1, 8))
    assert eight["time_s"][0] < one["time_s"][0]
    assert eight["t_link_s"][0] > 0


# ---------------------------------------------------------------- issue 15 item 5: topologies and collectives

ALPHA, NVLINK = 2e-6, 450e9  # seed 004 §4.5.3: alpha = 2 us, H100 NVLink 450 GB/s per direction


def _ring_alltoall_by_steps(v, p, rate, alpha, directions):
    """The ring all-to-all counted step by step: each device holds p - 1 blocks of v / (p - 1), one per other
    device; in step j each device passes on the blocks not yet home, p - j of them, each split over the ring's
    directions; a step takes alpha + its bytes per link / rate. Returns (time, bytes over links in all)."""
    s = v / (p - 1)
    time = moved = 0.0
    for j in range(1, p):
        per_link = (p - j) * s / directions
        time += alpha + per_link / rate
        moved += p * directions * per_link
    return time, moved


def test_collective_algorithms_by_topology():
    """Each topology's algorithms, step by step with alpha + V / R per step (seed 004 §4.5.3); the cheapest is
    chosen. 8 devices, 64 MB each."""
    from dse.model.links import ALGORITHMS, MESH, RING, SWITCH, TORUS, collective

    v, p = 64e6, 8
    # switch (H100's NVSwitch port, 450 GB/s in all): direct = reduce-scatter + all-gather, one step each moving
    # 7 of the 8 chunks of V / 8 through the port: 2 (2 us + 56 MB / 450 GB/s) = 0.25289 ms
    t, algo = collective("all_reduce", v, p, NVLINK, ALPHA, 1.0, SWITCH, 7)
    assert ALGORITHMS[int(algo)] == "direct" and t == pytest.approx(2 * (2e-6 + 56e6 / 450e9))
    # ... the ring moves the same 112 MB in 14 steps (28 us of alphas more), the tree 6 x 64 MB
    assert ring_allreduce_time(v, p, NVLINK, ALPHA) == pytest.approx(14 * (2e-6 + 8e6 / 450e9))
    # full mesh (MI355X: 7 xGMI links of 76.8 GB/s, seed 000 "Directional bandwidth"): each step's 7 chunks
    # each on its own link: 2 (2 us + 8 MB / 76.8 GB/s)
    t, algo = collective("all_reduce", v, p, 76.8e9, ALPHA, 1.0, MESH, 7)
    assert ALGORITHMS[int(algo)] == "direct" and t == pytest.approx(2 * (2e-6 + 8e6 / 76.8e9))
    # the same 8 chips on a bidirectional ring of 76.8 GB/s links: two rings, 4 MB chunks each way, 14 steps
    t, algo = collective("all_reduce", v, p, 76.8e9, ALPHA, 1.0, RING, 2)
    assert ALGORITHMS[int(algo)] == "ring" and t == pytest.approx(14 * (2e-6 + 4e6 / 76.8e9))
    # a 4 x 4 torus (4 links per chip) runs bidirectional rings dimension by dimension (Chan et al. 2007): the
    # reduce-scatter takes 3 steps of V / 4 / 2 along the first dimension, then 3 of V / 16 / 2 along the second,
    # the all-gather the same back: 6 (2 us + 8 MB / R) + 6 (2 us + 2 MB / R), 12 alphas where one ring of 16
    # chips takes 30 (30 (2 us + 2 MB / R): the same bytes)
    t, algo = collective("all_reduce", v, 16, 76.8e9, ALPHA, 1.0, TORUS, 4)
    assert ALGORITHMS[int(algo)] == "ring"
    assert t == pytest.approx(6 * (2e-6 + 8e6 / 76.8e9) + 6 * (2e-6 + 2e6 / 76.8e9))
    assert t == pytest.approx(30 * (2e-6 + 2e6 / 76.8e9) - 18 * 2e-6)
    # reduce-scatter and all-gather: half the steps of the all-reduce
    for kind in ("reduce_scatter", "all_gather"):
        assert collective(kind, v, p, NVLINK, ALPHA, 1.0, SWITCH, 7)[0] == pytest.approx(2e-6 + 56e6 / 450e9)
        assert collective(kind, v, p, 76.8e9, ALPHA, 1.0, RING, 2)[0] == pytest.approx(7 * (2e-6 + 4e6 / 76.8e9))
    # one device: nothing to do
    assert collective("all_reduce", v, 1, NVLINK, ALPHA, 1.0, SWITCH, 7)[0] == 0.0


def test_small_buffers_take_the_tree_on_a_ring():
    """seed 004 §4.5.3: below V* = alpha R (900,000 B = 879 KiB on H100 NVLink) a transfer is alpha-bound, so
    fewer steps win. On an 8-chip ring of 450 GB/s links: ring 14 alpha + 14 V / (8 x 2 R), tree 2 log2 8 = 6
    levels of alpha + V / R. Equal where 8 alpha = (6 - 14 / 16) V / R: V = 8 / 5.125 V* = 1.561 V*."""
    from dse.model.links import ALGORITHMS, RING, collective

    v_star = float(expected("link_alpha_beta", "crossover_bytes"))
    assert v_star == pytest.approx(ALPHA * NVLINK)
    v_x = 8 / 5.125 * v_star
    for v, want in ((0.99 * v_x, "tree"), (1.01 * v_x, "ring")):
        t, algo = collective("all_reduce", v, 8, NVLINK, ALPHA, 1.0, RING, 2)
        assert ALGORITHMS[int(algo)] == want
        hand = 6 * (ALPHA + v / NVLINK) if want == "tree" else 14 * (ALPHA + v / 16 / NVLINK)
        assert t == pytest.approx(hand)
    assert 6 * (ALPHA + v_x / NVLINK) == pytest.approx(14 * (ALPHA + v_x / 16 / NVLINK))


def test_a_mesh_beyond_its_links_keeps_the_ring():
    """9 devices on 7-link meshes: no direct step and no tree (the links reach only the chip's own node), so
    the ring over one link, even for a buffer that a tree would move in fewer steps."""
    from dse.model.links import MESH, collective

    t, algo = collective("all_reduce", 1e3, 9, 76.8e9, ALPHA, 1.0, MESH, 7)
    assert int(algo) == 0 and t == pytest.approx(16 * (ALPHA + 1e3 / 9 / 76.8e9))


def test_alltoall_by_topology():
    """All-to-all of V = 7 MB per device over 8 devices (1 MB to each other one)."""
    from dse.model.links import MESH, RING, SWITCH, TORUS, alltoall_time

    v, p = 7e6, 8
    # mesh: each 1 MB block on its own 76.8 GB/s link, one step
    t, moved = alltoall_time(v, p, 76.8e9, ALPHA, 1.0, MESH, 7)
    assert t == pytest.approx(ALPHA + 1e6 / 76.8e9) and moved == pytest.approx(8 * 7e6)
    # switch: all 7 MB through the 450 GB/s port, one step
    t, moved = alltoall_time(v, p, NVLINK, ALPHA, 1.0, SWITCH, 7)
    assert t == pytest.approx(ALPHA + 7e6 / 450e9) and moved == pytest.approx(8 * 7e6)
    # ring, and a torus of one dimension: p - 1 = 7 steps, passing the blocks on neighbour to neighbour, both
    # directions
    for topo, links in ((RING, 2), (TORUS, 2)):
        t, moved = alltoall_time(v, p, 76.8e9, ALPHA, 1.0, topo, links)
        want_t, want_moved = _ring_alltoall_by_steps(v, p, 76.8e9, ALPHA, 2)
        assert t == pytest.approx(want_t) and moved == pytest.approx(want_moved)
    # a 4 x 2 torus (4 links per chip), dimension by dimension: along the side of 4 each chip passes on the 3 / 4 of
    # its 8 blocks of 1 MB bound for the other 3 columns, 6 MB in 3 ring steps; then along the side of 2 the 1 / 2
    # bound for the other row, 4 MB in 1 step. By the ring formula on each side (blocks of 2 MB, resp. 4 MB):
    t, moved = alltoall_time(v, p, 76.8e9, ALPHA, 1.0, TORUS, 4)
    side4 = _ring_alltoall_by_steps(6e6, 4, 76.8e9, ALPHA, 2)
    side2 = _ring_alltoall_by_steps(4e6, 2, 76.8e9, ALPHA, 2)
    assert t == pytest.approx(side4[0] + side2[0])
    assert moved == pytest.approx(2 * side4[1] + 4 * side2[1])  # 2 rings of 4 chips, 4 rings of 2
    # 16 chips on a switch of 7 peers: beyond the switch, the same ring over the port (one direction)
    t, _ = alltoall_time(15e6, 16, NVLINK, ALPHA, 1.0, SWITCH, 7)
    assert t == pytest.approx(_ring_alltoall_by_steps(15e6, 16, NVLINK, ALPHA, 1)[0])
    # count all-to-alls of V in all: count alphas per step
    assert alltoall_time(2 * v, p, NVLINK, ALPHA, 2.0, SWITCH, 7)[0] == pytest.approx(2 * (ALPHA + v / 450e9))


topologies = st.sampled_from([0, 1, 2, 3])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(v=size, r1=rate, r2=rate, a=alpha, p=st.integers(min_value=1, max_value=64), topo=topologies,
       peers=st.integers(min_value=1, max_value=64))
def test_collectives_monotone_and_never_worse_than_the_ring(v, r1, r2, a, p, topo, peers):
    from dse.model.links import alltoall_time, collective

    lo, hi = sorted((r1, r2))
    for kind in ("all_reduce", "reduce_scatter", "all_gather"):
        slow = collective(kind, v, p, lo, a, 1.0, topo, peers)[0]
        fast = collective(kind, v, p, hi, a, 1.0, topo, peers)[0]
        assert fast <= slow * (1 + 1e-12)  # more link bandwidth, never slower
        assert collective(kind, v, p, lo, 2 * a, 1.0, topo, peers)[0] >= slow * (1 - 1e-12)  # more alpha, not faster
    # the choice is never worse than the ring every topology has
    ring_rate = lo * (2 if topo in (2, 3) else 1)
    assert collective("all_reduce", v, p, lo, a, 1.0, topo, peers)[0] <= ring_allreduce_time(v, p, ring_rate, a) \
        * (1 + 1e-12)
    assert alltoall_time(v, p, hi, a, 1.0, topo, peers)[0] <= alltoall_time(v, p, lo, a, 1.0, topo, peers)[0] \
        * (1 + 1e-12)


def test_torus_sides_and_steps():
    """A torus of p chips with 2 links per dimension: sides as even as whole numbers allow (TPU v4's 4 x 4 x 4
    cube of 64, Trainium2's 4 x 4 of 16), and its dimension-ordered rings take sum (side - 1) steps each way."""
    from dse.model.links import TORUS, collective, torus_ring_steps, torus_sides

    assert torus_sides(64, 3) == (4, 4, 4) and torus_sides(16, 2) == (4, 4) and torus_sides(8, 3) == (2, 2, 2)
    assert torus_sides(8, 2) == (4, 2) and torus_sides(12, 2) == (4, 3) and torus_sides(7, 2) == (7, 1)
    assert list(torus_ring_steps([64, 16, 8, 7, 1], [6, 4, 2, 4, 4])) == [9.0, 6.0, 7.0, 6.0, 0.0]
    # alpha-bound (a decode step's 16 KB all-reduce on 64 chips of a 3D torus): 2 x 9 steps, not 2 x 63; the
    # tree's 2 x 6 levels of the whole V win there
    t, algo = collective("all_reduce", 16e3, 64, 45e9, ALPHA, 1.0, TORUS, 6)
    ring = 18 * ALPHA + 2 * 63 / 64 * 16e3 / (2 * 45e9)
    tree = 12 * (ALPHA + 16e3 / 45e9)
    assert t == pytest.approx(min(ring, tree))
    # a torus of one dimension is the ring
    assert collective("all_reduce", 64e6, 8, 45e9, ALPHA, 1.0, TORUS, 2)[0] == pytest.approx(
        14 * (ALPHA + 64e6 / 8 / (2 * 45e9)))
