"""dse.model.capacity (and the memory-interface rule of dse.model.links): what the
evaluator and dse.workload call, with numbers counted by hand in the comments; and a guard that the chip
records and the technology tables give the same HBM stack figures as these rules (seed 004 §4.1.3)."""

from __future__ import annotations

import numpy as np
import pytest

from dse import technology
from dse.hardware import catalog_names, load_chip
from dse.model import capacity, links
from dse.workload import decode


def test_max_batch_is_never_negative():
    # 24 GB, 16 GB of weights + 2 GB workspace, 1 GB per 1K-token request: floor(6e9 / 1e9) = 6 requests
    assert capacity.max_batch(24e9, 18e9, 1024, 1e9 / 1024) == 6
    assert capacity.max_batch(24.5e9, 18e9, 1024, 1e9 / 1024) == 6  # (whole requests: 6.5 -> 6)
    # the weights alone do not fit: 0 requests (not -1), and fits says why
    assert capacity.max_batch(8e9, 18e9, 1024, 1e9 / 1024) == 0
    assert not capacity.fits(18e9, 8e9)
    # no KV cache: any number of requests while the fixed bytes fit, none otherwise
    np.testing.assert_array_equal(capacity.max_batch(np.array([24e9, 8e9]), 18e9, 0, 0.0), [np.inf, 0.0])
    # the same with a context per point (1K tokens, none, 1K where the weights do not fit): 6, inf, 0
    np.testing.assert_array_equal(capacity.max_batch(np.array([24e9, 24e9, 8e9]), 18e9, np.array([1024, 0, 1024]),
                                                     1e9 / 1024), [6.0, np.inf, 0.0])


def test_resident_bytes_and_max_batch_are_inverse():
    w = decode("qwen3-8b", batch=1, context=8192, workspace="2 GiB")
    fixed = w.weight_resident_bytes + w.workspace_bytes
    b = int(capacity.max_batch(80e9, fixed, w.context, w.kv_bytes_per_token))
    assert capacity.resident_bytes(w.weight_resident_bytes, w.workspace_bytes, b, w.context, w.kv_bytes_per_token) <= 80e9
    assert capacity.resident_bytes(w.weight_resident_bytes, w.workspace_bytes, b + 1, w.context,
                                   w.kv_bytes_per_token) > 80e9
    assert w.resident_bytes == capacity.resident_bytes(w.weight_resident_bytes, w.workspace_bytes, 1, 8192,
                                                       w.kv_bytes_per_token)


def test_chips_to_hold():
    # 1,152 MiB over 220 MiB chips: 5.24 -> 6 chips; exactly 440 MiB: 2
    np.testing.assert_array_equal(capacity.chips_to_hold(np.array([1152.0, 440.0]) * 2**20, 220 * 2**20), [6, 2])


@pytest.mark.parametrize("name", [n for n in catalog_names() if load_chip(n).hbm is not None])
def test_chip_records_agree_with_the_hbm_rules(name):
    """Until dse.hardware and dse.technology call these rules, they must give the same figures."""
    h = load_chip(name).hbm
    assert h.stack_bandwidth == pytest.approx(links.interface_bandwidth(h.pins_per_stack, h.pin_rate), rel=1e-12)
    if h.capacity_per_stack is None:
        assert h.stack_capacity == pytest.approx(capacity.stack_capacity(h.layers, h.capacity_per_layer), rel=1e-12)
    mem = technology.memory(h.generation)
    assert mem.interface_bandwidth == pytest.approx(links.interface_bandwidth(mem.pins, mem.pin_rate), rel=1e-12)
    if mem.stack_capacity is not None:
        assert mem.stack_capacity == pytest.approx(capacity.stack_capacity(mem.layers, mem.capacity_per_layer),
                                                   rel=1e-12)
