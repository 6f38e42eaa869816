"""One scoring of saved outputs, as `tphyolo eval` makes it (`run_eval`): detections against ground truth by a
protocol of the registry (with the evaluation report of VisDrone txt folders when the job asks for it, or only
the COCO json of a VisDrone annotation folder), tracks with HOTA, CLEAR and Identity, or the counts of an
analyze run against those of true tracks; the numbers written to the job's json file.

    run = run_eval(EvalJob(gt=Path("VisDrone/annotations"), pred=Path("runs/predict/exp/visdrone")))
    print(run.table)

VisDrone folders are read through a category table (`tphyolo.data.categories`): that of the job's `data`, else
that of the data yaml that declares `gt`, else VisDrone-DET's. Under torchrun the VisDrone files are read by
every rank and scored by rank 0; the other ranks get a run without a table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

from tphyolo.analyze.scoring import read_counts, score_counts, true_counts
from tphyolo.data.categories import CategoryTable
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.errors import InputError
from tphyolo.evaluation.detection_files import save_coco_gt
from tphyolo.evaluation.jobs import EvalJob
from tphyolo.evaluation.results import protocol_table
from tphyolo.evaluation.saved_scores import (
    SavedScores,
    folder_table,
    score_saved_detections,
    score_saved_tracks,
    visdrone_folder_results,
)
from tphyolo.infer.config import MAX_DET
from tphyolo.metrics.registry import VISDRONE_TXT, get_protocol, saved_format
from tphyolo.report.records import Records
from tphyolo.report.writer import report_run
from tphyolo.runtime.distributed import DistContext, process_group


@dataclass(frozen=True)
class SavedGroundTruth:
    """The COCO dataset json written from a VisDrone annotation folder: its `path` and number of `images`."""

    path: Path
    images: int


@dataclass(frozen=True)
class EvalRun:
    """What a scoring gave: the printed `table` of the numbers (None when nothing was scored: only the ground
    truth written, or a torchrun rank other than 0), the `numbers` the job's json holds, the `report` page and
    the ground truth written (`saved_gt`), None when not asked for."""

    table: str | None = None
    numbers: dict | None = None
    report: Path | None = None
    saved_gt: SavedGroundTruth | None = None


def run_eval(job: EvalJob) -> EvalRun:
    """Run `job` (see the module docstring) on the CPU, joining torchrun's process group for the run. Raises
    ValueError / FileNotFoundError naming the bad setting or file."""
    dist = DistContext.from_env()
    with process_group(dist, torch.device("cpu")):
        if job.task == "detect":
            run = _score_detections(job, dist)
        elif not dist.is_main:
            run = EvalRun()
        else:
            run = _score_tracks(job) if job.task == "track" else _score_counts(job)
    if job.json is not None and run.numbers is not None:
        job.json.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(job.json, json.dumps(run.numbers, indent=2))
    return run


def _table(job: EvalJob) -> CategoryTable:
    """The category table `job.gt` is read with: `job.data`'s, else what the folder declares, else VisDrone's."""
    return folder_table(job.gt, None if job.data is None else load_data_config(job.data).category_table)


def _score_detections(job: EvalJob, dist: DistContext) -> EvalRun:
    fmt = saved_format(job.gt)
    saved_gt = None
    if job.save_gt is not None and dist.is_main:
        dataset = save_coco_gt(job.gt, job.images or job.gt.parent / "images", job.save_gt, _table(job))
        saved_gt = SavedGroundTruth(job.save_gt, len(dataset["images"]))
    if job.pred is None:
        return EvalRun(saved_gt=saved_gt)
    if job.report is not None and fmt != VISDRONE_TXT and fmt in get_protocol(job.protocol).saved_formats:
        raise InputError(f"--report needs folders of VisDrone txt files, got {job.gt}")
    report = None
    if job.report is not None and fmt == VISDRONE_TXT:
        scored, report = _score_with_report(job, dist)
    else:  # refuses a protocol that does not score this format
        table = _table(job) if fmt == VISDRONE_TXT else None
        scored = score_saved_detections(job.gt, job.pred, protocol=job.protocol, images_dir=job.images, dist=dist,
                                        table=table)  # fmt: skip
    if scored is None:
        return EvalRun(saved_gt=saved_gt)
    numbers = dict(scored.overall) | {"per_class": scored.per_class}
    return EvalRun(scored.table, numbers, report, saved_gt)


def _score_with_report(job: EvalJob, dist: DistContext) -> tuple[SavedScores | None, Path | None]:
    """The scores of VisDrone txt folders, read from the report's one scoring after writing the records and the
    report into `job.report`, and the report's page (rank 0; the other ranks read their share of the files and
    get None)."""
    images_dir = job.images or job.gt.parent / "images"
    table = _table(job)
    images = visdrone_folder_results(job.gt, job.pred, protocol=job.protocol, images_dir=images_dir,
                                     with_images=True, dist=dist, table=table)  # fmt: skip  # the report draws them
    if images is None:
        return None, None
    settings = {"gt": str(job.gt), "pred": str(job.pred), "images": str(images_dir)}
    records = Records(protocol=job.protocol, max_det=MAX_DET, names=table.names, settings=settings,
                      images=tuple(images))  # fmt: skip
    data, path = report_run(records, job.report)
    scored = data.results  # the protocol's numbers in `extra` and `protocol_per_class`
    return SavedScores(scored.extra, scored.protocol_per_class, protocol_table(scored)), path


def _score_tracks(job: EvalJob) -> EvalRun:
    """`task` track: HOTA, CLEAR and Identity per class and combined; the json gets them all."""
    result = score_saved_tracks(job.pred, gt=job.gt, fmt=job.format, data=job.data, split=job.split)
    return EvalRun(result.table(), result.to_dict())


def _score_counts(job: EvalJob) -> EvalRun:
    """`task` count: line and zone counts of an analyze run against those of the ground-truth tracks."""
    score = score_counts(true_counts(job.gt, job.lines, source=job.source), read_counts(job.pred))
    return EvalRun(score.table(), score.to_dict())
