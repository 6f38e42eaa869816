"""The scores of a validation run (`EvalResults`: the numbers) and what is rendered from them: the printed tables
(`format_results`) and plain data for scripts (`results_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tphyolo.metrics.ap import fitness
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import get_protocol


@dataclass(frozen=True)
class ClassResult:
    """YOLO metrics of one class with objects: images holding it, objects, P, R, AP50, AP50-95."""

    name: str
    images: int
    instances: int
    precision: float
    recall: float
    map50: float
    map: float


@dataclass(frozen=True)
class EvalResults:
    """Scores of one validation run.

    mp, mr: mean precision and recall over classes with objects, at the confidence of best mean F1 (YOLO
    matching, for every protocol); map50, map: mean AP at IoU 0.5 and over 0.50:0.95 (fractions) by the
    run's protocol; per_class: YOLO metrics per class; extra: the protocol's headline numbers in percent
    (e.g. "AP", "AR500"); tables: the YOLO table, then the protocol's when it is not YOLO; speed: ms per
    image for "preprocess", "inference", "mapping" (and "classify" with a crop classifier); protocol_per_class:
    the protocol's per-class numbers in percent (as `extra`); classifier_classes: the crop classifier's
    classes, empty without one; image_results: each image's detections and ground truth, when asked for;
    names: the class names scored (index = class id); outputs: the results of the run's other evaluators and
    what its writers wrote, by name (`tphyolo.evaluation.evaluator`, `tphyolo.evaluation.writers`).
    """

    protocol: str
    mp: float
    mr: float
    map50: float
    map: float
    per_class: list[ClassResult]
    images: int
    instances: int
    speed: dict[str, float]
    tables: tuple[str, ...] = ()
    extra: dict[str, float] = field(default_factory=dict)
    save_dir: Path | None = None
    protocol_per_class: dict[str, dict[str, float]] = field(default_factory=dict)
    classifier_classes: tuple[str, ...] = ()
    image_results: tuple[ImageResult, ...] = ()
    names: tuple[str, ...] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fitness(self) -> float:
        """The checkpoint-selection score (`tphyolo.metrics.fitness`)."""
        return fitness(self.map50, self.map)


PER_CLASS_ROWS_BELOW = 50  # with fewer classes than this, tables list every class by default


def format_results(results: EvalResults, *, verbose: bool | None = None) -> str:
    """The YOLO table, the protocol's table, and the speed. The YOLO table has a row per class when `verbose`,
    or by default (None) when 2 to PER_CLASS_ROWS_BELOW - 1 classes have rows; else the 'all' row alone."""
    yolo = results.tables[0].splitlines() if results.tables else []
    if verbose is None:
        verbose = 1 < len(results.per_class) < PER_CLASS_ROWS_BELOW
    lines = yolo if verbose else yolo[:2]
    for table in results.tables[1:]:
        lines += ["", f"{results.protocol} protocol (percent):", table]
    speed = results.speed
    classify = f", {speed['classify']:.1f} ms crop classifier" if "classify" in speed else ""
    lines.append(
        f"Speed: {speed['preprocess']:.1f} ms pre-process, {speed['inference']:.1f} ms inference and NMS, "
        f"{speed['mapping']:.1f} ms mapping back and merging{classify} per image"
    )
    return "\n".join(lines)


def results_json(results: EvalResults) -> dict:
    """The numbers of a run as plain data, for comparing runs by script:

    {"protocol": name, "metrics": {"P", "R", "mAP50", "mAP50-95"} | the protocol's headline numbers,
     "per_class": {class: {"images", "instances", "P", "R", "AP50", "AP50-95"} | the protocol's numbers},
     "classifier_classes": [...] (only with a crop classifier)}

    P, R, mAP50 and mAP50-95 are fractions, as the YOLO table prints them (mAP by the run's protocol, as
    `val` reports it; per class by YOLO matching). With a protocol that has numbers of its own (not
    `yolo_metrics`: "coco", "visdrone"), the numbers of its table are added as "PROTOCOL/NAME" with NAME as
    that table prints it (AP, AP50, AP75, AR1, ...), in percent as printed.
    """
    metrics = {"P": results.mp, "R": results.mr, "mAP50": results.map50, "mAP50-95": results.map}
    per_class = {
        c.name: {
            "images": c.images,
            "instances": c.instances,
            "P": c.precision,
            "R": c.recall,
            "AP50": c.map50,
            "AP50-95": c.map,
        }
        for c in results.per_class
    }
    if not get_protocol(results.protocol).yolo_metrics:
        metrics |= {f"{results.protocol}/{k}": v for k, v in results.extra.items()}
        for name, values in results.protocol_per_class.items():
            per_class.setdefault(name, {}).update({f"{results.protocol}/{k}": v for k, v in values.items()})
    out = {"protocol": results.protocol, "metrics": metrics, "per_class": per_class}
    if results.classifier_classes:
        out["classifier_classes"] = list(results.classifier_classes)
    return out
