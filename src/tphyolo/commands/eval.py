"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry.

VisDrone inputs are folders of txt files with one object per line, `left,top,width,height,score,category,
truncation,occlusion` (pixels); a prediction file has the stem of its annotation file. They are read into
per-image results (`tphyolo.metrics.visdrone.image_result`) and scored by any protocol of
`tphyolo.metrics.registry.PROTOCOLS`, as `tphyolo val` scores its detections. COCO inputs (a dataset json and a
results json) are scored as they are by the COCO protocol.

`--save-gt PATH` writes the COCO dataset json the COCO protocol builds from a VisDrone annotation folder
(`tphyolo.metrics.coco.coco_dataset`: image ids by `coco_image_ids` of the sorted annotation stems, category
id = VisDrone category - 1, ignored regions as crowd boxes of every class), so that the `predictions.json` of
`tphyolo predict --save-json` on the matching image folder can be scored by any COCO tool; without `--pred`
it only writes the file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.metrics.registry import PROTOCOLS

    parser.add_argument("--gt", type=Path, required=True, help="folder of VisDrone annotation txt, or COCO json")
    parser.add_argument(
        "--pred", type=Path, help="folder of VisDrone result txt, or COCO results json (optional with --save-gt)"
    )
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="visdrone", help="scoring rules")
    parser.add_argument("--images", type=Path, help="image folder for sizes (default: images/ beside --gt)")
    parser.add_argument("--json", type=Path, help="write the numbers (percent) to this json file")
    parser.add_argument(
        "--report",
        type=Path,
        metavar="DIR",
        help="write evaluation.json and the html report (report.html) into DIR (VisDrone txt inputs); "
        "'tphyolo report DIR' rebuilds it",
    )
    parser.add_argument(
        "--save-gt", type=Path, metavar="PATH", help="write the COCO dataset json of a VisDrone --gt folder to PATH"
    )


def read_visdrone_rows(path: Path) -> np.ndarray:
    """(n, 8) float rows of a VisDrone txt file (missing truncation/occlusion read as 0). Raises ValueError
    naming the file and line of an unusable line (`read_visdrone_line`: empty fields, NaN/inf, a category that
    is not a whole number, ...)."""
    from tphyolo.data.formats.visdrone import read_visdrone_line

    rows = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        values = read_visdrone_line(line, f"{path}:{lineno}", max_values=8)
        if values is not None:
            rows.append(values + [0.0] * (8 - len(values)))
    return np.array(rows, dtype=np.float64).reshape(-1, 8)


def image_file(images_dir: Path, stem: str) -> Path | None:
    """The image `images_dir/stem.*` of a known image suffix, or None."""
    from tphyolo.data.image_io import IMAGE_SUFFIXES

    return next((p for suffix in IMAGE_SUFFIXES if (p := images_dir / f"{stem}{suffix}").exists()), None)


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) of the image `path`, read from the file header."""
    from PIL import Image

    with Image.open(path) as im:  # lazy: decodes the header only
        width, height = im.size
    return height, width


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
    gt_dir: Path, pred_dir: Path, *, indices: Sequence[int] | None = None
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(stem, gt rows, prediction rows) for every annotation file, sorted by name (only those of `indices` in
    that order, when given)."""
    gt_files = annotation_files(gt_dir)
    if not pred_dir.is_dir():
        raise NotADirectoryError(f"--pred {pred_dir} is not a folder of VisDrone result txt files")
    pairs = []
    for gt_path in gt_files if indices is None else [gt_files[i] for i in indices]:
        pred_path = pred_dir / gt_path.name
        if not pred_path.is_file():
            raise FileNotFoundError(f"no prediction file {pred_path} for annotation {gt_path}")
        pairs.append((gt_path.stem, read_visdrone_rows(gt_path), read_visdrone_rows(pred_path)))
    return pairs


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not valid JSON ({what}): {error}") from None


def _score_visdrone_files(args: argparse.Namespace, dist) -> tuple[dict, dict, str] | None:
    """The protocol's overall numbers, per-class numbers and table for VisDrone txt folders (with `--report`,
    read from the report's one scoring). Under torchrun each rank reads its share of the files and rank 0
    scores them all in file order; the other ranks get None."""
    from tphyolo.evaluation.sharded import Shard, gather_in_order
    from tphyolo.infer.config import MAX_DET
    from tphyolo.metrics.registry import get_protocol
    from tphyolo.metrics.visdrone import NAMES, image_result

    protocol = get_protocol(args.protocol)
    images_dir = args.images or args.gt.parent / "images"
    shard = Shard.of(len(annotation_files(args.gt)), unit=1, ctx=dist)
    images = []
    for stem, gt, pred in load_visdrone_pairs(args.gt, args.pred, indices=shard.indices):
        shape, path = None, stem
        if args.report is not None and (found := image_file(images_dir, stem)) is not None:
            shape, path = image_size(found), str(found.resolve())  # the report draws the image
        elif protocol.needs_image_size and (gt[:, 5] == 0).any():
            shape = image_size(required_image(images_dir, stem))  # the size matters only for ignored regions
        images.append(image_result(path, gt, pred, shape=shape))
    images = gather_in_order(shard, images)
    if images is None:
        return None
    if args.report is not None:
        scored = _write_report(args, images, names=NAMES, max_det=MAX_DET)
        return scored.extra, scored.protocol_per_class, scored.tables[-1]
    scored = protocol.score(images, names=NAMES, max_det=MAX_DET)
    return scored.overall, scored.per_class, scored.table


