"""Flight telemetry from a DJI-style SRT sidecar: the drone's position and height in each video frame.

DJI drones write, next to each video, a subtitle file with one entry per frame. Two layouts are read:

    1
    00:00:00,000 --> 00:00:00,033
    <font size="28">FrameCnt: 1, DiffTime: 33ms
    2024-05-01 10:00:00.033
    [iso: 100] [shutter: 1/500.0] [fnum: 1.7] [focal_len: 24.00] [latitude: 47.376900] [longitude: 8.541700]
    [rel_alt: 60.000 abs_alt: 468.000] [gb_yaw: 15.0]</font>

(the Mini, Air and Mavic 3 families: `rel_alt` is the height above the take-off point, `focal_len` the 35 mm
equivalent focal length, `gb_yaw` the gimbal's heading in degrees from north, where written), and the older

    GPS(8.541700,47.376900,20) BAROMETER:60.0

(Phantom and Inspire: longitude, latitude, then the height in `BAROMETER` or `H`). A frame's number is its
`FrameCnt`, else the entry's index. The height above the take-off point stands for the height above the
ground (flat ground is assumed). `read_srt` raises ValueError naming the file for a file without one readable
entry; entries lacking a field are skipped.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tphyolo.errors import InputError

MAX_SRT_BYTES = 64 << 20
_FIELD = re.compile(r"\b(latitude|longitude|rel_alt|altitude|focal_len|gb_yaw)\s*:\s*(-?[\d.]+)")
_GPS = re.compile(r"GPS\s*\(\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*,\s*(-?[\d.]+)\s*\)")
_HEIGHT = re.compile(r"\b(?:BAROMETER|H)\s*[:=]?\s*(-?[\d.]+)")
_FRAME = re.compile(r"FrameCnt\s*:\s*(\d+)")


@dataclass(frozen=True)
class Telemetry:
    """Where the drone was in one frame: `latitude` and `longitude` (WGS84 degrees), `height` above the ground
    (metres), `focal_35mm` the 35 mm equivalent focal length (None when not written) and `yaw`, the heading of
    the image's up direction in degrees clockwise from north (0 when not written)."""

    latitude: float
    longitude: float
    height: float
    focal_35mm: float | None = None
    yaw: float = 0.0


class FrameTelemetry:
    """The telemetry of a video by frame number (`read_srt`'s), with each frame's entry looked up in
    O(log n): `at(number)` is the frame's own entry, else that of the nearest earlier frame that has one."""

    def __init__(self, frames: Mapping[int, Telemetry]) -> None:
        self._frames = dict(frames)
        self._numbers = sorted(self._frames)

    def __len__(self) -> int:
        return len(self._numbers)

    def at(self, number: int) -> Telemetry | None:
        if number in self._frames:
            return self._frames[number]
        earlier = bisect.bisect_right(self._numbers, number)
        return self._frames[self._numbers[earlier - 1]] if earlier else None


def read_srt(path: str | Path) -> dict[int, Telemetry]:
    """{frame number (from 1): Telemetry} of SRT file `path` (see the module docstring)."""
    path = Path(path)
    if path.stat().st_size > MAX_SRT_BYTES:
        raise InputError(f"{path}: larger than {MAX_SRT_BYTES >> 20} MiB; not an SRT telemetry file")
    text = path.read_text(encoding="utf-8", errors="replace")
    frames: dict[int, Telemetry] = {}
    for index, entry in enumerate(re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip()), start=1):
        telemetry = _entry(entry)
        if telemetry is not None:
            number = _FRAME.search(entry)
            frames[int(number.group(1)) if number else index] = telemetry
    if not frames:
        raise InputError(f"{path}: no entry with latitude, longitude and height; not a DJI-style SRT telemetry file")
    return frames


def _entry(entry: str) -> Telemetry | None:
    fields = {name: float(value) for name, value in _FIELD.findall(entry) if _number(value)}
    gps = _GPS.search(entry)
    if gps is not None and all(_number(v) for v in gps.groups()):
        height = _HEIGHT.search(entry[gps.end() :])
        fields.setdefault("longitude", float(gps.group(1)))
        fields.setdefault("latitude", float(gps.group(2)))
        if height is not None and _number(height.group(1)):
            fields.setdefault("rel_alt", float(height.group(1)))
    height = fields.get("rel_alt", fields.get("altitude"))
    if "latitude" not in fields or "longitude" not in fields or height is None:
        return None
    if not (-90 <= fields["latitude"] <= 90 and -180 <= fields["longitude"] <= 180 and height > 0):
        return None
    return Telemetry(
        fields["latitude"], fields["longitude"], height, fields.get("focal_len"), fields.get("gb_yaw", 0.0)
    )


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
