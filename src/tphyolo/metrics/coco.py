"""The COCO detection protocol (pycocotools' rules) through faster-coco-eval, with configurable maxDets.

Ground truth is a COCO dataset dict (`images`, `annotations`, `categories`); regions to ignore are
annotations with `iscrowd: 1` (a detection overlapping one is neither a hit nor a miss). Detections are COCO
result records (`image_id`, `category_id`, `bbox` [left, top, width, height] pixels, `score`).

`CocoProtocol` scores per-image results (`tphyolo.metrics.protocol.ImageResult`) through the one conversion
to COCO records, `coco_dataset` and `coco_detections`: `tphyolo val --protocol coco` and `tphyolo eval
--protocol coco` on VisDrone txt files both go through it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import PurePath

import numpy as np
import torch

from tphyolo.data.formats.coco import coco_box_problem
from tphyolo.errors import InputError
from tphyolo.metrics.protocol import IgnoreRules, ImageResult, ProtocolResult, score_table
from tphyolo.metrics.registry import COCO_JSON, VISDRONE_TXT

BACKENDS = ("faster", "pycocotools")
VISDRONE_MAX_DETS = (1, 10, 100, 500)


@dataclass(frozen=True)
class CocoResult:
    """Percentages: `overall` AP, AP50, AP75 (at the largest maxDets) and AR<N> for each maxDets N;
    `per_class` category name -> the same keys, for categories with ground truth."""

    overall: dict[str, float]
    per_class: dict[str, dict[str, float]]

    def table(self) -> str:
        return score_table(self.overall, self.per_class)


def _mean_valid(x: np.ndarray) -> float:
    valid = x[x > -1]
    return float(valid.mean() * 100) if valid.size else float("nan")


def _summaries(precision: np.ndarray, recall: np.ndarray, iou_thrs: np.ndarray, max_dets: Sequence[int]):
    """precision (T, R, K, A, M), recall (T, K, A, M) -> dict of numbers for area 'all' (index 0)."""
    t50, t75 = int(np.argmin(np.abs(iou_thrs - 0.5))), int(np.argmin(np.abs(iou_thrs - 0.75)))
    out = {
        "AP": _mean_valid(precision[:, :, :, 0, -1]),
        "AP50": _mean_valid(precision[t50, :, :, 0, -1]),
        "AP75": _mean_valid(precision[t75, :, :, 0, -1]),
    }
    for m, n in enumerate(max_dets):
        out[f"AR{n}"] = _mean_valid(recall[:, :, 0, m])
    return out


def _copies(gt: dict, detections: list[dict]) -> tuple[dict, list[dict]]:
    """New record dicts (the COCO tools add keys to them); boxes and other values are shared, not copied."""
    gt = {**gt, **{k: [dict(r) for r in gt.get(k, [])] for k in ("images", "annotations", "categories")}}
    return gt, [dict(d) for d in detections]


def _run(backend: str, gt: dict, detections: list[dict], max_dets: Sequence[int]):
    gt, detections = _copies(gt, detections)
    if backend == "faster":
        from faster_coco_eval import COCO, COCOeval_faster

        coco_gt = COCO(gt)
        coco_dt = coco_gt.loadRes(detections)
        ev = COCOeval_faster(coco_gt, coco_dt, iouType="bbox", print_function=lambda *a, **k: None)
    elif backend == "pycocotools":
        from pycocotools.coco import COCO
        from pycocotools.cocoeval import COCOeval

        with redirect_stdout(io.StringIO()):
            coco_gt = COCO()
            coco_gt.dataset = gt
            coco_gt.createIndex()
            coco_dt = coco_gt.loadRes(detections)
            ev = COCOeval(coco_gt, coco_dt, iouType="bbox")
    else:
        raise InputError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    ev.params.maxDets = sorted(max_dets)
    with redirect_stdout(io.StringIO()):
        ev.evaluate()
        ev.accumulate()
    return ev.eval["precision"], ev.eval["recall"], np.asarray(ev.params.iouThrs), list(ev.params.catIds)


RESULT_KEYS = ("image_id", "category_id", "bbox", "score")


def check_coco_results(detections: object, source: str, *, gt: dict) -> None:
    """Raises ValueError naming `source` and the entry for the first malformed COCO result record: not a
    mapping, a key of RESULT_KEYS missing, an `image_id` (int or str) or `category_id` (int) of another type
    or that `gt` does not have (ids match by value and type: 1 is not "1"), a bbox that is not 4 finite
    numbers with width and height >= 0, a score that is not a finite number."""
    if not isinstance(detections, list):
        raise InputError(f"{source}: COCO results must be a list of detections, got {type(detections).__name__}")
    image_ids = {(type(im["id"]), im["id"]) for im in gt.get("images", [])}
    category_ids = {(type(c["id"]), c["id"]) for c in gt.get("categories", [])}
    for i, d in enumerate(detections):
        where = f"{source}: detection {i}"
        if not isinstance(d, dict):
            raise InputError(f"{where}: must be a mapping with {list(RESULT_KEYS)}, got {d!r:.60}")
        missing = [k for k in RESULT_KEYS if k not in d]
        if missing:
            raise InputError(f"{where}: lacks {missing}")
        for key, kinds in (("image_id", (int, str)), ("category_id", (int,))):
            if type(d[key]) not in kinds:
                expected = " or ".join(k.__name__ for k in kinds)
                raise InputError(f"{where}: '{key}' must be {expected}, got {d[key]!r:.40}")
        if (type(d["image_id"]), d["image_id"]) not in image_ids:
            raise InputError(f"{where}: image_id {d['image_id']!r:.40} is not an image of the dataset")
        if (type(d["category_id"]), d["category_id"]) not in category_ids:
            raise InputError(f"{where}: category_id {d['category_id']!r:.40} is not a category of the dataset")
        problem = coco_box_problem(d["bbox"])
        if problem:
            raise InputError(f"{where}: {problem}")
        if type(d["score"]) not in (int, float) or not np.isfinite(d["score"]):
            raise InputError(f"{where}: score must be a finite number, got {d['score']!r:.40}")


def evaluate_coco(
    gt: dict, detections: list[dict], *, max_dets: Sequence[int] = VISDRONE_MAX_DETS, backend: str = "faster"
) -> CocoResult:
    """Score `detections` against `gt` with the COCO protocol (IoU 0.50:0.05:0.95, 101 recall points, area
    range "all"), keeping at most N detections per image and category for each N in `max_dets`."""
    max_dets = sorted(int(n) for n in max_dets)
    names = {c["id"]: c.get("name", str(c["id"])) for c in gt.get("categories", [])}
    if not detections:
        zeros = {"AP": 0.0, "AP50": 0.0, "AP75": 0.0} | {f"AR{n}": 0.0 for n in max_dets}
        with_gt = {a["category_id"] for a in gt.get("annotations", []) if not a.get("iscrowd", 0)}
        return CocoResult(dict(zeros), {names[c]: dict(zeros) for c in sorted(with_gt)})
    precision, recall, iou_thrs, cat_ids = _run(backend, gt, detections, max_dets)
    overall = _summaries(precision, recall, iou_thrs, max_dets)
    per_class = {}
    for k, cat in enumerate(cat_ids):
        values = _summaries(precision[:, :, k : k + 1], recall[:, k : k + 1], iou_thrs, max_dets)
        if not np.isnan(values[f"AR{max_dets[-1]}"]):  # the category has ground truth
            per_class[names.get(cat, str(cat))] = values
    return CocoResult(overall, per_class)


def _xywh(image: ImageResult, which: str) -> list[list[float]]:
    """[left, top, width, height] lists of an image's "boxes", "ignore" or "detections", computed in float64."""
    return image.boxes_as("xywh", which, torch.float64).tolist()


