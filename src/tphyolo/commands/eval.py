"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry, or, with
`--task track`, saved tracks with HOTA, CLEAR and Identity metrics (`tphyolo.metrics.tracking`), or, with
`--task count`, the counts of an analyze run against those of ground-truth tracks (`tphyolo.analyze.scoring`).

The inputs (VisDrone txt folders, COCO json files) are read by `tphyolo.evaluation.detection_files`; this
module parses the flags and prints. `--save-gt PATH` writes the COCO dataset json of a VisDrone annotation
folder (`detection_files.save_coco_gt`); without `--pred` it only writes the file. Tracks are folders of
per-sequence files in the layout of `--format` (`tphyolo.data.mot.sequences`); `--data` names a video data set
whose split's ground truth to use instead of `--gt`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DETECTION_ONLY = ("protocol", "images", "report", "save_gt")  # flags --task track does not take


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.data.mot.sequences import TRACK_FORMATS
    from tphyolo.metrics.registry import PROTOCOLS

    parser.add_argument("--task", choices=("detect", "track", "count"), default="detect", help="what --pred holds")
    parser.add_argument(
        "--gt", type=Path, help="folder of VisDrone annotation txt, COCO json, or GeoJSON (map units); tracks: a folder"
    )
    parser.add_argument(
        "--pred", type=Path, help="folder of VisDrone result txt, COCO results json or GeoJSON (optional: --save-gt)"
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
    tracks = parser.add_argument_group("--task track")
    tracks.add_argument(
        "--format", choices=TRACK_FORMATS, default="visdrone-mot", help="layout and rules of --gt and --pred"
    )
    tracks.add_argument("--data", help="a video data set (e.g. synthetic-mot) whose --split ground truth to use")
    tracks.add_argument("--split", default="val", choices=("train", "val", "test"), help="--data split (default: val)")
    counts = parser.add_argument_group("--task count: --pred an analyze run (counts.json), --gt its true tracks")
    counts.add_argument("--lines", help="the lines and zones yaml the run counted with")
    counts.add_argument("--source", help="the frames, for the camera motion of the true tracks (a moving camera)")
    parser.set_defaults(detection_defaults={name: parser.get_default(name) for name in DETECTION_ONLY})


def _score_visdrone_files(args: argparse.Namespace, dist) -> tuple[dict, dict, str] | None:
    """The protocol's overall numbers, per-class numbers and table for VisDrone txt folders (with `--report`,
    read from the report's one scoring). Under torchrun each rank reads its share of the files and rank 0
    scores them all in file order; the other ranks get None."""
    from tphyolo.evaluation.detection_files import annotation_files, visdrone_image_results
    from tphyolo.evaluation.sharded import Shard, gather_in_order
    from tphyolo.infer.config import MAX_DET
    from tphyolo.metrics.registry import get_protocol
    from tphyolo.metrics.visdrone import NAMES

    protocol = get_protocol(args.protocol)
    images_dir = args.images or args.gt.parent / "images"
    shard = Shard.of(len(annotation_files(args.gt)), unit=1, ctx=dist)
    images = visdrone_image_results(args.gt, args.pred, images_dir=images_dir,
                                    needs_image_size=protocol.needs_image_size,
                                    with_images=args.report is not None,  # the report draws the images
                                    indices=shard.indices)  # fmt: skip
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
    from tphyolo.evaluation.detection_files import score_coco_files

    if args.protocol != "coco":
        raise ValueError(f"--protocol {args.protocol} needs a folder of VisDrone annotation txt files, got {args.gt}")
    if args.report is not None:
        raise ValueError(f"--report needs folders of VisDrone txt files, got {args.gt}")
    result = score_coco_files(args.gt, args.pred)
    return result.overall, result.per_class, result.table()


def _score_geojson_files(args: argparse.Namespace):
    from tphyolo.evaluation.geojson_files import score_geojson_files

    if args.protocol not in ("yolo", "visdrone") or args.report is not None:  # visdrone: the flag's default
        raise ValueError(f"--gt {args.gt}: GeoJSON is scored by box IoU in map units (AP50, AP50-95) only")
    result = score_geojson_files(args.gt, args.pred)
    overall = {"AP50": 100 * result.map50, "AP": 100 * result.map, "P": 100 * result.mp, "R": 100 * result.mr}
    return overall, {}, result.tables[0]


def _run_track(args: argparse.Namespace) -> int:
    """`--task track`: HOTA, CLEAR and Identity per class and combined; `--json` gets them all."""
    from tphyolo.data.files.atomic import write_text_atomic
    from tphyolo.errors import UsageError
    from tphyolo.metrics.tracking import evaluate_tracking

    given = [f"--{name.replace('_', '-')}" for name, default in args.detection_defaults.items()
             if getattr(args, name) != default]  # fmt: skip
    if given:
        raise UsageError(f"{', '.join(given)} score detections; --task track does not take them")
    if args.pred is None or (args.gt is None) == (args.data is None):
        raise UsageError("--task track needs --pred and one of --gt or --data")
    gt, fmt = args.gt, args.format
    if args.data is not None:
        from tphyolo.data.dataset_config import load_data_config
        from tphyolo.data.mot.sequences import tracking_split

        split = tracking_split(load_data_config(args.data), args.split)
        gt, fmt = split.annotations, split.fmt
    result = evaluate_tracking(gt, args.pred, fmt=fmt)
    print(result.table())
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(args.json, json.dumps(result.to_dict(), indent=2))
    return 0


def _run_count(args: argparse.Namespace) -> int:
    """`--task count`: line and zone counts of an analyze run against those of the ground-truth tracks."""
    from tphyolo.analyze.scoring import read_counts, score_counts, true_counts
    from tphyolo.errors import UsageError

    if args.pred is None or args.gt is None or args.lines is None:
        raise UsageError("--task count needs --pred (an analyze run), --gt (true track files) and --lines")
    score = score_counts(true_counts(args.gt, args.lines, source=args.source), read_counts(args.pred))
    print(score.table())
    if args.json is not None:
        args.json.write_text(json.dumps(score.to_dict(), indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    from tphyolo.runtime.distributed import DistContext, process_group

    dist = DistContext.from_env()  # under torchrun: VisDrone files read by every rank, scored by rank 0
    with process_group(dist, torch.device("cpu")):
        return _run(args, dist)


def _run(args: argparse.Namespace, dist) -> int:
    from tphyolo.data.files.atomic import write_text_atomic
    from tphyolo.errors import UsageError

    if args.task == "track":
        return _run_track(args) if dist.is_main else 0
    if args.task == "count":
        return _run_count(args) if dist.is_main else 0
    if args.gt is None:
        raise UsageError("--gt is required")
    if args.save_gt is not None:
        if args.gt.suffix == ".json":
            raise UsageError(f"--save-gt writes the COCO json of a VisDrone annotation folder; --gt {args.gt} is one")
        from tphyolo.evaluation.detection_files import save_coco_gt

        if dist.is_main:
            dataset = save_coco_gt(args.gt, args.images or args.gt.parent / "images", args.save_gt)
            print(f"COCO ground truth of {len(dataset['images'])} image(s) in {args.save_gt}")
        if args.pred is None:
            return 0
    if args.pred is None:
        raise UsageError("--pred is required (unless --save-gt only writes the ground truth)")
    if args.gt.suffix == ".geojson":
        scored = _score_geojson_files(args) if dist.is_main else None
    elif args.gt.suffix == ".json":
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
        write_text_atomic(args.json, json.dumps(payload, indent=2))
    return 0
