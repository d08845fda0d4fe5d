"""The brute-force oracle of the CP-SAT tile model: every tiling of the domain through the evaluator.

:func:`tile_candidates` enumerates the domain of :mod:`dse.solvers.cpsat_tiles` (or its dominant subset)
with numpy; :func:`brute_force_tiles` evaluates every candidate with the evaluator at once (a batch of
identical chips) and picks the least time, then the least off-chip traffic, then the least energy: the
test oracle, the evaluator's optimum by exhaustion.
"""

from __future__ import annotations

import time

import numpy as np

from dse.errors import InfeasibleError
from dse.model import tiling
from dse.solvers.tile_data import (BYTES_RTOL, SLOTS, TIME_RTOL, TileChoice, as_chips, evaluate_tiles, fits, infeasible_message,
                                   tile_data, working_set)
from dse.workload import Op

__all__ = ["tile_candidates", "brute_force_tiles"]


def tile_candidates(op: Op, chip, *, prune: bool = True) -> dict[str, np.ndarray]:
    """Every feasible tiling of the domain (``prune=False``: all five decisions), or its dominant subset.

    Pruned (exact, the evaluator's time and traffic depend on the tiles only as stated):
      * T_K and S change neither time nor traffic, and T_K = k_i with S = 2 is the smallest working set and
        the loosest split limit: a (T_M, T_N, s) is feasible iff it is feasible there;
      * time and traffic depend on T_M only through c_M = ceil(M / T_M) (and r_B = min(c_M, ceil(M / t_2))),
        except the local-buffer energy, which grows with T_M: the smallest T_M of each c_M dominates (same for T_N);
      * for fixed tiles, memory time, traffic and energy grow with s, and the matrix time follows
        ceil(w s / U) / (w s): only splits that strictly improve that ratio over every smaller split remain --
        where the clock cannot throttle. Where it can, every split stays: a split with more waves per work
        item or more partial-sum traffic lengthens the busy time over which the evaluator spreads the
        operator's memory or compute power, which can raise its sustained clock.
    """
    d = tile_data(op, chip)
    if not prune:
        qm, qn, qk, sl, sp = np.meshgrid(np.arange(1, d.qm_max + 1), np.arange(1, d.qn_max + 1),
                                         np.arange(1, d.qk_max + 1), np.array(SLOTS),
                                         np.arange(1, d.split_max + 1), indexing="ij")
        tm, tn, tk = d.im * qm.ravel(), d.inn * qn.ravel(), d.ik * qk.ravel()
        sl, sp = sl.ravel(), sp.ravel()
        ok = fits(d, tm, tn, tk, sl) & (sp <= tiling.ceil_div_core(d.k, tk))
        return {"tm": tm[ok], "tn": tn[ok], "tk": tk[ok], "slots": sl[ok], "split": sp[ok]}
    c = np.arange(1, d.qm_max + 1)
    tms = np.unique(tiling.pad_core(tiling.ceil_div_core(d.m, c), d.im))  # the smallest T_M of each c_M
    c = np.arange(1, d.qn_max + 1)
    tns = np.unique(tiling.pad_core(tiling.ceil_div_core(d.n, c), d.inn))
    TM, TN = (a.ravel() for a in np.meshgrid(tms, tns, indexing="ij"))
    ok = fits(d, TM, TN, d.ik, SLOTS[0])
    TM, TN = TM[ok], TN[ok]
    w = tiling.output_tiles(d.m, d.n, TM, TN, d.batch)
    S = np.arange(1, d.split_max + 1)
    ws = w[:, None] * S[None, :]
    waves = tiling.waves(ws, d.units)
    # keep s where waves/ws < min over smaller splits (integer cross-multiplication); every s where it may throttle
    keep = np.ones(ws.shape, dtype=bool)
    best_w = waves[:, 0].copy()
    best_ws = ws[:, 0].copy()
    for j in range(1, len(S) if d.throttle != "maybe" else 0):
        better = waves[:, j] * best_ws < best_w * ws[:, j]
        keep[:, j] = better
        best_w = np.where(better, waves[:, j], best_w)
        best_ws = np.where(better, ws[:, j], best_ws)
    i, j = np.nonzero(keep)
    n = len(i)
    return {"tm": TM[i], "tn": TN[i], "tk": np.full(n, d.ik), "slots": np.full(n, SLOTS[0]), "split": S[j]}


def brute_force_tiles(op: Op, chip, *, prune: bool = True, chunk: int = 200_000) -> TileChoice:
    """The oracle: every candidate of :func:`tile_candidates` through ``evaluate_arrays`` at once.

    Picks the least time, among the tilings within TIME_RTOL of it the least off-chip traffic, among those
    (within BYTES_RTOL) the least energy (then the smallest T_M + T_N, fewest slots, largest T_K for a
    canonical answer). ``info`` holds the number
    of candidates and, under 'all', every candidate's time and traffic.
    """
    start = time.perf_counter()
    chip = as_chips(chip)
    d = tile_data(op, chip)
    cand = tile_candidates(op, chip, prune=prune)
    n = len(cand["tm"])
    if n == 0:
        raise InfeasibleError(infeasible_message(d))
    times, traffic, energy, cr = [], [], [], []
    for s in range(0, n, chunk):
        r = evaluate_tiles(op, chip, cand["tm"][s:s + chunk], cand["tn"][s:s + chunk], cand["tk"][s:s + chunk],
                           cand["split"][s:s + chunk])
        times.append(r["time_s"])
        traffic.append(r["traffic_bytes"])
        energy.append(r["energy_j"])
        cr.append(r["clock_ratio"])
    T, B, E, CR = np.concatenate(times), np.concatenate(traffic), np.concatenate(energy), np.concatenate(cr)
    tie = T <= T.min() * (1 + TIME_RTOL)
    least = tie & (B <= B[tie].min() * (1 + BYTES_RTOL))
    order = np.lexsort((-cand["tk"], cand["slots"], cand["tm"] + cand["tn"], np.where(least, E, np.inf)))
    i = int(order[0])
    return TileChoice(
        op=op.name, tm=int(cand["tm"][i]), tn=int(cand["tn"][i]), tk=int(cand["tk"][i]), slots=int(cand["slots"][i]),
        split_k=int(cand["split"][i]), time_s=float(T[i]), traffic_bytes=float(B[i]), status="BRUTE_FORCE",
        solve_time_s=time.perf_counter() - start, model_time_s=float(T[i]), clock_ratio=float(CR[i]),
        working_set_bytes=float(working_set(d, cand["tm"][i], cand["tn"][i], cand["tk"][i], cand["slots"][i])),
        energy_j=float(E[i]), info={"candidates": n, "all": {"time_s": T, "traffic_bytes": B, "energy_j": E, **cand}},
    )
