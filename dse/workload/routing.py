"""MoE routing: rows each expert receives, and the rows the matrix unit executes after padding."""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError, unknown_name
from dse.model.tiling import pad

ROUTINGS = ("uniform", "concentrated")


def moe_rows(tokens: int, top_k: int, experts: int, distribution="uniform") -> np.ndarray:
    """Rows each expert receives when ``tokens`` tokens each pick ``top_k`` of ``experts``.

    seed 004 §4.2.1, §4.3.3: tokens x top_k dispatches in total.
    ``'uniform'`` (the seed's *dispersed*) spreads them as evenly as possible
    (64 tokens x top-8 over 256 experts: 2 rows each; 8 decode tokens x 8 over
    128 experts: 64 experts with 1 row); ``'concentrated'``: every token picks
    the same ``top_k`` experts, which get ``tokens`` rows each. An explicit
    list gives each expert's row count (length ``experts``, sum tokens x top_k,
    none above ``tokens``). Returns an int array of length ``experts``.
    """
    for name, v in (("tokens", tokens), ("top_k", top_k), ("experts", experts)):
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < (0 if name == "tokens" else 1):
            raise SpecError(f"moe_rows: {name} must be an integer >= {0 if name == 'tokens' else 1}, got {v!r}")
    if top_k > experts:
        raise SpecError(f"moe_rows: top_k ({top_k}) must be <= experts ({experts})")
    dispatches = tokens * top_k
    if isinstance(distribution, str):
        if distribution == "uniform":
            base, extra = divmod(dispatches, experts)
            rows = np.full(experts, base, dtype=np.int64)
            rows[:extra] += 1
            return rows
        if distribution == "concentrated":
            rows = np.zeros(experts, dtype=np.int64)
            rows[:top_k] = tokens
            return rows
        raise SpecError(unknown_name("routing distribution", distribution, ROUTINGS))
    rows = np.asarray(list(distribution), dtype=np.int64)
    if rows.shape != (experts,):
        raise SpecError(f"routing: an explicit list needs one row count per expert ({experts}), got {rows.size}")
    if np.any(rows < 0) or np.any(rows > tokens):
        raise SpecError(f"routing: each expert's rows must be between 0 and tokens ({tokens})")
    if rows.sum() != dispatches:
        raise SpecError(f"routing: rows must sum to tokens x top_k = {dispatches}, got {int(rows.sum())}")
    return rows


def padded_rows(rows, quantum: int) -> np.ndarray:
    """Each expert's rows padded up to the row quantum; 0 stays 0 (seed 004 §4.2.1)."""

    return np.asarray(pad(np.asarray(rows, dtype=np.int64), quantum))


def executed_rows(rows, quantum: int) -> int:
    """Rows the matrix unit executes over all experts (seed 004 §4.2.1).

    64 tokens x top-8, quantum 16: uniform over 256 experts 256 x 16 = 4096;
    concentrated on 8 experts 8 x 64 = 512; useful rows 512 in both.
    """
    return int(np.sum(padded_rows(rows, quantum)))


def _routing_arg(routing):
    if isinstance(routing, str):
        if routing not in ROUTINGS:
            raise SpecError(unknown_name("routing distribution", routing, ROUTINGS))
        return routing
    return tuple(int(r) for r in routing)
