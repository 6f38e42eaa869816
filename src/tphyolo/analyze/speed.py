"""Ground speed of tracks in km/h, with the camera's own motion removed.

A track's ground points (`tphyolo.analyze.points`, the first frame's pixels: the camera's pan, zoom and turn
taken out through the accumulated camera motion) are turned into metres by the ground sampling distance: `gsd`
metres per pixel of the current frame (a number for the whole stream, or one per frame given to `update`),
times the frame's pixels per ground pixel. The speed in a frame is the straight distance between the track's
ground point now and its oldest point within the last `window` frames, over the time between them: a window
smooths the jitter of the boxes. A track seen once has no speed yet (NaN). A speed above `max_speed` km/h is
flagged as implausible (a wrong match, a bad motion estimate).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from tphyolo.analyze.points import TrackPoints

SPEED_COLUMNS = ("frame", "track", "class", "speed_kmh", "implausible")


class Speed:
    """Measures speeds frame by frame (see the module docstring): `update(points, gsd=...)` returns (N,) km/h for
    the frame's tracks (NaN for a track seen once); `rows` keeps (frame, id, class id, km/h, flagged) of every
    measured track-frame and `mean_speed(track)` a track's mean."""

    def __init__(self, *, fps: float, gsd: float | None = None, window: int = 10,
                 max_speed: float | None = None) -> None:  # fmt: skip
        if not fps > 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        if gsd is not None and not gsd > 0:
            raise ValueError(f"gsd must be > 0 metres per pixel, got {gsd}")
        if window < 1:
            raise ValueError(f"window must be >= 1 frame, got {window}")
        self.fps, self.gsd, self.window, self.max_speed = float(fps), gsd, int(window), max_speed
        self.reset()

    def reset(self) -> None:
        """Forget every track."""
        self._history: dict[int, deque] = {}  # id -> (frame, ground xy, metres per ground pixel)
        self.rows: list[tuple[int, int, int, float, bool]] = []

    def update(self, points: TrackPoints, *, gsd: float | None = None) -> np.ndarray:
        """(N,) km/h of the frame's tracks; `gsd`: this frame's metres per pixel (default: the stream's)."""
        gsd = self.gsd if gsd is None else gsd
        if gsd is None or not gsd > 0:
            raise ValueError(f"frame {points.number}: no ground sampling distance (> 0 metres per pixel), got {gsd}")
        metres_per_ground_pixel = gsd * points.scale
        speeds = np.full(len(points), np.nan)
        for i, (track, label) in enumerate(zip(points.ids.tolist(), points.labels.tolist(), strict=True)):
            history = self._history.setdefault(track, deque())
            history.append((points.number, points.ground[i], metres_per_ground_pixel))
            while history[0][0] <= points.number - self.window:
                history.popleft()
            if len(history) < 2:
                continue
            frame, start, _ = history[0]
            metres = np.hypot(*(points.ground[i] - start)) * np.mean([h[2] for h in history])
            speeds[i] = metres / ((points.number - frame) / self.fps) * 3.6
            flagged = self.max_speed is not None and speeds[i] > self.max_speed
            self.rows.append((points.number, track, label, float(speeds[i]), flagged))
        return speeds

    def mean_speed(self, track: int) -> float:
        """Mean km/h of track `track` over its measured frames (NaN when none)."""
        speeds = [row[3] for row in self.rows if row[1] == track]
        return float(np.mean(speeds)) if speeds else float("nan")
