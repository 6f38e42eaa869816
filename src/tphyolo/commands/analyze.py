"""`tphyolo analyze`: counts across lines and zones, dwell, ground speed and heatmaps from a drone video, on top of
tracking (`tphyolo.analyze`): run a detector and a tracker on `--source`, or read the detections (`--detections`)
or the tracks (`--tracks`) of an earlier run, so that nothing is detected twice.
"""

from __future__ import annotations

import argparse

from tphyolo.analyze.config import AnalyzeConfig, AnalyzeInputs, AnalyzeOutputs, AnalyzeTracking
from tphyolo.analyze.outputs.summary import summary_text
from tphyolo.commands.options.inference import add_inference_flags, inference_device, inference_settings
from tphyolo.errors import UsageError
from tphyolo.flags import add_flags, from_flags
from tphyolo.runtime.run_dir import OutputDir
from tphyolo.track.interface import CameraMotionSettings
from tphyolo.track.registry import make_tracker, tracker_settings

USES_RUNTIME = True
RUNTIME_INFERENCE = True
TRACK_CONF = 0.1  # as `tphyolo track`: ByteTrack's second association uses the weak detections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("what to analyse"), AnalyzeInputs)
    add_flags(parser.add_argument_group("tracker"), AnalyzeTracking)
    add_flags(parser.add_argument_group("analytics"), AnalyzeConfig)
    add_inference_flags(parser, defaults={"conf": TRACK_CONF})
    add_flags(parser.add_argument_group("outputs"), AnalyzeOutputs)


def run(args: argparse.Namespace) -> int:
    from tphyolo.analyze.pipeline import AnalyzeInput, analyze  # lazy: imports torch; 'tphyolo analyze -h' must not

    given = [name for name in ("weights", "detections", "tracks") if getattr(args, name) is not None]
    if len(given) != 1:
        raise UsageError("give one of --weights (with --source), --detections or --tracks")
    if args.weights is not None and args.source is None:
        raise UsageError("--weights needs --source: the video or frames to run on")
    config = from_flags(AnalyzeConfig, args)
    cmc = args.cmc if (args.weights or args.source) else "none"  # without frames there is nothing to estimate from
    compensates = isinstance(tracker_settings(args.tracker), CameraMotionSettings)
    tracker = make_tracker(args.tracker, **({"cmc": cmc} if compensates else {}))
    predictor = None
    if args.weights is not None:
        from tphyolo.predict.predictor import Predictor  # lazy: imports torch; 'tphyolo analyze -h' must not

        predictor = Predictor(args.weights, inference_settings(args), runtime=args.runtime,
                              device=inference_device(args.runtime))  # fmt: skip
    save_dir = from_flags(OutputDir, args).create("runs/analyze")
    inputs = AnalyzeInput(source=args.source, predictor=predictor, detections=args.detections, tracks=args.tracks)
    reports = analyze(args.lines, save_dir, inputs, config=config, tracker=tracker, cmc=args.cmc,
                      save_video=args.save_video)  # fmt: skip
    print(summary_text(reports, save_dir))
    return 0
