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
    # per-peer links (lanes x lane rate) with a peer for each other device: the mesh; a switch total: the ring
    assert bool(per_peer_links(16.0, float("nan"))) and not bool(per_peer_links(float("nan"), 450e9))
    assert allreduce_time(v, p, r, a, 1.0, True, 7) == pytest.approx(mesh_allreduce_time(v, p, r, a))
    assert allreduce_time(v, p, r, a, 1.0, False, 7) == pytest.approx(ring_allreduce_time(v, p, r, a))
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
