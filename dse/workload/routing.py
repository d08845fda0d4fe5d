"""MoE routing: rows each expert receives, and the rows the matrix unit executes after padding."""

from __future__ import annotations

import numpy as np

from dse.errors import SpecError, unknown_name
from dse.model.tiling import pad

ROUTINGS = ("uniform", "concentrated", "random")


def moe_rows(tokens: int, top_k: int, experts: int, distribution="uniform") -> np.ndarray:
    """Rows each expert receives when ``tokens`` tokens each pick ``top_k`` of ``experts``.

    seed 004 §4.2.1, §4.3.3: tokens x top_k dispatches in total.
    ``'uniform'`` (the seed's *dispersed*) spreads them as evenly as possible
    (64 tokens x top-8 over 256 experts: 2 rows each; 8 decode tokens x 8 over
    128 experts: 64 experts with 1 row); ``'concentrated'``: every token picks
    the same ``top_k`` experts, which get ``tokens`` rows each; ``'random'``: the expected outcome of a router that
    picks its top_k experts independently for each token (:func:`random_rows`: 8 decode tokens x 8 over 128
    experts reach 52 experts, not the 64 of ``'uniform'``). An explicit
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
        if distribution == "random":
            return random_rows(tokens, top_k, experts)
        raise SpecError(unknown_name("routing distribution", distribution, ROUTINGS))
    rows = np.asarray(list(distribution), dtype=np.int64)
    if rows.shape != (experts,):
        raise SpecError(f"routing: an explicit list needs one row count per expert ({experts}), got {rows.size}")
    if np.any(rows < 0) or np.any(rows > tokens):
        raise SpecError(f"routing: each expert's rows must be between 0 and tokens ({tokens})")
    if rows.sum() != dispatches:
        raise SpecError(f"routing: rows must sum to tokens x top_k = {dispatches}, got {int(rows.sum())}")
    return rows


def random_rows(tokens: int, top_k: int, experts: int) -> np.ndarray:
    """Rows per expert, largest first, that a router picking ``top_k`` of ``experts`` for each token independently
    and uniformly gives on expectation: each expert receives Binomial(tokens, top_k / experts) rows, so
    experts x P(Binomial = r) experts receive r rows, rounded to whole experts (largest remainders) and then
    to the exact tokens x top_k dispatches (a row more on the least loaded active experts, or a row fewer on the
    most loaded ones). The active experts
    are experts (1 - (1 - top_k / experts)^tokens) (the expected number of distinct experts a decode step reads;
    e.g. Huang et al. 2023, "Towards MoE Deployment: Mitigating Inefficiencies in Mixture-of-Expert (MoE)
    Inference", section 3). Uniform spreads the dispatches over as many experts as possible, an upper bound.
    """
    dispatches = tokens * top_k
    if tokens == 0:
        return np.zeros(experts, dtype=np.int64)
    p = top_k / experts
    r = np.arange(tokens + 1, dtype=float)
    if p >= 1.0:
        return np.full(experts, tokens, dtype=np.int64)
    # log P(Binomial(T, p) = r), cumulatively: log C(T, r) = sum log((T - j) / (j + 1)), j < r
    steps = np.log(np.maximum(tokens - r[:-1], 1e-300)) - np.log(r[:-1] + 1.0)
    log_pmf = np.concatenate([[0.0], np.cumsum(steps)]) + r * np.log(p) + (tokens - r) * np.log1p(-p)
    expected = experts * np.exp(log_pmf)
    count = np.floor(expected).astype(np.int64)
    short = experts - int(count.sum())
    if short > 0:  # largest remainders, ties to the smaller row count
        order = np.lexsort((r, -(expected - count)))
        count[order[:short]] += 1
    rows = np.repeat(np.arange(tokens + 1, dtype=np.int64), count)[::-1].copy()  # largest first
    diff = dispatches - int(rows.sum())
    while diff != 0:  # to the exact dispatches, a row at a time, keeping the active experts where it can
        if diff > 0:  # onto the least loaded active experts first, then onto idle ones
            order = np.lexsort((rows, rows == 0))
            take = order[rows[order] < tokens][:diff]
        else:  # off the most loaded experts first, emptying one only where no other can give
            order = np.lexsort((-rows, rows == 1))
            take = order[rows[order] > 0][:-diff]
        rows[take] += 1 if diff > 0 else -1
        diff -= len(take) if diff > 0 else -len(take)
    return np.sort(rows)[::-1].copy()


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
