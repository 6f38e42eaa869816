"""The metrics of a validation run as an evaluator: `MetricsEvaluator` scores the per-image results by a protocol
of the registry (`tphyolo.metrics.registry.PROTOCOLS`: "yolo", "coco", "visdrone"), with the YOLO numbers (P, R,
the per-class table) beside those of every protocol; `score_images` does the same for a list in hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tphyolo.evaluation.evaluator import Evaluator
from tphyolo.evaluation.results import ClassResult, EvalResults
from tphyolo.infer.config import VALIDATION
from tphyolo.metrics.ap import Summary
from tphyolo.metrics.confusion import ConfusionMatrix
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import get_protocol
from tphyolo.metrics.yolo import summarize, summary_result

METRICS, SUMMARY, CONFUSION = "metrics", "summary", "confusion"  # the names of MetricsEvaluator's results


class MetricsEvaluator(Evaluator):
    """The run's scores by `protocol` over classes `names` (`score_images`). Its results: METRICS, the
    EvalResults (no speed: the loop's); SUMMARY, the YOLO Summary they were read from (per-class curves); and
    CONFUSION, the ConfusionMatrix of YOLO matching, when built with `confusion`."""

    def __init__(self, *, names: Sequence[str], protocol: str = "yolo", max_det: int = VALIDATION.max_det,
                 classifier_classes: Sequence[str] = (), confusion: bool = False) -> None:  # fmt: skip
        get_protocol(protocol)  # an unknown name fails before the run
        self.names, self.protocol, self.max_det = tuple(names), protocol, max_det
        self.classifier_classes, self.confusion = tuple(classifier_classes), confusion
        self.images: list[ImageResult] = []

    def reset(self) -> None:
        self.images = []

    def process(self, images: Sequence[ImageResult]) -> None:
        self.images += images

    def evaluate(self) -> Mapping[str, Any]:
        confusion = ConfusionMatrix(len(self.names)) if self.confusion else None
        results, summary = score_images(self.images, names=self.names, protocol=self.protocol, max_det=self.max_det,
                                        confusion=confusion, classifier_classes=self.classifier_classes)  # fmt: skip
        return {METRICS: results, SUMMARY: summary} | ({CONFUSION: confusion} if confusion is not None else {})


def score_images(
    images: Sequence[ImageResult],
    *,
    names: Sequence[str],
    protocol: str = "yolo",
    max_det: int = VALIDATION.max_det,
    speed: dict[str, float] | None = None,
    confusion: ConfusionMatrix | None = None,
    classifier_classes: Sequence[str] = (),
) -> tuple[EvalResults, Summary]:
    """Score per-image results by `protocol` (YOLO numbers always, the protocol's beside them); fills
    `confusion` when given. Returns the EvalResults (`speed` as given, default empty) and the YOLO Summary
    (per-class curves) they were read from."""
    scorer = get_protocol(protocol)
    summary = summarize(images, nc=len(names), confusion=confusion)
    yolo = summary_result(summary, names)
    scored = yolo if scorer.yolo_metrics else scorer.score(images, names=names, max_det=max_det)
    total = int(summary.labels_per_class.sum())
    results = EvalResults(
        protocol=protocol,
        names=tuple(map(str, names)),
        yolo_all=ClassResult("all", len(images), total, summary.mp, summary.mr, summary.map50, summary.map),
        per_class=_per_class(summary, names),
        map50=scored.map50,
        map=scored.map,
        extra=dict(scored.overall),
        protocol_per_class=dict(scored.per_class),
        protocol_images=None if scored.images_per_class is None else dict(scored.images_per_class),
        speed=dict(speed or {}),
        classifier_classes=tuple(classifier_classes),
    )
    return results, summary


def _per_class(summary: Summary, names: Sequence[str]) -> list[ClassResult]:
    if summary.result is None:
        return []
    res, holding = summary.result, summary.images_per_class
    return [
        ClassResult(
            str(names[c]),
            int(holding[c]),
            int(summary.labels_per_class[c]),
            float(res.p[i]),
            float(res.r[i]),
            float(res.ap50[i]),
            float(res.ap50_95[i]),
        )
        for i, c in enumerate(res.classes.tolist())
    ]
