"""What one tracking run is asked to do: what to track (a detector, `DetectorSpec`, on a source or a data set's
split, or precomputed detections), with which tracker, and which files to write. Each field is also a `tphyolo
track` flag; the module imports nothing heavy, so that building the command line stays light.
`tphyolo.track.run.track_job` runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tphyolo.flags import AT_LEAST_ONE, check_field_types, flag
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.runtime.run_dir import OutputDir
from tphyolo.track.config import CMC_METHODS
from tphyolo.track.registry import TRACKER_NAMES

TRACK_CONF = 0.1  # the detector's threshold: ByteTrack's second association uses the weak detections
DEFAULT_TRACKER = "bytetrack"


@dataclass(frozen=True)
class TrackInputs:
    """What to track: the job's detector on `source` or on the `split` of a video data set (`data`), or the
    precomputed `detections` (with the frames of `source` when given)."""

    source: str | None = flag(
        None, "--source", help="video, folder of frames, folder of sequence folders, glob, stream"
    )
    data: str | None = flag(
        None, "--data", help="a video data set (yaml with 'tracking:', or 'synthetic-mot'): its split"
    )
    split: str = flag("val", "--split", choices=("train", "val", "test"), help="--data split")
    detections: str | None = flag(
        None, "--detections", metavar="DIR",
        help="track these per-sequence detection files (MOT or VisDrone-MOT rows) instead of running a model",
    )  # fmt: skip
    vid_stride: int = flag(1, "--vid-stride", metavar="N", bounds=AT_LEAST_ONE, help="track every N-th video frame")

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


@dataclass(frozen=True)
class TrackerChoice:
    """Which tracker: a registered name or a yaml of settings over one, and its camera-motion compensation
    (None: the tracker's own)."""

    tracker: str = flag(
        DEFAULT_TRACKER, "--tracker", metavar="NAME|YAML",
        help=f"{', '.join(TRACKER_NAMES)}, or a yaml of settings over one",
    )  # fmt: skip
    cmc: str | None = flag(
        None, "--cmc", choices=CMC_METHODS, help="camera-motion compensation (default: the tracker's; botsort: sparse)"
    )

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


@dataclass(frozen=True)
class TrackOutputs:
    """Which files a run writes (`tphyolo.track.writers.TrackWriter`); a data set's split adds the format its
    ground truth is scored in."""

    save_mot: bool = flag(False, "--save-mot", help="MOTChallenge txt per sequence (mot/)")
    save_visdrone: bool = flag(False, "--save-visdrone", help="VisDrone-MOT txt per sequence (visdrone/)")
    save_img: bool = flag(True, "--no-save-img", help="do not write drawn videos / frames")


@dataclass(frozen=True)
class TrackJob:
    """One run of `tphyolo track`: the `detector` (`DetectorSpec`; None to track `inputs.detections`; its
    runtime and device are the run's unless it names them; `tphyolo track` gives it conf TRACK_CONF), `inputs`,
    `choice` of tracker, `outputs`, how drawn frames look (`style`) and where the run folder goes (`output`,
    under runs/track by default)."""

    detector: DetectorSpec | None = None
    inputs: TrackInputs = field(default_factory=TrackInputs)
    choice: TrackerChoice = field(default_factory=TrackerChoice)
    outputs: TrackOutputs = field(default_factory=TrackOutputs)
    style: DrawStyle = DEFAULT_STYLE
    output: OutputDir = field(default_factory=OutputDir)