def coco_image_ids(names: Sequence[str]) -> list[int]:
    """The COCO image ids of images named `names` (file stems), in order: the names' numbers when every name is
    all digits and no two numbers are equal (COCO's own naming: 000000000139 -> 139), otherwise 1, 2, ... in
    order. Ground truth (`coco_dataset`, `tphyolo eval --save-gt`) and predictions (`predictions.json` of
    `tphyolo predict` and `tphyolo val`) are numbered by this one rule, so images listed in the same order
    (a folder's files sorted by name) get the same ids."""
    if names and all(n.isascii() and n.isdigit() for n in names) and len({int(n) for n in names}) == len(names):
        return [int(n) for n in names]
    return list(range(1, len(names) + 1))


def _image_ids(images: Sequence[ImageResult]) -> list[int]:
    return coco_image_ids([PurePath(image.path).stem for image in images])


def coco_dataset(images: Sequence[ImageResult], names: Sequence[str]) -> dict:
    """The COCO dataset of `images`' ground truth: image ids by `coco_image_ids` of the images' stems (1, 2,
    ... in order unless every stem is a distinct number), category ids the class ids.

    Objects become annotations (`iscrowd` 1 for crowd objects, of their own class); each ignore region
    becomes one crowd annotation per class (it ignores every class). Objects of classes outside `names` are
    left out."""
    out_images, annotations = [], []

    def add(image_id: int, category: int, bbox: list[float], crowd: int) -> None:
        annotations.append(
            {"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "bbox": bbox,
             "area": bbox[2] * bbox[3], "iscrowd": crowd}
        )  # fmt: skip

    nc = len(names)
    for image_id, image in zip(_image_ids(images), images, strict=True):
        entry = {"id": image_id, "file_name": image.path}
        if image.shape is not None:
            entry |= {"height": image.shape[0], "width": image.shape[1]}
        out_images.append(entry)
        rows = zip(image.classes.tolist(), _xywh(image, "boxes"), image.crowd_mask().tolist(), strict=True)
        for category, bbox, crowd in rows:
            if 0 <= category < nc:
                add(image_id, category, bbox, int(crowd))
        for bbox in _xywh(image, "ignore"):
            for category in range(nc):
                add(image_id, category, bbox, 1)
    categories = [{"id": c, "name": str(name)} for c, name in enumerate(names)]
    return {"images": out_images, "annotations": annotations, "categories": categories}


