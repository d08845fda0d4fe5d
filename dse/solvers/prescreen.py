"""Surrogate pre-screening of a search's candidates: evaluate the few a cheap model says will help.

NSGA-II makes ``factor x k`` offspring (crossover and mutation, as usual); a k-nearest-neighbour model of the
points already evaluated predicts each one's objectives and whether it is feasible, and :func:`choose` keeps
``k`` of them for the evaluator: for each of ``k`` weight vectors (drawn without replacement from Das and
Dennis's simplex lattice), the candidate predicted feasible with the best achievement scalarizing function
(Wierzbicki's ASF, objectives normalized by the current front), so the ``k`` points spread over the whole front instead of crowding where
the model promises most. The others are never evaluated. The evaluations are the budget; the model costs
one distance matrix per generation.

Why a k-NN model and an ASF on lattice weights (a screening harness over benchmarks/bench_search.py's rich
12-parameter space at 2,325 evaluations = 5% of the reference's, one strict reference pooled from the long
runs and every screening run; mean and worst seed): NSGA-II alone 0.986, worst 0.978 (29 seeds: 0-4, 10-17,
20-35). Pre-screened 4x by k-NN (3 neighbours), keeping greedily the best predicted improvement of the
front (an additive-epsilon margin): 0.992, worst 0.985 (seeds 0-4, 10-17); better on average, but it
converged one region of the front and starved another (on the worst seed the one-die, one-chip designs, the
cheap end). With an ASF on random (Dirichlet) weights instead: 0.994, worst 0.990 (29 seeds), though with
another random stream 0.9935, worst 0.986 (19 seeds); on Das and Dennis's lattice (a random k of its
vectors, so every part of the front gets a direction): 0.9934, worst 0.9906 (the same 19 seeds). 8x instead
of 4x, 5 or 10 neighbours, a lower confidence bound (prediction minus 0.3-0.5 standard deviations of the
neighbours), or random candidates beside NSGA-II's: worse worst seeds (0.978-0.988). The benchmark's own
figures are in README "Benchmarks".

The model knows nothing of the physics: parameters are scaled to the unit cube (log parameters on a log
scale, choices one-hot at distance 1 from each other), objectives of one sign are predicted on a log scale
(they are multiplicative: time, energy, cost), and the prediction is the inverse-distance-weighted mean of
the nearest feasible points (whether a candidate is feasible: the same weights over all points).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from dse.pareto import pareto_mask, to_minimization
from dse.space import ChoiceParam, DesignSpace, LogParam

#: offspring made per point evaluated (1: no pre-screening); measured above
DEFAULT_FACTOR = 4
#: neighbours of the k-NN model
NEIGHBOURS = 3
#: the ASF's utopia point lies this far below the front's ideal (normalized units), so no weight vector's
#: ASF is decided by one objective alone at the ideal
UTOPIA = 0.05
#: candidates per block of the distance matrix (memory: BLOCK x evaluated points floats)
BLOCK = 256
#: the model learns from at most this many points: the latest ones and the current front (a long run's early
#: generations, far from the front, add cost and little else)
LEARN_MAX = 10_000


def encode(space: DesignSpace, params: Mapping[str, np.ndarray]) -> np.ndarray:
    """Parameters as points of the unit cube (one column per number, one per choice), one row per point."""
    cols = []
    for p in space.params:
        v = np.asarray(params[p.name])
        if isinstance(p, ChoiceParam):
            index = {c: i for i, c in enumerate(p.choices)}
            idx = np.array([index[x] for x in v.tolist()], dtype=int)
            hot = np.zeros((len(v), len(p.choices)))
            hot[np.arange(len(v)), idx] = 1 / math.sqrt(2)  # two different choices: distance 1
            cols.append(hot)
            continue
        x = v.astype(float)
        lo, hi = float(p.low), float(p.high)
        if isinstance(p, LogParam):
            x, lo, hi = np.log(x), math.log(lo), math.log(hi)
        cols.append(((x - lo) / (hi - lo if hi > lo else 1.0))[:, None])
    return np.hstack(cols) if cols else np.zeros((len(next(iter(params.values()), [])), 0))


def _nearest(Xc: np.ndarray, X: np.ndarray, usable: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into X) and inverse-distance weights of the ``k`` nearest usable rows of X, per row of Xc."""
    rows = np.flatnonzero(usable)
    k = min(k, len(rows))
    Xu = X[rows]
    sq = (Xu ** 2).sum(1)
    idx = np.empty((len(Xc), k), dtype=int)
    dist = np.empty((len(Xc), k))
    for s in range(0, len(Xc), BLOCK):
        c = Xc[s:s + BLOCK]
        d2 = np.maximum((c ** 2).sum(1)[:, None] + sq[None, :] - 2.0 * c @ Xu.T, 0.0)
        nn = np.argpartition(d2, k - 1, axis=1)[:, :k]
        idx[s:s + BLOCK] = rows[nn]
        dist[s:s + BLOCK] = np.sqrt(np.take_along_axis(d2, nn, 1))
    w = 1.0 / (dist + 1e-9)
    return idx, w / w.sum(1, keepdims=True)


