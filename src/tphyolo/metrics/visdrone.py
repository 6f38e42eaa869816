"""The VisDrone2019-DET challenge protocol, with the rules of the official MATLAB toolkit (evalDET.m).

Behaviour reproduced from the toolkit (cited by its file names):
- saveAnnoRes.m / dropObjectsInIgr.m: ground-truth rows of category 0 are ignored regions, never objects. In
  an image with ignored regions, an image-size mask of them is built (regions clamped to >= 1 pixel, 1-based
  inclusive extents), and every object and detection whose rounded box has >= 50% of its area on the mask is
  removed; the covered area is read from the mask's integral image at the box corners, which leaves out the
  box's first row and column, and is divided by the full w * h. Objects with score 0 become "ignore" objects.
- evalRes.m / compOas.m: per image and class, detections by descending score (stable) are matched greedily:
  the unmatched normal object of largest IoU >= threshold (the later one among equals) makes a true positive;
  failing that, the first ignore object whose intersection over the detection's area is >= threshold makes
  the detection ignored (neither true nor false positive).
- calcAccuracy.m: only categories 1..10 are evaluated (11, "others", never); IoU thresholds 0.50:0.05:0.95;
  maxDets 1/10/100/500 keep the first N rows of each image's detection list (file order, after the
  ignored-region removal, before the class filter); recall divides by all objects of the class including
  ignore objects; AP is the all-point (VOC) area under the precision envelope with maxDets 500; AR@N is the
  final recall with maxDets N; a class's numbers enter the means once per image that has objects of that
  class, so classes are weighted by the number of images they appear in. Values are percentages.

`VisDroneProtocol` scores per-image results (`tphyolo.metrics.protocol.ImageResult`): objects are category
class + 1 (score 0 for crowd objects, 1 otherwise), ignore regions category 0, detections in their order.
`image_result` reads the rows of an annotation file and a result file into one ImageResult, exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tphyolo.data.formats.visdrone import NAMES, NUM_CLASSES
from tphyolo.errors import InputError
from tphyolo.metrics.ignored import in_ignored_regions
from tphyolo.metrics.protocol import IgnoreRules, ImageResult, ProtocolResult, score_table
from tphyolo.metrics.registry import GEOJSON, VISDRONE_TXT

MAX_DETS = (1, 10, 100, 500)
CLASSES = tuple(range(1, NUM_CLASSES + 1))  # evaluated categories; 0 marks ignored regions, 11 is "others"
METRICS = ("AP", "AP50", "AP75", "AR1", "AR10", "AR100", "AR500")


def iou_thresholds() -> np.ndarray:
    """0.50:0.05:0.95 with the values MATLAB's colon operator produces (first half from the start, second
    half back from the end)."""
    n = 9
    k = np.arange(n + 1)
    return np.where(k <= n // 2, 0.5 + k * 0.05, 0.95 - (n - k) * 0.05)


@dataclass(frozen=True)
class ImageAnnotations:
    """One image: `gt` (m, >=6) and `det` (n, >=6) rows of left, top, width, height, score, category in
    pixels, as in VisDrone txt files (detections in file order); `height`, `width` the image size."""

    gt: np.ndarray
    det: np.ndarray
    height: int
    width: int


def drop_in_ignored(gt: np.ndarray, det: np.ndarray, *, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Remove ignored regions (category 0) from `gt`, and, where there are any, the objects and detections
    that lie in them (`tphyolo.metrics.ignored.in_ignored_regions`). Returns (gt, det) rows kept, in order."""
    regions = gt[gt[:, 5] == 0, :4]
    gt = gt[gt[:, 5] != 0]
    if not len(regions):
        return gt, det
    return (gt[~in_ignored_regions(gt[:, :4], regions, height=height, width=width)],
            det[~in_ignored_regions(det[:, :4], regions, height=height, width=width)])  # fmt: skip


def _overlaps(det: np.ndarray, gt: np.ndarray, ignore: np.ndarray) -> np.ndarray:
    """(n, 4) and (m, 4) left, top, w, h -> (n, m): IoU, or intersection over detection area for ignore
    objects; 0 where the boxes do not overlap."""
    w = np.minimum(det[:, None, 0] + det[:, None, 2], gt[None, :, 0] + gt[None, :, 2]) - np.maximum(
        det[:, None, 0], gt[None, :, 0]
    )
    h = np.minimum(det[:, None, 1] + det[:, None, 3], gt[None, :, 1] + gt[None, :, 3]) - np.maximum(
        det[:, None, 1], gt[None, :, 1]
    )
    inter = np.where((w > 0) & (h > 0), w * h, 0.0)
    det_area = (det[:, 2] * det[:, 3])[:, None]
    union = np.where(ignore[None, :], det_area, det_area + (gt[:, 2] * gt[:, 3])[None, :] - inter)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(inter > 0, inter / union, 0.0)


