"""The hypervolume of the study's front and how it grew with the trials (the convergence of the search).

Normalization (the same as ``benchmarks/bench_search.py``): every objective turned to minimization, then
scaled by the final front's own range, ideal -> 0 and nadir -> 1; the reference point is 1.1 in every
objective. The front's hypervolume is then between 0.1^m (one design) and 1.1^m (a design at the ideal
point), and a search that keeps finding better designs raises it. The curve is the hypervolume of the
feasible designs among the first k trials (in the order the solver evaluated them), in that one
normalization, at up to :data:`POINTS` values of k: where it flattens, more trials of the same search
added little. Computed from the results table only (``trial``, ``feasible`` and the ``obj.*`` columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.pareto import hypervolume, normalize, pareto_mask, to_minimization

#: Trial counts at which the curve is computed (evenly spaced up to the last trial).
POINTS = 60
#: The reference point, in every normalized objective.
REFERENCE = 1.1


@dataclass(frozen=True)
class Convergence:
    """``hypervolume`` of the final front; ``trials`` / ``curve``: the hypervolume after the first k trials;
    ``ideal`` / ``nadir``: the normalization (objectives as minimized); ``half`` / ``ninety``: the first
    trial count that reached 50% / 90% of the final hypervolume (None: never, a curve of one point)."""

    hypervolume: float
    trials: np.ndarray
    curve: np.ndarray
    ideal: np.ndarray
    nadir: np.ndarray
    objectives: int

    def reached(self, share: float) -> int | None:
        if not self.hypervolume > 0:
            return None
        hit = np.nonzero(self.curve >= share * self.hypervolume * (1 - 1e-12))[0]
        return int(self.trials[hit[0]]) if len(hit) else None

    @property
    def maximum(self) -> float:
        """The hypervolume of the ideal point (the most a front can have in this normalization)."""
        return REFERENCE ** self.objectives


def convergence(t, objectives: list[str], directions: dict[str, str]) -> Convergence | None:
    """The front's hypervolume and its curve over the trials (None: fewer than 2 objectives or no feasible
    design with finite objectives)."""
    if len(objectives) < 2 or not len(t):
        return None
    order = np.argsort(t["trial"].to_numpy(), kind="stable") if "trial" in t.columns else np.arange(len(t))
    F = t[[f"obj.{o}" for o in objectives]].to_numpy(dtype=float)[order]
    dirs = [directions[o] for o in objectives]
    ok = t["feasible"].to_numpy(dtype=bool)[order] & np.all(np.isfinite(F), axis=1)
    if not ok.any():
        return None
    a = to_minimization(F, dirs)
    front = a[pareto_mask(F, dirs, ok)]
    ideal, nadir = front.min(axis=0), front.max(axis=0)
    m = a.shape[1]
    ref = np.full(m, REFERENCE)
    z = normalize(a, ideal, nadir)

    def hv(k: int) -> float:
        sel = ok[:k]
        return float(hypervolume(z[:k][sel], ref, ("minimize",) * m)) if sel.any() else 0.0

    n = len(t)
    ks = np.unique(np.linspace(1, n, min(POINTS, n)).round().astype(int))
    curve = np.array([hv(int(k)) for k in ks])
    return Convergence(hypervolume=float(curve[-1]), trials=ks, curve=curve, ideal=ideal, nadir=nadir,
                       objectives=m)


def summary(c: Convergence) -> str:
    """One line for the reports."""
    half, ninety = c.reached(0.5), c.reached(0.9)
    parts = [f"hypervolume of the front: **{c.hypervolume:.4g}** (objectives normalized by the front, ideal 0 and "
             f"nadir 1, reference point {REFERENCE} in each; at most {c.maximum:.4g})"]
    if ninety is not None and len(c.trials) > 1:
        parts.append(f"90% of it reached after {ninety:,} of {int(c.trials[-1]):,} trials"
                     + (f" (50% after {half:,})" if half is not None and half != ninety else ""))
    return "; ".join(parts)
