"""YOLOv5-style evolution: parent selection, mutation factors and proposals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tphyolo.training.tune.searchers import (
    FACTOR_LIMITS,
    Scored,
    mutation_factors,
    propose,
    select_parent,
)
from tphyolo.training.tune.space import HypRange, SearchSpace


def test_parents_come_from_the_top_five_weighted_by_fitness_above_the_fifths():
    history = [Scored({"x": float(i)}, fitness=f) for i, f in enumerate([0.1, 0.5, 0.9, 0.2, 0.7, 0.3, 0.6])]
    rng = np.random.default_rng(0)
    picks = [select_parent(history, rng).values["x"] for _ in range(20000)]
    counts = {x: picks.count(x) / len(picks) for x in set(picks)}
    # top five: 0.9 (x=2), 0.7 (x=4), 0.6 (x=6), 0.5 (x=1), 0.3 (x=5); weights fitness - 0.3 (+1e-6)
    weights = {2: 0.6, 4: 0.4, 6: 0.3, 1: 0.2}
    assert set(counts) == {2.0, 4.0, 6.0, 1.0}  # x=5 has weight 1e-6, the others none
    for x, w in weights.items():
        assert abs(counts[x] - w / 1.5) < 0.015


def test_mutation_factors_follow_the_gains():
    rng = np.random.default_rng(1)
    gains = np.array([1.0, 0.3, 0.0, 2.0])
    factors = np.stack([mutation_factors(gains, rng) for _ in range(20000)])
    assert factors.min() >= FACTOR_LIMITS[0] and factors.max() <= FACTOR_LIMITS[1]
    assert (factors[:, 2] == 1).all() and ((factors != 1).any(axis=1)).all()
    # factor - 1 = gain * [u < 0.8] * n * r * 0.2: its std is gain * 0.2 * sqrt(0.8 / 3) = 0.1033 * gain
    expected = 0.2 * math.sqrt(0.8 / 3)
    assert abs((factors[:, 0] - 1).std() / expected - 1) < 0.03
    assert abs((factors[:, 1] - 1).std() / (0.3 * expected) - 1) < 0.03
    assert (mutation_factors(np.zeros(3), rng) == 1).all()


def space_of(**ranges: HypRange) -> SearchSpace:
    base = {"a": 0.5, "b": 0.0, "c": 2.0}
    return SearchSpace(base, ranges or {"a": HypRange(0.0, 1.0), "b": HypRange(0.0, 1.0), "c": HypRange(1.0, 8.0)})


def test_without_history_the_hyp_files_values_are_mutated_and_zero_stays_zero():
    space = space_of()
    rng = np.random.default_rng(2)
    points = [propose(space, [], rng) for _ in range(200)]
    assert all(p["b"] == 0.0 for p in points)
    assert len({p["a"] for p in points}) > 150 and all(0 <= p["a"] <= 1 and 1 <= p["c"] <= 8 for p in points)
    assert np.median([p["a"] for p in points]) == pytest.approx(0.5, abs=0.02)


def test_proposals_are_the_same_for_the_same_seed_and_history():
    space, history = space_of(), [Scored({"a": 0.3, "b": 0.1, "c": 3.0}, 0.4)]
    first = [propose(space, history, np.random.default_rng(7)) for _ in range(3)]
    assert first[0] == first[1] == first[2]


def test_evolution_climbs_where_mutating_the_hyp_file_alone_does_not():
    """On fitness = -|a - 0.95| - |c - 7| from a = 0.5, c = 2, selecting the best parents walks to the optimum;
    60 mutations of the starting point alone cannot reach it (a factor moves a value by at most ~x1.6)."""
    space = space_of()

    def score(values):
        return -abs(values["a"] - 0.95) - abs(values["c"] - 7.0)

    evolved, blind = [], []
    rng_evolved, rng_blind = np.random.default_rng(3), np.random.default_rng(3)
    for _ in range(60):
        values = propose(space, evolved, rng_evolved)
        evolved.append(Scored(values, score(values)))
        values = propose(space, [], rng_blind)
        blind.append(Scored(values, score(values)))
    best_evolved = max(t.fitness for t in evolved)
    best_blind = max(t.fitness for t in blind)
    assert best_evolved > -1.0 and best_blind < -3.0
