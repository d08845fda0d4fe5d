"""Tests of dse.pareto: hypervolume against hand arithmetic and Monte-Carlo,
non-dominated sort against a brute-force definition, crowding distance."""

from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse import pareto
from dse.errors import SpecError
from dse.pareto import (
    crowding_distance,
    hypervolume,
    non_dominated_sort,
    normalize,
    pareto_mask,
    reference_point,
)

MIN, MAX = "minimize", "maximize"

# ------------------------------------------------------------ brute force


def dominates(a, b, directions) -> bool:
    """Deb et al. 2002: a is no worse than b everywhere and strictly better somewhere."""
    better = worse = False
    for x, y, d in zip(a, b, directions):
        if d == MAX:
            x, y = -x, -y
        if x < y:
            better = True
        elif x > y:
            worse = True
    return better and not worse


def brute_ranks(F, directions, feasible=None) -> list[int]:
    """Peel fronts one at a time with the O(n^2) pairwise definition."""
    n = len(F)
    feasible = [True] * n if feasible is None else list(feasible)
    rank = [-1] * n
    left = [i for i in range(n) if feasible[i]]
    k = 0
    while left:
        front = [i for i in left if not any(dominates(F[j], F[i], directions) for j in left if j != i)]
        for i in front:
            rank[i] = k
        left = [i for i in left if rank[i] == -1]
        k += 1
    return rank


def brute_ranks_np(F) -> np.ndarray:
    """Peeling with a numpy dominance matrix (all minimized), for a few thousand points."""
    dom = (F[:, None, :] <= F[None, :, :]).all(2) & (F[:, None, :] < F[None, :, :]).any(2)
    ranks = np.full(len(F), -1)
    left = np.ones(len(F), dtype=bool)
    k = 0
    while left.any():
        front = left & ~dom[left].any(axis=0)
        ranks[front] = k
        left &= ~front
        k += 1
    return ranks


def mc_hypervolume(F, ref, n_samples=200_000, seed=0) -> float:
    """Monte-Carlo: volume of the box [ideal, ref] x fraction of samples dominated by some point (minimized)."""
    F = np.asarray(F, float)
    ref = np.asarray(ref, float)
    lo = F.min(axis=0)
    u = np.random.default_rng(seed).uniform(lo, ref, size=(n_samples, F.shape[1]))
    hit = np.zeros(n_samples, dtype=bool)
    for p in F:
        hit |= (p <= u).all(axis=1)
    return float(np.prod(ref - lo) * hit.mean())


# ------------------------------------------------------- hypervolume: exact


def test_hypervolume_2d_staircase_by_hand():
    # (1,3),(2,2),(3,1), reference (4,4), both minimized. Slices along x:
    # [1,2) x [3,4): 1*1 = 1; [2,3) x [2,4): 1*2 = 2; [3,4) x [1,4): 1*3 = 3; total 6.
    F = [[1, 3], [2, 2], [3, 1]]
    assert hypervolume(F, [4, 4], [MIN, MIN]) == pytest.approx(6.0)


def test_hypervolume_2d_maximize_by_hand():
    # (3,1),(2,2),(1,3), reference (0,0), both maximized. Slices along y:
    # [0,1): x up to 3 -> 3; [1,2): x up to 2 -> 2; [2,3): x up to 1 -> 1; total 6.
    F = [[3, 1], [2, 2], [1, 3]]
    assert hypervolume(F, [0, 0], [MAX, MAX]) == pytest.approx(6.0)


def test_hypervolume_2d_mixed_directions_by_hand():
    # minimize x, maximize y; (1,1),(2,3), reference (4,0).
    # (2,3) covers [2,4] x [0,3] = 2*3 = 6; (1,1) adds [1,2] x [0,1] = 1; total 7.
    F = [[1, 1], [2, 3]]
    assert hypervolume(F, [4, 0], [MIN, MAX]) == pytest.approx(7.0)


