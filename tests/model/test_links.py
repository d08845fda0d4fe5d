"""Tests of dse.model.links: seed cases (inputs typed from the seeds, expected values from the case file) and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import SpecError
from dse.model.links import (
    aggregate_egress,
    alpha_beta_crossover_bytes,
    compute_in_place_time,
    cross_die_read_time,
    host_upload,
    lane_bandwidth,
    littles_law_bandwidth,
    ring_allreduce_time,
    transactions_needed,
    transfer_time,
)
from tests.reference_cases import approx

GiB, MiB = 2**30, 2**20


def test_littles_law():
    # seed 004 §4.3.3, Example 4-2: 128 B transactions, 500 ns latency; 1.125 GiB of KV;
    # RTX 4090 1,008 GB/s, RTX 5090 1,792 GB/s; 800 ns variant
    cid, s, lat, kv = "littles_law", 128, 500e-9, 1.125 * GiB
    r4090, r5090 = 1008e9, 1792e9
    approx(cid, "transactions_for_1008GBps", transactions_needed(r4090, s, lat))
    bw128 = littles_law_bandwidth(128, s, lat, r4090)
    approx(cid, "bw_with_128_transactions", bw128)
    approx(cid, "time_with_128_transactions_s", transfer_time(kv, bw128))
    approx(cid, "time_with_4096_at_1008GBps_s", transfer_time(kv, littles_law_bandwidth(4096, s, lat, r4090)))
    approx(cid, "bw_with_4096_transactions", littles_law_bandwidth(4096, s, lat))
    approx(cid, "time_with_4096_at_1792GBps_s", transfer_time(kv, littles_law_bandwidth(4096, s, lat, r5090)))
    approx(cid, "transactions_for_1792GBps", transactions_needed(r5090, s, lat))
    approx(cid, "transactions_for_1792GBps_at_800ns", transactions_needed(r5090, s, 800e-9))


def test_link_alpha_beta():
    # seed 004 §4.5.3: alpha = 2 us; [M, 4096] BF16 activations = 8192 M bytes;
    # H100 NVLink 450 GB/s per direction, A100 300 GB/s
    cid, alpha, row_bytes = "link_alpha_beta", 2e-6, 4096 * 2
    for chip, bw in (("h100", 450e9), ("a100", 300e9)):
        for m in (1, 256):
            approx(cid, f"{chip}_m{m}_s", transfer_time(m * row_bytes, bw, alpha))
    v_star = alpha_beta_crossover_bytes(alpha, 450e9)
    approx(cid, "crossover_bytes", v_star)
    approx(cid, "crossover_rows", v_star / row_bytes)
    # at the crossover the byte term equals the fixed overhead
    assert transfer_time(v_star, 450e9) == pytest.approx(alpha)


def test_host_upload():
    # seed 004 §4.5.2: 64 MiB over PCIe 4.0 x16 (32 GB/s per direction); RTX 4090 1,008 GB/s
    up = host_upload(64 * MiB, 32e9, 1008e9)
    approx("host_upload", "h2d_s", up.upload_s)
    approx("host_upload", "read_s", up.read_s)
    approx("host_upload", "reuses_to_amortize", up.reuses_to_amortize)


def test_cross_die_placement():
    # seed 004 §4.5.1: 64 GiB split 32/32 over two dies, all compute on die 0.
    # B200: 4 TB/s per die, NV-HBI 10 TB/s (5 TB/s per direction if aggregate). 910C: 1.6 TB/s per die, 270 GB/s link
    cid, half = "cross_die_placement", 32 * GiB
    for link in (10e12, 5e12):
        b200 = cross_die_read_time(half, half, 4e12, 4e12, link)
        approx(cid, "b200_stage_s", b200.time_s)
        assert b200.local_s == b200.remote_s
    ascend = cross_die_read_time(half, half, 1.6e12, 1.6e12, 270e9)
    approx(cid, "ascend_local_s", ascend.local_s)
    approx(cid, "ascend_cross_s", ascend.remote_s)
    assert ascend.time_s == ascend.remote_s
    approx(cid, "ascend_compute_in_place_s", compute_in_place_time([half, half], 1.6e12))
    approx(cid, "ascend_64mib_over_link_s", transfer_time(64 * MiB, 270e9))


def test_xgmi_links():
    # seed 000 "Directional bandwidth": 16 lanes x 38.4 Gb/s per xGMI link, 7 peers, 1 GB to one peer
    link = lane_bandwidth(16, 38.4e9)
    approx("xgmi_links", "per_link_one_direction", link)
    approx("xgmi_links", "aggregate_egress", aggregate_egress(7, link))
    approx("xgmi_links", "one_gb_to_peer_s", transfer_time(1e9, link))


def test_ring_allreduce():
    # Patarasuk & Yuan 2009: 2 (p-1) steps of V/p bytes; one device costs nothing
    assert ring_allreduce_time(1e9, 1, 76.8e9, 1e-6) == 0.0
    t = ring_allreduce_time(8e9, 8, 100e9, 0.0)
    assert t == pytest.approx(2 * 7 * 1e9 / 100e9)
    np.testing.assert_allclose(ring_allreduce_time(1e6, np.array([2, 4]), 1e9, 1e-6),
                               [2 * (1e-6 + 0.5e-3), 6 * (1e-6 + 0.25e-3)])
    with pytest.raises(SpecError):
        ring_allreduce_time(1e6, 2.5, 1e9)


def test_vectorized_and_errors():
    np.testing.assert_allclose(transfer_time(np.array([0, 1e9]), 1e9, 1.0), [1.0, 2.0])
    np.testing.assert_array_equal(transactions_needed(np.array([1008e9, 1792e9]), 128, 500e-9), [3938, 7000])
    with pytest.raises(SpecError):
        transfer_time(1e6, 0.0)
    with pytest.raises(SpecError):
        transfer_time(-1.0, 1e9)


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
    bw = littles_law_bandwidth(n, s, lat, r)
    assert bw <= r * (1 + 1e-12)
    # the transactions needed for the achieved bandwidth never exceed what was in flight
    assert transactions_needed(bw, s, lat) <= max(n, 0)