def match_image(gt: np.ndarray, det: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy matching of one image and class at every threshold.

    gt (m, 5) left, top, w, h, ignore flag; det (n, 5) left, top, w, h, score. Returns the detections' scores
    sorted descending (stable) (n,) and their flags (T, n): 1 true positive, 0 false positive, -1 ignored.
    """
    order = np.argsort(-det[:, 4], kind="stable")
    det = det[order]
    n_thr = len(thresholds)
    flags = np.zeros((n_thr, len(det)), dtype=np.int8)
    if not len(det) or not len(gt):
        return det[:, 4], flags
    gt = gt[np.argsort(gt[:, 4], kind="stable")]  # normal objects first, ignore objects last
    is_ignore = gt[:, 4] != 0
    oa = _overlaps(det[:, :4], gt[:, :4], is_ignore)
    normal, ignore = oa[:, ~is_ignore], oa[:, is_ignore]
    n_normal = normal.shape[1]
    within = thresholds[:, None, None]  # (T, 1, 1)
    # A detection none of whose candidate objects is a candidate of another detection is matched alone: its
    # outcome does not depend on the order. Only the others go through the sequential loop.
    candidates = normal >= thresholds[0]  # (n, m_normal)
    shared = candidates.sum(0) > 1
    contested = (candidates & shared).any(1)
    alone = np.flatnonzero(~contested & (oa >= thresholds[0]).any(1))  # the rest are false positives
    if len(alone):
        best = np.where(normal[alone] >= within, normal[alone], -np.inf)  # (T, k, m_normal)
        hit = best.max(2, initial=-np.inf) > -np.inf  # (T, k)
        on_ignore = ~hit & (ignore[alone] >= within).any(2)
        flags[:, alone] = np.where(hit, 1, np.where(on_ignore, -1, 0))
    taken = np.zeros((n_thr, n_normal), dtype=bool)
    rows = np.arange(n_thr)
    for d in np.flatnonzero(contested):  # by descending score
        cand = np.where(~taken & (normal[d] >= thresholds[:, None]), normal[d], -np.inf)  # (T, m_normal)
        last_best = n_normal - 1 - cand[:, ::-1].argmax(1)  # the later object among equal overlaps
        hit = np.isfinite(cand[rows, last_best])
        taken[rows[hit], last_best[hit]] = True
        flags[hit, d] = 1
        on_ignore = ~hit & (ignore[d] >= thresholds[:, None]).any(1)
        flags[on_ignore, d] = -1
    return det[:, 4], flags


def all_point_ap(recall: np.ndarray, precision: np.ndarray) -> float:
    """All-point AP: area under the precision envelope, summed where recall changes (VOCap.m)."""
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([0.0], precision, [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.flatnonzero(mrec[1:] != mrec[:-1]) + 1
    return float(((mrec[i] - mrec[i - 1]) * mpre[i]).sum())


@dataclass(frozen=True)
class VisDroneResult:
    """Challenge numbers in percent: `overall` metric -> value (METRICS); `per_class` name -> metric -> value
    for classes with objects; `images_per_class` name -> weight in the means (images holding the class)."""

    overall: dict[str, float]
    per_class: dict[str, dict[str, float]]
    images_per_class: dict[str, int]

    def table(self) -> str:
        return score_table(self.overall, self.per_class, self.images_per_class)  # `overall` in METRICS order


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    return a.reshape(0, 6) if a.size == 0 else np.atleast_2d(a)


def _is_prefix_sorted(scores: np.ndarray) -> bool:
    """Whether the first N rows are the N best in the stable descending order, for every N."""
    return bool((np.diff(scores) <= 0).all())


def evaluate_visdrone(images: Sequence[ImageAnnotations], *, names: Sequence[str] = NAMES) -> VisDroneResult:
    """Score detections with the VisDrone2019-DET toolkit's protocol (see the module notes)."""
    thresholds = iou_thresholds()
    n_thr, n_md = len(thresholds), len(MAX_DETS)
    prepared = []
    for im in images:
        gt, det = drop_in_ignored(_rows(im.gt), _rows(im.det), height=im.height, width=im.width)
        gt = np.concatenate([gt[:, :4], (gt[:, 4:5] == 0), gt[:, 5:6]], axis=1)  # score 0 -> ignore object
        prepared.append((gt, det))

    ap = np.zeros((len(CLASSES), n_thr))
    ar = np.zeros((len(CLASSES), n_thr, n_md))
    weight = np.zeros(len(CLASSES), dtype=np.int64)
    for ci, c in enumerate(CLASSES):
        scores = [[] for _ in MAX_DETS]
        flags = [[] for _ in MAX_DETS]
        n_gt = 0
        for gt, det in prepared:
            gt_c = gt[gt[:, 5] == c, :5]
            weight[ci] += len(gt_c) > 0
            n_gt += len(gt_c)
            is_c = det[:, 5] == c
            if _is_prefix_sorted(det[is_c, 4]):  # truncations are prefixes of one matching
                s, f = match_image(gt_c, det[is_c, :5], thresholds)
                position = np.flatnonzero(is_c)  # rows in the file, aligned with the sorted output
                for k, n_max in enumerate(MAX_DETS):
                    keep = position < n_max
                    scores[k].append(s[keep])
                    flags[k].append(f[:, keep])
            else:
                for k, n_max in enumerate(MAX_DETS):
                    first = det[:n_max]
                    s, f = match_image(gt_c, first[first[:, 5] == c, :5], thresholds)
                    scores[k].append(s)
                    flags[k].append(f)
        for k in range(n_md):
            s = np.concatenate(scores[k])
            f = np.concatenate(flags[k], axis=1)
            order = np.argsort(-s, kind="stable")
            tp = np.cumsum(f[:, order] == 1, axis=1)
            recall = tp / max(1, n_gt)
            if len(s):
                ar[ci, :, k] = recall[:, -1] * 100
            if k == n_md - 1:
                fp = np.cumsum(f[:, order] == 0, axis=1)
                precision = tp / np.maximum(1, tp + fp)
                ap[ci] = [all_point_ap(recall[t], precision[t]) * 100 for t in range(n_thr)]

    def weighted(values: np.ndarray) -> float:  # (classes,) -> mean with each class once per image it is in
        return float((values * weight).sum() / weight.sum()) if weight.sum() else float("nan")

    def metrics(a: np.ndarray, r: np.ndarray, reduce) -> dict[str, float]:
        values = [a.mean(-1), a[..., 0], a[..., 5], *(r[..., k].mean(-1) for k in range(n_md))]
        return {m: reduce(v) for m, v in zip(METRICS, values, strict=True)}

    overall = metrics(ap, ar, weighted)
    present = [ci for ci in range(len(CLASSES)) if weight[ci]]
    per_class = {names[ci]: metrics(ap[ci], ar[ci], float) for ci in present}
    return VisDroneResult(overall, per_class, {names[ci]: int(weight[ci]) for ci in present})


def image_result(path: str, gt: np.ndarray, det: np.ndarray, *, shape: tuple[int, int] | None = None) -> ImageResult:
    """An ImageResult of VisDrone rows (left, top, width, height, score, category, ...): objects of categories
    1..10 (class = category - 1; score 0 makes a crowd object), ignore regions of category 0; "others" (11)
    is left out, as the protocol never scores it. Every detection row is kept, in file order, with class =
    category - 1. Boxes stay in "xywh" as written."""
    gt, det = torch.from_numpy(_rows(gt)), torch.from_numpy(_rows(det))
    category = gt[:, 5].long()
    objects = (category >= 1) & (category <= len(CLASSES))
    return ImageResult(
        path=path,
        shape=shape,
        detections=torch.cat([det[:, :5], det[:, 5:6] - 1], dim=1),
        classes=category[objects] - 1,
        boxes=gt[objects, :4],
        ignore=gt[category == 0, :4],
        crowd=gt[objects, 4] == 0,
        box_format="xywh",
    )


def _annotations(image: ImageResult) -> ImageAnnotations:
    """The toolkit's rows of one image: objects, then ignore regions; detections in their order."""
    height, width = image.shape if image.shape is not None else (0, 0)
    if len(image.ignore) and image.shape is None:
        raise InputError(f"{image.path}: the VisDrone protocol needs the image size where there are ignored regions")
    boxes = torch.cat([image.boxes_as("xywh", "boxes"), image.boxes_as("xywh", "ignore")]).double()
    score = torch.cat([(~image.crowd_mask()).double(), torch.ones(len(image.ignore), dtype=torch.float64)])
    category = torch.cat([image.classes + 1, torch.zeros(len(image.ignore), dtype=torch.int64)])
    gt = torch.cat([boxes, score[:, None], category[:, None].double()], dim=1)
    d = image.detections
    det = torch.cat([image.boxes_as("xywh", "detections").double(), d[:, 4:5].double(), d[:, 5:6].double() + 1], 1)
    return ImageAnnotations(gt.numpy(), det.numpy(), height, width)


class VisDroneProtocol:
    """The VisDrone2019-DET toolkit's rules (see the module docstring) for up to 10 classes."""

    name = "visdrone"
    needs_image_size = True
    saved_formats = (VISDRONE_TXT, GEOJSON)
    yolo_metrics = False
    ignore_rules = IgnoreRules(crowd=True, drop_in_regions=True)  # dropObjectsInIgr, then ignore objects

    def score(self, images: Sequence[ImageResult], *, names: Sequence[str], max_det: int) -> ProtocolResult:
        """Toolkit numbers; `max_det` is not used: the toolkit keeps at most 500 detections per image."""
        if len(names) > len(CLASSES):
            raise InputError(f"the VisDrone protocol evaluates {len(CLASSES)} classes; this dataset has {len(names)}")
        padded = [str(n) for n in names] + [f"class{c}" for c in range(len(names), len(CLASSES))]
        result = evaluate_visdrone([_annotations(image) for image in images], names=padded)
        ap50, ap = result.overall["AP50"] / 100.0, result.overall["AP"] / 100.0
        return ProtocolResult(self.name, ap50, ap, result.overall, result.per_class, result.table(),
                              result.images_per_class)  # fmt: skip