def test_hypervolume_ignores_points_not_dominating_reference_duplicates_and_infeasible():
    base = [[1, 3], [2, 2], [3, 1]]
    # (5,0) lies beyond the reference in x, (4,1) sits on it (zero volume), the duplicate adds nothing
    F = base + [[5, 0], [4, 1], [2, 2]]
    assert hypervolume(F, [4, 4], [MIN, MIN]) == pytest.approx(6.0)
    # an infeasible point that would cover everything: (0,0) alone gives 16
    F2 = base + [[0, 0]]
    assert hypervolume(F2, [4, 4], [MIN, MIN]) == pytest.approx(16.0)
    assert hypervolume(F2, [4, 4], [MIN, MIN], feasible=[True, True, True, False]) == pytest.approx(6.0)


def test_hypervolume_of_nothing_is_zero():
    assert hypervolume(np.zeros((0, 2)), [1, 1], [MIN, MIN]) == 0.0
    assert hypervolume([[2, 2]], [1, 1], [MIN, MIN]) == 0.0


def test_hypervolume_3d_single_box_by_hand():
    # one point (1,2,3), reference (2,4,6): box 1 * 2 * 3 = 6
    assert hypervolume([[1, 2, 3]], [2, 4, 6], [MIN, MIN, MIN]) == pytest.approx(6.0)


# ------------------------------------------------- hypervolume: Monte-Carlo


@pytest.mark.parametrize("m", [2, 3, 4])
def test_hypervolume_matches_monte_carlo(m):
    rng = np.random.default_rng(m)
    # points near the simplex so that many are non-dominated
    X = rng.random((30, m))
    F = X / X.sum(axis=1, keepdims=True) + 0.05 * rng.random((30, m))
    ref = np.full(m, 1.1)
    exact = hypervolume(F, ref, [MIN] * m)
    assert exact == pytest.approx(mc_hypervolume(F, ref), rel=0.01)


def test_hypervolume_3d_maximize_matches_monte_carlo_of_negated():
    rng = np.random.default_rng(11)
    F = rng.uniform(1, 5, size=(25, 3))
    ref = np.array([0.5, 0.5, 0.5])
    exact = hypervolume(F, ref, [MAX] * 3)
    assert exact == pytest.approx(mc_hypervolume(-F, -ref), rel=0.01)


# ------------------------------------------------------ non-dominated sort


@st.composite
def objective_sets(draw):
    m = draw(st.integers(1, 4))
    n = draw(st.integers(0, 40))
    values = st.integers(0, 4)  # few values -> ties and duplicates
    F = [[draw(values) for _ in range(m)] for _ in range(n)]
    directions = [draw(st.sampled_from([MIN, MAX])) for _ in range(m)]
    feasible = [draw(st.booleans()) or draw(st.booleans()) for _ in range(n)]
    return F, directions, feasible


@settings(max_examples=150, deadline=None)
@given(objective_sets(), st.sampled_from([1, 3, 256]))
def test_non_dominated_sort_matches_brute_force(case, block):
    F, directions, feasible = case
    expected = brute_ranks(F, directions, feasible)
    arr = np.array(F, dtype=float).reshape(len(F), len(directions))
    # small blocks and chunks exercise the block-to-block search and the chunking
    with mock.patch.object(pareto, "_BLOCK", block), mock.patch.object(pareto, "_CHUNK_ELEMENTS", 8):
        got = non_dominated_sort(arr, directions, feasible)
        mask = pareto_mask(arr, directions, feasible)
    assert got.tolist() == expected
    assert mask.tolist() == [r == 0 for r in expected]


@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("kind", ["uniform", "simplex", "integer"])
def test_non_dominated_sort_many_points_matches_brute_force(m, kind):
    rng = np.random.default_rng(m)
    n = 1500  # several blocks of 256 and dozens of fronts
    if kind == "uniform":
        F = rng.random((n, m))
    elif kind == "simplex":
        X = rng.random((n, m))
        F = X / X.sum(axis=1, keepdims=True) + 0.02 * rng.random((n, m))
    else:
        F = rng.integers(0, 8, size=(n, m)).astype(float)
    expected = brute_ranks_np(F)
    assert np.array_equal(non_dominated_sort(F, [MIN] * m), expected)
    assert np.array_equal(pareto_mask(F, [MIN] * m), expected == 0)


