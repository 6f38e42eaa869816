"""The settings of an analysis (`AnalyzeConfig`), and what `tphyolo analyze` reads and how it tracks
(`AnalyzeInputs`, `AnalyzeTracking`, `AnalyzeOutputs`): frozen dataclasses whose fields are also its flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tphyolo.analyze.points import ANCHORS
from tphyolo.errors import InputError
from tphyolo.flags import AT_LEAST_ONE, Bounds, check_field_types, flag
from tphyolo.track.config import CMC_METHODS
from tphyolo.track.registry import TRACKER_NAMES

POSITIVE = Bounds(0, low_open=True)


@dataclass(frozen=True)
class AnalyzeConfig:
    """How tracks are read into counts, dwell, speeds and heatmaps (see `tphyolo.analyze.pipeline`).

    The ground sampling distance comes from `gsd`, else from `altitude` with `focal_mm` and `sensor_mm` (both
    needed), else from the video's SRT telemetry sidecar (`srt`, or `<video>.SRT` next to it), per frame; with
    none of them speeds are not measured (a warning says so) and positions stay in pixels.
    """

    anchor: str = flag("centre", "--anchor", choices=ANCHORS, help="a track's point: its box centre or bottom middle")
    fps: float | None = flag(None, "--fps", help="frame rate of --tracks/--detections files without a video "
                             "(default: the video's, else 30)", bounds=POSITIVE)  # fmt: skip
    gsd: float | None = flag(None, "--gsd", metavar="M_PER_PX", help="ground sampling distance, metres per pixel",
                             bounds=POSITIVE)  # fmt: skip
    altitude: float | None = flag(None, "--altitude", metavar="M", help="flight height above the ground, metres "
                                  "(with --focal-mm and --sensor-mm: the GSD)", bounds=POSITIVE)  # fmt: skip
    focal_mm: float | None = flag(None, "--focal-mm", help="lens focal length, mm", bounds=POSITIVE)
    sensor_mm: float | None = flag(None, "--sensor-mm", help="sensor width, mm", bounds=POSITIVE)
    srt: str | None = flag(None, "--srt", metavar="FILE", help="DJI-style SRT telemetry (default: <video>.SRT)")
    window: int = flag(10, "--speed-window", metavar="FRAMES", help="frames a speed is measured over",
                       bounds=AT_LEAST_ONE)  # fmt: skip
    max_speed: float | None = flag(None, "--max-speed", metavar="KMH", help="flag speeds above this as implausible",
                                   bounds=POSITIVE)  # fmt: skip
    margin: float = flag(2.0, "--margin", metavar="PX", help="hysteresis band around lines and zone edges, pixels",
                         bounds=Bounds(0))  # fmt: skip
    cell: int = flag(4, "--heatmap-cell", metavar="PX", help="heatmap cell size, pixels", bounds=AT_LEAST_ONE)

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.anchor not in ANCHORS:
            raise InputError(f"--anchor must be one of {list(ANCHORS)}, got {self.anchor!r}")
        lens = (self.focal_mm is None, self.sensor_mm is None, self.altitude is None)
        if len(set(lens)) > 1:
            raise InputError("--altitude, --focal-mm and --sensor-mm go together: give all three or none")
        if self.gsd is not None and self.altitude is not None:
            raise InputError("give --gsd or --altitude/--focal-mm/--sensor-mm, not both")


@dataclass(frozen=True)
class AnalyzeInputs:
    """What is analysed: the lines and zones, and the source the job's detector runs on, or detection files or
    track files (`check_one_input`, which the job checks)."""

    lines: str | None = flag(None, "--lines", required=True, metavar="YAML",
                             help="the lines and zones (first-frame pixels)")  # fmt: skip
    source: str | None = flag(None, "--source", help="video or frames: what the detector runs on, and what is drawn")
    detections: Path | None = flag(None, "--detections", metavar="PATH",
                                   help="detection files (<seq>.txt) to track: a folder of them, or one")
    tracks: Path | None = flag(None, "--tracks", metavar="PATH",
                               help="track files of a track run (<seq>.txt) or ground truth (UAVDT "
                                    "<seq>_gt_whole.txt, MOT <seq>/gt/gt.txt): a folder of them, or one")  # fmt: skip


def check_one_input(*, detector: bool, source: Any, detections: Any, tracks: Any) -> None:
    """The one-input rule of an analysis: exactly one of a detector (which needs `source` to run on),
    `detections` or `tracks`; ValueError in the words of the flags otherwise."""
    if detector + (detections is not None) + (tracks is not None) != 1:
        raise InputError("give one of --weights (with --source), --detections or --tracks")
    if detector and source is None:
        raise InputError("--weights needs --source: the video or frames to run on")


@dataclass(frozen=True)
class AnalyzeTracking:
    """The tracker that links detections into tracks, and the camera-motion estimate."""

    tracker: str = flag("bytetrack", "--tracker", metavar="NAME|YAML",
                        help=f"{' or '.join(TRACKER_NAMES)}, or a yaml of settings")  # fmt: skip
    cmc: str = flag("sparse", "--cmc", choices=CMC_METHODS, help="camera-motion estimate that keeps lines and zones "
                    "on the ground; also the tracker's, when it has the setting")  # fmt: skip

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


@dataclass(frozen=True)
class AnalyzeOutputs:
    """What an analysis writes besides its tables."""

    save_video: bool = flag(True, "--no-save-video", help="do not write the annotated video")
