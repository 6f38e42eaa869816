"""The searchers a search can name, and `build_searcher`, which builds the Ray Tune searcher for one.

    SEARCHERS["evolve"]  YOLOv5-style evolution: mutate one of the best trials so far (the default)
    SEARCHERS["tpe"]     Optuna's Tree-structured Parzen Estimator (needs optuna)
    SEARCHERS["random"]  uniform random draws from the ranges (log-uniform where a range says so)

Evolution takes a parent from the `TOP` fittest finished trials, drawn with weights `fitness - min + 1e-6` (the
fittest most often), and multiplies each searched value by a factor

    1 + gain * [u_i < MUTATION_PROBABILITY] * n_i * r * SIGMA,   clipped to [0.3, 3.0]

with u_i ~ U(0, 1) and n_i ~ N(0, 1) per key and one r ~ U(0, 1) per proposal, drawing again until at least one
factor differs from 1; the result is clipped to the key's range and rounded (`SearchSpace.clip`). Values are
multiplied, so a value of 0 stays 0 (as in YOLOv5): set it above 0 in the hyp file to let it evolve, or search
it with the TPE or random searcher. With no finished trial the parent is the hyp file itself.

Every searcher's trial 1 trains on the hyp file as it is (unless a resumed search already has finished trials).
Tune gets it wrapped in a `NumberedSearcher`, which numbers the configs in the order trials are created
(`TRIAL_KEY`), so that trial folders, the printed lines and trials.csv share one number. The space's own
searchers (`SpaceProposals`) have the methods Tune calls on a wrapped searcher and save their state as JSON,
never a pickle. Ray Tune and Optuna are imported when a searcher is built, not when this module is: Ray is an
optional extra (`pip install -e ".[tune]"`), and importing it changes the process (it sets RAY_CLIENT_MODE).
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tphyolo.errors import InputError
from tphyolo.training.tune.space import SearchSpace

METRIC = "fitness"  # what every searcher maximises: 0.1 mAP50 + 0.9 mAP50-95 of the trial's best epoch so far
TRIAL_KEY = "trial"  # the config key NumberedSearcher adds: the trial's number in the search, from 1
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


class SpaceProposals:
    """A searcher over a SearchSpace (module docstring) for Tune to wrap: configs are the searched keys' values.

    history: trials finished before this searcher started (a resumed search); they count as results.
    seed: with the number of finished trials, seeds the proposals, so that a resumed search draws anew.
    The first proposal is the hyp file's values (`SearchSpace.baseline`) when the history is empty.
    """

    def __init__(
        self, space: SearchSpace, *, metric: str, mode: str = "max", seed: int = 0, history: Sequence[Scored] = ()
    ) -> None:
        if mode != "max":
            raise ValueError(f"{type(self).__name__} maximises its metric; got mode {mode!r}")
        self.metric, self.mode, self.space, self.seed = metric, mode, space, seed
        self.history: list[Scored] = list(history)
        self.rng = np.random.default_rng([seed, len(self.history)])
        self.pending: dict[str, dict[str, float]] = {}
        self.proposed = 0

    def propose(self) -> dict[str, float]:
        """The next point, not counting the baseline (subclasses)."""
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Epochs in between teach nothing: a trial counts when it ends."""

    def suggest(self, trial_id: str) -> dict[str, float]:
        first = self.proposed == 0 and not self.history
        values = self.space.baseline() if first else self.propose()
        self.proposed += 1
        self.pending[trial_id] = values
        return dict(values)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """A finished trial (stopped early ones too) joins the history with its last reported metric; a failed
        one, or one without the metric, does not."""
        values = self.pending.pop(trial_id, None)
        score = None if (error or not result) else result.get(self.metric)
        if values is not None and score is not None and math.isfinite(score):
            self.history.append(Scored(values, float(score)))

    def add_evaluated_point(self, parameters: dict, value: float, error: bool = False, **unused: Any) -> None:
        if not error and value is not None and math.isfinite(value):
            self.history.append(Scored(self.space.clip(parameters), float(value)))

    def save(self, checkpoint_path: str) -> None:
        state = {"seed": self.seed, "proposed": self.proposed, "pending": self.pending,
                 "history": [{"values": dict(t.values), "fitness": t.fitness} for t in self.history],
                 "rng": self.rng.bit_generator.state}  # fmt: skip
        with open(checkpoint_path, "w") as f:
            json.dump(state, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path) as f:
            state = json.load(f)
        self.seed, self.proposed = int(state["seed"]), int(state["proposed"])
        self.history = [Scored(dict(t["values"]), float(t["fitness"])) for t in state["history"]]
        self.pending = {k: dict(v) for k, v in state["pending"].items()}
        self.rng.bit_generator.state = state["rng"]

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Tune's periodic save of the searcher a wrapper holds: the state as JSON in `checkpoint_dir`."""
        self.save(os.path.join(checkpoint_dir, f"searcher-state-{session_str}.json"))


