"""Pareto tools: non-dominated sort, crowding distance, hypervolume.

Pure functions over an ``(n, m)`` array ``F`` of objective values (one row per
design point, one column per objective) and a sequence of ``directions``
(``'minimize'`` or ``'maximize'``, one per column). Internally every column is
turned into a minimization by negating the maximized ones.

Definitions (Deb, Pratap, Agarwal, Meyarivan, "A fast and elitist
multiobjective genetic algorithm: NSGA-II", IEEE TEVC 6(2), 2002):

- ``a`` dominates ``b`` when ``a`` is no worse in every objective and strictly
  better in at least one. Equal rows do not dominate each other, so duplicates
  share a rank.
- Objective values are compared to :data:`TIE_BITS` bits of their mantissa (~12 significant digits): values
  equal that far are a tie. The model's sums of the same work differ in their last bits between designs (a
  memory-bound step on 100 or 120 units), and a design one unit in the last place faster and dearer is no
  trade-off; exact comparison put it on the front.
- The rank of a point is its front: rank 0 is the Pareto front (no feasible
  point dominates it); rank ``k`` points are dominated only by points of rank
  ``< k``. Equivalently, rank = length of the longest chain of points that
  dominate it. Infeasible rows get rank -1 and never dominate anything.
- Crowding distance (Deb et al. 2002, §III-B): the sum over objectives of the
  normalized gap between a point's two neighbours on its front; the boundary
  points of each objective get infinity.

The hypervolume is computed by moocore (López-Ibáñez et al.,
https://multi-objective.github.io/moocore/), exact for any number of
objectives and O(n log n) for 2-3 objectives.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np

from dse.errors import SpecError, unknown_name

__all__ = [
    "TIE_BITS",
    "tied",
    "MINIMIZE",
    "MAXIMIZE",
    "DIRECTIONS",
    "check_directions",
    "to_minimization",
    "non_dominated_sort",
    "pareto_mask",
    "crowding_distance",
    "hypervolume",
    "reference_point",
    "normalize",
]

MINIMIZE = "minimize"
MAXIMIZE = "maximize"
DIRECTIONS = (MINIMIZE, MAXIMIZE)

#: bits of the mantissa to which objective values are compared (2^-40 ~ 1e-12 relative): values equal that far tie
TIE_BITS = 40

# Budget of array elements for one chunk of pairwise comparisons (4 MB of bools).
_CHUNK_ELEMENTS = 1 << 22
# Rows ranked together in one block of the m >= 3 sort.
_BLOCK = 256


# ------------------------------------------------------------------ inputs


def check_directions(directions: Sequence[str], m: int | None = None) -> tuple[str, ...]:
    """``directions`` as a tuple, each 'minimize' or 'maximize'; SpecError otherwise."""
    if isinstance(directions, str):
        directions = (directions,)
    directions = tuple(directions)
    for d in directions:
        if d not in DIRECTIONS:
            raise SpecError(unknown_name("direction", d, DIRECTIONS))
    if m is not None and len(directions) != m:
        raise SpecError(f"got {len(directions)} directions for {m} objectives; give one per objective")
    return directions


def _objectives(F) -> np.ndarray:
    """``F`` as a float (n, m) array with m >= 1; SpecError if not 2-D or if it holds NaN."""
    try:
        a = np.asarray(F, dtype=float)
    except (TypeError, ValueError) as exc:
        raise SpecError(f"objective values: expected an (n, m) array of numbers, got {F!r}") from exc
    if a.ndim != 2 or a.shape[1] < 1:
        raise SpecError(f"objective values: expected an (n, m) array with m >= 1, got shape {a.shape}")
    return a


def _feasible(feasible, n: int) -> np.ndarray:
    if feasible is None:
        return np.ones(n, dtype=bool)
    f = np.asarray(feasible)
    if f.shape != (n,):
        raise SpecError(f"feasible: expected a boolean mask of shape ({n},), got shape {f.shape}")
    return f.astype(bool)


def to_minimization(F, directions: Sequence[str]) -> np.ndarray:
    """A float copy of ``F`` with the maximized columns negated (all columns minimized)."""
    a = _objectives(F)
    directions = check_directions(directions, a.shape[1])
    sign = np.array([-1.0 if d == MAXIMIZE else 1.0 for d in directions])
    return a * sign


# ------------------------------------------------------- non-dominated sort


def non_dominated_sort(F, directions: Sequence[str], feasible=None) -> np.ndarray:
    """Pareto rank of every row of ``F``: 0 = Pareto front, -1 = infeasible.

    ``feasible`` is an optional boolean mask; infeasible rows get rank -1 and
    never dominate. NaN in a feasible row is an error (mark the row infeasible
    instead); +-inf is allowed. Duplicated rows get the same rank.

    Ranks are the fronts of Deb et al. 2002 (NSGA-II), computed as the longest
    chain of dominators. Rows are deduplicated and sorted lexicographically, so a
    row's dominators all come before it. Two objectives: one pass with binary
    search over the fronts' last values, O(n log n). Three or more: points are
    ranked in blocks; each block's rank from earlier points comes from a binary
    search over the fronts found so far (if front k+1 dominates a point, so does
    front k), compared in bounded-memory chunks, then the dominance inside the
    block is resolved in order (the ENS-BS idea of Zhang et al., IEEE TEVC 19(2),
    2015, vectorized).
    """
    return _sort(F, directions, feasible, first_only=False)


def _sort(F, directions: Sequence[str], feasible, first_only: bool) -> np.ndarray:
    a = to_minimization(F, directions)
    n, m = a.shape
    feas = _feasible(feasible, n)
    ranks = np.full(n, -1, dtype=np.int64)
    if not feas.any():
        return ranks
    sub = a[feas]
    if np.isnan(sub).any():
        row = int(np.flatnonzero(feas)[np.isnan(sub).any(axis=1)][0])
        raise SpecError(f"objective values: row {row} is NaN; mark it infeasible instead")
    # unique rows (values equal to TIE_BITS are one), sorted lexicographically; `inverse` maps each row to its
    # unique row
    uniq, inverse = np.unique(tied(sub), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    if m == 1:
        urank = np.arange(len(uniq), dtype=np.int64)
    elif m == 2:
        urank = _ranks_2d(uniq)
    else:
        urank = _ranks_nd(uniq, first_only)
    ranks[feas] = urank[inverse]
    return ranks


def tied(a) -> np.ndarray:
    """``a`` (objective values) with every finite value rounded to :data:`TIE_BITS` bits of mantissa, as the sort
    compares them: values that differ in their last bits are equal; +-inf and 0 as they are."""
    a = np.asarray(a, dtype=float)
    mant, exp = np.frexp(a)
    scale = float(2 ** TIE_BITS)
    with np.errstate(invalid="ignore"):
        out = np.ldexp(np.round(mant * scale) / scale, exp)
    return np.where(np.isfinite(a), out, a)


def _ranks_2d(u: np.ndarray) -> np.ndarray:
    """Ranks of distinct rows sorted lexicographically, two objectives.

    An earlier row q (q0 <= p0, rows distinct) dominates p iff q1 <= p1. The
    smallest second objective of each front increases with the front index, so
    p's rank is the number of fronts whose smallest second objective is <= p1.
    """
    tails: list[float] = []
    out = np.empty(len(u), dtype=np.int64)
    for i, y in enumerate(u[:, 1].tolist()):
        k = bisect.bisect_right(tails, y)
        if k == len(tails):
            tails.append(y)
        else:
            tails[k] = y
        out[i] = k
    return out


def _weakly_dominated(points: np.ndarray, front: np.ndarray) -> np.ndarray:
    """Row i: does any row of ``front`` weakly dominate ``points[i]`` (<= in every objective).

    Every row of ``front`` precedes every point in lexicographic order, so its
    first objective is already <= and only objectives 1.. are compared, one at
    a time on 2-D boolean arrays (a reduction over a short last axis is slow in
    numpy), in chunks of bounded memory.
    """
    n, m = points.shape
    out = np.empty(n, dtype=bool)
    step = max(1, _CHUNK_ELEMENTS // max(1, len(front)))
    for s in range(0, n, step):
        p = points[s:s + step]
        acc = front[None, :, 1] <= p[:, None, 1]
        for j in range(2, m):
            acc &= front[None, :, j] <= p[:, None, j]
        out[s:s + step] = acc.any(axis=1)
    return out


class _Fronts:
    """The points of each front found so far, one growable array per front."""

    def __init__(self, m: int):
        self.m = m
        self.buf: list[np.ndarray] = []
        self.size: list[int] = []

    def __len__(self) -> int:
        return len(self.buf)

    def points(self, k: int) -> np.ndarray:
        return self.buf[k][: self.size[k]]

    def add(self, k: int, pts: np.ndarray) -> None:
        while len(self.buf) <= k:
            self.buf.append(np.empty((16, self.m)))
            self.size.append(0)
        need = self.size[k] + len(pts)
        if need > len(self.buf[k]):
            grown = np.empty((max(need, 2 * len(self.buf[k])), self.m))
            grown[: self.size[k]] = self.points(k)
            self.buf[k] = grown
        self.buf[k][self.size[k]:need] = pts
        self.size[k] = need


def _ranks_nd(u: np.ndarray, first_only: bool = False) -> np.ndarray:
    """Ranks of distinct rows sorted lexicographically, three or more objectives.

    Rows are distinct, so weak dominance is dominance, and a row is dominated
    only by rows before it. ``first_only``: only tell front 0 from the rest
    (every rank above 0 becomes 1), which needs front 0 alone.
    """
    n, m = u.shape
    out = np.empty(n, dtype=np.int64)
    fronts = _Fronts(m)
    for b0 in range(0, n, _BLOCK):
        block = u[b0:b0 + _BLOCK]
        nb = len(block)
        # 1) rank from earlier rows = first front that does not dominate the row
        lo = np.zeros(nb, dtype=np.int64)
        hi = np.full(nb, min(len(fronts), 1) if first_only else len(fronts), dtype=np.int64)
        while True:
            active = np.flatnonzero(lo < hi)
            if active.size == 0:
                break
            mid = (lo[active] + hi[active]) // 2
            for k in np.unique(mid).tolist():
                rows = active[mid == k]
                dom = _weakly_dominated(block[rows], fronts.points(k))
                lo[rows[dom]] = k + 1
                hi[rows[~dom]] = k
        # 2) dominance inside the block, resolved in order
        # inner[q, p]: q dominates p; only q < p can (lexicographic order, distinct rows)
        inner = np.triu(block[:, None, 1] <= block[None, :, 1], k=1)
        for j in range(2, m):
            inner &= block[:, None, j] <= block[None, :, j]
        r = lo
        for p in np.flatnonzero(inner.any(axis=0)).tolist():
            r[p] = max(r[p], int(r[:p][inner[:p, p]].max()) + 1)
        if first_only:
            np.minimum(r, 1, out=r)
        out[b0:b0 + nb] = r
        # 3) add the block's rows to their fronts
        for k in np.unique(r).tolist():
            if k == 0 or not first_only:
                fronts.add(k, block[r == k])
    return out


def pareto_mask(F, directions: Sequence[str], feasible=None) -> np.ndarray:
    """Boolean mask of the Pareto-optimal feasible rows (rank 0 of :func:`non_dominated_sort`).

    With three or more objectives only front 0 is computed, which is cheaper.
    """
    return _sort(F, directions, feasible, first_only=True) == 0


# -------------------------------------------------------- crowding distance


def crowding_distance(F_front) -> np.ndarray:
    """Crowding distance of each point of one front (Deb et al. 2002, §III-B).

    For each objective the points are sorted; the two boundary points get
    infinity and every other point adds (next - previous) / (max - min). An
    objective with max == min adds nothing. The distance does not depend on
    the directions. Fronts of one or two points are all infinite.
    """
    a = np.asarray(F_front, dtype=float)
    if a.size == 0:
        return np.zeros(len(a))
    a = _objectives(a)
    n, m = a.shape
    d = np.zeros(n)
    if n <= 2:
        d[:] = np.inf
        return d
    for j in range(m):
        order = np.argsort(a[:, j], kind="stable")
        col = a[order, j]
        span = col[-1] - col[0]
        d[order[0]] = np.inf
        d[order[-1]] = np.inf
        if span > 0 and np.isfinite(span):
            d[order[1:-1]] += (col[2:] - col[:-2]) / span
    return d


# --------------------------------------------------------------- hypervolume


def hypervolume(F, reference, directions: Sequence[str], feasible=None) -> float:
    """Hypervolume dominated by the feasible rows of ``F`` and bounded by ``reference``.

    ``reference`` is in the same units and orientation as ``F`` (for a maximized
    objective it is a lower bound). Maximized columns are negated and the volume
    is computed by ``moocore.hypervolume`` (minimization). Only points that
    strictly dominate the reference count; none -> 0.0.
    """
    import moocore

    a = to_minimization(F, directions)
    n, m = a.shape
    sign = np.array([-1.0 if d == MAXIMIZE else 1.0 for d in check_directions(directions, m)])
    ref = np.asarray(reference, dtype=float)
    if ref.shape != (m,) or not np.all(np.isfinite(ref)):
        raise SpecError(f"hypervolume reference: expected {m} finite numbers, got {reference!r}")
    ref = ref * sign
    a = a[_feasible(feasible, n)]
    a = a[~np.isnan(a).any(axis=1)]
    a = a[(a < ref).all(axis=1)]
    if len(a) == 0:
        return 0.0
    return float(moocore.hypervolume(a, ref=ref))


def reference_point(F, directions: Sequence[str], margin: float = 0.1, feasible=None) -> np.ndarray:
    """A reference point for :func:`hypervolume`: the nadir pushed out by ``margin`` of the range.

    The nadir is the worst value of each objective over the Pareto front of the
    feasible rows (dominated points add no volume, so they do not move it). The
    reference is ``nadir + margin * (nadir - ideal)`` in the worse direction; an
    objective with zero range is pushed by ``margin * |nadir|`` (or ``margin`` if
    the nadir is 0), so boundary points still count. Returned in the
    orientation of ``F``. To compare several runs, compute it once from their union.
    """
    if not (margin >= 0):
        raise SpecError(f"reference_point margin: must be >= 0, got {margin!r}")
    a = to_minimization(F, directions)
    n, m = a.shape
    mask = pareto_mask(F, directions, feasible)
    if not mask.any():
        raise SpecError("reference_point: no feasible point to take the nadir from")
    front = a[mask]
    nadir, ideal = front.max(axis=0), front.min(axis=0)
    span = nadir - ideal
    flat = span == 0
    span[flat] = np.where(nadir[flat] != 0, np.abs(nadir[flat]), 1.0)
    if margin > 0 and not np.all(np.isfinite(span)):
        raise SpecError("reference_point: the front has an infinite objective value")
    sign = np.array([-1.0 if d == MAXIMIZE else 1.0 for d in check_directions(directions, m)])
    return (nadir + margin * span) * sign


def normalize(F, lo, hi) -> np.ndarray:
    """``(F - lo) / (hi - lo)`` column by column; a column with ``hi == lo`` maps to 0."""
    a = _objectives(F)
    m = a.shape[1]
    lo = np.broadcast_to(np.asarray(lo, dtype=float), (m,))
    hi = np.broadcast_to(np.asarray(hi, dtype=float), (m,))
    span = hi - lo
    safe = np.where(span == 0, 1.0, span)
    out = (a - lo) / safe
    out[:, span == 0] = 0.0
    return out
