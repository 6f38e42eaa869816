"""Ground speed of tracks in km/h, with the camera's own motion removed.

A track's ground points (`tphyolo.analyze.points`, the first frame's pixels: the camera's pan, zoom and turn
taken out through the accumulated camera motion) are turned into metres by the ground sampling distance: `gsd`
metres per pixel of the current frame (a number for the whole stream, or one per frame given to `update`),
times the frame's pixels per ground pixel. The speed in a frame is the straight distance between the track's
ground point now and its oldest point within the last `window` frames, over the time between them: a window
smooths the jitter of the boxes. A track seen in fewer than half the window's frames (and at least two) has no
speed yet (NaN). A speed above `max_speed` km/h is flagged as implausible (a wrong match, a bad motion estimate).
"""

from __future__ import annotations

import numpy as np

from tphyolo.analyze.points import TrackPoints, TrackSlots, grown
from tphyolo.errors import InputError

SPEED_COLUMNS = ("frame", "track", "class", "speed_kmh", "implausible")


class Speed:
    """Measures speeds frame by frame (see the module docstring): `update(points, gsd=...)` returns (N,) km/h for
    the frame's tracks (NaN for a track not yet seen long enough); `rows` keeps (frame, id, class id, km/h,
    flagged) of every measured track-frame and `mean_speed(track)` a track's mean."""

    def __init__(self, *, fps: float, gsd: float | None = None, window: int = 10,
                 max_speed: float | None = None) -> None:  # fmt: skip
        if not fps > 0:
            raise InputError(f"fps must be > 0, got {fps}")
        if gsd is not None and not gsd > 0:
            raise InputError(f"gsd must be > 0 metres per pixel, got {gsd}")
        if window < 1:
            raise InputError(f"window must be >= 1 frame, got {window}")
        self.fps, self.gsd, self.window, self.max_speed = float(fps), gsd, int(window), max_speed
        self.reset()

    def reset(self) -> None:
        """Forget every track."""
        self._slots = TrackSlots()
        w = self.window
        # per track, its last `window` observations in a ring: frame (-inf: none), ground xy, metres per ground px
        self._frame = np.zeros((0, w))
        self._xy = np.zeros((0, w, 2))
        self._mpp = np.zeros((0, w))
        self._seen = np.zeros(0, np.int64)  # observations so far (the ring's next slot is seen % window)
        self._rows: list[np.ndarray] = []  # (K, 5) per frame: frame, id, class id, km/h, flagged

    def update(self, points: TrackPoints, *, gsd: float | None = None) -> np.ndarray:
        """(N,) km/h of the frame's tracks; `gsd`: this frame's metres per pixel (default: the stream's)."""
        gsd = self.gsd if gsd is None else gsd
        if gsd is None or not gsd > 0:
            raise InputError(f"frame {points.number}: no ground sampling distance (> 0 metres per pixel), got {gsd}")
        rows = self._slots.rows(points.ids)
        size = len(self._slots)
        self._frame, self._xy = grown(self._frame, size, -np.inf), grown(self._xy, size, 0.0)
        self._mpp, self._seen = grown(self._mpp, size, 0.0), grown(self._seen, size, 0)
        at = self._seen[rows] % self.window
        self._frame[rows, at], self._xy[rows, at], self._mpp[rows, at] = (
            points.number,
            points.ground,
            gsd * points.scale,
        )
        self._seen[rows] += 1
        frames = self._frame[rows]  # (N, W)
        recent = frames > points.number - self.window
        oldest = np.where(recent, frames, np.inf).argmin(1)
        n = np.arange(len(rows))
        elapsed = (points.number - frames[n, oldest]) / self.fps  # seconds
        metres = np.hypot(*(points.ground - self._xy[rows, oldest]).T)
        metres *= np.where(recent, self._mpp[rows], 0.0).sum(1) / recent.sum(1)
        measured = (recent.sum(1) >= max(2, (self.window + 1) // 2)) & (elapsed > 0)
        speeds = np.full(len(rows), np.nan)
        speeds[measured] = metres[measured] / elapsed[measured] * 3.6
        flagged = speeds > self.max_speed if self.max_speed is not None else np.zeros(len(rows), dtype=bool)
        self._rows.append(np.column_stack([np.full(len(rows), points.number), points.ids, points.labels, speeds,
                                           flagged])[measured])  # fmt: skip
        return speeds

    @property
    def rows(self) -> list[tuple[int, int, int, float, bool]]:
        """(frame, track id, class id, km/h, flagged) of every measured track-frame, in order."""
        table = np.concatenate(self._rows) if self._rows else np.zeros((0, 5))
        return [(int(f), int(t), int(c), float(s), bool(x)) for f, t, c, s, x in table.tolist()]

    def mean_speed(self, track: int) -> float:
        """Mean km/h of track `track` over its measured frames (NaN when none)."""
        table = np.concatenate(self._rows) if self._rows else np.zeros((0, 5))
        speeds = table[table[:, 1] == track, 3]
        return float(speeds.mean()) if len(speeds) else float("nan")
