"""The trackers, one row each: the name `--tracker` takes, the class that keeps the tracker contract
(`tphyolo.track.interface.MultiObjectTracker`) and its preset settings.

    tracker = make_tracker("ocsort")                         # the preset
    tracker = make_tracker("my_tracker.yaml")                # `tracker: ocsort` plus the fields to change
    tracker = make_tracker("bytetrack", track_buffer=60)     # keywords win over both

| name | class | settings |
| --- | --- | --- |
| `bytetrack` | `track.tracker.ByteTracker` | `TrackerConfig` preset (ByteTrack, Zhang et al. 2022) for drones |
| `botsort` | `track.tracker.ByteTracker` | `TrackerConfig` preset (BoT-SORT, Aharon et al. 2022) for drones |
| `ocsort` | `track.ocsort.OCSort` | `OCSortConfig` (OC-SORT, Cao et al. 2023) for drones |
| `bytetrack-mot17`, `botsort-mot17`, `ocsort-mot17` | the same | the settings each method published for MOT17 |

The drone presets are measured by `benchmarks/tracking_defaults.py` (docs/tracking.md); a `-mot17` row makes a
tracker whose settings name the method (`config.tracker` is `bytetrack`, `botsort` or `ocsort`).

A new tracker is its module (a class with `config`, `reset()` and `update(...) -> Tracks`, and a frozen settings
dataclass whose `tracker` field is its name) and one row here. A row names its class by its dotted path, imported
when a tracker is made, so that reading the names and settings (`tphyolo track -h`) imports no torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from tphyolo.track.config import TRACKER_PRESETS, settings_from
from tphyolo.track.interface import MultiObjectTracker
from tphyolo.track.ocsort import OCSORT_MOT17, OCSortConfig


@dataclass(frozen=True)
class TrackerKind:
    """One registered tracker: `cls`, the dotted path (`module:Class`) of the class built from its settings;
    `preset`, its default settings."""

    cls: str
    preset: Any

    def make(self, settings: Any) -> MultiObjectTracker:
        """The tracker built from `settings`."""
        module, name = self.cls.split(":")
        return getattr(importlib.import_module(module), name)(settings)


TRACKERS: dict[str, TrackerKind] = {
    "bytetrack": TrackerKind("tphyolo.track.tracker:ByteTracker", TRACKER_PRESETS["bytetrack"]),
    "botsort": TrackerKind("tphyolo.track.tracker:ByteTracker", TRACKER_PRESETS["botsort"]),
    "ocsort": TrackerKind("tphyolo.track.ocsort:OCSort", OCSortConfig()),
    "bytetrack-mot17": TrackerKind("tphyolo.track.tracker:ByteTracker", TRACKER_PRESETS["bytetrack-mot17"]),
    "botsort-mot17": TrackerKind("tphyolo.track.tracker:ByteTracker", TRACKER_PRESETS["botsort-mot17"]),
    "ocsort-mot17": TrackerKind("tphyolo.track.ocsort:OCSort", OCSORT_MOT17),
}
TRACKER_NAMES: tuple[str, ...] = tuple(TRACKERS)


def tracker_settings(source: Any = "bytetrack", **overrides: Any) -> Any:
    """The settings of `source`: a tracker name, a settings object, or a yaml file naming its tracker as
    `tracker:` (default bytetrack) and the settings that differ from its preset; `overrides` win over both.
    ValueError naming the file (or tracker) and the key for an unknown name, key or value."""
    return settings_from(source, {name: kind.preset for name, kind in TRACKERS.items()}, **overrides)


def make_tracker(source: Any = "bytetrack", **overrides: Any) -> MultiObjectTracker:
    """A new tracker from `source` and `overrides` (see `tracker_settings`)."""
    settings = tracker_settings(source, **overrides)
    return TRACKERS[settings.tracker].make(settings)

