"""The search space's own Ray Tune searchers (YOLOv5-style evolution, uniform random), and the wrapper that
numbers the trials of any searcher.

Importing this module imports Ray Tune; `searchers.build_searcher` imports it only when a search is built.
Every searcher here proposes the hyp file's own values first when it has no finished trial yet, and states
what it knows as plain data (`get_state`): Tune's periodic `save` writes that as JSON, never a pickle.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from tphyolo.training.tune.evolution import Scored, propose
from tphyolo.training.tune.space import SearchSpace

TRIAL_KEY = "trial"  # the config key NumberedSearcher adds: the trial's number in the search, from 1


class SpaceSearcher(Searcher):
    """A searcher over a SearchSpace: trial configs are the searched keys' values.

    history: trials finished before this searcher started (a resumed search); they count as results.
    seed: with the number of finished trials, seeds the proposals, so that a resumed search draws anew.
    The first proposal is the hyp file's values (`SearchSpace.baseline`) when the history is empty.
    """

    def __init__(
        self,
        space: SearchSpace,
        *,
        metric: str,
        mode: str = "max",
        seed: int = 0,
        history: Sequence[Scored] = (),
    ) -> None:
        if mode != "max":
            raise ValueError(f"{type(self).__name__} maximises its metric; got mode {mode!r}")
        super().__init__(metric=metric, mode=mode)
        self.space = space
        self.seed = seed
        self.history: list[Scored] = list(history)
        self.rng = np.random.default_rng([seed, len(self.history)])
        self.pending: dict[str, dict[str, float]] = {}
        self.proposed = 0

    def propose(self) -> dict[str, float]:
        """The next point, not counting the baseline (subclasses)."""
        raise NotImplementedError

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        """The space comes with the searcher; Tune's metric must be the searcher's."""
        if metric not in (None, self.metric) or mode not in (None, self.mode):
            raise ValueError(f"{type(self).__name__} searches {self.metric}/{self.mode}, Tune asked {metric}/{mode}")
        return True

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

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        if not error and value is not None and math.isfinite(value):
            self.history.append(Scored(self.space.clip(parameters), float(value)))

    def get_state(self) -> dict:
        return {
            "seed": self.seed,
            "proposed": self.proposed,
            "history": [{"values": dict(t.values), "fitness": t.fitness} for t in self.history],
            "pending": self.pending,
            "rng": self.rng.bit_generator.state,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.seed, self.proposed = int(state["seed"]), int(state["proposed"])
        self.history = [Scored(dict(t["values"]), float(t["fitness"])) for t in state["history"]]
        self.pending = {k: dict(v) for k, v in state["pending"].items()}
        self.rng.bit_generator.state = state["rng"]

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "w") as f:
            json.dump(self.get_state(), f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path) as f:
            self.set_state(json.load(f))


class EvolutionSearcher(SpaceSearcher):
    """YOLOv5-style evolution: each proposal mutates one of the best trials so far (`evolution.propose`)."""

    def propose(self) -> dict[str, float]:
        return propose(self.space, self.history, self.rng)


class RandomSearcher(SpaceSearcher):
    """Uniform random search over the ranges (log-uniform where a range says so)."""

    def propose(self) -> dict[str, float]:
        return self.space.sample(self.rng)


class NumberedSearcher(Searcher):
    """`searcher`, with each config numbered in the order trials are created (`TRIAL_KEY`, from `first`), so
    that trial folders, the printed lines and trials.csv share one number; everything else is the wrapped
    searcher's."""

    def __init__(self, searcher: Searcher, *, first: int = 1) -> None:
        super().__init__(metric=searcher.metric, mode=searcher.mode)
        self.searcher = searcher
        self.next_number = first

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec: Any) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return self.searcher.set_max_concurrency(max_concurrent)

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

    def add_evaluated_point(self, parameters: dict, value: float, **kwargs: Any) -> None:
        self.searcher.add_evaluated_point(parameters, value, **kwargs)

    def save(self, checkpoint_path: str) -> None:
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)

    def get_state(self) -> dict:
        """The wrapper's own state (Tune saves a wrapped searcher's apart, with its `save`)."""
        return {"next_number": self.next_number}

    def set_state(self, state: Mapping[str, Any]) -> None:
        self.next_number = int(state["next_number"])

    @property
    def metric(self) -> str:
        return self.searcher.metric

    @property
    def mode(self) -> str:
        return self.searcher.mode
