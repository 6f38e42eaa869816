"""Tracker settings: one frozen dataclass, a preset per tracker, and yaml files that override a preset.

    config = tracker_config("botsort")                    # the preset
    config = tracker_config("my_tracker.yaml")            # `tracker: botsort` plus the fields to change
    config = tracker_config("bytetrack", track_buffer=60)  # keywords win over both

The presets `bytetrack` and `botsort` are chosen for drone video by `benchmarks/tracking_defaults.py` (UAVDT
M0101's real trajectories and synthetic-mot, with detections simulated like a drone detector's and a real
detector's own; docs/tracking.md has the table): a detection is confident from 0.3 and starts a track from 0.3,
where the methods' published MOT17 settings (kept as `bytetrack-mot17` and `botsort-mot17`) ask 0.5 / 0.6 and
0.6 / 0.7 of scores that pedestrian detectors give. Small objects seen from above score lower: with a drone
detector's scores the published thresholds leave most true boxes to the second association, which starts no
track (UAVDT M0101: HOTA / IDF1 / MOTA 47.4 / 64.8 / 60.1 at 0.3 against 26.2 / 41.4 / 33.0 for ByteTrack's
MOT17 settings; every scene of the sweep, a clean detector's included, ranks 0.3 first or level). Beside the
thresholds: BoT-SORT runs without its appearance (re-identification) cue, which costs a network pass per box
and tells little about objects of 10-30 pixels seen from above; ByteTrack uses BoT-SORT's Kalman state
(`motion: xywh`) instead of its own (`xyah`), which localises boxes that change shape better; so the two differ
by BoT-SORT's camera-motion compensation alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from tphyolo.errors import InputError
from tphyolo.flags import FRACTION, NON_NEGATIVE, Bounds, check_field_types, checked
from tphyolo.track.kalman import MOTION_MODELS
from tphyolo.yaml_files import load_yaml_file

CMC_METHODS = ("sparse", "ecc", "orb", "none")
BYTETRACK_FAMILY = ("bytetrack", "botsort")  # the trackers TrackerConfig sets up; all: tphyolo.track.registry
COST_LIMIT = Bounds(0, 2, low_open=True)  # a limit on 1 - IoU (times a score): 0 would match nothing


@dataclass(frozen=True)
class TrackerConfig:
    """How a tracker associates detections with tracks, and when tracks are born and die.

    Per frame: detections scoring at least `track_high_thresh` are matched first with every track that is
    tracked or lost (cost 1 - IoU, times the score with `fuse_score`; pairs costing `match_thresh` or more never
    match); then the tracks still unmatched that were tracked in the last frame take the detections scoring
    `track_low_thresh` to `track_high_thresh` (limit `second_match_thresh`); then tracks born in the last frame
    take the high detections left (limit `unconfirmed_match_thresh`), or are dropped. A high detection left over
    scoring at least `new_track_thresh` starts a track, which gets its id when it is matched again in the next
    frame (at once in a stream's first frame). A track unmatched for more than `track_buffer` frames is dropped;
    of a tracked and a lost track overlapping by more than `duplicate_iou`, the younger is dropped.
    `class_aware`: a detection matches only tracks of its class. `motion`: the Kalman state (see
    `tphyolo.track.kalman`). `cmc`: camera-motion compensation (see `tphyolo.track.cmc`), estimated on frames
    shrunk to `cmc_size` pixels on the long side.
    """

    tracker: str = checked("bytetrack", choices=BYTETRACK_FAMILY)
    track_high_thresh: float = checked(0.3, bounds=FRACTION)
    track_low_thresh: float = checked(0.1, bounds=FRACTION)
    new_track_thresh: float = checked(0.3, bounds=FRACTION)
    match_thresh: float = checked(0.8, bounds=COST_LIMIT)
    second_match_thresh: float = checked(0.5, bounds=COST_LIMIT)
    unconfirmed_match_thresh: float = checked(0.7, bounds=COST_LIMIT)
    fuse_score: bool = True
    track_buffer: int = checked(30, bounds=NON_NEGATIVE)
    duplicate_iou: float = checked(0.85, bounds=FRACTION)
    class_aware: bool = False
    motion: str = checked("xywh", choices=MOTION_MODELS)
    cmc: str = checked("none", choices=CMC_METHODS)
    cmc_size: int = checked(480, bounds=Bounds(32))

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
        if self.track_low_thresh > self.track_high_thresh:
            raise InputError(f"track_low_thresh {self.track_low_thresh} is above track_high_thresh "
                             f"{self.track_high_thresh}")  # fmt: skip


TRACKER_PRESETS: dict[str, TrackerConfig] = {
    "bytetrack": TrackerConfig(),
    "botsort": TrackerConfig(tracker="botsort", cmc="sparse"),
    # the settings published for MOT17 (ByteTrack: Zhang et al. 2022; BoT-SORT: Aharon et al. 2022)
    "bytetrack-mot17": TrackerConfig(track_high_thresh=0.5, new_track_thresh=0.6, motion="xyah"),
    "botsort-mot17": TrackerConfig(tracker="botsort", track_high_thresh=0.6, new_track_thresh=0.7, cmc="sparse"),
}  # fmt: skip


def tracker_config(source: str | Path | TrackerConfig = "bytetrack", **overrides: Any) -> TrackerConfig:
    """The settings of `source` for the ByteTrack engine: a preset name (`TRACKER_PRESETS`), a TrackerConfig, or
    a yaml file naming its preset as `tracker:` (default bytetrack) and the fields that differ from it;
    `overrides` win over both. Raises ValueError naming the file and the key for an unknown key or a value of
    the wrong type. (`tphyolo.track.registry.tracker_settings` does the same for every tracker.)"""
    return settings_from(source, TRACKER_PRESETS, **overrides)


def settings_from(source: Any, presets: Mapping[str, Any], **overrides: Any) -> Any:
    """A tracker's settings from `source`: a settings object (returned with `overrides`), a name of `presets`
    (its preset with `overrides`) or a yaml file naming a preset as `tracker:` (default: the first) and the
    fields that differ from it. ValueError, naming the file and the key where there is one, for an unknown
    name, key or value."""
    if is_dataclass(source) and not isinstance(source, type):
        return _replaced(source, overrides, where=f"tracker {source.tracker}")
    text = str(source)
    if text in presets:
        return _replaced(presets[text], overrides, where=f"tracker {text}")
    path = Path(text)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise InputError(f"tracker {text!r}: neither a tracker name ({', '.join(presets)}) nor a .yaml file")
    data = load_yaml_file(path)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of tracker settings, got {type(data).__name__}")
    base = data.get("tracker", next(iter(presets)))
    if base not in presets:
        raise InputError(f"{path}: tracker {base!r} is not one of {list(presets)}")
    return _replaced(presets[base], data | overrides, where=str(path))


def _replaced(settings: Any, changes: Mapping[str, Any], *, where: str) -> Any:
    known = {f.name for f in fields(settings)}
    unknown = sorted(str(k) for k in changes if k not in known)
    if unknown:
        raise InputError(f"{where}: unknown tracker setting(s) {unknown}; known: {sorted(known)}")
    try:
        return replace(settings, **changes)
    except ValueError as error:
        raise InputError(f"{where}: {error}") from None
