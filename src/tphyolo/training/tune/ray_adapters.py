"""The Ray Tune classes a search hands to Ray, made when a search first asks for them (`ray_classes()`):
`NumberedSearcher`, a Searcher that numbers the trials of the searcher it wraps (`proposals`, or Optuna's), and
`TableCallback`, the Tune callback that gives the trials' starts, epochs and ends to a `reporter.TrialTable`.

They subclass Ray's own classes, so Ray is imported when they are made, not when this module is: Ray is an
optional extra (`pip install -e ".[tune]"`), and importing it changes the process (it sets RAY_CLIENT_MODE).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

TRIAL_KEY = "trial"  # the config key NumberedSearcher adds: the trial's number in the search, from 1


@functools.cache
def ray_classes() -> SimpleNamespace:
    """NumberedSearcher and TableCallback (module docstring), subclasses of Ray Tune's Searcher and Callback."""
    from ray.tune import Callback
    from ray.tune.search import Searcher

    class NumberedSearcher(Searcher):
        """`searcher` (a Searcher, or an object with its methods: `proposals`), with each config numbered in the
        order trials are created (`TRIAL_KEY`, from `first`), so that trial folders, the printed lines and
        trials.csv share one number; everything else is the wrapped searcher's."""

        def __init__(self, searcher: Any, *, first: int = 1) -> None:
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

    class TableCallback(Callback):
        """Hands each trial's start, epoch results, end and error to `table` (a `reporter.TrialTable`); Tune
        calls it in the process that started the search."""

        def __init__(self, table: Any) -> None:
            self.table = table

        def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self.table.on_trial_start(trial)

        def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict, **info: Any) -> None:
            self.table.on_trial_result(trial, result)

        def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self.table.on_trial_complete(trial)

        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            self.table.on_trial_error(trial)

    return SimpleNamespace(NumberedSearcher=NumberedSearcher, TableCallback=TableCallback)
