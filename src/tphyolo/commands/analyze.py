"""`tphyolo analyze`: counts across lines and zones, dwell, ground speed and heatmaps from a drone video, on top of
tracking (`tphyolo.analyze`): run a detector and a tracker on `--source`, or read the detections (`--detections`)
or the tracks (`--tracks`) of an earlier run, so that nothing is detected twice.
The run is `tphyolo.analyze.pipeline.run_analyze`; this module parses its flags and prints its summary.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs, AnalyzeTracking
from tphyolo.analyze.job import AnalyzeJob
from tphyolo.commands.options.detector import add_detector_flags, detector_spec, on_process_device
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.console import RunEvents
from tphyolo.runtime.run_dir import OutputDir
from tphyolo.track.job import TRACK_CONF

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("what to analyse"), AnalyzeInputs)
    add_flags(parser.add_argument_group("tracker"), AnalyzeTracking)
    add_flags(parser.add_argument_group("analytics"), AnalyzeConfig)
    add_detector_flags(parser, defaults={"conf": TRACK_CONF})
    add_flags(parser.add_argument_group("outputs"), AnalyzeOutputs)
    add_flags(parser, OutputDir)


def _job(args: argparse.Namespace) -> AnalyzeJob:
    """The run the flags ask for; ValueError (in the flags' words) for inputs that do not go together."""
    return AnalyzeJob(
        from_flags(AnalyzeInputs, args), detector_spec(args), from_flags(AnalyzeTracking, args),
        from_flags(AnalyzeConfig, args), from_flags(AnalyzeOutputs, args), from_flags(OutputDir, args),
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from tphyolo.analyze.pipeline import run_analyze  # lazy: imports torch; 'tphyolo analyze -h' must not

    job = _job(args)
    job = replace(job, detector=on_process_device(job.detector, args.runtime))
    print(run_analyze(job, runtime=args.runtime, events=RunEvents(progress=True)).summary())
    return 0
