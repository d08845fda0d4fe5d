"""Resident-state capacity: how many requests fit beside the weights, how many chips hold a tensor."""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError
from dse.model import capacity as rules


def max_requests(capacity, weights, workspace, context, kv_per_token):
    """B_max = floor((C - W - workspace) / (S m_KV)), never below 0 (seed 004 §4.3.1).

    Vectorized over any argument. RTX 4090: 24 GB, 16.4 GB weights, 2 GiB
    workspace, 144 KiB per token: 4 requests at 8K, 2 at 16K.
    """
    c, w, ws, s, kv = (np.asarray(v, dtype=float) for v in (capacity, weights, workspace, context, kv_per_token))
    if np.any(s <= 0) or np.any(kv <= 0):
        raise SpecError("max_requests: context and kv bytes per token must be > 0")
    out = np.asarray(rules.max_batch(c, w + ws, s, kv)).astype(np.int64)  # dse.model.capacity: never below 0
    return out.item() if out.ndim == 0 else out


def chips_to_hold(nbytes, capacity_per_chip):
    """Chips needed to hold ``nbytes`` split evenly: ceil(bytes / capacity) (seed 004 §4.7.2).

    Groq TSP, 220 MiB SRAM per chip: Qwen3-8B BF16 weights (16.4 GB) need 72
    chips; one 8K request's KV (1.125 GiB = 1152 MiB) 6; eight requests (9 GiB)
    42 (the total is rounded, not each request); eight 32K requests 168.
    """
    b, c = np.asarray(nbytes, dtype=float), np.asarray(capacity_per_chip, dtype=float)
    if np.any(c <= 0):
        raise SpecError("chips_to_hold: capacity per chip must be > 0")
    out = np.asarray(rules.chips_to_hold(b, c)).astype(np.int64)
    return out.item() if out.ndim == 0 else out