class EvolutionProposals(SpaceProposals):
    """YOLOv5-style evolution: each proposal mutates one of the best trials so far (`propose`)."""

    def propose(self) -> dict[str, float]:
        return propose(self.space, self.history, self.rng)


class RandomProposals(SpaceProposals):
    """Uniform random search over the ranges (log-uniform where a range says so)."""

    def propose(self) -> dict[str, float]:
        return self.space.sample(self.rng)


def _tpe(space: SearchSpace, *, seed: int, history: Sequence[Scored]) -> Any:
    import optuna  # lazy: optional extras, needed by this searcher only
    from ray.tune.search.optuna import OptunaSearch

    distributions = {}
    for key in space.keys:
        span = space.ranges[key]
        if span.integer:
            distributions[key] = optuna.distributions.IntDistribution(int(span.low), int(span.high), log=span.log)
        else:
            distributions[key] = optuna.distributions.FloatDistribution(span.low, span.high, log=span.log)
    sampler = optuna.samplers.TPESampler(seed=seed + len(history))
    searcher = OptunaSearch(
        distributions, metric=METRIC, mode="max", sampler=sampler,
        points_to_evaluate=None if history else [space.baseline()],
    )  # fmt: skip
    for trial in history:
        searcher.add_evaluated_point(dict(trial.values), trial.fitness)
    return searcher


SEARCHERS: dict[str, Callable[..., Any]] = {
    "evolve": functools.partial(EvolutionProposals, metric=METRIC),
    "tpe": _tpe,
    "random": functools.partial(RandomProposals, metric=METRIC),
}


def build_searcher(
    name: str, space: SearchSpace, *, seed: int = 0, history: Sequence[Scored] = (), first_trial: int = 1
) -> Any:
    """The Ray Tune searcher `name` (a key of SEARCHERS) over `space`, told the finished trials `history`,
    numbering its trials from `first_trial`."""
    if name not in SEARCHERS:
        raise InputError(f"unknown searcher {name!r}; known: {sorted(SEARCHERS)}")
    if not space.keys:
        raise InputError("the search space searches no key (every range is fixed or has gain 0)")
    return numbered_searcher_class()(SEARCHERS[name](space, seed=seed, history=history), first=first_trial)


@functools.cache
def numbered_searcher_class() -> type:
    """NumberedSearcher (module docstring), a subclass of Ray Tune's Searcher made on first use."""
    from ray.tune.search import Searcher

    class NumberedSearcher(Searcher):
        """`searcher` (a Searcher, or an object with the methods Tune calls on a wrapped one) with each config
        numbered from `first`. Tune saves the wrapper's state (`get_state`) and the wrapped searcher's apart."""

        def __init__(self, searcher: Any, *, first: int = 1) -> None:
            super().__init__(metric=searcher.metric, mode=searcher.mode)
            self.searcher = searcher
            self.next_number = first

        def suggest(self, trial_id: str) -> dict | str | None:
            config = self.searcher.suggest(trial_id)
            if not isinstance(config, dict):
                return config  # None (nothing now) or Searcher.FINISHED
            config = {**config, TRIAL_KEY: self.next_number}
            self.next_number += 1
            return config

        def on_trial_result(self, trial_id: str, result: dict) -> None:
            self.searcher.on_trial_result(trial_id, result)

        def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)

        def get_state(self) -> dict:
            return {"next_number": self.next_number}

        def set_state(self, state: Mapping[str, Any]) -> None:
            self.next_number = int(state["next_number"])

    return NumberedSearcher
