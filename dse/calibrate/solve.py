"""The least-squares solver: variable projection over the knobs, for several row subsets at once.

Least squares on relative residuals; an overhead the time is exactly linear in is solved exactly (bounded
linear least squares), the other knobs by a coarse grid and zooming (see dse.calibrate.fit for the method).
"""

from __future__ import annotations

import itertools

import numpy as np

from dse.calibrate.problem import _COARSE_POINTS, _Problem


def _vp(prob: _Problem, unbounded: frozenset, masks: list[np.ndarray], extras: list) -> list[tuple[np.ndarray, float]]:
    """Least squares for several row subsets of ``prob`` at once (the fit and its leave-one-out refits).

    Variable projection: the overheads the time is linear in are solved exactly (bounded linear least
    squares: the best feasible face of the box) for each setting of the other knobs; those (the fractions,
    and an overhead the time is not linear in) by a coarse grid, then by zooming around the three best grid
    points and the given extra starts until the step is 1e-6 (in log fraction, or overhead / shortest
    measurement). The grid is indifferent to the kinks max(matrix, vector, memory) puts in the fractions.
    One evaluator call per workload and round serves every subset. Knobs in ``unbounded`` may leave their
    physical range (fractions up to 1e4, overheads below 0).
    """
    lin = prob.linear()
    gd = prob.grid_dims()
    ov = [j for j, k in enumerate(prob.free) if k in lin]
    q, d = len(ov), len(gd)
    A_all = (np.stack([lin[prob.free[j]] for j in ov], axis=1) * prob.scale / prob.meas[:, None] if q
             else np.zeros((len(prob.rows), 0)))
    always = tuple(i for i, j in enumerate(ov) if prob.free[j] in unbounded)
    bounded = [i for i in range(q) if i not in always]
    subsets = [tuple(sorted(always + S)) for r in range(len(bounded) + 1) for S in itertools.combinations(bounded, r)]
    pinvs = [{S: np.linalg.pinv(A_all[m][:, list(S)]) for S in subsets if S} for m in masks]

    def inner(T0: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
        m = masks[i]
        A = A_all[m]
        c = T0[:, m] / prob.meas[m] - 1.0
        best = np.full(c.shape[0], np.inf)
        best_o = np.zeros((c.shape[0], q))
        for S in subsets:
            o = np.zeros((c.shape[0], q))
            if S:
                o[:, list(S)] = -(pinvs[i][S] @ c.T).T
            ok = np.all(o[:, bounded] >= 0, axis=1)
            r = c + o @ A.T
            cost = 0.5 * np.einsum("gi,gi->g", r, r)
            take = ok & (cost < best)
            best = np.where(take, cost, best)
            best_o[take] = o[take]
        return best, best_o

    def assemble(x: np.ndarray, o: np.ndarray) -> np.ndarray:
        z = np.zeros(len(prob.free))
        z[gd] = x
        z[ov] = o
        return z

    if d == 0:
        T0 = prob.times(prob.theta(np.zeros((1, len(prob.free)))))
        out = []
        for i in range(len(masks)):
            cost, o = inner(T0, i)
            out.append((assemble(np.zeros(0), o[0]), float(cost[0])))
        return out
    lo, hi = prob.ranges(unbounded)
    g, T0 = prob.coarse()
    inside = np.all((g >= lo - 1e-12) & (g <= hi + 1e-12), axis=1)
    g, T0 = g[inside], T0[inside]
    centers, cur, owner = [], [], []
    for i in range(len(masks)):
        cost, _ = inner(T0, i)
        order = np.argsort(cost, kind="stable")[:3]
        centers += [g[j] for j in order] + [np.clip(np.asarray(e, dtype=float)[gd], lo, hi) for e in extras[i]]
        cur += [cost[j] for j in order] + [np.inf] * len(extras[i])
        owner += [i] * (len(order) + len(extras[i]))
    centers, cur, owner = np.array(centers), np.array(cur), np.array(owner)
    per_dim = 9 if d <= 2 else 5
    offs = np.array(list(itertools.product(np.linspace(-1.0, 1.0, per_dim), repeat=d)))
    lo_u, hi_u = prob.ranges(frozenset(prob.free))
    step = (hi_u - lo_u) / (_COARSE_POINTS.get(d, 11) - 1)
    while step.max() > 1e-6:
        pts = np.clip(centers[:, None, :] + step * offs[None], lo, hi)  # (C, K, d)
        T = prob.times(prob.theta(prob.z_grid(pts.reshape(-1, d)))).reshape(len(centers), len(offs), -1)
        for i in range(len(masks)):
            mine = np.flatnonzero(owner == i)
            c, _ = inner(T[mine].reshape(-1, T.shape[2]), i)
            c = c.reshape(len(mine), -1)
            k = np.argmin(c, axis=1)
            better = c[np.arange(len(mine)), k] < cur[mine]
            centers[mine[better]] = pts[mine[better], k[better]]
            cur[mine[better]] = c[better, k[better]]
        step = step / ((per_dim - 1) / 2)
    best = [int(np.flatnonzero(owner == i)[np.argmin(cur[owner == i])]) for i in range(len(masks))]
    T = prob.times(prob.theta(prob.z_grid(centers[best])))
    out = []
    for i, b in enumerate(best):
        cost, o = inner(T[i:i + 1], i)
        out.append((assemble(centers[b], o[0]), float(cost[0])))
    return out


def _solve(prob: _Problem, unbounded=frozenset(), extra=()) -> tuple[np.ndarray, float]:
    """The least-squares knobs in z coordinates, within the physical bounds except for the knobs in ``unbounded``."""
    return _vp(prob, frozenset(unbounded), [np.ones(len(prob.rows), dtype=bool)], [list(extra)])[0]
