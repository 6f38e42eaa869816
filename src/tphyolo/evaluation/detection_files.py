"""Scoring saved detections: VisDrone txt folders and COCO json files read into what the protocols score.

VisDrone inputs are folders of txt files with one object per line, `left,top,width,height,score,category,
truncation,occlusion` (pixels); a prediction file has the stem of its annotation file. Their categories are
read through the data set's category table (`tphyolo.data.categories.CategoryTable`: class = the table's
class of the category; 0 stays an ignored region; a category the table lacks is scored as no class, as
VisDrone's "others"), and they are read into per-image results (`tphyolo.metrics.visdrone.image_result`),
which any protocol of `tphyolo.metrics.registry.PROTOCOLS` scores as `tphyolo val` scores its detections. COCO
inputs (a dataset json and a results json) are scored as they are by the COCO protocol.

`save_coco_gt` writes the COCO dataset json the COCO protocol builds from a VisDrone annotation folder
(`tphyolo.metrics.coco.coco_dataset`: image ids by `coco_image_ids` of the sorted annotation stems, category
id = the class index of the table's category, ignored regions as crowd boxes of every class), so that the
`predictions.json` of `tphyolo predict --save-json` on the matching image folder can be scored by any COCO tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.data.categories import NONE, VISDRONE, CategoryTable
from tphyolo.data.files.image_io import IMAGE_SUFFIXES, read_image_size
from tphyolo.data.files.json_files import load_json_file
from tphyolo.data.formats.coco import check_coco_dataset
from tphyolo.data.formats.visdrone import read_visdrone_rows as read_rows
from tphyolo.errors import InputError
from tphyolo.metrics.coco import check_coco_results, coco_dataset, evaluate_coco
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.visdrone import NUM_CLASSES, image_result


def read_visdrone_rows(path: Path, table: CategoryTable = VISDRONE) -> np.ndarray:
    """(n, 8) float rows of a VisDrone txt file, read as training reads labels (`tphyolo.data.formats.visdrone.
    read_visdrone_rows`: a byte-order mark dropped; ValueError naming the file and line of an unusable line, a
    category outside 0..max(11, the table's largest + 1), or text that is not UTF-8), the category column
    renumbered for the protocols (`protocol_categories`)."""
    rows = read_rows(path, num_classes=max((NUM_CLASSES, *table.ids)))
    rows[:, 5] = protocol_categories(rows[:, 5], table)
    return rows


def protocol_categories(categories: np.ndarray, table: CategoryTable) -> np.ndarray:
    """The protocols' numbers (class index + 1; 0 an ignored region) of the categories `categories` of files
    numbered by `table`; a category the table lacks becomes one above every class (VisDrone's "others": an
    object never scored, a detection of no class)."""
    classes = table.classes(categories)
    others = max(NUM_CLASSES, len(table.names)) + 1
    return np.where(categories == 0, 0, np.where(classes == NONE, others, classes + 1)).astype(np.float64)


def image_file(images_dir: Path, stem: str) -> Path | None:
    """The image `images_dir/stem.*` of a known image suffix, or None."""
    return next((p for suffix in IMAGE_SUFFIXES if (p := images_dir / f"{stem}{suffix}").exists()), None)


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) of the image `path` as displayed, from its header, by the one image reader and its pixel
    limit (ImageError naming the file for an image that declares too many pixels)."""
    return read_image_size(path)


def required_image(images_dir: Path, stem: str) -> Path:
    """`image_file(images_dir, stem)`, or FileNotFoundError naming what is missing and why it is needed."""
    path = image_file(images_dir, stem)
    if path is None:
        raise FileNotFoundError(f"no image {stem}.* in {images_dir} (needed for its ignored regions)")
    return path


def annotation_files(gt_dir: Path) -> list[Path]:
    """The VisDrone annotation txt files of `gt_dir`, sorted by name; raises naming the folder when it is not
    one or holds none."""
    if not gt_dir.is_dir():
        raise NotADirectoryError(f"--gt {gt_dir} is not a folder of VisDrone annotation txt files")
    gt_files = sorted(gt_dir.glob("*.txt"))
    if not gt_files:
        raise FileNotFoundError(f"no annotation txt files in {gt_dir}")
    return gt_files


def load_visdrone_pairs(
    gt_dir: Path, pred_dir: Path, *, indices: Sequence[int] | None = None, table: CategoryTable = VISDRONE
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(stem, gt rows, prediction rows) for every annotation file, sorted by name (only those at `indices` of
    that order, when given: a rank's share), categories read through `table` (`read_visdrone_rows`)."""
    gt_files = annotation_files(gt_dir)
    if not pred_dir.is_dir():
        raise NotADirectoryError(f"--pred {pred_dir} is not a folder of VisDrone result txt files")
    pairs = []
    for gt_path in gt_files if indices is None else [gt_files[i] for i in indices]:
        pred_path = pred_dir / gt_path.name
        if not pred_path.is_file():
            raise FileNotFoundError(f"no prediction file {pred_path} for annotation {gt_path}")
        pairs.append((gt_path.stem, read_visdrone_rows(gt_path, table), read_visdrone_rows(pred_path, table)))
    return pairs


def read_json(path: Path, what: str):
    """The JSON document of `path`, through the one bounded JSON reader (ValueError naming the file)."""
    return load_json_file(path, what=what)


def visdrone_image_results(
    gt_dir: Path,
    pred_dir: Path,
    *,
    images_dir: Path,
    needs_image_size: bool,
    with_images: bool = False,
    indices: Sequence[int] | None = None,
    table: CategoryTable = VISDRONE,
) -> list[ImageResult]:
    """The per-image results of VisDrone annotation and result folders, sorted by name (`indices`: only those,
    as `load_visdrone_pairs`). An image's size is read (from `images_dir`) when `needs_image_size` and it has
    ignored regions, or for every image found with `with_images` (whose path then names the image, for
    drawing; otherwise the annotation stem). Categories are read through `table`."""
    images = []
    for stem, gt, pred in load_visdrone_pairs(gt_dir, pred_dir, indices=indices, table=table):
        shape, path = None, stem
        if with_images and (found := image_file(images_dir, stem)) is not None:
            shape, path = image_size(found), str(found.resolve())
        elif needs_image_size and (gt[:, 5] == 0).any():
            shape = image_size(required_image(images_dir, stem))  # the size matters only for ignored regions
        images.append(image_result(path, gt, pred, shape=shape))
    return images


def score_coco_files(gt_path: Path, pred_path: Path):
    """The COCO protocol's result (`tphyolo.metrics.coco.CocoResult`) of a COCO results json against a COCO
    dataset json, both checked first (ValueError naming the file)."""
    gt = read_json(gt_path, "COCO dataset")
    detections = read_json(pred_path, "COCO results")
    if not isinstance(gt, dict) or "annotations" not in gt or "images" not in gt:
        raise InputError(f"{gt_path}: a COCO dataset needs 'images' and 'annotations'")
    check_coco_dataset(gt, gt_path, image_files=False)  # scoring needs ids, boxes and categories only
    check_coco_results(detections, str(pred_path), gt=gt)
    return evaluate_coco(gt, detections)


def save_coco_gt(gt_dir: Path, images_dir: Path, out: Path, table: CategoryTable = VISDRONE) -> dict:
    """Write the COCO dataset of the VisDrone annotation folder `gt_dir` (see the module docstring), numbered
    by `table`, to `out` and return it; images found in `images_dir` give their file names and sizes, others
    are named by their annotation stem."""
    images = []
    for gt_path in annotation_files(gt_dir):
        image = image_file(images_dir, gt_path.stem)
        shape = None if image is None else image_size(image)
        name = gt_path.stem if image is None else image.name
        images.append(image_result(name, read_visdrone_rows(gt_path, table), np.zeros((0, 8)), shape=shape))
    dataset = coco_dataset(images, table.names)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dataset), encoding="utf-8")
    return dataset
