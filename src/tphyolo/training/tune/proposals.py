"""The search space's own searchers: YOLOv5-style evolution and uniform random draws.

They have the methods of a Ray Tune `Searcher` (suggest, on_trial_complete, save, ...) without importing Ray,
which `ray_adapters` imports when a search starts. Each proposes the hyp file's own values first when it has no
finished trial yet, and states what it knows as plain data (`get_state`): Tune's periodic `save` writes that as
JSON, never a pickle.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tphyolo.training.tune.evolution import Scored, propose
from tphyolo.training.tune.space import SearchSpace


class SpaceProposals:
    """A searcher over a SearchSpace, with the methods of a Ray Tune `Searcher` (`ray_adapters` hands it to Ray):
    trial configs are the searched keys' values.

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
        self.metric, self.mode = metric, mode
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

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return False  # no limit of its own

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

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> None:
        """Tune's periodic save of the searcher it was given: the state as JSON in `checkpoint_dir`."""
        self.save(os.path.join(checkpoint_dir, f"searcher-state-{session_str}.json"))


class EvolutionProposals(SpaceProposals):
    """YOLOv5-style evolution: each proposal mutates one of the best trials so far (`evolution.propose`)."""

    def propose(self) -> dict[str, float]:
        return propose(self.space, self.history, self.rng)


class RandomProposals(SpaceProposals):
    """Uniform random search over the ranges (log-uniform where a range says so)."""

    def propose(self) -> dict[str, float]:
        return self.space.sample(self.rng)
