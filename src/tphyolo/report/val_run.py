"""One validation run, as `tphyolo val` makes it (`run_val`): `val` into a new run folder, with the evaluation
report when the job asks for it (`ReportWriter`) and the numbers written to the job's json file.

    run = run_val(ValJob(DetectorSpec("best.pt", inference=VALIDATION), "visdrone", report=True))
    run.results.map50, run.report, run.numbers

The run folder keeps the job (args.yaml, `tphyolo.runtime.run_dir.job_data`: paths made absolute, hooks such as
`ValConfig.on_problems` left out), written once the run scored: a run that fails leaves no folder.

Under torchrun every process runs the call: each runs its share of the images, rank 0 scores, writes and gets
the run; the other ranks get None.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.evaluation.jobs import VAL_PROJECT, ValJob
from tphyolo.evaluation.results import EvalResults, results_json
from tphyolo.evaluation.val import val_spec
from tphyolo.infer.build import spec_device, spec_runtime
from tphyolo.infer.slicing import MODEL
from tphyolo.report.run_report import ReportWriter
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.runtime.distributed import DistContext, process_group
from tphyolo.runtime.run_dir import JOB_FILE, write_job_file


@dataclass(frozen=True)
class ValRun:
    """What a validation run gave: the `results` (their `save_dir` is the run folder), the `numbers` the job's
    json holds (`results_json`, or with a report the report's numbers) and the `report` page (None without)."""

    results: EvalResults
    numbers: dict
    report: Path | None = None


def run_val(job: ValJob, *, runtime: RuntimeConfig | None = None, events: RunEvents = NO_EVENTS) -> ValRun | None:
    """Run `job` (see the module docstring) on `runtime` (default: the detector spec's) and the spec's device
    (default: the runtime's, under torchrun this process's), joining torchrun's process group for the run and
    leaving it after. `events` (`RunEvents`): `note(report)` for the unusable files of the split
    (in place of the config's `on_problems`, when given), `progress`: a bar (as the config's `progress`).
    Raises ValueError / FileNotFoundError naming the bad setting or file, before the run folder is made when it
    can."""
    spec = replace(job.detector, runtime=runtime or spec_runtime(job.detector))
    dist = DistContext.from_env()
    device = spec_device(spec, dist.local_rank)
    spec = replace(spec, device=str(device))
    run_dir = cache(lambda: job.output.create(VAL_PROJECT))  # created once the data are loaded
    config = replace(job.config, save_dir=run_dir, progress=job.config.progress or events.progress,
                     on_problems=events.note or job.config.on_problems)  # fmt: skip
    report = _report_writer(job, run_dir) if job.report else None
    with process_group(dist, device):
        results = val_spec(spec, job.data, config, writers=[report] if report is not None else [])
    if not dist.is_main:
        return None
    write_job_file(run_dir() / JOB_FILE, job)
    run = ValRun(results, results_json(results))
    if report is not None:  # the plain numbers plus sizes, images and dataset
        data, path = results.outputs[report.name]
        run = ValRun(results, data.as_json(), path)
    if job.json is not None:
        Path(job.json).parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(Path(job.json), json.dumps(run.numbers, indent=2))
    return run


def _report_writer(job: ValJob, run_dir) -> ReportWriter:
    """The writer of the run's evaluation records and its report into the run folder, listing the
    settings in effect."""
    inference, config = job.detector.inference, job.config
    settings = {"weights": job.detector.models[0], "data": job.data, "task": config.task}  # val scores one model
    slicing = job.detector.slicing
    size = slicing.size if slicing is not None else None  # a size, "auto", MODEL or None
    sliced = size is not None and size != MODEL  # MODEL: the checkpoint's own tiles, if it has any (settled later)
    settings |= inference.settings_in_effect(runs_merged=inference.augment or sliced)
    if sliced:
        settings["slice"] = size
    return ReportWriter(run_dir, settings=settings, max_det=inference.max_det)