def simplex_lattice(m: int, k: int) -> np.ndarray:
    """Das and Dennis's weight vectors: every w with sum 1 and each w_j a multiple of 1/H, for the smallest H
    that gives at least ``k`` of them (``m`` objectives; one objective: the one weight 1)."""
    if m == 1:
        return np.ones((1, 1))
    h = 1
    while math.comb(h + m - 1, m - 1) < k:
        h += 1

    def parts(total: int, n: int):
        if n == 1:
            yield (total,)
            return
        for first in range(total + 1):
            for rest in parts(total - first, n - 1):
                yield (first, *rest)

    return np.array(list(parts(h, m)), dtype=float) / h


def choose(space: DesignSpace, directions, evaluated: tuple[Mapping, np.ndarray, np.ndarray],
           candidates: Mapping[str, np.ndarray], k: int, rng: np.random.Generator) -> np.ndarray | None:
    """Indices of the ``k`` candidates to evaluate (sorted), or None when the model has nothing to go on.

    ``evaluated``: (params, objectives, constraints) of every point evaluated so far (constraints ``<= 0``
    feasible). None when fewer than two feasible points are known (no front to normalize by).
    """
    P, F, G = evaluated
    n_cand = len(next(iter(candidates.values())))
    if n_cand <= k:
        return np.arange(n_cand)
    Z = to_minimization(np.asarray(F, dtype=float), directions)
    G = np.asarray(G, dtype=float)
    ok = np.all(np.isfinite(Z), axis=1) & (np.all(G <= 0, axis=1) if G.shape[1] else True)
    if ok.sum() < 2:
        return None
    positive = np.all(Z[ok] > 0, axis=0)
    T = np.where(positive, np.log(np.where(Z > 0, Z, 1.0)), Z)
    front = pareto_mask(T, ["minimize"] * T.shape[1], ok)
    lo, hi = T[front].min(0), T[front].max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    X, Xc = encode(space, P), encode(space, candidates)
    learn = np.ones(len(X), dtype=bool)
    if len(X) > LEARN_MAX:
        learn[: len(X) - LEARN_MAX] = front[: len(X) - LEARN_MAX]
        ok = ok & learn
    near, w = _nearest(Xc, X, learn, NEIGHBOURS)
    p_feasible = (w * ok[near]).sum(1)
    near_ok, w_ok = _nearest(Xc, X, ok, NEIGHBOURS)
    C = (np.einsum("ck,ckj->cj", w_ok, T[near_ok]) - lo) / span
    free = np.ones(n_cand, dtype=bool)
    likely = p_feasible >= 0.5
    chosen: list[int] = []
    lattice = simplex_lattice(C.shape[1], k)
    for wv in lattice[rng.choice(len(lattice), k, replace=len(lattice) < k)] + 1e-3:
        asf = np.where(free & likely, np.max((C + UTOPIA) / wv, axis=1), np.inf)
        i = int(np.argmin(asf))
        if not np.isfinite(asf[i]):
            break
        chosen.append(i)
        free[i] = False
    if len(chosen) < k:  # too few predicted feasible: the likeliest of the rest
        rest = np.flatnonzero(free)
        chosen += rest[np.argsort(-p_feasible[rest], kind="stable")][: k - len(chosen)].tolist()
    return np.sort(np.array(chosen, dtype=int))


__all__ = ["DEFAULT_FACTOR", "choose", "encode"]
