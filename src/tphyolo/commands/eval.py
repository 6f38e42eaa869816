"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry.

The inputs (VisDrone txt folders, COCO json files) are read by `tphyolo.evaluation.detection_files`; this
module parses the flags and prints. `--save-gt PATH` writes the COCO dataset json of a VisDrone annotation
folder (`detection_files.save_coco_gt`); without `--pred` it only writes the file.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


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


def _score_visdrone_files(args: argparse.Namespace) -> tuple[dict, dict, str]:
    """The protocol's overall numbers, per-class numbers and table for VisDrone txt folders (with `--report`,
    read from the report's one scoring)."""
    from tphyolo.evaluation.detection_files import visdrone_image_results
    from tphyolo.infer.config import MAX_DET
    from tphyolo.metrics.registry import get_protocol
    from tphyolo.metrics.visdrone import NAMES

    protocol = get_protocol(args.protocol)
    images_dir = args.images or args.gt.parent / "images"
    images = visdrone_image_results(args.gt, args.pred, images_dir=images_dir,
                                    needs_image_size=protocol.needs_image_size,
                                    with_images=args.report is not None)  # the report draws the images
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
    from tphyolo.evaluation.detection_files import score_coco_files

    if args.protocol != "coco":
        raise ValueError(f"--protocol {args.protocol} needs a folder of VisDrone annotation txt files, got {args.gt}")
    if args.report is not None:
        raise ValueError(f"--report needs folders of VisDrone txt files, got {args.gt}")
    result = score_coco_files(args.gt, args.pred)
    return result.overall, result.per_class, result.table()


def run(args: argparse.Namespace) -> int:
    from tphyolo.errors import UsageError

    if args.save_gt is not None:
        if args.gt.suffix == ".json":
            raise UsageError(f"--save-gt writes the COCO json of a VisDrone annotation folder; --gt {args.gt} is one")
        from tphyolo.evaluation.detection_files import save_coco_gt

        dataset = save_coco_gt(args.gt, args.images or args.gt.parent / "images", args.save_gt)
        print(f"COCO ground truth of {len(dataset['images'])} image(s) in {args.save_gt}")
        if args.pred is None:
            return 0
    if args.pred is None:
        raise UsageError("--pred is required (unless --save-gt only writes the ground truth)")
    if args.gt.suffix == ".json":
        overall, per_class, table = _score_coco_files(args)
    else:
        overall, per_class, table = _score_visdrone_files(args)
    print(table)
    if args.json is not None:
        payload = dict(overall) | {"per_class": per_class}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2))
    return 0
