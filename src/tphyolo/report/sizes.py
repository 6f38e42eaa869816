"""AP50 and recall by object size, in buckets that fit drone imagery.

An object's size is the side of the square of its area, sqrt(w * h), in original-image pixels. The buckets are
[0, 8), [8, 16), [16, 32), [32, 96) and [96, inf) (`BUCKETS`); most VisDrone objects fall under 32 px, where
COCO's small/medium/large split has one bucket.

A bucket is scored on its own objects only, from the one matching of `tphyolo.report.matching`: a detection
that took an object of the bucket is a true positive; one that took an object of another bucket is left out;
one that took no object (a false positive) falls in the bucket of its own box size; ignored detections are left
out. Per class, AP50 is the all-point area under the precision envelope (as the VisDrone toolkit computes it)
and recall is the share of the bucket's objects found at any score. A bucket's overall AP50 is the mean over
the classes with objects in it; its overall recall is found objects over all its objects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tphyolo.metrics.visdrone import all_point_ap
from tphyolo.report.matching import ImageMatch

BUCKETS: tuple[tuple[float, float], ...] = ((0, 8), (8, 16), (16, 32), (32, 96), (96, math.inf))
ALL = "all"


def bucket_label(bucket: tuple[float, float]) -> str:
    """'<8', '8-16', ..., '>96'."""
    low, high = bucket
    return f"<{high:g}" if low == 0 else f">{low:g}" if math.isinf(high) else f"{low:g}-{high:g}"


BUCKET_LABELS: tuple[str, ...] = tuple(bucket_label(b) for b in BUCKETS)


def box_side(xyxy: np.ndarray) -> np.ndarray:
    """(n, 4) xyxy pixels -> (n,) sqrt(w * h)."""
    wh = np.clip(xyxy[:, 2:4] - xyxy[:, 0:2], 0, None)
    return np.sqrt(wh[:, 0] * wh[:, 1])


def bucket_index(xyxy: np.ndarray) -> np.ndarray:
    """(n, 4) xyxy pixels -> (n,) index into BUCKETS."""
    edges = np.array([high for _, high in BUCKETS[:-1]])
    return np.searchsorted(edges, box_side(xyxy), side="right")


@dataclass(frozen=True)
class SizeScore:
    """One cell of the size table: objects counted, objects found at any score, AP50 (None without objects)."""

    objects: int
    found: int
    ap50: float | None

    @property
    def recall(self) -> float | None:
        return self.found / self.objects if self.objects else None

    def as_json(self) -> dict:
        return {"objects": self.objects, "found": self.found, "recall": self.recall, "AP50": self.ap50}


@dataclass(frozen=True)
class SizeTable:
    """overall: bucket label (and "all") -> SizeScore; per_class: class name -> the same, for classes with
    objects."""

    overall: dict[str, SizeScore]
    per_class: dict[str, dict[str, SizeScore]]

    def as_json(self) -> dict:
        return {
            "buckets": list(BUCKET_LABELS),
            "rule": "side = sqrt(w * h) in original pixels",
            "overall": {k: v.as_json() for k, v in self.overall.items()},
            "per_class": {c: {k: v.as_json() for k, v in row.items()} for c, row in self.per_class.items()},
        }


def _score(scores: np.ndarray, true_positive: np.ndarray, objects: int) -> SizeScore:
    found = int(true_positive.sum())
    if not objects:
        return SizeScore(0, 0, None)
    order = np.argsort(-scores, kind="stable")
    tp = np.cumsum(true_positive[order])
    precision = tp / np.arange(1, len(tp) + 1)
    return SizeScore(objects, found, all_point_ap(tp / objects, precision) if len(tp) else 0.0)


def size_table(matches: Sequence[ImageMatch], names: Sequence[str]) -> SizeTable:
    """AP50 and recall per bucket, per class and overall (see the module docstring)."""
    gt_cls, gt_bucket, det_cls, det_score, det_tp, det_bucket = [], [], [], [], [], []
    for m in matches:
        gt_cls.append(m.gt_classes[m.gt_counted])
        gt_bucket.append(bucket_index(m.gt_boxes)[m.gt_counted])
        keep = ~m.det_ignored
        taken = m.det_object >= 0
        own = bucket_index(m.det_rows[:, :4])
        of_object = bucket_index(m.gt_boxes)[np.maximum(m.det_object, 0)] if len(m.gt_boxes) else own
        det_cls.append(m.det_rows[keep, 5].astype(np.int64))
        det_score.append(m.det_rows[keep, 4])
        det_tp.append(taken[keep])
        det_bucket.append(np.where(taken, of_object, own)[keep])
    gt_cls, gt_bucket = np.concatenate(gt_cls or [[]]).astype(np.int64), np.concatenate(gt_bucket or [[]])
    det_cls, det_score = np.concatenate(det_cls or [[]]).astype(np.int64), np.concatenate(det_score or [[]])
    det_tp, det_bucket = np.concatenate(det_tp or [[]]).astype(bool), np.concatenate(det_bucket or [[]])

    def cell(c: int | None, b: int | None) -> SizeScore:
        g = np.ones(len(gt_cls), dtype=bool) if c is None else gt_cls == c
        d = np.ones(len(det_cls), dtype=bool) if c is None else det_cls == c
        if b is not None:
            g, d = g & (gt_bucket == b), d & (det_bucket == b)
        return _score(det_score[d], det_tp[d], int(g.sum()))

    buckets: list[tuple[str, int | None]] = [*((label, i) for i, label in enumerate(BUCKET_LABELS)), (ALL, None)]
    present = [c for c in range(len(names)) if (gt_cls == c).any()]
    per_class = {str(names[c]): {label: cell(c, b) for label, b in buckets} for c in present}
    overall = {}
    for label, b in buckets:
        scores = [row[label] for row in per_class.values() if row[label].objects]
        total = cell(None, b)
        mean = float(np.mean([s.ap50 for s in scores])) if scores else None
        overall[label] = SizeScore(total.objects, total.found, mean)
    return SizeTable(overall, per_class)
