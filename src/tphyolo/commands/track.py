"""`tphyolo track`: follow objects through videos with a detector and ByteTrack, BoT-SORT or OC-SORT, or track
precomputed detections (`--detections`); write MOT / VisDrone-MOT files and drawn videos with ids and trails.

Sources are grouped into sequences by `tphyolo.predict.sequences` (a video, a folder of frames, a folder of
sequence folders, ...). With `--data` the sequences are a video data set's split (`tracking:` in its yaml, e.g.
the built-in `synthetic-mot`), its ground truth is scored at the end, and the output files it needs are written.
The run is `tphyolo.track.run.track_job`; this module parses its flags and prints what it did.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from tqdm import tqdm

from tphyolo.commands.options.detector import add_detector_flags, detector_spec, on_process_device
from tphyolo.errors import UsageError, describe_error
from tphyolo.flags import add_flags, from_flags
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.runtime.console import RunEvents
from tphyolo.runtime.run_dir import OutputDir, remove_if_empty
from tphyolo.track.job import TRACK_CONF, TrackerChoice, TrackInputs, TrackJob, TrackOutputs

USES_RUNTIME = True
RUNTIME_INFERENCE = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_flags(parser.add_argument_group("what to track"), TrackInputs)
    add_flags(parser.add_argument_group("tracker"), TrackerChoice)
    add_detector_flags(parser.add_argument_group("detector"), defaults={"conf": TRACK_CONF})
    add_flags(parser, OutputDir)
    outputs = parser.add_argument_group("outputs")
    add_flags(outputs, TrackOutputs)
    add_flags(outputs, DrawStyle)


def _job(args: argparse.Namespace) -> TrackJob:
    """The run the flags ask for; UsageError for flags that do not go together."""
    if (args.weights is None) == (args.detections is None):
        raise UsageError("give --weights (a detector) or --detections (precomputed detections), one of them")
    if args.weights is not None and (args.source is None) == (args.data is None):
        raise UsageError("give --source or --data, one of them, for the detector to run on")
    if args.detections is not None and args.data is not None:
        raise UsageError("--detections tracks files; --data runs the detector on a data set: drop one")
    return TrackJob(
        detector_spec(args), from_flags(TrackInputs, args), from_flags(TrackerChoice, args),
        from_flags(TrackOutputs, args), from_flags(DrawStyle, args), from_flags(OutputDir, args),
    )  # fmt: skip


def _print_sequence(sequence) -> None:  # tqdm.write: printed above the progress bar
    if sequence.frames == 0:
        tqdm.write(f"tphyolo track: warning: sequence {sequence.name}: no frame could be read", file=sys.stderr)
    else:
        tqdm.write(f"{sequence.name}: {sequence.tracks} tracks, {sequence.frames} frames, {sequence.fps:.1f} fps")


def _print_skip(path, error: Exception) -> None:
    tqdm.write(f"tphyolo track: skipped {describe_error(error)}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from tphyolo.track.run import BOOKKEEPING, track_job  # lazy: it imports torch, which `track -h` must not

    job = _job(args)
    job = replace(job, detector=on_process_device(job.detector, args.runtime))
    events = RunEvents(skip=_print_skip, item_done=_print_sequence, progress=True)
    result = track_job(job, runtime=args.runtime, events=events)
    if result.frames == 0:
        given = next(
            f"{flag} {value}"
            for flag, value in (("--source", args.source), ("--data", args.data), ("--detections", args.detections))
            if value is not None
        )
        print(f"tphyolo track: error: {given}: no frame could be read (skipped sources named above)", file=sys.stderr)
        if not job.output.exist_ok:  # a folder of settings alone: gone, its name free for the next run
            remove_if_empty(result.save_dir, ignoring=BOOKKEEPING)
        return 1
    print(f"{result.frames} frames tracked ({result.tracker}, cmc {result.cmc}) at {result.fps:.1f} fps; "
          f"results in {result.save_dir}")  # fmt: skip
    if result.scores is not None:
        print(result.scores.table())
    return 0
