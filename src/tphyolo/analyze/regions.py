"""Counting lines and zones, and the yaml file that lists them.

    lines:
      - name: north_exit
        points: [[0, 270], [1024, 270]]     # a polyline, two or more points, first -> last is its direction
    zones:
      - name: junction
        points: [[200, 100], [800, 100], [800, 440], [200, 440]]   # a simple polygon, three or more points

Coordinates are pixels of the stream's first frame (the ground, `tphyolo.analyze.motion`), or, for a video with
telemetry, WGS84 degrees: `latlon: [[lat, lon], ...]` in place of `points`, turned into first-frame pixels by
the caller's `from_latlon` (`tphyolo.analyze.geo.wgs84_to_pixels` with the first frame's telemetry).
`load_regions` refuses, in one line naming the file and the line or zone: an empty file or one with neither
list, a name that is empty or given twice, a coordinate that is not a number (`true`, text) or lies beyond
MAX_COORDINATE pixels (or outside -90..90 latitude, -180..180 longitude), a point outside the first frame (of
a line or zone in pixels, when the frame is known), a line with fewer than 2 points or two equal points in a
row (a segment of no length has no direction to count), a zone with fewer than 3 points or whose edges cross,
a `latlon` entry without telemetry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.analyze.geometry import is_simple_polygon
from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

# Ten million pixels from the first frame: 100 km of ground at 1 cm a pixel. Far beyond what any flight pans to,
# and far below where the crossing tests' products of coordinates lose their precision or overflow.
MAX_COORDINATE = 1e7
LATLON_RANGE = (90.0, 180.0)


@dataclass(frozen=True)
class Line:
    """A counting line: `points` (K >= 2, 2) float64 ground pixels, first -> last its direction."""

    name: str
    points: np.ndarray


@dataclass(frozen=True)
class Zone:
    """A zone: `points` (K >= 3, 2) float64 ground pixels, a simple polygon."""

    name: str
    points: np.ndarray


@dataclass(frozen=True)
class Regions:
    """The lines and zones of one analysis."""

    lines: tuple[Line, ...] = ()
    zones: tuple[Zone, ...] = ()


def load_regions(path: str | Path, *, frame_size: tuple[int, int] | None = None,
                 from_latlon: Callable[[np.ndarray], np.ndarray] | None = None) -> Regions:  # fmt: skip
    """The lines and zones of yaml file `path` (see the module docstring); `frame_size` (width, height) of the
    first frame, when known, bounds the points; `from_latlon` maps (K, 2) latitude, longitude to first-frame
    pixels (None: no telemetry; `latlon` entries are then refused, unless `frame_size` is None too: a first
    look at the file before any frame). Raises ValueError naming the file and the problem."""
    path = Path(path)
    data = load_yaml_file(path)
    if not data:
        raise InputError(f"{path}: empty; give 'lines:' and/or 'zones:' (lists of name and points)")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping with 'lines:' and/or 'zones:', got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in ("lines", "zones"))
    if unknown:
        raise InputError(f"{path}: unknown key(s) {unknown}; known: ['lines', 'zones']")
    try:
        lines = [(Line(name, points), geo) for name, points, geo in _entries(data, "lines", 2, from_latlon, frame_size)]
        zones = [(Zone(name, points), geo) for name, points, geo in _entries(data, "zones", 3, from_latlon, frame_size)]
        for region, geographic in (*lines, *zones):
            if not geographic:
                _check(region, frame_size)
            elif from_latlon is not None:  # the ground a drone pans to may lie beyond the first frame
                _check(region, None)
        lines, zones = tuple(line for line, _ in lines), tuple(zone for zone, _ in zones)
        if not lines and not zones:
            raise InputError("no lines and no zones")
        names = [r.name for r in (*lines, *zones)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"name {twice[0]!r} is given twice")
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return Regions(lines, zones)


def _entries(data: dict, key: str, least: int, from_latlon, frame_size):
    entries = data.get(key) or []
    if not isinstance(entries, list):
        raise InputError(f"'{key}' must be a list of entries with name and points")
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if (
            not isinstance(entry, dict)
            or len(entry) != 2
            or "name" not in entry
            or not {"points", "latlon"} & set(entry)
        ):
            raise InputError(f"{where}: expected exactly 'name' and 'points' (or 'latlon')")
        if entry["name"] is None or isinstance(entry["name"], (bool, list, dict)) or not str(entry["name"]).strip():
            raise InputError(f"{where}: 'name' must be a non-empty name, got {entry['name']!r:.40}")
        name, field = str(entry["name"]), "points" if "points" in entry else "latlon"
        points = _points(entry[field], f"{key[:-1]} {name!r}: {field}")
        if points.ndim != 2 or points.shape[1] != 2 or len(points) < least or not np.isfinite(points).all():
            raise InputError(f"{key[:-1]} {name!r}: needs {least} or more [x, y] points, got {entry[field]!r:.80}")
        bound = np.array(LATLON_RANGE) if field == "latlon" else np.array([MAX_COORDINATE, MAX_COORDINATE])
        beyond = np.abs(points) > bound
        if beyond.any():
            value = points[beyond][0]
            limit = "latitude -90..90, longitude -180..180" if field == "latlon" else f"±{MAX_COORDINATE:,.0f} px"
            raise InputError(f"{key[:-1]} {name!r}: {field} value {value:g} is beyond {limit}")
        if key == "lines" and (np.diff(points, axis=0) == 0).all(axis=1).any():
            k = int(np.flatnonzero((np.diff(points, axis=0) == 0).all(axis=1))[0])
            raise InputError(f"line {name!r}: points {k + 1} and {k + 2} are the same point (a segment of no "
                             "length has no direction to count)")  # fmt: skip
        if field == "latlon":
            if from_latlon is None and frame_size is not None:
                raise InputError(f"{key[:-1]} {name!r} is in latitude/longitude: it needs the video's SRT telemetry")
            points = from_latlon(points) if from_latlon is not None else points  # degrees: a first look only
        yield name, points, field == "latlon"


def _points(value, where: str) -> np.ndarray:
    """`value` as an array of numbers; ValueError naming `where` for anything else: booleans (which numpy would
    take as 0 and 1) and text that is not a number. Text that is one is taken (YAML reads `1e5` as text)."""
    rows = value if isinstance(value, list) else None
    if rows is None or not all(
        isinstance(row, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in row)
        for row in rows
    ):
        raise InputError(f"{where} must be [[x, y], ...] numbers, got {value!r:.80}")
    try:
        return np.asarray([[float(v) for v in row] for row in rows], dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where} must be [[x, y], ...] numbers, got {value!r:.80}") from None


def _check(region: Line | Zone, frame_size: tuple[int, int] | None) -> None:
    kind = "line" if isinstance(region, Line) else "zone"
    if frame_size is not None:
        width, height = frame_size
        outside = (region.points[:, 0] < 0) | (region.points[:, 0] > width) | (region.points[:, 1] < 0) | (
            region.points[:, 1] > height)  # fmt: skip
        if outside.any():
            x, y = region.points[np.argmax(outside)]
            raise InputError(f"{kind} {region.name!r}: point ({x:g}, {y:g}) is outside the first frame "
                             f"({width} x {height} pixels)")  # fmt: skip
    if kind == "zone" and not is_simple_polygon(region.points):
        raise InputError(f"zone {region.name!r}: its edges cross (a self-intersecting polygon)")
