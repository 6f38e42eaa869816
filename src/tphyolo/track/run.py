"""One tracking run, as `tphyolo track` makes it: a `Tracker` over every sequence of a source (or of a video data
set's split, whose ground truth is then scored), the tracks written by `TrackWriter` into a new run folder.

    spec = DetectorSpec(("best.pt",), inference=InferenceConfig(conf=TRACK_CONF))
    run = track_job(TrackJob(spec, TrackInputs(source="drone.mp4")), runtime=RuntimeConfig())
    run.save_dir, run.frames, run.fps, run.scores

What was tracked is written whatever stops the run (an error, Ctrl-C). A data set's split writes the text its
benchmark takes as output (its layout's `output_text`, `tphyolo.data.mot.layouts.LAYOUTS`) besides the files
asked for. The run folder keeps the run's settings (`SETTINGS_FILE`: the job, as `tphyolo.runtime.run_dir.job_data`
writes it with paths made absolute, and the tracker's own settings, every field resolved, under `tracker`);
`progress` shows a bar of the frames tracked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from tphyolo.data.categories import TRACKING_TABLES
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.mot.layouts import MOT_TEXT, VISDRONE_TEXT
from tphyolo.data.mot.sequences import TrackingSplit, tracking_split
from tphyolo.metrics.tracking import evaluate_tracking
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.sequences import resolve_sequences
from tphyolo.predict.sources import count_frames
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.runtime.decisions import FILE as DECISIONS_FILE
from tphyolo.runtime.decisions import write_decisions
from tphyolo.runtime.run_dir import JOB_FILE, removed_if_left_empty, write_job_file
from tphyolo.track.job import TrackJob
from tphyolo.track.stream import Tracker
from tphyolo.track.writers import TrackWriter

DEFAULT_PROJECT = "runs/track"
SETTINGS_FILE = JOB_FILE  # a run folder's settings
BOOKKEEPING = (SETTINGS_FILE, DECISIONS_FILE)  # what a run folder holds before any tracks


@dataclass(frozen=True)
class SequenceRun:
    """One sequence tracked: its `name`, the number of distinct track `ids`, `frames` read and `seconds` taken
    (frames 0: none could be read; nothing was written for it)."""

    name: str
    tracks: int
    frames: int
    seconds: float

    @property
    def fps(self) -> float:
        return self.frames / max(self.seconds, 1e-9)


@dataclass(frozen=True)
class TrackRun:
    """What a run did: its `save_dir`, `tracker` name and `cmc`, the `sequences` tracked and, for a data set's
    split, the `scores` of its ground truth (`tphyolo.metrics.tracking`; None otherwise or when no frame was
    read)."""

    save_dir: Path
    tracker: str
    cmc: str
    sequences: tuple[SequenceRun, ...]
    scores: Any = None

    @property
    def frames(self) -> int:
        return sum(s.frames for s in self.sequences)

    @property
    def fps(self) -> float:
        return self.frames / max(sum(s.seconds for s in self.sequences if s.frames), 1e-9)


def track_job(
    job: TrackJob,
    *,
    runtime: Any = None,
    events: RunEvents = NO_EVENTS,
) -> TrackRun:
    """Run `job` (see the module docstring) on `runtime` (default: the detector spec's) and the spec's device
    (default: the runtime's). `events` (`RunEvents`): `item_done(SequenceRun)` as each sequence
    ends, `skip(file, error)` for each file that does not decode (then skipped; without it the run stops),
    `progress`: a bar of the frames (their total when the frames are files). Raises
    ValueError / FileNotFoundError naming the bad setting or file; a run that fails before it writes any tracks
    leaves no run folder."""
    inputs, choice, spec = job.inputs, job.choice, job.detector
    if spec is not None:
        spec = replace(spec, runtime=runtime or spec.runtime)
    predictor = None if spec is None else Predictor.from_spec(spec)
    tracker = Tracker(predictor, choice.tracker, detections=inputs.detections, cmc=choice.cmc)
    split = tracking_split(load_data_config(inputs.data), inputs.split) if inputs.data is not None else None
    source = split.folder / "sequences" if split is not None else inputs.source
    sequences = tracker.sequences(source, vid_stride=inputs.vid_stride, on_skip=events.skip)
    save_dir = job.output.create(DEFAULT_PROJECT)
    with removed_if_left_empty(save_dir, ignoring=BOOKKEEPING):  # a file or frame that does not read
        write_job_file(save_dir / SETTINGS_FILE, job, tracker=tracker.tracker_settings())
        if tracker.predictor is not None:
            write_decisions(save_dir, {"track": tracker.predictor.decisions})
        done = _track_into(save_dir, job, tracker, split, sequences, source, events)
    run = TrackRun(save_dir, tracker.tracker_name, tracker.cmc, tuple(done))
    if split is None or run.frames == 0:
        return run
    return TrackRun(**{**vars(run), "scores": _score(split, save_dir)})


def _track_into(save_dir: Path, job: TrackJob, tracker: Tracker, split: TrackingSplit | None, sequences, source: Any,
                events: RunEvents) -> list[SequenceRun]:  # fmt: skip
    """Track every sequence into `save_dir`; what was tracked is written whatever stops the loop."""
    text = split.output_text if split is not None else None  # the text the split's ground truth is scored on
    table = TRACKING_TABLES[split.fmt] if split is not None else None  # the split's benchmark numbers categories
    outputs = job.outputs
    writer = TrackWriter(save_dir, names=tracker.names, save_img=outputs.save_img, style=job.style, categories=table,
                         save_mot=outputs.save_mot or text == MOT_TEXT,
                         save_visdrone=outputs.save_visdrone or text == VISDRONE_TEXT)  # fmt: skip
    done: list[SequenceRun] = []
    bar = None
    if events.progress:
        bar = tqdm(total=_frame_total(source, job.inputs.vid_stride), unit="frame", desc="track")
    try:
        for name, frames in sequences:
            done.append(_write_sequence(writer, name, frames, bar))
            if events.item_done is not None:
                events.item_done(done[-1])
    finally:
        writer.close()
        if bar is not None:
            bar.close()
    return done


def _frame_total(source: Any, vid_stride: int) -> int | None:
    """The frames of `source`'s sequences, or None without a source (precomputed detections alone) or for a
    stream."""
    if source is None:
        return None
    return count_frames([f for s in resolve_sequences(source) for f in s.files], vid_stride=vid_stride)


def _write_sequence(writer: TrackWriter, name: str, frames, bar: tqdm | None) -> SequenceRun:
    ids: set[int] = set()
    count, start = 0, time.perf_counter()
    for frame in frames:
        if count == 0:
            writer.start_sequence(name, fps=frame.fps)
        writer.write(frame.number, frame.boxes, frame.ids, frame.scores, frame.labels, frame.categories,
                     image=frame.image, image_name=frame.image_name)  # fmt: skip
        ids.update(frame.ids.tolist())
        count += 1
        if bar is not None:
            bar.set_postfix_str(name, refresh=False)
            bar.update()
    seconds = time.perf_counter() - start
    if count:
        writer.end_sequence()
    return SequenceRun(name, len(ids), count, seconds)


def _score(split: TrackingSplit, save_dir: Path):
    return evaluate_tracking(split.annotations, save_dir / split.output_text, fmt=split.fmt)
