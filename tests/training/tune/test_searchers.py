"""The Ray Tune searchers (driven by hand, without a Ray cluster): trial 1 is the hyp file, results shape the
next proposals, the state survives a JSON round trip, and trials are numbered."""

from __future__ import annotations

import json

import pytest
from ray.tune.search import Searcher

from tphyolo.training.tune.searchers import (
    METRIC,
    SEARCHERS,
    TRIAL_KEY,
    EvolutionProposals,
    Scored,
    build_searcher,
    numbered_searcher_class,
)
from tphyolo.training.tune.space import HypRange, SearchSpace

BASE = {"lr0": 0.01, "momentum": 0.9, "iou_t": 0.2, "anchors": 3}
SPACE = SearchSpace(
    BASE,
    {"lr0": HypRange(1e-4, 0.1, log=True), "momentum": HypRange(0.6, 0.98, 0.3), "anchors": HypRange(2, 10, 2,
                                                                                                     integer=True)},
)  # fmt: skip


def searched(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != TRIAL_KEY}


def within(values: dict) -> bool:
    return set(values) == set(SPACE.keys) and all(SPACE.ranges[k].low <= v <= SPACE.ranges[k].high
                                                  for k, v in values.items())  # fmt: skip


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_every_searcher_starts_from_the_hyp_file_and_numbers_its_trials(name):
    searcher = build_searcher(name, SPACE, seed=0)
    configs = [searcher.suggest(f"t{i}") for i in range(4)]
    assert [c[TRIAL_KEY] for c in configs] == [1, 2, 3, 4]
    assert searched(configs[0]) == SPACE.baseline()
    assert all(within(searched(c)) for c in configs)
    assert len({tuple(searched(c).values()) for c in configs}) == 4
    for i, config in enumerate(configs):
        searcher.on_trial_complete(f"t{i}", {METRIC: 0.1 * i, "config": config})


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_a_resumed_search_does_not_redo_the_hyp_file_and_numbers_on(name):
    history = [Scored({"lr0": 0.02, "momentum": 0.8, "anchors": 4}, 0.3), Scored(SPACE.baseline(), 0.1)]
    searcher = build_searcher(name, SPACE, seed=0, history=history, first_trial=3)
    config = searcher.suggest("t")
    assert config[TRIAL_KEY] == 3 and searched(config) != SPACE.baseline() and within(searched(config))


def test_tpe_is_told_the_finished_trials():
    history = [Scored({"lr0": 0.02, "momentum": 0.8, "anchors": 4}, 0.3), Scored(SPACE.baseline(), 0.1)]
    searcher = build_searcher("tpe", SPACE, history=history).searcher
    trials = searcher._ot_study.get_trials()
    assert [t.value for t in trials] == [0.3, 0.1] and trials[0].params == dict(history[0].values)


def test_evolution_mutates_the_best_finished_trial():
    searcher = EvolutionProposals(SPACE, metric=METRIC, seed=1)
    assert searcher.suggest("base") == SPACE.baseline()
    searcher.suggest("failed")
    searcher.on_trial_complete("failed", None, error=True)
    searcher.suggest("nan")
    searcher.on_trial_complete("nan", {METRIC: float("nan")})
    good = {"lr0": 0.05, "momentum": 0.7, "anchors": 8}
    searcher.add_evaluated_point(good, 0.9)
    searcher.on_trial_complete("base", {METRIC: 0.1})
    assert searcher.history == [Scored(good, 0.9), Scored(SPACE.baseline(), 0.1)]
    # the parent is the best one nearly always (weights 0.8 + 1e-6 against 1e-6): anchors move from 8, not 3
    proposals = [searcher.suggest(f"next{i}") for i in range(20)]
    assert sum(p["anchors"] >= 5 for p in proposals) == 20
    assert sum(p["lr0"] > 0.02 for p in proposals) == 20


def test_the_state_round_trips_as_json_and_the_proposals_go_on_alike(tmp_path):
    searcher = EvolutionProposals(SPACE, metric=METRIC, seed=4)
    for i in range(3):
        searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", {METRIC: 0.2 * i})
    searcher.suggest("running")
    path = tmp_path / "state.json"
    searcher.save(str(path))
    assert json.loads(path.read_text())["pending"] == {"running": searcher.pending["running"]}
    copy = EvolutionProposals(SPACE, metric=METRIC, seed=99)
    copy.restore(str(path))
    assert [copy.suggest(f"n{i}") for i in range(5)] == [searcher.suggest(f"n{i}") for i in range(5)]


def test_the_numbered_wrapper_passes_everything_else_through():
    class Fixed(Searcher):
        def __init__(self):
            super().__init__(metric=METRIC, mode="max")
            self.calls = []
            self.answers = iter([{"x": 1}, None, Searcher.FINISHED])

        def suggest(self, trial_id):
            return next(self.answers)

        def on_trial_result(self, trial_id, result):
            self.calls.append(("result", trial_id))

        def on_trial_complete(self, trial_id, result=None, error=False):
            self.calls.append(("complete", trial_id, error))

    inner = Fixed()
    searcher = numbered_searcher_class()(inner, first=7)
    assert (searcher.metric, searcher.mode) == (METRIC, "max")
    assert searcher.suggest("a") == {"x": 1, TRIAL_KEY: 7}
    assert searcher.suggest("b") is None and searcher.suggest("c") == Searcher.FINISHED
    searcher.on_trial_result("a", {METRIC: 0.5})
    searcher.on_trial_complete("a", {METRIC: 0.5}, error=True)
    assert inner.calls == [("result", "a"), ("complete", "a", True)]


def test_bad_requests_are_refused():
    with pytest.raises(ValueError, match="unknown searcher 'grid'; known: \\['evolve', 'random', 'tpe'\\]"):
        build_searcher("grid", SPACE)
    with pytest.raises(ValueError, match="searches no key"):
        build_searcher("evolve", SearchSpace(BASE, {}))
    with pytest.raises(ValueError, match="maximises"):
        EvolutionProposals(SPACE, metric=METRIC, mode="min")
