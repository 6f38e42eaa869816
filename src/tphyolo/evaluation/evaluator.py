"""The evaluator protocol: what computes a result from the per-image results of a validation run.

The loop (`tphyolo.evaluation.loop.evaluate`) tells every evaluator `reset()` before a run, gives it
`process(images)` with each batch's per-image results (`ImageResult`: detections and ground truth in original
pixels, the batches in the run's order) and then asks `evaluate()` for its results, by name. The results of a
run's evaluators are combined into one mapping (`combine_results`): two evaluators may not give a result of the
same name. The metrics of a run are one evaluator among them (`tphyolo.evaluation.scoring.MetricsEvaluator`);
files written from the results are writers (`tphyolo.evaluation.writers`), not evaluators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tphyolo.errors import InputError
from tphyolo.metrics.protocol import ImageResult


class Evaluator:
    """Computes results from a run's per-image results (see the module docstring). Subclasses override what they
    need; the defaults do nothing and give no result. Only the process that scores the run (rank 0) feeds its
    evaluators, with every batch of the run in order."""

    def reset(self) -> None:
        """Before a run: forget what an earlier run gave."""

    def process(self, images: Sequence[ImageResult]) -> None:
        """One batch's per-image results, in original pixels."""

    def evaluate(self) -> Mapping[str, Any]:
        """The run is over: its results, by name (names unique among the run's evaluators)."""
        return {}


def combine_results(evaluators: Sequence[Evaluator]) -> dict[str, Any]:
    """The results of every evaluator in one mapping, in the evaluators' order. Raises ValueError naming both
    evaluators when two give a result of the same name."""
    combined: dict[str, Any] = {}
    given_by: dict[str, str] = {}
    for evaluator in evaluators:
        who = type(evaluator).__name__
        for name, value in evaluator.evaluate().items():
            if name in combined:
                raise InputError(f"evaluators {given_by[name]} and {who} both give a result named {name!r}; "
                                 "results need names of their own")  # fmt: skip
            combined[name], given_by[name] = value, who
    return combined
