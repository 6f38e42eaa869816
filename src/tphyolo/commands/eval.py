"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry, or, with
`--task track`, saved tracks with HOTA, CLEAR and Identity metrics (`tphyolo.metrics.tracking`), or, with
`--task count`, the counts of an analyze run against those of ground-truth tracks (`tphyolo.analyze.scoring`).

Saved detections (VisDrone txt folders, COCO json files, GeoJSON) are scored by `tphyolo.evaluation.
saved_scores`; this module parses the flags and prints. `--save-gt PATH` writes the COCO dataset json of a
VisDrone annotation folder (`detection_files.save_coco_gt`); without `--pred` it only writes the file.
VisDrone folders are read through a category table (`tphyolo.data.categories`): that of `--data` (whose class
names the table prints), else that of the data yaml that declares `--gt`, else VisDrone-DET's.
Tracks are folders of per-sequence files in the layout of `--format` (`tphyolo.data.mot.sequences`); `--data`
names a video data set whose split's ground truth to use instead of `--gt`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.commands.options.evaluation import DETECTION_ONLY, EVAL_FLAG_GROUPS, EvalFlags
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, setting_name
from tphyolo.infer.config import MAX_DET
from tphyolo.metrics.registry import VISDRONE_TXT, get_protocol, saved_format

if TYPE_CHECKING:  # imported by `run` (they import torch: `tphyolo eval -h` must not)
    from tphyolo.data.categories import CategoryTable
    from tphyolo.evaluation.saved_scores import SavedScores
    from tphyolo.runtime.distributed import DistContext


def add_arguments(parser: argparse.ArgumentParser) -> None:
    every = set(EvalFlags.__dataclass_fields__)
    for title, names in EVAL_FLAG_GROUPS.items():
        add_flags(parser if title is None else parser.add_argument_group(title), EvalFlags,
                  exclude=every - set(names))  # fmt: skip


def _table(args: argparse.Namespace) -> CategoryTable:
    """The category table `--gt` is read with: `--data`'s, else what the folder declares, else VisDrone's."""
    # lazy: these import torch; 'tphyolo eval -h' must not
    from tphyolo.data.dataset_config import load_data_config
    from tphyolo.evaluation.saved_scores import folder_table

    return folder_table(args.gt, None if args.data is None else load_data_config(args.data).category_table)


def _score_with_report(args: argparse.Namespace, dist: DistContext) -> SavedScores | None:
    """The scores of VisDrone txt folders, read from the report's one scoring after writing the records and the
    report into `args.report` (rank 0; the other ranks read their share of the files and get None)."""
    # lazy: these import torch; 'tphyolo eval -h' must not
    from tphyolo.evaluation.results import protocol_table
    from tphyolo.evaluation.saved_scores import SavedScores, visdrone_folder_results
    from tphyolo.report.records import Records
    from tphyolo.report.writer import report_run

    images_dir = args.images or args.gt.parent / "images"
    table = _table(args)
    images = visdrone_folder_results(args.gt, args.pred, protocol=args.protocol, images_dir=images_dir,
                                     with_images=True, dist=dist, table=table)  # fmt: skip  # the report draws them
    if images is None:
        return None
    settings = {"gt": str(args.gt), "pred": str(args.pred), "images": str(images_dir)}
    records = Records(protocol=args.protocol, max_det=MAX_DET, names=table.names, settings=settings,
                      images=tuple(images))  # fmt: skip
    data, path = report_run(records, args.report)
    print(f"report in {path}")
    scored = data.results  # the protocol's numbers in `extra` and `protocol_per_class`
    return SavedScores(scored.extra, scored.protocol_per_class, protocol_table(scored))


def _run_track(args: argparse.Namespace) -> int:
    """`--task track`: HOTA, CLEAR and Identity per class and combined; `--json` gets them all."""
    from tphyolo.evaluation.saved_scores import score_saved_tracks  # lazy: imports torch; 'eval -h' must not

    default = EvalFlags()
    given = [setting_name(EvalFlags, n) for n in DETECTION_ONLY if getattr(args, n) != getattr(default, n)]
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
    from tphyolo.analyze.scoring import read_counts, score_counts, true_counts  # lazy: torch; not for 'eval -h'

    if args.pred is None or args.gt is None or args.lines is None:
        raise UsageError("--task count needs --pred (an analyze run), --gt (true track files) and --lines")
    score = score_counts(true_counts(args.gt, args.lines, source=args.source), read_counts(args.pred))
    print(score.table())
    if args.json is not None:
        args.json.write_text(json.dumps(score.to_dict(), indent=2))
    return 0


def run(args: argparse.Namespace) -> int:
    # lazy: these import torch; 'tphyolo eval -h' must not
    import torch

    from tphyolo.runtime.distributed import DistContext, process_group

    dist = DistContext.from_env()  # under torchrun: VisDrone files read by every rank, scored by rank 0
    with process_group(dist, torch.device("cpu")):
        return _run(args, dist)


def _run(args: argparse.Namespace, dist: DistContext) -> int:
    # lazy: these import torch; 'tphyolo eval -h' must not
    from tphyolo.evaluation.detection_files import save_coco_gt
    from tphyolo.evaluation.saved_scores import score_saved_detections

    if args.task != "detect":
        return (_run_track if args.task == "track" else _run_count)(args) if dist.is_main else 0
    if args.gt is None:
        raise UsageError("--gt is required")
    fmt = saved_format(args.gt)
    if args.save_gt is not None:
        if fmt != VISDRONE_TXT:
            raise UsageError(f"--save-gt writes the COCO json of a VisDrone annotation folder; --gt {args.gt} is one")
        if dist.is_main:
            dataset = save_coco_gt(args.gt, args.images or args.gt.parent / "images", args.save_gt, _table(args))
            print(f"COCO ground truth of {len(dataset['images'])} image(s) in {args.save_gt}")
        if args.pred is None:
            return 0
    if args.pred is None:
        raise UsageError("--pred is required (unless --save-gt only writes the ground truth)")
    if args.report is not None and fmt != VISDRONE_TXT and fmt in get_protocol(args.protocol).saved_formats:
        raise ValueError(f"--report needs folders of VisDrone txt files, got {args.gt}")
    if args.report is not None and fmt == VISDRONE_TXT:
        scored = _score_with_report(args, dist)
    else:  # refuses a protocol that does not score this format
        table = _table(args) if fmt == VISDRONE_TXT else None
        scored = score_saved_detections(args.gt, args.pred, protocol=args.protocol, images_dir=args.images, dist=dist,
                                        table=table)  # fmt: skip
    if scored is None:
        return 0
    print(scored.table)
    if args.json is not None:
        _write_json(args.json, dict(scored.overall) | {"per_class": scored.per_class})
    return 0


def _write_json(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(payload, indent=2))
