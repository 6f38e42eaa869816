"""Counting lines and zones, and the yaml file that lists them.

    lines:
      - name: north_exit
        points: [[0, 270], [1024, 270]]     # a polyline, two or more points, first -> last is its direction
    zones:
      - name: junction
        points: [[200, 100], [800, 100], [800, 440], [200, 440]]   # a simple polygon, three or more points

Coordinates are pixels of the stream's first frame (the ground, `tphyolo.analyze.motion`). `load_regions`
refuses, in one line naming the file and the line or zone: an empty file or one with neither list, a point
outside the first frame, a line with fewer than 2 points, a zone with fewer than 3 or whose edges cross, a name
given twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.analyze.geometry import is_simple_polygon
from tphyolo.yaml_files import load_yaml_file


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


def load_regions(path: str | Path, *, frame_size: tuple[int, int] | None = None) -> Regions:
    """The lines and zones of yaml file `path` (see the module docstring); `frame_size` (width, height) of the
    first frame, when known, bounds the points. Raises ValueError naming the file and the problem."""
    path = Path(path)
    data = load_yaml_file(path)
    if not data:
        raise ValueError(f"{path}: empty; give 'lines:' and/or 'zones:' (lists of name and points)")
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with 'lines:' and/or 'zones:', got {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in ("lines", "zones"))
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {unknown}; known: ['lines', 'zones']")
    try:
        lines = tuple(Line(name, points) for name, points in _entries(data, "lines", 2))
        zones = tuple(Zone(name, points) for name, points in _entries(data, "zones", 3))
        if not lines and not zones:
            raise ValueError("no lines and no zones")
        names = [r.name for r in (*lines, *zones)]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"name {twice[0]!r} is given twice")
        for region in (*lines, *zones):
            _check(region, frame_size)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return Regions(lines, zones)


def _entries(data: dict, key: str, least: int):
    entries = data.get(key) or []
    if not isinstance(entries, list):
        raise ValueError(f"'{key}' must be a list of entries with name and points")
    for i, entry in enumerate(entries):
        where = f"{key}[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "points"}:
            raise ValueError(f"{where}: expected exactly 'name' and 'points'")
        name = str(entry["name"])
        try:
            points = np.asarray(entry["points"], dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{key[:-1]} {name!r}: points must be [[x, y], ...] numbers") from None
        if points.ndim != 2 or points.shape[1] != 2 or len(points) < least or not np.isfinite(points).all():
            raise ValueError(f"{key[:-1]} {name!r}: needs {least} or more [x, y] points, got {entry['points']!r:.80}")
        yield name, points


def _check(region: Line | Zone, frame_size: tuple[int, int] | None) -> None:
    kind = "line" if isinstance(region, Line) else "zone"
    if frame_size is not None:
        width, height = frame_size
        outside = (region.points[:, 0] < 0) | (region.points[:, 0] > width) | (region.points[:, 1] < 0) | (
            region.points[:, 1] > height)  # fmt: skip
        if outside.any():
            x, y = region.points[np.argmax(outside)]
            raise ValueError(f"{kind} {region.name!r}: point ({x:g}, {y:g}) is outside the first frame "
                             f"({width} x {height} pixels)")  # fmt: skip
    if kind == "zone" and not is_simple_polygon(region.points):
        raise ValueError(f"zone {region.name!r}: its edges cross (a self-intersecting polygon)")
