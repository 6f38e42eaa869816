"""An analysis run: the analytics over each track stream of an input, and their files.

    reports = analyze("lines.yaml", Path("runs/analyze/exp"), AnalyzeInput(tracks=Path("runs/track/exp/visdrone")),
                      config=AnalyzeConfig(fps=25))

or as `tphyolo analyze` runs it, from its job (`tphyolo.analyze.job.AnalyzeJob`: the tracker, the Predictor and
the run folder made from the settings): `run_analyze(job).summary()`.

Per sequence (in the run folder, or in `<run>/<sequence>/` when there are several): `counts.json`,
`events.csv`, `tracks_speed.csv` (when a ground sampling distance is known), `tracks_geo.csv` (with SRT
telemetry), `heatmap.npy` and `heatmap.png` (over the first frame, or a plain canvas without frames) and, with
frames, the annotated video `<sequence>.mp4`.

The ground sampling distance (see `AnalyzeConfig`) is `--gsd`, else computed from `--altitude`, `--focal-mm`
and `--sensor-mm`, else read per frame from the video's SRT sidecar; a missing or unreadable sidecar leaves
positions in pixels and speeds unmeasured, with one warning.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from tphyolo.analyze.config import AnalyzeConfig, check_one_input
from tphyolo.analyze.counter import Counter
from tphyolo.analyze.events import class_name
from tphyolo.analyze.geo import ground_sampling_distance, pixels_to_wgs84, telemetry_gsd, wgs84_to_pixels
from tphyolo.analyze.heatmap import Heatmap
from tphyolo.analyze.inputs.streams import (
    StreamFrame,
    TrackStream,
    detection_streams,
    detector_streams,
    track_streams,
)
from tphyolo.analyze.inputs.telemetry import FrameTelemetry, read_srt
from tphyolo.analyze.job import DEFAULT_PROJECT, AnalyzeJob
from tphyolo.analyze.motion import GroundMotion
from tphyolo.analyze.outputs.draw import draw_analytics
from tphyolo.analyze.outputs.files import GEO_COLUMNS, VideoFile, write_counts, write_csv, write_events, write_heatmap
from tphyolo.analyze.outputs.summary import summary_text
from tphyolo.analyze.points import TrackPoints
from tphyolo.analyze.regions import Regions, load_regions
from tphyolo.analyze.speed import SPEED_COLUMNS, Speed
from tphyolo.analyze.zones import Zones
from tphyolo.errors import InputError
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.runtime.decisions import FILE as DECISIONS_FILE
from tphyolo.runtime.decisions import write_decisions
from tphyolo.runtime.run_dir import JOB_FILE, removed_if_left_empty, write_job_file
from tphyolo.track.interface import CameraMotionSettings, MultiObjectTracker
from tphyolo.track.registry import make_tracker, tracker_settings

LOGGER = logging.getLogger(__name__)
DEFAULT_FPS = 30.0


@dataclass
class SequenceReport:
    """What one sequence gave: `counts` (as in counts.json), frames read and the seconds the analytics took
    (tracking and decoding excluded), the mean speed per class (km/h; empty without a GSD), files written."""

    name: str
    counts: dict
    frames: int = 0
    seconds: float = 0.0
    mean_speeds: dict[str, float] = field(default_factory=dict)
    saved: list[Path] = field(default_factory=list)


class Analysis:
    """Counter, Zones, Speed and Heatmap over one stream, in the ground coordinates its camera motion gives:
    `update(frame, gsd=...)` per StreamFrame, in order. `regions`: lines and zones; `names`: class names;
    `frame_size` (width, height) of the first frame; `gsd`: None when speeds are not measured."""

    def __init__(self, regions: Regions, *, names, fps: float, config: AnalyzeConfig, frame_size: tuple[int, int],
                 measure_speed: bool) -> None:  # fmt: skip
        self.names, self.config = names, config
        self.ground = GroundMotion()
        self.counter = Counter(regions.lines, names=names, fps=fps, margin=config.margin)
        self.zones = Zones(regions.zones, names=names, fps=fps, margin=config.margin)
        self.speed = Speed(fps=fps, window=config.window, max_speed=config.max_speed) if measure_speed else None
        self.heatmap = Heatmap(frame_size, cell=config.cell)

    def update(self, frame: StreamFrame, *, gsd: float | None = None) -> tuple[TrackPoints, np.ndarray]:
        """Read one frame; returns its track points and speeds (km/h, NaN where not measured)."""
        self.ground.advance(frame.motion)
        points = TrackPoints.from_boxes(frame.number, frame.boxes, frame.ids, frame.labels, self.ground,
                                        anchor=self.config.anchor)  # fmt: skip
        self.counter.update(points)
        self.zones.update(points)
        self.heatmap.update(points)
        speeds = np.full(len(points), np.nan)
        if self.speed is not None and gsd is not None:
            speeds = self.speed.update(points, gsd=gsd)
        return points, speeds

    def counts(self) -> dict:
        """{"lines": {name: {"forward": {class: n}, "backward": {...}}}, "zones": {name: {"live", "entries",
        "exits", "dwell_s"}}}."""
        return {"lines": self.counter.counts, "zones": self.zones.summary()}

    def mean_speeds(self) -> dict[str, float]:
        """Mean km/h per class over every measured track-frame."""
        if self.speed is None or not self.speed.rows:
            return {}
        labels = np.array([row[2] for row in self.speed.rows])
        values = np.array([row[3] for row in self.speed.rows])
        return {class_name(self.names, label): round(float(values[labels == label].mean()), 2)
                for label in np.unique(labels).tolist()}  # fmt: skip


@dataclass(frozen=True)
class AnalyzeInput:
    """What an analysis runs on: exactly one of `predictor` (a Predictor, run on `source`), `detections` (a folder
    of detection files) or `tracks` (a folder of track files); `source` (a video or frames, optional beside
    detections or tracks) is also what the camera motion is estimated from and the annotated video drawn on.
    ValueError when that rule is broken (`check_one_input`, in the words of `tphyolo analyze`'s flags: the
    predictor is what --weights loads)."""

    source: Any = None
    predictor: Any = None
    detections: Path | None = None
    tracks: Path | None = None

    def __post_init__(self) -> None:
        check_one_input(detector=self.predictor is not None, source=self.source, detections=self.detections,
                        tracks=self.tracks)  # fmt: skip


def analyze(
    regions: str | Path,
    save_dir: Path,
    inputs: AnalyzeInput,
    *,
    config: AnalyzeConfig | None = None,
    tracker: MultiObjectTracker | None = None,
    cmc: str = "sparse",
    save_video: bool = True,
    progress: bool = True,
) -> list[SequenceReport]:
    """Analyse `inputs` with the lines and zones of yaml `regions`; detections are tracked by `tracker`
    (default: ByteTrack with `cmc`); the camera motion is the tracker's when it compensates it, else estimated
    from the frames of `inputs.source` (when given) with `cmc`. Writes into `save_dir` (see the module
    docstring) and returns a report per sequence; `progress` draws a bar with frames per second."""
    source, predictor, detections, tracks = inputs.source, inputs.predictor, inputs.detections, inputs.tracks
    config = config or AnalyzeConfig()
    load_regions(regions)  # a bad file fails here, before any frame is read; the frame's size is checked later
    tracker = tracker or make_tracker("bytetrack", cmc=cmc if source is not None else "none")
    if predictor is not None:
        streams = detector_streams(predictor, tracker, source, cmc=cmc)
    elif detections is not None:
        streams = detection_streams(Path(detections), tracker, source, cmc=cmc)
    else:
        streams = track_streams(Path(tracks), source, cmc=cmc)
    video = source if source is not None and Path(str(source)).is_file() else None
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(unit="frame", desc="analyze", leave=False)
    try:
        return analyze_streams(streams, regions, config, Path(save_dir), video=video, save_video=save_video,
                               on_frame=None if bar is None else bar.update)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()


@dataclass(frozen=True)
class AnalyzeRun:
    """What `run_analyze` did: the run folder (`save_dir`) and a report per sequence (`reports`)."""

    save_dir: Path
    reports: list[SequenceReport]

    def summary(self) -> str:
        """The one-screen summary `tphyolo analyze` prints (`summary_text`)."""
        return summary_text(self.reports, self.save_dir)


def run_analyze(job: AnalyzeJob, *, runtime: Any = None, events: RunEvents = NO_EVENTS) -> AnalyzeRun:
    """Run `job` (`tphyolo analyze` without its flags): its tracker (`job.tracking`; the camera-motion setting
    goes to a tracker that compensates it, and is "none" without frames to estimate from), the Predictor of
    `job.detector` (on `runtime` and the spec's device; defaults: the spec's, else the runtime's) when given, a
    new run folder (`job.output`, under DEFAULT_PROJECT) holding the job (args.yaml,
    `tphyolo.runtime.run_dir.job_data`), then `analyze`; `events.progress` (`RunEvents`): a bar
    of the frames. Raises ValueError / FileNotFoundError naming the bad setting or file."""
    inputs, tracking = job.inputs, job.tracking
    cmc = tracking.cmc if (job.detector or inputs.source) else "none"  # without frames: nothing to estimate from
    compensates = isinstance(tracker_settings(tracking.tracker), CameraMotionSettings)
    tracker = make_tracker(tracking.tracker, **({"cmc": cmc} if compensates else {}))
    predictor = None
    if job.detector is not None:
        spec = replace(job.detector, runtime=runtime or job.detector.runtime)
        predictor = Predictor.from_spec(spec)
    save_dir = job.output.create(DEFAULT_PROJECT)
    bookkeeping = (DECISIONS_FILE, JOB_FILE)
    with removed_if_left_empty(save_dir, ignoring=bookkeeping):  # inputs that fail to read leave no folder
        write_job_file(save_dir / JOB_FILE, job)
        if predictor is not None:
            write_decisions(save_dir, {"analyze": predictor.decisions})
        streams = AnalyzeInput(source=inputs.source, predictor=predictor, detections=inputs.detections,
                               tracks=inputs.tracks)  # fmt: skip
        reports = analyze(inputs.lines, save_dir, streams, config=job.config, tracker=tracker, cmc=tracking.cmc,
                          save_video=job.outputs.save_video, progress=events.progress)  # fmt: skip
    return AnalyzeRun(save_dir, reports)


def analyze_streams(streams: Iterable[TrackStream], regions: str | Path, config: AnalyzeConfig, save_dir: Path, *,
                    video: str | Path | None = None, save_video: bool = True,
                    on_frame: Callable[[int], None] | None = None) -> list[SequenceReport]:  # fmt: skip
    """Analyse each stream (see the module docstring); `video`: the video file the streams come from, whose
    `.SRT` sidecar is looked for; `on_frame(n)` is called after each frame (a progress bar)."""
    streams = list(streams)
    reports = []
    for stream in streams:
        folder = save_dir if len(streams) == 1 else save_dir / stream.name
        folder.mkdir(parents=True, exist_ok=True)
        reports.append(_analyze_stream(stream, regions, config, folder, video=video, save_video=save_video,
                                       on_frame=on_frame))  # fmt: skip
    return reports


def _analyze_stream(stream: TrackStream, regions_path, config: AnalyzeConfig, folder: Path, *, video, save_video,
                    on_frame) -> SequenceReport:  # fmt: skip
    first = next(stream.frames, None)
    if first is None:
        return SequenceReport(stream.name, {"lines": {}, "zones": {}})
    frames = itertools.chain([first], stream.frames)
    size = None if first.image is None else (first.image.shape[1], first.image.shape[0])
    fps = config.fps or first.fps or DEFAULT_FPS
    telemetry = _telemetry(config, video) if config.gsd is None and config.altitude is None else None
    fixed_gsd = _fixed_gsd(config, size)
    regions = load_regions(regions_path, frame_size=size, from_latlon=_latlon_mapper(telemetry, first.number, size))
    analysis = Analysis(regions, names=stream.names, fps=fps, config=config, frame_size=size or (1, 1),
                        measure_speed=fixed_gsd is not None or telemetry is not None)  # fmt: skip
    writer = VideoFile(folder / f"{stream.name}.mp4", fps) if save_video and first.image is not None else None
    geo_rows, seconds, count, first_image = [], 0.0, 0, None
    try:
        for frame in frames:
            start = time.perf_counter()
            here = telemetry.at(frame.number) if telemetry else None
            width = frame.image.shape[1] if frame.image is not None else (size or (0, 0))[0]
            gsd = fixed_gsd if fixed_gsd is not None else (telemetry_gsd(here, width) if here and width else None)
            points, speeds = analysis.update(frame, gsd=gsd)
            if here is not None and gsd is not None and frame.image is not None:
                geo = pixels_to_wgs84(points.image, here, image_size=size, gsd=gsd)
                geo_rows += [(frame.number, int(i), class_name(stream.names, c), round(a, 7), round(b, 7))
                             for i, c, (a, b) in zip(points.ids, points.labels, geo.tolist(), strict=True)]  # fmt: skip
            seconds += time.perf_counter() - start
            if writer is not None and frame.image is not None:
                labels = [class_name(stream.names, c) for c in frame.labels.tolist()]
                writer.write(draw_analytics(frame.image, ground=analysis.ground, counter=analysis.counter,
                                            zones=analysis.zones, boxes=frame.boxes, ids=frame.ids, labels=labels,
                                            speeds=speeds))  # fmt: skip
            first_image = frame.image if first_image is None else first_image
            count += 1
            if on_frame is not None:
                on_frame(1)
    finally:
        if writer is not None:
            writer.close()
    report = SequenceReport(stream.name, analysis.counts(), count, seconds, analysis.mean_speeds())
    report.saved += [write_counts(folder / "counts.json", report.counts),
                     write_events(folder / "events.csv", analysis.counter.events + analysis.zones.events)]  # fmt: skip
    if analysis.speed is not None:
        rows = [(f, t, class_name(stream.names, c), round(s, 3), int(x)) for f, t, c, s, x in analysis.speed.rows]
        report.saved.append(write_csv(folder / "tracks_speed.csv", SPEED_COLUMNS, rows))
    if geo_rows:
        report.saved.append(write_csv(folder / "tracks_geo.csv", GEO_COLUMNS, geo_rows))
    report.saved += write_heatmap(folder, analysis.heatmap.array, analysis.heatmap.overlay(first_image))
    if writer is not None:
        report.saved.append(writer.path)
    return report


def _latlon_mapper(telemetry: FrameTelemetry | None, number: int, size: tuple[int, int] | None):
    """Latitude, longitude -> pixels of the first frame (number `number`), or None without telemetry for it."""
    here = telemetry.at(number) if telemetry and size else None
    if here is None:
        return None
    gsd = telemetry_gsd(here, size[0])
    return lambda latlon: wgs84_to_pixels(latlon, here, image_size=size, gsd=gsd)


def _fixed_gsd(config: AnalyzeConfig, size: tuple[int, int] | None) -> float | None:
    if config.gsd is not None:
        return config.gsd
    if config.altitude is None:
        return None
    if size is None:
        raise InputError("--altitude needs the frames' width for the GSD: give --source with the frames, or --gsd")
    return ground_sampling_distance(config.altitude, focal_mm=config.focal_mm, sensor_mm=config.sensor_mm,
                                    image_width=size[0])  # fmt: skip


def _telemetry(config: AnalyzeConfig, video) -> FrameTelemetry | None:
    """The SRT telemetry by frame, or None with one warning when it is missing or unreadable."""
    path = Path(config.srt) if config.srt else _sidecar(video)
    if path is None:
        LOGGER.warning("no ground sampling distance (--gsd, --altitude/--focal-mm/--sensor-mm or an SRT sidecar): "
                       "positions stay in pixels and speeds are not measured")  # fmt: skip
        return None
    try:
        return FrameTelemetry(read_srt(path))
    except (OSError, ValueError) as error:
        cause = str(error) if isinstance(error, ValueError) else f"{path}: cannot read it ({error.strerror})"
        LOGGER.warning(f"{cause}; positions stay in pixels, speeds need --gsd")
        return None


def _sidecar(video) -> Path | None:
    if video is None or not Path(str(video)).is_file():
        return None
    for suffix in (".SRT", ".srt"):
        path = Path(str(video)).with_suffix(suffix)
        if path.is_file():
            return path
    return None
