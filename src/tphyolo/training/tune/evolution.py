"""YOLOv5-style hyperparameter evolution: pick a parent among the best trials so far, mutate it.

Each proposal takes a parent from the `TOP` fittest finished trials, drawn with weights `fitness - min + 1e-6`
(the fittest most often), and multiplies each searched value by a factor

    1 + gain * [u_i < MUTATION_PROBABILITY] * n_i * r * SIGMA,   clipped to [0.3, 3.0]

with u_i ~ U(0, 1) and n_i ~ N(0, 1) per key and one r ~ U(0, 1) per proposal, drawing again until at least one
factor differs from 1; the result is clipped to the key's range and rounded (`SearchSpace.clip`). Values are
multiplied, so a value of 0 stays 0 (as in YOLOv5): set it above 0 in the hyp file to let it evolve, or search
it with the TPE or random searcher. With no finished trial the parent is the hyp file itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from tphyolo.training.tune.space import SearchSpace

TOP = 5  # parents are drawn from this many fittest trials
MUTATION_PROBABILITY = 0.8  # chance that a key mutates in a proposal
SIGMA = 0.2  # scale of the mutation
FACTOR_LIMITS = (0.3, 3.0)  # a value changes by at most these factors in one mutation
_MAX_DRAWS = 1000


@dataclass(frozen=True)
class Scored:
    """A finished trial: its searched values and its fitness."""

    values: Mapping[str, float]
    fitness: float


def select_parent(history: Sequence[Scored], rng: np.random.Generator, *, top: int = TOP) -> Scored:
    """One of the `top` fittest trials of `history` (non-empty), drawn with weights fitness - min + 1e-6."""
    if not history:
        raise ValueError("select_parent needs at least one finished trial")
    best = sorted(history, key=lambda trial: trial.fitness, reverse=True)[:top]
    fitness = np.array([trial.fitness for trial in best], dtype=np.float64)
    weights = fitness - fitness.min() + 1e-6
    return best[rng.choice(len(best), p=weights / weights.sum())]


def mutation_factors(gains: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The factors (K,) one mutation multiplies K values by (module docstring); at least one differs from 1
    when any gain is above 0."""
    if not (gains > 0).any():
        return np.ones_like(gains)
    for _ in range(_MAX_DRAWS):
        chosen = rng.random(gains.shape) < MUTATION_PROBABILITY
        factors = 1 + gains * chosen * rng.standard_normal(gains.shape) * rng.random() * SIGMA
        factors = factors.clip(*FACTOR_LIMITS)
        if (factors != 1).any():
            return factors
    raise RuntimeError(f"no mutation in {_MAX_DRAWS} draws")  # p(no key chosen) = 0.2 ** K per draw


def propose(space: SearchSpace, history: Sequence[Scored], rng: np.random.Generator) -> dict[str, float]:
    """The next trial's searched values: a mutation of a parent drawn from `history` (the hyp file's values
    when it is empty), within the space."""
    parent = select_parent(history, rng).values if history else space.baseline()
    keys = space.keys
    gains = np.array([space.ranges[key].gain for key in keys], dtype=np.float64)
    factors = mutation_factors(gains, rng)
    return space.clip({key: parent[key] * factor for key, factor in zip(keys, factors, strict=True)})
