"""The scores of a validation run (`EvalResults`: the numbers) and what is rendered from them: the printed tables
(`yolo_table`, `protocol_table`, `format_results`) and plain data for scripts (`results_json`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tphyolo.metrics import ap
from tphyolo.metrics.protocol import ImageResult, score_table
from tphyolo.metrics.registry import get_protocol


@dataclass(frozen=True)
class ClassResult:
    """YOLO metrics of one class with objects: images holding it, objects, P, R, AP50, AP50-95 (fractions)."""

    name: str
    images: int
    instances: int
    precision: float
    recall: float
    map50: float
    map: float


@dataclass(frozen=True)
class EvalResults:
    """Scores of one validation run: numbers only; its tables are rendered from them (`format_results`).

    yolo_all: the YOLO numbers over all classes (every protocol reports them): the images scored, their objects,
    mean precision and recall over classes with objects at the confidence of best mean F1, YOLO's AP50 and
    AP50-95; per_class: the YOLO numbers per class with objects; map50, map: mean AP at IoU 0.5 and over
    0.50:0.95 (fractions) by the run's `protocol`; extra: the protocol's headline numbers in percent (e.g. "AP",
    "AR500"); protocol_per_class: its per-class numbers in percent (as `extra`); protocol_images: the images
    weighting each class in its means, for a protocol whose table shows them (VisDrone's), else None; names:
    the class names scored (index = class id); speed: ms per image for "preprocess", "inference", "mapping"
    (and "classify" with a crop classifier); classifier_classes: the crop classifier's classes, empty without
    one; save_dir: where the run wrote its files; image_results: each image's detections and ground truth, when
    asked for; outputs: the results of the run's other evaluators and what its writers wrote, by name
    (`tphyolo.evaluation.evaluator`, `tphyolo.evaluation.writers`).
    """

    protocol: str
    names: tuple[str, ...]
    yolo_all: ClassResult
    per_class: list[ClassResult]
    map50: float
    map: float
    extra: dict[str, float] = field(default_factory=dict)
    protocol_per_class: dict[str, dict[str, float]] = field(default_factory=dict)
    protocol_images: dict[str, int] | None = None
    speed: dict[str, float] = field(default_factory=dict)
    classifier_classes: tuple[str, ...] = ()
    save_dir: Path | None = None
    image_results: tuple[ImageResult, ...] = ()
    outputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def mp(self) -> float:
        """YOLO's mean precision (`yolo_all`)."""
        return self.yolo_all.precision

    @property
    def mr(self) -> float:
        """YOLO's mean recall (`yolo_all`)."""
        return self.yolo_all.recall

    @property
    def images(self) -> int:
        """The images scored."""
        return self.yolo_all.images

    @property
    def instances(self) -> int:
        """The objects of the images scored."""
        return self.yolo_all.instances

    @property
    def fitness(self) -> float:
        """The checkpoint-selection score (`tphyolo.metrics.fitness`)."""
        return ap.fitness(self.map50, self.map)


def yolo_table(results: EvalResults) -> str:
    """The YOLO table (`tphyolo.metrics.ap.yolo_table`): the 'all' row, then a row per class when more than one
    class has one."""
    rows = [results.yolo_all, *results.per_class] if len(results.per_class) > 1 else [results.yolo_all]
    return ap.yolo_table([(r.name, r.images, r.instances, r.precision, r.recall, r.map50, r.map) for r in rows])


def protocol_table(results: EvalResults) -> str:
    """The table of the run's protocol: its own numbers in percent (`tphyolo.metrics.protocol.score_table`), or
    the YOLO table for a protocol that reports YOLO's numbers."""
    if get_protocol(results.protocol).yolo_metrics:
        return yolo_table(results)
    return score_table(results.extra, results.protocol_per_class, results.protocol_images)


PER_CLASS_ROWS_BELOW = 50  # with fewer classes than this, tables list every class by default


def format_results(results: EvalResults, *, verbose: bool | None = None) -> str:
    """The YOLO table, the protocol's table, and the speed. The YOLO table has a row per class when `verbose`,
    or by default (None) when 2 to PER_CLASS_ROWS_BELOW - 1 classes have rows; else the 'all' row alone."""
    yolo = yolo_table(results).splitlines()
    if verbose is None:
        verbose = 1 < len(results.per_class) < PER_CLASS_ROWS_BELOW
    lines = yolo if verbose else yolo[:2]
    if not get_protocol(results.protocol).yolo_metrics:
        lines += ["", f"{results.protocol} protocol (percent):", protocol_table(results)]
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