def _write_report(args: argparse.Namespace, images, *, names, max_det: int):
    """Save the records of `images` and write the report into `args.report`; returns the report's scores (an
    EvalResults: the protocol's numbers in `extra` and `protocol_per_class`, its table last in `tables`)."""
    from tphyolo.report.records import Records
    from tphyolo.report.writer import report_run

    settings = {"gt": str(args.gt), "pred": str(args.pred), "images": str(args.images or args.gt.parent / "images")}
    records = Records(protocol=args.protocol, max_det=max_det, names=tuple(names), settings=settings,
                      images=tuple(images))  # fmt: skip
    data, path = report_run(records, args.report)
    print(f"report in {path}")
    return data.results


def _score_coco_files(args: argparse.Namespace):
    from tphyolo.data.formats.coco import check_coco_dataset
    from tphyolo.metrics.coco import check_coco_results, evaluate_coco

    if args.protocol != "coco":
        raise ValueError(f"--protocol {args.protocol} needs a folder of VisDrone annotation txt files, got {args.gt}")
    if args.report is not None:
        raise ValueError(f"--report needs folders of VisDrone txt files, got {args.gt}")
    gt = _read_json(args.gt, "COCO dataset")
    detections = _read_json(args.pred, "COCO results")
    if not isinstance(gt, dict) or "annotations" not in gt or "images" not in gt:
        raise ValueError(f"{args.gt}: a COCO dataset needs 'images' and 'annotations'")
    check_coco_dataset(gt, args.gt, image_files=False)  # scoring needs ids, boxes and categories only
    check_coco_results(detections, str(args.pred), gt=gt)
    result = evaluate_coco(gt, detections)
    return result.overall, result.per_class, result.table()


def save_coco_gt(gt_dir: Path, images_dir: Path, out: Path) -> dict:
    """Write the COCO dataset of the VisDrone annotation folder `gt_dir` (see the module docstring) to `out`
    and return it; images found in `images_dir` give their file names and sizes, others are named by their
    annotation stem."""
    from tphyolo.metrics.coco import coco_dataset
    from tphyolo.metrics.visdrone import NAMES, image_result

    images = []
    for gt_path in annotation_files(gt_dir):
        image = image_file(images_dir, gt_path.stem)
        shape = None if image is None else image_size(image)
        name = gt_path.stem if image is None else image.name
        images.append(image_result(name, read_visdrone_rows(gt_path), np.zeros((0, 8)), shape=shape))
    dataset = coco_dataset(images, NAMES)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(dataset), encoding="utf-8")
    return dataset


def run(args: argparse.Namespace) -> int:
    import torch

    from tphyolo.runtime.distributed import DistContext, process_group

    dist = DistContext.from_env()  # under torchrun: VisDrone files read by every rank, scored by rank 0
    with process_group(dist, torch.device("cpu")):
        return _run(args, dist)


def _run(args: argparse.Namespace, dist) -> int:
    from tphyolo.errors import UsageError

    if args.save_gt is not None:
        if args.gt.suffix == ".json":
            raise UsageError(f"--save-gt writes the COCO json of a VisDrone annotation folder; --gt {args.gt} is one")
        if dist.is_main:
            dataset = save_coco_gt(args.gt, args.images or args.gt.parent / "images", args.save_gt)
            print(f"COCO ground truth of {len(dataset['images'])} image(s) in {args.save_gt}")
        if args.pred is None:
            return 0
    if args.pred is None:
        raise UsageError("--pred is required (unless --save-gt only writes the ground truth)")
    if args.gt.suffix == ".json":
        scored = _score_coco_files(args) if dist.is_main else None  # one COCO evaluation, on rank 0
    else:
        scored = _score_visdrone_files(args, dist)
    if scored is None:
        return 0
    overall, per_class, table = scored
    print(table)
    if args.json is not None:
        payload = dict(overall) | {"per_class": per_class}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
    return 0
