"""`tphyolo track`: follow objects through videos with a detector and ByteTrack, BoT-SORT or OC-SORT, or track
precomputed detections (`--detections`); write MOT / VisDrone-MOT files and drawn videos with ids and trails.

Sources are grouped into sequences by `tphyolo.predict.sequences` (a video, a folder of frames, a folder of
sequence folders, ...). With `--data` the sequences are a video data set's split (`tracking:` in its yaml, e.g.
the built-in `synthetic-mot`), its ground truth is scored at the end, and the output files it needs are written.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from tphyolo.commands.options.inference import (
    add_classifier_flags,
    add_inference_flags,
    add_slice_flags,
    classifier_settings,
    inference_device,
    slice_settings,
)

if TYPE_CHECKING:
    import numpy as np

USES_RUNTIME = True
RUNTIME_INFERENCE = True
TRACK_CONF = 0.1  # the detector's threshold: ByteTrack's second association uses the weak detections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tphyolo.flags import add_flags
    from tphyolo.predict.draw_style import DrawStyle
    from tphyolo.track.config import CMC_METHODS
    from tphyolo.track.registry import TRACKER_NAMES

    inputs = parser.add_argument_group("what to track")
    inputs.add_argument("--weights", nargs="+", help="checkpoint(s) or exported model(s); several form an ensemble")
    inputs.add_argument("--source", help="video, folder of frames, folder of sequence folders, glob, stream")
    inputs.add_argument("--data", help="a video data set (yaml with 'tracking:', or 'synthetic-mot'): its split")
    inputs.add_argument("--split", default="val", choices=("train", "val", "test"), help="--data split (default: val)")
    inputs.add_argument(
        "--detections", type=Path, metavar="DIR",
        help="track these per-sequence detection files (MOT or VisDrone-MOT rows) instead of running a model",
    )  # fmt: skip
    tracking = parser.add_argument_group("tracker")
    tracking.add_argument(
        "--tracker", default="bytetrack", metavar="NAME|YAML",
        help=f"{', '.join(TRACKER_NAMES)}, or a yaml of settings over one (default: bytetrack)",
    )  # fmt: skip
    tracking.add_argument(
        "--cmc", choices=CMC_METHODS, help="camera-motion compensation (default: the tracker's; botsort: sparse)"
    )
    add_inference_flags(parser, defaults={"conf": TRACK_CONF})
    add_slice_flags(parser)
    add_classifier_flags(parser)
    outputs = parser.add_argument_group("outputs")
    outputs.add_argument("--save-mot", action="store_true", help="MOTChallenge txt per sequence (mot/)")
    outputs.add_argument("--save-visdrone", action="store_true", help="VisDrone-MOT txt per sequence (visdrone/)")
    outputs.add_argument("--no-save-img", action="store_true", help="do not write drawn videos / frames")
    add_flags(outputs, DrawStyle)
    outputs.add_argument("--vid-stride", type=int, default=1, metavar="N", help="track every N-th video frame")


def _check(args: argparse.Namespace) -> None:
    from tphyolo.errors import UsageError

    if (args.weights is None) == (args.detections is None):
        raise UsageError("give --weights (a detector) or --detections (precomputed detections), one of them")
    if args.weights is not None and (args.source is None) == (args.data is None):
        raise UsageError("give --source or --data, one of them, for the detector to run on")
    if args.detections is not None and args.data is not None:
        raise UsageError("--detections tracks files; --data runs the detector on a data set: drop one")
    if args.vid_stride < 1:
        raise UsageError(f"--vid-stride must be at least 1, got {args.vid_stride}")


class TrackedFrame(NamedTuple):
    """One frame's tracks: frame number (from 1), image (None without frames), its file name (None for a video
    frame), frame rate (None for image frames), and the tracks' boxes, ids, scores, class ids and categories
    (None: the writer derives them from the class ids)."""

    number: int
    image: np.ndarray | None
    image_name: str | None
    fps: float | None
    boxes: np.ndarray
    ids: np.ndarray
    scores: np.ndarray
    labels: np.ndarray
    categories: np.ndarray | None


def run(args: argparse.Namespace) -> int:
    from tphyolo.flags import from_flags
    from tphyolo.predict.draw_style import DrawStyle
    from tphyolo.runtime.run_dir import OutputDir
    from tphyolo.track.registry import make_tracker
    from tphyolo.track.writers import TrackWriter

    _check(args)
    tracker = make_tracker(args.tracker, **({} if args.cmc is None else {"cmc": args.cmc}))
    config = tracker.config
    split = _data_split(args) if args.data is not None else None
    save_mot = args.save_mot or (split is not None and split.fmt in ("mot", "uavdt"))
    save_visdrone = args.save_visdrone or (split is not None and split.fmt == "visdrone-mot")
    if args.detections is not None:
        names, sequences = _public_sequences(args, tracker)
    else:
        names, sequences = _detector_sequences(args, tracker, split)
    save_dir = from_flags(OutputDir, args).create("runs/track")
    writer = TrackWriter(save_dir, names=names, save_mot=save_mot, save_visdrone=save_visdrone,
                         save_img=not args.no_save_img, style=from_flags(DrawStyle, args))  # fmt: skip
    total_frames, total_seconds = 0, 0.0
    try:  # what was tracked is written whatever stops the loop
        for name, frames in sequences:
            ids: set[int] = set()
            count, start = 0, time.perf_counter()
            for frame in frames:
                if count == 0:
                    writer.start_sequence(name, fps=frame.fps)
                writer.write(frame.number, frame.boxes, frame.ids, frame.scores, frame.labels, frame.categories,
                             image=frame.image, image_name=frame.image_name)  # fmt: skip
                ids.update(frame.ids.tolist())
                count += 1
            seconds = time.perf_counter() - start
            if count == 0:
                print(f"tphyolo track: warning: sequence {name}: no frame could be read", file=sys.stderr)
                continue
            writer.end_sequence()
            total_frames, total_seconds = total_frames + count, total_seconds + seconds
            print(f"{name}: {len(ids)} tracks, {count} frames, {count / max(seconds, 1e-9):.1f} fps")
    finally:
        writer.close()
    if total_frames == 0:
        given = next(f"{flag} {value}" for flag, value in (("--source", args.source), ("--data", args.data),
                                                             ("--detections", args.detections)) if value is not None)
        print(f"tphyolo track: error: {given}: no frame could be read (skipped sources named above)", file=sys.stderr)
        return 1
    print(f"{total_frames} frames tracked ({config.tracker}, cmc {_cmc(config)}) at "
          f"{total_frames / max(total_seconds, 1e-9):.1f} fps; results in {save_dir}")  # fmt: skip
    if split is not None:
        _score(split, save_dir)
    return 0


def _cmc(config) -> str:
    """The tracker's camera-motion compensation ('none' for a tracker without the setting)."""
    return getattr(config, "cmc", "none")