def coco_detections(images: Sequence[ImageResult], names: Sequence[str]) -> list[dict]:
    """COCO result records of `images`' detections (ids as in `coco_dataset`), unrounded; detections of
    classes outside `names` are left out."""
    records = []
    for image_id, image in zip(_image_ids(images), images, strict=True):
        scores, classes = image.detections[:, 4].double().tolist(), image.detections[:, 5].tolist()
        for bbox, score, category in zip(_xywh(image, "detections"), scores, classes, strict=True):
            if 0 <= category < len(names):
                records.append({"image_id": image_id, "category_id": int(category), "bbox": bbox, "score": score})
    return records


class CocoProtocol:
    """pycocotools' rules (see the module docstring) with maxDets 1, 10, 100 and the run's `max_det`."""

    name = "coco"
    needs_image_size = False
    saved_formats = (VISDRONE_TXT, COCO_JSON)
    yolo_metrics = False
    ignore_rules = IgnoreRules(crowd=True, on_region=True)  # iscrowd: IoU over the detection's area

    def score(self, images: Sequence[ImageResult], *, names: Sequence[str], max_det: int) -> ProtocolResult:
        result = evaluate_coco(
            coco_dataset(images, names), coco_detections(images, names), max_dets=sorted({1, 10, 100, max_det})
        )
        ap50, ap = result.overall["AP50"] / 100.0, result.overall["AP"] / 100.0
        return ProtocolResult(self.name, ap50, ap, result.overall, result.per_class, result.table())
