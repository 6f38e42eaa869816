"""COCO detection json: `images` (id, file_name, width, height), `annotations` (image_id, category_id,
bbox = [left, top, width, height] pixels, iscrowd), `categories` (id, name).

Category ids map to class ids in ascending id order; `iscrowd: 1` boxes become ignore regions.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.data.labels import ImageLabels, LabelError
from tphyolo.ops.boxes import xywh_to_xyxy


@dataclass(frozen=True)
class CocoImage:
    """One image entry of a COCO file: labels in pixel xyxy and the size the json declares."""

    file_name: str
    width: int
    height: int
    labels: ImageLabels


def load_coco(path: Path) -> tuple[list[str], dict[str, CocoImage]]:
    """Class names (by ascending category id) and the images keyed by `file_name` (as written in the json)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        categories = sorted(data["categories"], key=lambda c: c["id"])
        images = data["images"]
        annotations = data.get("annotations", [])
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise LabelError(f"{path}: not a COCO detection file ({error})") from None
    class_of = {c["id"]: i for i, c in enumerate(categories)}
    names = [str(c.get("name", c["id"])) for c in categories]
    per_image: dict[int, tuple[list, list, list]] = {im["id"]: ([], [], []) for im in images}
    for a in annotations:
        where = f"{path}: annotation {a.get('id', '?')}"
        if a.get("image_id") not in per_image:
            raise LabelError(f"{where}: unknown image_id {a.get('image_id')!r}")
        bbox = a.get("bbox")
        if not isinstance(bbox, list) or len(bbox) != 4 or not all(math.isfinite(float(v)) for v in bbox):
            raise LabelError(f"{where}: bad bbox {bbox!r}")
        if bbox[2] < 0 or bbox[3] < 0:
            raise LabelError(f"{where}: negative box size {bbox[2]:g}x{bbox[3]:g}")
        classes, boxes, ignore = per_image[a["image_id"]]
        if a.get("iscrowd", 0):
            ignore.append(bbox)
            continue
        if a.get("category_id") not in class_of:
            raise LabelError(f"{where}: unknown category_id {a.get('category_id')!r}")
        classes.append(class_of[a["category_id"]])
        boxes.append(bbox)
    result = {}
    for im in images:
        classes, boxes, ignore = per_image[im["id"]]
        labels = ImageLabels(classes, xywh_to_xyxy(np.array(boxes)), xywh_to_xyxy(np.array(ignore)))
        result[im["file_name"]] = CocoImage(im["file_name"], int(im["width"]), int(im["height"]), labels)
    return names, result


def coco_dict(images: list[CocoImage], names: list[str]) -> dict:
    """A COCO detection dict (category ids 1..nc, image ids 1..N, ignore regions as iscrowd boxes)."""
    out_images, annotations = [], []
    for image_id, im in enumerate(images, start=1):
        out_images.append({"id": image_id, "file_name": im.file_name, "width": im.width, "height": im.height})
        rows = [(int(c) + 1, b, 0) for c, b in zip(im.labels.classes, im.labels.boxes, strict=True)]
        rows += [(1, b, 1) for b in im.labels.ignore]
        for category_id, (x1, y1, x2, y2), crowd in rows:
            w, h = float(x2 - x1), float(y2 - y1)
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category_id,
                    "bbox": [float(x1), float(y1), w, h],
                    "area": w * h,
                    "iscrowd": crowd,
                }
            )
    categories = [{"id": i + 1, "name": n} for i, n in enumerate(names)]
    return {"images": out_images, "annotations": annotations, "categories": categories}
