"""COCO detection json: `images` (id, file_name, width, height), `annotations` (image_id, category_id,
bbox = [left, top, width, height] pixels, iscrowd), `categories` (id, name).

Category ids map to class ids in ascending id order; `iscrowd: 1` boxes become ignore regions.

A split is a COCO file given as the split source (images under the json's `images/` folder, or beside it), or
an `images/` folder with `../annotations.json` or a single `../annotations/*.json` (`file_name`s relative to
`images/`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.data.files.json_files import load_json_file
from tphyolo.data.formats.base import LabeledImage, LabelEntry, LabelFormat, one_images_folder
from tphyolo.data.labels import ImageLabels, LabelError
from tphyolo.ops.boxes import xywh_to_xyxy


@dataclass(frozen=True)
class CocoImage:
    """One image entry of a COCO file: labels in pixel xyxy and the size the json declares."""

    file_name: str
    width: int
    height: int
    labels: ImageLabels


def _number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _is_id(value: object) -> bool:
    """An image id: an int or a string (json's true and false are not ids, nor are lists)."""
    return type(value) in (int, str)


def coco_box_problem(bbox: object) -> str | None:
    """What is wrong with a COCO `bbox` (4 finite numbers left, top, width >= 0, height >= 0), or None."""
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_number(v) for v in bbox):
        return f"bbox must be 4 finite numbers [left, top, width, height], got {bbox!r:.80}"
    if bbox[2] < 0 or bbox[3] < 0:
        return f"negative box size {bbox[2]:g}x{bbox[3]:g}"
    return None


