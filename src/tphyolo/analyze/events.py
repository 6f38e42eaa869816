"""What the analytics report as it happens: one `Event` per line crossing, zone entry and zone exit."""

from __future__ import annotations

from typing import NamedTuple

EVENT_COLUMNS = ("kind", "region", "track", "class", "frame", "time_s", "direction")


class Event(NamedTuple):
    """`kind`: "crossing", "entry" or "exit"; `region`: the line or zone's name; `track` id; `label` the class
    name; `frame` number (from 1) and `time` in seconds from the first frame; `direction`: "forward" or
    "backward" for a crossing, "" otherwise."""

    kind: str
    region: str
    track: int
    label: str
    frame: int
    time: float
    direction: str = ""

    def row(self) -> list:
        """The event as a row of `EVENT_COLUMNS`."""
        return [self.kind, self.region, self.track, self.label, self.frame, round(self.time, 4), self.direction]


UNNAMED = "object"  # the class of a track whose input gives none (label -1)


def class_name(names, label: int) -> str:
    """The name of class id `label` in `names` (a sequence or a mapping), UNNAMED for a negative id, else the
    id itself as text."""
    if int(label) < 0:
        return UNNAMED
    try:
        return str(names[int(label)]) if names is not None else str(int(label))
    except (IndexError, KeyError):
        return str(int(label))
