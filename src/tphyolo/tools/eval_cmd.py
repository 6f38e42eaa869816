"""`tphyolo eval`: score saved detections against ground truth with the VisDrone or COCO challenge protocol.

VisDrone inputs are folders of txt files with one object per line, `left,top,width,height,score,category,
truncation,occlusion` (pixels); a prediction file has the stem of its annotation file. COCO inputs are a
dataset json and a results json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from tphyolo.data.formats.visdrone import NUM_CLASSES as N_CLASSES  # categories 1..N_CLASSES are scored

HELP = "score saved detections against ground truth (VisDrone or COCO protocol)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--gt", type=Path, required=True, help="folder of VisDrone annotation txt, or COCO json")
    parser.add_argument("--pred", type=Path, required=True, help="folder of VisDrone result txt, or COCO results json")
    parser.add_argument("--protocol", choices=("visdrone", "coco"), default="visdrone")
    parser.add_argument("--images", type=Path, help="image folder for sizes (default: images/ beside --gt)")
    parser.add_argument("--json", type=Path, help="write the numbers (percent) to this json file")


def read_visdrone_rows(path: Path) -> np.ndarray:
    """(n, 8) float rows of a VisDrone txt file (missing truncation/occlusion read as 0)."""
    rows = []
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        fields = [f for f in line.strip().split(",") if f.strip()]
        if not fields:
            continue
        try:
            values = [float(f) for f in fields]
        except ValueError:
            raise ValueError(f"{path}:{lineno}: not a number in {line.strip()!r}") from None
        if not 6 <= len(values) <= 8:
            raise ValueError(f"{path}:{lineno}: expected 6 to 8 comma-separated numbers, got {len(values)}")
        if values[2] < 0 or values[3] < 0:
            raise ValueError(f"{path}:{lineno}: negative width or height in {line.strip()!r}")
        rows.append(values + [0.0] * (8 - len(values)))
    return np.array(rows, dtype=np.float64).reshape(-1, 8)


def image_size(images_dir: Path, stem: str) -> tuple[int, int]:
    """(height, width) of `images_dir/stem.*`, read from the file header."""
    from PIL import Image

    from tphyolo.data.image_io import IMAGE_SUFFIXES

    for suffix in IMAGE_SUFFIXES:
        path = images_dir / f"{stem}{suffix}"
        if path.exists():
            with Image.open(path) as im:  # lazy: decodes the header only
                width, height = im.size
            return height, width
    raise FileNotFoundError(f"no image {stem}.* in {images_dir} (needed for its ignored regions)")


def load_visdrone_pairs(gt_dir: Path, pred_dir: Path) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(stem, gt rows, prediction rows) for every annotation file, sorted by name."""
    if not gt_dir.is_dir():
        raise NotADirectoryError(f"--gt {gt_dir} is not a folder of VisDrone annotation txt files")
    if not pred_dir.is_dir():
        raise NotADirectoryError(f"--pred {pred_dir} is not a folder of VisDrone result txt files")
    gt_files = sorted(gt_dir.glob("*.txt"))
    if not gt_files:
        raise FileNotFoundError(f"no annotation txt files in {gt_dir}")
    pairs = []
    for gt_path in gt_files:
        pred_path = pred_dir / gt_path.name
        if not pred_path.is_file():
            raise FileNotFoundError(f"no prediction file {pred_path} for annotation {gt_path}")
        pairs.append((gt_path.stem, read_visdrone_rows(gt_path), read_visdrone_rows(pred_path)))
    return pairs


def visdrone_to_coco(pairs: list[tuple[str, np.ndarray, np.ndarray]]) -> tuple[dict, list[dict]]:
    """COCO dataset and results from VisDrone rows. Objects of categories 1..10 with score 1 are objects;
    ignored regions (category 0) become crowd boxes of every category, score-0 objects crowd boxes of
    their own; category 11 is left out."""
    from tphyolo.metrics.visdrone import NAMES

    images, annotations, results = [], [], []

    def crowd_or_object(image_id, box, category, crowd):
        annotations.append(
            {"id": len(annotations) + 1, "image_id": image_id, "category_id": category, "bbox": box,
             "area": box[2] * box[3], "iscrowd": crowd}
        )  # fmt: skip

    for image_id, (stem, gt, pred) in enumerate(pairs, start=1):
        images.append({"id": image_id, "file_name": stem})
        for row in gt:
            box, category = [float(v) for v in row[:4]], int(row[5])
            if category == 0:
                for c in range(1, N_CLASSES + 1):
                    crowd_or_object(image_id, box, c, 1)
            elif 1 <= category <= N_CLASSES:
                crowd_or_object(image_id, box, category, int(row[4] == 0))
        for row in pred:
            if 1 <= int(row[5]) <= N_CLASSES:
                results.append(
                    {"image_id": image_id, "category_id": int(row[5]), "bbox": [float(v) for v in row[:4]],
                     "score": float(row[4])}
                )  # fmt: skip
    categories = [{"id": c, "name": NAMES[c - 1]} for c in range(1, N_CLASSES + 1)]
    return {"images": images, "annotations": annotations, "categories": categories}, results


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({what}): {error}") from None


def _evaluate_visdrone(args: argparse.Namespace):
    from tphyolo.metrics.visdrone import ImageAnnotations, evaluate_visdrone

    if args.gt.suffix == ".json":
        raise ValueError(f"--protocol visdrone needs a folder of VisDrone annotation txt files, got {args.gt}")
    images_dir = args.images or args.gt.parent / "images"
    images = []
    for stem, gt, pred in load_visdrone_pairs(args.gt, args.pred):
        height = width = 0
        if (gt[:, 5] == 0).any():  # the image size matters only for ignored regions
            height, width = image_size(images_dir, stem)
        images.append(ImageAnnotations(gt, pred, height, width))
    return evaluate_visdrone(images)


def _evaluate_coco(args: argparse.Namespace):
    from tphyolo.metrics.coco import evaluate_coco

    if args.gt.suffix == ".json":
        gt = _read_json(args.gt, "COCO dataset")
        detections = _read_json(args.pred, "COCO results")
        if not isinstance(gt, dict) or "annotations" not in gt or "images" not in gt:
            raise ValueError(f"{args.gt}: a COCO dataset needs 'images' and 'annotations'")
        if not isinstance(detections, list):
            raise ValueError(f"{args.pred}: COCO results must be a list of detections")
    else:
        gt, detections = visdrone_to_coco(load_visdrone_pairs(args.gt, args.pred))
    return evaluate_coco(gt, detections)


def run(args: argparse.Namespace) -> int:
    result = _evaluate_visdrone(args) if args.protocol == "visdrone" else _evaluate_coco(args)
    print(result.table())
    if args.json is not None:
        payload = dict(result.overall) | {"per_class": result.per_class}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
    return 0
