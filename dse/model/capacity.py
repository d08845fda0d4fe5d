"""Capacity: resident bytes, whether they fit, how many requests fit, how many chips hold a tensor.

Seed 004 §4.3.1: the main memory holds the weights W, the workspace and the KV cache of every request
in flight, B S m_KV for B requests of S tokens of context at m_KV bytes per token. Each rule lives here
once; the evaluator (dse/model/evaluator.py) and dse.workload call these functions. Pure, unchecked,
numpy-vectorized (scalars or arrays, broadcasting).

``max_batch`` means one thing everywhere: the number of requests that fit, never negative. Where the
weights and workspace alone do not fit it is 0 (no request can be served; ``fits`` is False); where the
workload holds no KV cache (a GEMM, a prefill without a cache) it is inf when the fixed bytes fit.
"""

from __future__ import annotations

import numpy as np

from dse.model.tiling import ceil_div_core

__all__ = ["stack_capacity", "resident_bytes", "fits", "max_batch", "chips_to_hold"]


def stack_capacity(layers, capacity_per_layer):
    """Bytes of one HBM stack: layers x capacity per layer (seed 004 §4.1.3: 8 x 3 GB = 24 GB of HBM3E)."""
    return layers * capacity_per_layer


def resident_bytes(weights, workspace, batch, context, kv_per_token):
    """W + B S m_KV + workspace (seed 004 §4.3.1, §4.8.2): Qwen3-8B BF16, 8 requests of 8K, 2 GiB workspace."""
    return weights + batch * context * kv_per_token + workspace


def fits(resident, capacity):
    """The resident bytes fit the capacity (seed 004 §4.3.1; the fits_memory constraint's sign)."""
    return resident <= capacity


def max_batch(capacity, fixed_bytes, context, kv_per_token):
    """B_max = floor((C - W - workspace) / (S m_KV)), never below 0 (seed 004 §4.3.1).

    ``fixed_bytes`` = W + workspace. 0 where they do not fit; inf where there is no KV cache
    (``context`` or ``kv_per_token`` 0) and they fit. RTX 4090: 24 GB, 16.4 GB weights, 2 GiB
    workspace, 144 KiB per token: 4 requests at 8K, 2 at 16K.
    """
    free = capacity - fixed_bytes
    per_request = context * kv_per_token
    if np.ndim(per_request) == 0:  # (one request size for every point: the division only where there is a cache)
        return np.where(free < 0, 0.0, np.floor(free / per_request) if per_request > 0 else np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        n = np.floor(free / per_request)
    return np.where(free < 0, 0.0, np.where(per_request > 0, n, np.inf))


def chips_to_hold(nbytes, capacity_per_chip):
    """Chips needed to hold ``nbytes`` split evenly: ceil(bytes / capacity) (seed 004 §4.7.2).

    Groq TSP, 220 MiB SRAM per chip: Qwen3-8B BF16 weights (16.4 GB) need 72 chips; one 8K request's
    KV (1.125 GiB = 1152 MiB) 6; eight requests (9 GiB) 42 (the total is rounded, not each request).
    """
    return ceil_div_core(np.asarray(nbytes, dtype=float), capacity_per_chip)
