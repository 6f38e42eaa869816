"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry, or, with
`--task track`, saved tracks with HOTA, CLEAR and Identity metrics (`tphyolo.metrics.tracking`), or, with
`--task count`, the counts of an analyze run against those of ground-truth tracks (`tphyolo.analyze.scoring`).

Saved detections (VisDrone txt folders, COCO json files, GeoJSON) are scored by `tphyolo.evaluation.
saved_scores`; this module parses the flags and prints. `--save-gt PATH` writes the COCO dataset json of a
VisDrone annotation folder (`detection_files.save_coco_gt`); without `--pred` it only writes the file.
Tracks are folders of per-sequence files in the layout of `--format` (`tphyolo.data.mot.sequences`); `--data`
names a video data set whose split's ground truth to use instead of `--gt`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.mot.sequences import TRACK_FORMATS
from tphyolo.errors import UsageError
from tphyolo.infer.config import MAX_DET
from tphyolo.metrics.registry import PROTOCOLS

if TYPE_CHECKING:  # imported by `run` (they import torch: `tphyolo eval -h` must not)
    from tphyolo.evaluation.saved_scores import SavedScores
    from tphyolo.runtime.distributed import DistContext

DETECTION_ONLY = ("protocol", "images", "report", "save_gt")  # flags --task track does not take


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--task", choices=("detect", "track", "count"), default="detect", help="what --pred holds")
    parser.add_argument("--gt", type=Path, help="folder of VisDrone annotation txt, COCO json, or GeoJSON (map "
                        "units); tracks: a folder")  # fmt: skip
    parser.add_argument("--pred", type=Path, help="folder of VisDrone result txt, COCO results json or GeoJSON "
                        "(optional: --save-gt)")  # fmt: skip
    parser.add_argument("--protocol", choices=list(PROTOCOLS), default="visdrone", help="scoring rules")
    parser.add_argument("--images", type=Path, help="image folder for sizes (default: images/ beside --gt)")
    parser.add_argument("--json", type=Path, help="write the numbers (percent) to this json file")
    parser.add_argument("--report", type=Path, metavar="DIR", help="write evaluation.json and the html report "
                        "(report.html) into DIR (VisDrone txt inputs); 'tphyolo report DIR' rebuilds it")  # fmt: skip
    parser.add_argument("--save-gt", type=Path, metavar="PATH",
                        help="write the COCO dataset json of a VisDrone --gt folder to PATH")  # fmt: skip
    tracks = parser.add_argument_group("--task track")
    tracks.add_argument("--format", choices=TRACK_FORMATS, default="visdrone-mot",
                        help="layout and rules of --gt and --pred")  # fmt: skip
    tracks.add_argument("--data", help="a video data set (e.g. synthetic-mot) whose --split ground truth to use")
    tracks.add_argument("--split", default="val", choices=("train", "val", "test"), help="--data split (default: val)")
    counts = parser.add_argument_group("--task count: --pred an analyze run (counts.json), --gt its true tracks")
    counts.add_argument("--lines", help="the lines and zones yaml the run counted with")
    counts.add_argument("--source", help="the frames, for the camera motion of the true tracks (a moving camera)")
    parser.set_defaults(detection_defaults={name: parser.get_default(name) for name in DETECTION_ONLY})


def _score_with_report(args: argparse.Namespace, dist: DistContext) -> SavedScores | None:
    """The scores of VisDrone txt folders, read from the report's one scoring after writing the records and the
    report into `args.report` (rank 0; the other ranks read their share of the files and get None)."""
    from tphyolo.evaluation.saved_scores import SavedScores, visdrone_folder_results  # torch: not for -h
    from tphyolo.metrics.visdrone import NAMES
    from tphyolo.report.records import Records
    from tphyolo.report.writer import report_run

    images_dir = args.images or args.gt.parent / "images"
    images = visdrone_folder_results(args.gt, args.pred, protocol=args.protocol, images_dir=images_dir,
                                     with_images=True, dist=dist)  # fmt: skip  # the report draws the images
    if images is None:
        return None
    settings = {"gt": str(args.gt), "pred": str(args.pred), "images": str(images_dir)}
    records = Records(protocol=args.protocol, max_det=MAX_DET, names=tuple(NAMES), settings=settings,
                      images=tuple(images))  # fmt: skip
    data, path = report_run(records, args.report)
    print(f"report in {path}")
    scored = data.results  # the protocol's numbers in `extra` and `protocol_per_class`, its table last
    return SavedScores(scored.extra, scored.protocol_per_class, scored.tables[-1])


def _run_track(args: argparse.Namespace) -> int:
    """`--task track`: HOTA, CLEAR and Identity per class and combined; `--json` gets them all."""
    from tphyolo.evaluation.saved_scores import score_saved_tracks  # torch: not for -h

    given = [f"--{name.replace('_', '-')}" for name, default in args.detection_defaults.items()
             if getattr(args, name) != default]  # fmt: skip
    if given:
        raise UsageError(f"{', '.join(given)} score detections; --task track does not take them")
    if args.pred is None or (args.gt is None) == (args.data is None):
        raise UsageError("--task track needs --pred and one of --gt or --data")
    result = score_saved_tracks(args.pred, gt=args.gt, fmt=args.format, data=args.data, split=args.split)
    print(result.table())
    if args.json is not None:
        _write_json(args.json, result.to_dict())
    return 0


def _run_count(args: argparse.Namespace) -> int:
    """`--task count`: line and zone counts of an analyze run against those of the ground-truth tracks."""
    from tphyolo.analyze.scoring import read_counts, score_counts, true_counts  # torch: not for -h

    if args.pred is None or args.gt is None or args.lines is None:
        raise UsageError("--task count needs --pred (an analyze run), --gt (true track files) and --lines")
    score = score_counts(true_counts(args.gt, args.lines, source=args.source), read_counts(args.pred))
    print(score.table())
    if args.json is not None:
        args.json.write_text(json.dumps(score.to_dict(), indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    import torch  # with the modules below: not for -h

    from tphyolo.runtime.distributed import DistContext, process_group

    dist = DistContext.from_env()  # under torchrun: VisDrone files read by every rank, scored by rank 0
    with process_group(dist, torch.device("cpu")):
        return _run(args, dist)


def _run(args: argparse.Namespace, dist: DistContext) -> int:
    from tphyolo.evaluation.detection_files import save_coco_gt  # torch: not for -h
    from tphyolo.evaluation.saved_scores import score_saved_detections

    if args.task == "track":
        return _run_track(args) if dist.is_main else 0
    if args.task == "count":
        return _run_count(args) if dist.is_main else 0
    if args.gt is None:
        raise UsageError("--gt is required")
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
    if args.report is not None and args.gt.suffix == ".geojson":
        raise ValueError(f"--gt {args.gt}: GeoJSON is scored by box IoU in map units (AP50, AP50-95) only")
    if args.report is not None and args.gt.suffix == ".json" and args.protocol == "coco":
        raise ValueError(f"--report needs folders of VisDrone txt files, got {args.gt}")
    if args.report is not None and args.gt.suffix != ".json":
        scored = _score_with_report(args, dist)
    else:
        scored = score_saved_detections(args.gt, args.pred, protocol=args.protocol, images_dir=args.images, dist=dist)
    if scored is None:
        return 0
    print(scored.table)
    if args.json is not None:
        _write_json(args.json, dict(scored.overall) | {"per_class": scored.per_class})
    return 0


def _write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(payload, indent=2))