def test_maximize_is_minimize_of_the_negation():
    rng = np.random.default_rng(5)
    F = rng.integers(0, 10, size=(300, 3)).astype(float)
    dirs = [MAX, MIN, MAX]
    G = F * np.array([-1, 1, -1])
    assert np.array_equal(non_dominated_sort(F, dirs), non_dominated_sort(G, [MIN] * 3))


def test_duplicates_share_rank_zero():
    F = [[1, 2], [1, 2], [2, 1], [3, 3], [3, 3]]
    assert non_dominated_sort(F, [MIN, MIN]).tolist() == [0, 0, 0, 1, 1]
    F3 = [[1, 2, 3], [1, 2, 3], [0, 5, 5]]
    assert non_dominated_sort(F3, [MIN] * 3).tolist() == [0, 0, 0]


def test_ties_in_one_objective():
    # (1,1) dominates (1,2): equal in x, better in y
    assert non_dominated_sort([[1, 2], [1, 1]], [MIN, MIN]).tolist() == [1, 0]


def test_values_equal_to_the_tie_bits_are_ties():
    """A study's scenario front listed a design 1 ulp faster and 5.6% dearer than another (Qwen3-8B decode on 100
    and 120 units: 0.007484963358778627 vs 0.0074849633587786265 s, 1,971 vs 2,080 $). Values equal to 40 bits
    of mantissa tie, so the dearer one is dominated; a difference of 1e-9 relative is still a trade-off, in
    either direction and for maximized objectives too."""
    t = 0.007484963358778627
    F = [[t, 1970.8], [np.nextafter(t, 0.0), 2080.4], [0.005, 2500.0]]
    assert non_dominated_sort(F, [MIN, MIN]).tolist() == [0, 1, 0]
    assert non_dominated_sort([[1.0, 5.0], [1.0 - 1e-9, 6.0]], [MIN, MIN]).tolist() == [0, 0]
    assert non_dominated_sort([[-t, 1970.8], [-np.nextafter(t, 0.0), 2080.4]], [MAX, MIN]).tolist() == [0, 1]
    assert non_dominated_sort([[t, 1.0, 2.0], [np.nextafter(t, 1.0), 1.0, 1.0]], [MIN] * 3).tolist() == [1, 0]
    assert pareto_mask(F, [MIN, MIN]).tolist() == [True, False, True]
    # infinities and zeros are values as they are
    assert non_dominated_sort([[0.0, np.inf], [0.0, 1.0]], [MIN, MIN]).tolist() == [1, 0]


def test_infeasible_rows_get_minus_one_and_never_dominate():
    F = [[0, 0], [1, 2], [2, 1], [3, 3]]
    ranks = non_dominated_sort(F, [MIN, MIN], feasible=[False, True, True, True])
    assert ranks.tolist() == [-1, 0, 0, 1]
    assert non_dominated_sort(F, [MIN, MIN], feasible=[False] * 4).tolist() == [-1] * 4
    assert pareto_mask(F, [MIN, MIN], feasible=[False, True, True, True]).tolist() == [False, True, True, False]


def test_infinities_are_values_and_nan_must_be_marked_infeasible():
    F = [[np.inf, np.inf], [1, np.inf], [np.inf, 1], [-np.inf, 5]]
    assert non_dominated_sort(F, [MIN, MIN]).tolist() == [2, 1, 0, 0]
    assert non_dominated_sort([[np.inf] * 3, [1, 2, 3]], [MIN] * 3).tolist() == [1, 0]
    with pytest.raises(SpecError, match="row 1"):
        non_dominated_sort([[1, 2], [np.nan, 1]], [MIN, MIN])
    assert non_dominated_sort([[1, 2], [np.nan, 1]], [MIN, MIN], feasible=[True, False]).tolist() == [0, -1]


