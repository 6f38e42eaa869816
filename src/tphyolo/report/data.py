"""The numbers of an evaluation report, computed once: the html page and `val --json` both render this object.

`build_report(records)` scores the saved per-image results (`tphyolo.report.records`) the way `tphyolo val`
does (`tphyolo.evaluation.scoring.score_images`: YOLO numbers and the run's protocol), matches every image once
(`tphyolo.report.matching`) and reads from that matching the size table (`tphyolo.report.sizes`), the error
counts per image, the scores of true and false positives, and the dataset statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.evaluation.results import EvalResults, results_json
from tphyolo.evaluation.scoring import score_images
from tphyolo.metrics.ap import Summary
from tphyolo.metrics.confusion import ConfusionMatrix
from tphyolo.report.matching import ImageMatch, match_image
from tphyolo.report.records import Records
from tphyolo.report.sizes import SizeTable, box_side, size_table

GALLERY_SCORE = 0.25  # detections below this score are not drawn, and an object found only below it is a miss


@dataclass(frozen=True)
class ImageErrors:
    """One image's counts at GALLERY_SCORE: objects counted, missed, true and false positives."""

    path: str
    objects: int
    misses: int
    true_positives: int
    false_positives: int

    def as_json(self) -> dict:
        return {"path": self.path, "objects": self.objects, "misses": self.misses, "TP": self.true_positives,
                "FP": self.false_positives}  # fmt: skip


@dataclass(frozen=True)
class DatasetStats:
    """objects_per_image (images,) counted objects; object_sides (objects,) sqrt(w * h) pixels; objects_per_class
    class name -> count; ignore_regions: regions over all images."""

    objects_per_image: np.ndarray
    object_sides: np.ndarray
    objects_per_class: dict[str, int]
    ignore_regions: int

    def as_json(self) -> dict:
        sides = self.object_sides
        quantiles = np.percentile(sides, [10, 50, 90]).tolist() if len(sides) else [None] * 3
        return {
            "images": len(self.objects_per_image),
            "objects": int(self.objects_per_image.sum()),
            "objects_per_image": {
                "mean": float(self.objects_per_image.mean()) if len(self.objects_per_image) else 0,
                "max": int(self.objects_per_image.max(initial=0)),
            },  # fmt: skip
            "object_side_px": dict(zip(("p10", "p50", "p90"), quantiles, strict=True)),
            "objects_per_class": self.objects_per_class,
            "ignore_regions": self.ignore_regions,
        }


@dataclass(frozen=True)
class ReportData:
    """Everything the report shows.

    results: the run's scores (as `tphyolo val` prints them); summary: YOLO curves per class; confusion:
    counts [predicted, true] with background last; sizes: AP50 and recall by object size; matches: each image's
    matching; errors: each image's error counts; tp_scores / fp_scores: scores of every true and false positive;
    dataset: ground-truth statistics; settings: the run's settings; names: class names.
    """

    results: EvalResults
    summary: Summary
    confusion: ConfusionMatrix
    sizes: SizeTable
    matches: tuple[ImageMatch, ...]
    errors: tuple[ImageErrors, ...]
    tp_scores: np.ndarray
    fp_scores: np.ndarray
    dataset: DatasetStats
    settings: dict
    names: tuple[str, ...]

    def as_json(self) -> dict:
        """`results_json` of the run (protocol, metrics, per_class), plus "sizes", "images" (error counts
        per image at `gallery_score`), "dataset" and "settings"."""
        return results_json(self.results) | {
            "sizes": self.sizes.as_json(),
            "gallery_score": GALLERY_SCORE,
            "images": [e.as_json() for e in self.errors],
            "dataset": self.dataset.as_json(),
            "settings": self.settings,
        }


def _errors(match: ImageMatch) -> ImageErrors:
    return ImageErrors(
        path=match.path,
        objects=int(match.gt_counted.sum()),
        misses=int(match.misses(GALLERY_SCORE).sum()),
        true_positives=int(match.true_positives(GALLERY_SCORE).sum()),
        false_positives=int(match.false_positives(GALLERY_SCORE).sum()),
    )


def build_report(records: Records) -> ReportData:
    """Score and match `records` (see the module docstring)."""
    names = records.names
    confusion = ConfusionMatrix(len(names))
    results, summary = score_images(records.images, names=names, protocol=records.protocol,
                                    max_det=records.max_det, speed=records.speed, confusion=confusion)  # fmt: skip
    matches = tuple(match_image(image, nc=len(names), protocol=records.protocol) for image in records.images)
    tp = [m.det_rows[m.det_object >= 0, 4] for m in matches]
    fp = [m.det_rows[m.false_positive, 4] for m in matches]
    counted_classes = np.concatenate([m.gt_classes[m.gt_counted] for m in matches] or [np.zeros(0, np.int64)])
    dataset = DatasetStats(
        objects_per_image=np.array([int(m.gt_counted.sum()) for m in matches], dtype=np.int64),
        object_sides=np.concatenate([box_side(m.gt_boxes)[m.gt_counted] for m in matches] or [np.zeros(0)]),
        objects_per_class={str(names[c]): int((counted_classes == c).sum()) for c in range(len(names))},
        ignore_regions=sum(len(image.ignore) for image in records.images),
    )
    return ReportData(
        results=results,
        summary=summary,
        confusion=confusion,
        sizes=size_table(matches, names),
        matches=matches,
        errors=tuple(_errors(m) for m in matches),
        tp_scores=np.concatenate(tp or [np.zeros(0)]),
        fp_scores=np.concatenate(fp or [np.zeros(0)]),
        dataset=dataset,
        settings=dict(records.settings),
        names=tuple(names),
    )