def _entries(data: dict, key: str, path: Path, *, required: bool = True) -> list[dict]:
    if key not in data and not required:
        return []
    entries = data.get(key)
    if not isinstance(entries, list):
        raise LabelError(f"{path}: '{key}' must be a list, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise LabelError(f"{path}: {key}[{i}] must be a mapping, got {entry!r:.60}")
    return entries


def _check_flag(record: dict, key: str, where: str) -> None:
    """`record[key]`, when present, must be 0 or 1 (json true/false too): a string such as "0" is truthy and
    would turn every box into a crowd region."""
    if key in record and (type(record[key]) not in (int, bool) or record[key] not in (0, 1)):
        raise LabelError(f"{where}: '{key}' must be 0 or 1, got {record[key]!r:.40}")


def _check_annotation(a: dict, where: str, image_ids: set, category_ids: set, annotation_ids: set) -> None:
    if "id" in a:
        if not _is_id(a["id"]) or a["id"] in annotation_ids:
            raise LabelError(f"{where}: 'id' must be a unique int or string, got {a['id']!r:.40}")
        annotation_ids.add(a["id"])
    if not _is_id(a.get("image_id")):
        raise LabelError(f"{where}: 'image_id' must be an int or a string, got {a.get('image_id')!r:.40}")
    if a["image_id"] not in image_ids:
        raise LabelError(f"{where}: unknown image_id {a['image_id']!r:.40}")
    if (problem := coco_box_problem(a.get("bbox"))) is not None:
        raise LabelError(f"{where}: {problem}")
    for key in ("iscrowd", "ignore"):
        _check_flag(a, key, where)
    if "area" in a and (not _number(a["area"]) or a["area"] < 0):
        raise LabelError(f"{where}: 'area' must be a finite number >= 0, got {a['area']!r:.40}")
    crowd = a.get("iscrowd", 0)
    if ("category_id" in a or not crowd) and type(a.get("category_id")) is not int:
        raise LabelError(f"{where}: 'category_id' must be an int, got {a.get('category_id')!r:.40}")
    if not crowd and a["category_id"] not in category_ids:  # a crowd region may ignore every category
        raise LabelError(f"{where}: unknown category_id {a['category_id']!r:.40}")


def check_coco_dataset(data: object, path: Path, *, image_files: bool = True) -> None:
    """Raises LabelError naming `path`, the record (`images[3]`, `annotations[12]`) and the field for the first
    malformed part of COCO dataset `data`; every field the package reads is type-checked:
    images (unique int or str `id`; with `image_files`, a unique relative `file_name` that stays inside the
    images folder and whole-number `width` and `height` >= 1), categories (unique int `id`, a str `name` when
    given), annotations (a unique int or str `id` when given, a known int or str `image_id`, a `bbox` as
    `coco_box_problem` wants it, `iscrowd` and `ignore` 0 or 1 when given, a finite `area` >= 0 when given, a
    known int `category_id`; a crowd region's may be unknown or left out)."""
    if not isinstance(data, dict):
        raise LabelError(f"{path}: a COCO dataset is a mapping with 'images', 'annotations', 'categories'")
    image_ids, file_names, category_ids, annotation_ids = set(), {}, set(), set()
    for i, im in enumerate(_entries(data, "images", path)):
        where = f"{path}: images[{i}]"
        if not _is_id(im.get("id")) or im["id"] in image_ids:
            raise LabelError(f"{where}: 'id' must be a unique int or string, got {im.get('id')!r:.60}")
        image_ids.add(im["id"])
        if not image_files:
            continue
        name = im.get("file_name")
        if not isinstance(name, str) or not name or Path(name).is_absolute() or ".." in Path(name).parts:
            raise LabelError(f"{where}: 'file_name' must be a path inside the images folder, got {name!r:.80}")
        if name in file_names:
            raise LabelError(f"{where}: file_name {name!r} repeats images[{file_names[name]}]")
        file_names[name] = i
        for key in ("width", "height"):
            if type(im.get(key)) is not int or im[key] < 1:
                raise LabelError(f"{where} ({name}): '{key}' must be a whole number >= 1, got {im.get(key)!r:.40}")
    for i, c in enumerate(_entries(data, "categories", path)):
        if type(c.get("id")) is not int or c["id"] in category_ids:
            raise LabelError(f"{path}: categories[{i}]: 'id' must be a unique int, got {c.get('id')!r:.40}")
        if "name" in c and not isinstance(c["name"], str):
            raise LabelError(f"{path}: categories[{i}]: 'name' must be a string, got {c['name']!r:.40}")
        category_ids.add(c["id"])
    for i, a in enumerate(_entries(data, "annotations", path, required=False)):
        _check_annotation(a, f"{path}: annotations[{i}]", image_ids, category_ids, annotation_ids)


def load_coco(path: Path) -> tuple[list[str], dict[str, CocoImage]]:
    """Class names (by ascending category id) and the images keyed by `file_name` (as written in the json).
    Raises LabelError naming the file (and the entry) when it is not a valid COCO detection file."""
    try:
        data = load_json_file(path, what="COCO dataset")
    except ValueError as error:
        raise LabelError(str(error)) from None
    check_coco_dataset(data, path)
    categories = sorted(data["categories"], key=lambda c: c["id"])
    images = data["images"]
    class_of = {c["id"]: i for i, c in enumerate(categories)}
    names = [str(c.get("name", c["id"])) for c in categories]
    per_image: dict[int | str, tuple[list, list, list]] = {im["id"]: ([], [], []) for im in images}
    for a in data.get("annotations", []):
        classes, boxes, ignore = per_image[a["image_id"]]
        if a.get("iscrowd", 0):
            ignore.append(a["bbox"])
            continue
        classes.append(class_of[a["category_id"]])
        boxes.append(a["bbox"])
    result = {}
    for im in images:
        classes, boxes, ignore = per_image[im["id"]]
        labels = ImageLabels(classes, xywh_to_xyxy(np.array(boxes)), xywh_to_xyxy(np.array(ignore)))
        result[im["file_name"]] = CocoImage(im["file_name"], im["width"], im["height"], labels)
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


def _coco_beside(folder: Path) -> Path | None:
    """The COCO file of an image folder: `../annotations.json`, or the only .json in `../annotations/` when
    that folder holds no VisDrone .txt files."""
    single = folder.parent / "annotations.json"
    if single.is_file():
        return single
    annotations = folder.parent / "annotations"
    if annotations.is_dir() and not any(annotations.glob("*.txt")):
        found = sorted(p for p in annotations.glob("*.json") if not p.name.endswith(".cache.json"))
        if len(found) == 1:
            return found[0]
    return None


class CocoFormat(LabelFormat):
    """One json per split; its images are the split. Entries carry the `CocoImage` read from the json."""

    name = "coco"

    def split_entries(self, source: Path) -> list[LabelEntry] | None:
        if source.suffix.lower() == ".json" and source.is_file():
            path = source
            base = source.parent / "images" if (source.parent / "images").is_dir() else source.parent
        elif source.is_dir() and source.name == "images" and (beside := _coco_beside(source)) is not None:
            path, base = beside, source
        else:
            return None
        _, images = load_coco(path)
        return [LabelEntry(base / name, self.name, path, data=im) for name, im in sorted(images.items())]

    def read(self, entry: LabelEntry, *, width: int, height: int, num_classes: int,
             categories: tuple[int, ...] = ()) -> tuple[ImageLabels, list[str]]:  # fmt: skip
        im: CocoImage = entry.data
        notes = []
        if (im.height, im.width) != (height, width):
            notes.append(f"{entry.image}: json says {im.width}x{im.height}, image is {width}x{height}")
        return im.labels, notes

    def cache_file(self, entry: LabelEntry) -> Path:
        return entry.label.with_name(f"{entry.label.stem}.cache.json")

    def write(self, images: Sequence[LabeledImage], *, names: Sequence[str]) -> list[Path]:
        """`annotations.json` beside the `images/` folder that holds every image (`file_name`s relative to it)."""
        folder = one_images_folder(images, "COCO labels")
        entries = [CocoImage(im.image.relative_to(folder).as_posix(), im.width, im.height, im.labels) for im in images]
        path = folder.parent / "annotations.json"
        path.write_text(json.dumps(coco_dict(entries, list(names))), encoding="utf-8")
        return [path]