def test_bad_directions_and_shapes_are_spec_errors():
    with pytest.raises(SpecError, match="did you mean 'minimize'"):
        non_dominated_sort([[1, 2]], ["minimise", MIN])
    with pytest.raises(SpecError, match="2 directions for 3 objectives"):
        non_dominated_sort([[1, 2, 3]], [MIN, MIN])
    with pytest.raises(SpecError, match="shape"):
        non_dominated_sort([1, 2, 3], [MIN])
    with pytest.raises(SpecError, match="feasible"):
        non_dominated_sort([[1, 2]], [MIN, MIN], feasible=[True, False])


def test_one_objective_ranks_are_dense_ranks():
    assert non_dominated_sort([[3], [1], [2], [1]], [MIN]).tolist() == [2, 0, 1, 0]
    assert non_dominated_sort([[3], [1], [2], [1]], [MAX]).tolist() == [0, 2, 1, 2]


# ------------------------------------------------------------ crowding etc.


def test_crowding_distance_by_hand():
    # front (1,5),(2,3),(4,2),(5,1); both objectives span 4.
    # (2,3): x neighbours 1 and 4 -> 3/4; y neighbours 2 and 5 -> 3/4; total 1.5
    # (4,2): x neighbours 2 and 5 -> 3/4; y neighbours 1 and 3 -> 2/4; total 1.25
    d = crowding_distance([[1, 5], [2, 3], [4, 2], [5, 1]])
    assert d[0] == np.inf and d[3] == np.inf
    assert d[1] == pytest.approx(1.5) and d[2] == pytest.approx(1.25)


def test_crowding_boundary_points_are_infinite_per_objective():
    rng = np.random.default_rng(2)
    F = rng.random((20, 3))
    d = crowding_distance(F)
    for j in range(3):
        assert d[np.argmin(F[:, j])] == np.inf and d[np.argmax(F[:, j])] == np.inf
    assert np.isfinite(d).sum() >= 20 - 6
    assert crowding_distance([[1, 2], [2, 1]]).tolist() == [np.inf, np.inf]
    assert crowding_distance(np.zeros((0, 2))).shape == (0,)


def test_crowding_flat_objective_adds_nothing():
    d = crowding_distance([[1, 7], [2, 7], [3, 7]])
    assert d[1] == pytest.approx(1.0)  # x: (3 - 1) / 2; y: span 0 adds nothing


def test_reference_point_is_front_nadir_plus_margin():
    # front (1,3),(3,1) (the point (4,4) is dominated): nadir (3,3), ideal (1,1), range 2 -> 3 + 0.2
    F = [[1, 3], [3, 1], [4, 4]]
    assert reference_point(F, [MIN, MIN]).tolist() == pytest.approx([3.2, 3.2])
    # maximize: nadir is the smallest value, pushed down
    assert reference_point([[1, 3], [3, 1]], [MAX, MAX]).tolist() == pytest.approx([0.8, 0.8])
    # a flat objective is pushed by margin * |nadir|: (1,5) dominates (2,5), front = {(1,5)},
    # both ranges are 0 -> (1 + 0.5 * 1, 5 + 0.5 * 5)
    assert reference_point([[1, 5], [2, 5]], [MIN, MIN], margin=0.5).tolist() == pytest.approx([1.5, 7.5])
    assert reference_point([[0, 5]], [MIN, MIN], margin=0.5).tolist() == pytest.approx([0.5, 7.5])
    # every front point counts against it
    ref = reference_point(F, [MIN, MIN])
    assert hypervolume(F, ref, [MIN, MIN]) > 0
    with pytest.raises(SpecError, match="no feasible"):
        reference_point(F, [MIN, MIN], feasible=[False] * 3)


def test_normalize():
    out = normalize([[1, 5], [3, 5]], [1, 5], [3, 5])
    assert out.tolist() == [[0.0, 0.0], [1.0, 0.0]]
