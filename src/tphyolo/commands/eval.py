"""`tphyolo eval`: score saved detections against ground truth with a protocol of the registry, or, with
`--task track`, saved tracks with HOTA, CLEAR and Identity metrics (`tphyolo.metrics.tracking`), or, with
`--task count`, the counts of an analyze run against those of ground-truth tracks (`tphyolo.analyze.scoring`).

Saved detections (VisDrone txt folders, COCO json files, GeoJSON) are scored by `tphyolo.evaluation.
saved_scores`. `--save-gt PATH` writes the COCO dataset json of a VisDrone annotation folder
(`detection_files.save_coco_gt`); without `--pred` it only writes the file. VisDrone folders are read through a
category table (`tphyolo.data.categories`): that of `--data` (whose class names the table prints), else that of
the data yaml that declares `--gt`, else VisDrone-DET's. Tracks are folders of per-sequence files in the layout
of `--format` (`tphyolo.data.mot.sequences`); `--data` names a video data set whose split's ground truth to use
instead of `--gt`. The run is `tphyolo.report.eval_run.run_eval`; this module parses its flags and prints.
"""

from __future__ import annotations

import argparse

from tphyolo.commands.options.evaluation import EVAL_FLAG_GROUPS
from tphyolo.evaluation.jobs import EvalJob
from tphyolo.flags import add_flags, from_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    every = set(EvalJob.__dataclass_fields__)
    for title, names in EVAL_FLAG_GROUPS.items():
        add_flags(parser if title is None else parser.add_argument_group(title), EvalJob,
                  exclude=every - set(names))  # fmt: skip


def _job(args: argparse.Namespace) -> EvalJob:
    """The scoring the flags ask for; ValueError (in the flags' words) for flags that do not go together."""
    return from_flags(EvalJob, args)


def run(args: argparse.Namespace) -> int:
    from tphyolo.report.eval_run import run_eval  # lazy: imports torch; 'tphyolo eval -h' must not

    run = run_eval(_job(args))
    if run.saved_gt is not None:
        print(f"COCO ground truth of {run.saved_gt.images} image(s) in {run.saved_gt.path}")
    if run.report is not None:
        print(f"report in {run.report}")
    if run.table is not None:
        print(run.table)
    return 0
