"""Which detection found which object, per image, with ignore regions treated as the run's protocol treats them.

One matching serves every part of the report (AP by size, error counts per image, galleries, crops): in each
image and class, detections by descending score (stable) each take the unmatched object of their class with
the highest IoU, at IoU >= 0.5. A detection that takes no object is a false positive unless the protocol
ignores it. Which boxes are ignored is the protocol's to say (`Protocol.ignore_rules`,
`tphyolo.metrics.protocol.IgnoreRules`); the registered ones say:

- yolo: nothing is ignored; crowd objects count as ordinary objects (as YOLOv5's metrics read them);
- coco: crowd objects are neither hit nor miss; a detection that takes no object is ignored when its
  intersection with an ignore region or a crowd object of its class covers at least half of its area (COCO's
  overlap with a crowd annotation);
- visdrone: objects and detections that lie in an ignored region (the toolkit's rule,
  `tphyolo.metrics.ignored.in_ignored_regions`) are removed first (removed detections count as ignored), then
  crowd objects are handled as for coco.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tphyolo.errors import InputError
from tphyolo.metrics.ignored import in_ignored_regions
from tphyolo.metrics.protocol import ImageResult, Protocol
from tphyolo.metrics.registry import get_protocol
from tphyolo.ops.boxes import box_iou

IOU_THRESHOLD = 0.5


@dataclass(frozen=True)
class ImageMatch:
    """One image's matching, in original pixels.

    gt_boxes (m, 4) xyxy, gt_classes (m,), gt_counted (m,) bool: objects that can be hit or missed (not crowd,
    not removed by an ignore region); gt_detection (m,): index of the detection that took the object, -1 if none.
    det_rows (n, 6) x1, y1, x2, y2, score, class (classes 0..nc-1 only, by descending score); det_object (n,):
    index of the object taken, -1 if none; det_ignored (n,) bool: neither true nor false positive.
    """

    path: str
    shape: tuple[int, int] | None
    gt_boxes: np.ndarray
    gt_classes: np.ndarray
    gt_counted: np.ndarray
    gt_detection: np.ndarray
    det_rows: np.ndarray
    det_object: np.ndarray
    det_ignored: np.ndarray

    @property
    def false_positive(self) -> np.ndarray:
        """(n,) bool: detections that took no object and are not ignored."""
        return (self.det_object < 0) & ~self.det_ignored

    def misses(self, min_score: float) -> np.ndarray:
        """(m,) bool: counted objects no detection scoring at least `min_score` took."""
        scores = np.zeros(len(self.gt_detection))  # of the detection that took each object, 0 for none
        found = self.gt_detection >= 0
        scores[found] = self.det_rows[self.gt_detection[found], 4]
        return self.gt_counted & (~found | (scores < min_score))

    def false_positives(self, min_score: float) -> np.ndarray:
        """(n,) bool: false positives scoring at least `min_score`."""
        return self.false_positive & (self.det_rows[:, 4] >= min_score)

    def true_positives(self, min_score: float) -> np.ndarray:
        """(n,) bool: detections scoring at least `min_score` that took an object."""
        return (self.det_object >= 0) & (self.det_rows[:, 4] >= min_score)


def _removed_by_ignore(image: ImageResult, det_xyxy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m,), (n,) bool: objects and detections that lie in the image's ignored regions."""
    if not len(image.ignore):
        return np.zeros(len(image.classes), dtype=bool), np.zeros(len(det_xyxy), dtype=bool)
    if image.shape is None:
        raise InputError(f"{image.path}: the rule for ignored regions needs the image size")
    height, width = image.shape
    regions = image.boxes_as("xywh", "ignore", torch.float64).numpy()
    gt_xywh = image.boxes_as("xywh", "boxes", torch.float64).numpy().reshape(-1, 4)
    return (in_ignored_regions(gt_xywh, regions, height=height, width=width),
            in_ignored_regions(_xywh(det_xyxy), regions, height=height, width=width))  # fmt: skip


def _covered(det: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """(n, k): intersection of each xyxy detection with each xyxy region over the detection's area."""
    w = np.minimum(det[:, None, 2], regions[None, :, 2]) - np.maximum(det[:, None, 0], regions[None, :, 0])
    h = np.minimum(det[:, None, 3], regions[None, :, 3]) - np.maximum(det[:, None, 1], regions[None, :, 1])
    area = ((det[:, 2] - det[:, 0]) * (det[:, 3] - det[:, 1]))[:, None]
    return np.clip(w, 0, None) * np.clip(h, 0, None) / np.maximum(area, 1e-12)


def match_image(image: ImageResult, *, nc: int, protocol: str | Protocol) -> ImageMatch:
    """The matching of one image under the ignore rules of `protocol` (a name of
    `tphyolo.metrics.registry.PROTOCOLS` or a protocol); detections of classes outside 0..nc-1 are left out."""
    rules = (get_protocol(protocol) if isinstance(protocol, str) else protocol).ignore_rules
    gt_boxes = image.boxes_as("xyxy", "boxes", torch.float64).numpy().reshape(-1, 4)
    gt_classes = image.classes.numpy().astype(np.int64)
    crowd = image.crowd_mask().numpy() if rules.crowd else np.zeros(len(gt_classes), dtype=bool)
    det = torch.cat([image.boxes_as("xyxy", "detections", torch.float64), image.detections[:, 4:6].double()], 1)
    det = det.numpy().reshape(-1, 6)
    det = det[(det[:, 5] >= 0) & (det[:, 5] < nc)]
    det = det[np.argsort(-det[:, 4], kind="stable")]
    gt_removed = np.zeros(len(gt_classes), dtype=bool)
    det_ignored = np.zeros(len(det), dtype=bool)
    if rules.drop_in_regions:
        gt_removed, det_ignored = _removed_by_ignore(image, det[:, :4])
    counted = ~crowd & ~gt_removed
    iou = box_iou(torch.from_numpy(det[:, :4]), torch.from_numpy(gt_boxes)).numpy()  # (n, m)
    same = det[:, 5:6].astype(np.int64) == gt_classes[None, :]
    gt_detection = np.full(len(gt_classes), -1, dtype=np.int64)
    det_object = np.full(len(det), -1, dtype=np.int64)
    for d in np.flatnonzero(~det_ignored):
        candidates = np.where(same[d] & counted & (gt_detection < 0) & (iou[d] >= IOU_THRESHOLD), iou[d], -1.0)
        if len(candidates) and candidates.max() >= 0:
            g = int(candidates.argmax())
            gt_detection[g], det_object[d] = d, g
    if (rules.crowd or rules.on_region) and len(det):
        on_region = np.zeros(len(det), dtype=bool)
        if rules.on_region:
            regions = image.boxes_as("xyxy", "ignore", torch.float64).numpy().reshape(-1, 4)
            on_region = _covered(det[:, :4], regions).max(1, initial=0.0) >= IOU_THRESHOLD
        on_crowd = ((_covered(det[:, :4], gt_boxes) >= IOU_THRESHOLD) & same & crowd[None, :] & ~gt_removed).any(1)
        det_ignored |= (det_object < 0) & (on_region | on_crowd)
    return ImageMatch(image.path, image.shape, gt_boxes, gt_classes, counted, gt_detection, det, det_object,
                      det_ignored)  # fmt: skip


def _xywh(xyxy: np.ndarray) -> np.ndarray:
    return np.concatenate([xyxy[:, :2], xyxy[:, 2:] - xyxy[:, :2]], axis=1)