def _data_split(args: argparse.Namespace):
    from tphyolo.data.dataset_config import load_data_config
    from tphyolo.data.mot.sequences import tracking_split

    return tracking_split(load_data_config(args.data), args.split)


def _detector_sequences(args: argparse.Namespace, tracker, split):
    """(class names, sequences): (name, its TrackedFrames as the detector and the tracker go) per sequence."""
    from tphyolo.flags import from_flags
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.predict.predictor import Predictor
    from tphyolo.predict.sequences import resolve_sequences

    sequences = resolve_sequences(split.folder / "sequences" if split is not None else args.source)
    predictor = Predictor(args.weights, from_flags(InferenceConfig, args), runtime=args.runtime,
                          device=inference_device(args.runtime), slice=slice_settings(args),
                          **classifier_settings(args))  # fmt: skip

    def skip(path, error: Exception) -> None:
        from tphyolo.errors import describe_error

        print(f"tphyolo track: skipped {describe_error(error)}", file=sys.stderr)

    def frames(sequence):
        for frame, result in predictor.track_sequence(sequence, tracker, on_skip=skip, vid_stride=args.vid_stride):
            yield TrackedFrame(result.frame + 1, frame.image, None if frame.is_video else Path(frame.path).name,
                               frame.fps, result.boxes.numpy(), result.ids.numpy(), result.scores.numpy(),
                               result.labels.numpy(), None)  # fmt: skip

    return predictor.names, ((sequence.name, frames(sequence)) for sequence in sequences)


def _public_sequences(args: argparse.Namespace, tracker):
    """As `_detector_sequences`, for the detection files of `--detections` (frames from `--source` when given;
    the files' categories are VisDrone's, class id = category - 1)."""
    from tphyolo.data.formats.visdrone import NAMES
    from tphyolo.data.mot.sequences import detection_files, read_detections
    from tphyolo.errors import UsageError
    from tphyolo.predict.sequences import resolve_sequences
    from tphyolo.predict.sources import iter_frames
    from tphyolo.track.precomputed import track_detections

    files = detection_files(args.detections)
    if args.source is None and _cmc(tracker.config) != "none":
        raise UsageError(f"--tracker {tracker.config.tracker} compensates camera motion ({_cmc(tracker.config)}) from "
                         "the frames: give --source with them, or --cmc none")  # fmt: skip
    sequences = {s.name: s for s in resolve_sequences(args.source)} if args.source is not None else {}
    if len(files) == 1 and len(sequences) == 1:
        sequences = {next(iter(files)): next(iter(sequences.values()))}  # one of each: paired whatever the names
    missing = [name for name in files if sequences and name not in sequences]
    if missing:
        raise FileNotFoundError(f"--source {args.source}: no sequence named {missing[0]!r} for {files[missing[0]]}")

    def frames(name: str, path: Path):
        sequence, fps, names = sequences.get(name), {}, {}

        def images():
            for position, frame in enumerate(iter_frames(list(sequence.files), vid_stride=args.vid_stride)):
                number = sequence.frame_number(frame, position)
                fps[number], names[number] = frame.fps, None if frame.is_video else Path(frame.path).name
                yield number, frame.image

        tracked = track_detections(read_detections(path), tracker, frames=None if sequence is None else images())
        for number, image, tracks in tracked:
            labels = tracks.labels.clip(min=0) - 1  # class id = category - 1; no category: -1
            yield TrackedFrame(number, image, names.get(number), fps.get(number), tracks.boxes, tracks.ids,
                               tracks.scores, labels, tracks.labels)  # fmt: skip

    return list(NAMES), ((name, frames(name, path)) for name, path in files.items())


def _score(split, save_dir: Path) -> None:
    from tphyolo.metrics.tracking import evaluate_tracking

    outputs = save_dir / ("visdrone" if split.fmt == "visdrone-mot" else "mot")
    print(evaluate_tracking(split.annotations, outputs, fmt=split.fmt).table())
