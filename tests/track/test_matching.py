"""`match` finds the cheapest matching where unmatched rows and columns cost limit / 2 (checked by brute force)."""

import itertools

import numpy as np
import pytest

from tphyolo.track.matching import match


def brute_force_cost(cost: np.ndarray, limit: float) -> float:
    """The cheapest total over every partial matching of pairs cheaper than `limit`."""
    n, m = cost.shape
    best = (n + m) * limit / 2  # nothing matched
    for k in range(1, min(n, m) + 1):
        for rows in itertools.combinations(range(n), k):
            for cols in itertools.permutations(range(m), k):
                pair_costs = cost[list(rows), list(cols)]
                if (pair_costs < limit).all():
                    best = min(best, pair_costs.sum() + (n + m - 2 * k) * limit / 2)
    return best


def total_cost(cost: np.ndarray, limit: float, pairs: np.ndarray) -> float:
    n, m = cost.shape
    return cost[pairs[:, 0], pairs[:, 1]].sum() + (n + m - 2 * len(pairs)) * limit / 2


@pytest.mark.parametrize("seed", range(40))
def test_matching_is_optimal_on_small_random_problems(seed):
    rng = np.random.default_rng(seed)
    n, m = rng.integers(0, 5, 2)
    cost = rng.uniform(0, 1, (n, m))
    cost[rng.random((n, m)) < 0.4] = 1.0  # no overlap
    limit = float(rng.choice([0.5, 0.8]))
    found = match(cost, limit)
    assert total_cost(cost, limit, found.pairs) == pytest.approx(brute_force_cost(cost, limit))
    assert (cost[found.pairs[:, 0], found.pairs[:, 1]] < limit).all()
    assert sorted([*found.pairs[:, 0], *found.unmatched_rows]) == list(range(n))
    assert sorted([*found.pairs[:, 1], *found.unmatched_cols]) == list(range(m))


def test_a_cheap_pair_is_not_given_up_for_more_pairs():
    # A-1 is cheap; matching A-2 and B-1 instead would match more pairs but cost more than leaving B and 2 out
    cost = np.array([[0.1, 0.7], [0.7, 1.0]])
    found = match(cost, 0.8)
    assert found.pairs.tolist() == [[0, 0]]
    assert found.unmatched_rows.tolist() == [1] and found.unmatched_cols.tolist() == [1]


def test_isolated_pairs_and_forbidden_entries():
    cost = np.full((4, 5), 1.0)
    cost[0, 3] = cost[2, 0] = 0.3  # two isolated pairs
    cost[1, 1], cost[3, 1], cost[3, 2] = 0.2, 0.1, np.inf  # a contested column
    cost[1, 4] = np.nan
    found = match(cost, 0.8)
    assert found.pairs.tolist() == [[0, 3], [2, 0], [3, 1]]
    assert found.unmatched_rows.tolist() == [1] and found.unmatched_cols.tolist() == [2, 4]
    assert match(np.zeros((0, 3)), 0.8).unmatched_cols.tolist() == [0, 1, 2]
