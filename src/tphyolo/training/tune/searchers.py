"""The searchers a search can name, and `build_searcher`, which builds the Ray Tune searcher for one.

    SEARCHERS["evolve"]  YOLOv5-style evolution: mutate one of the best trials so far (the default)
    SEARCHERS["tpe"]     Optuna's Tree-structured Parzen Estimator (needs optuna)
    SEARCHERS["random"]  uniform random draws from the ranges

Every searcher's trial 1 trains on the hyp file as it is (unless a resumed search already has finished trials),
and its configs are numbered (`ray_adapters.TRIAL_KEY`). Ray Tune and Optuna are imported when a searcher is
built, not when this module is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tphyolo.errors import InputError
from tphyolo.training.tune.evolution import Scored
from tphyolo.training.tune.proposals import EvolutionProposals, RandomProposals
from tphyolo.training.tune.ray_adapters import ray_classes
from tphyolo.training.tune.space import SearchSpace

METRIC = "fitness"  # what every searcher maximises: 0.1 mAP50 + 0.9 mAP50-95 of the trial's best epoch so far


def _evolution(space: SearchSpace, *, seed: int, history: Sequence[Scored]) -> Any:
    return EvolutionProposals(space, metric=METRIC, seed=seed, history=history)


def _random(space: SearchSpace, *, seed: int, history: Sequence[Scored]) -> Any:
    return RandomProposals(space, metric=METRIC, seed=seed, history=history)


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


SEARCHERS: dict[str, Callable[..., Any]] = {"evolve": _evolution, "tpe": _tpe, "random": _random}


def build_searcher(
    name: str, space: SearchSpace, *, seed: int = 0, history: Sequence[Scored] = (), first_trial: int = 1
) -> Any:
    """The Ray Tune searcher `name` (a key of SEARCHERS) over `space`, told the finished trials `history`,
    numbering its trials from `first_trial`."""
    if name not in SEARCHERS:
        raise InputError(f"unknown searcher {name!r}; known: {sorted(SEARCHERS)}")
    if not space.keys:
        raise InputError("the search space searches no key (every range is fixed or has gain 0)")
    return ray_classes().NumberedSearcher(SEARCHERS[name](space, seed=seed, history=history), first=first_trial)
