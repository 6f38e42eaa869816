"""The ground under a moving camera: frame-to-frame camera motion accumulated from the first frame.

Lines, zones, speeds and the heatmap live in ground coordinates, the pixels of the stream's first frame. A
tracker with camera-motion compensation (`tphyolo.track.ByteTracker.camera_motion` after each `update`), or
`tphyolo.track.cmc.CameraMotion` on the frames for a tracker without it, gives per frame the (2, 3) affine from
the previous frame's pixels to this one's; their product maps the first frame's pixels to the current frame's,
and its inverse brings a track's position back onto the ground. Without compensation (the identity each frame)
ground coordinates are image coordinates.
"""

from __future__ import annotations

import numpy as np


class GroundMotion:
    """Accumulates camera motion: call `advance(motion)` once per frame, the first frame included (its motion is
    the identity), then map points with `to_ground` / `to_image`."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start a new stream: the next frame is the first (ground = image)."""
        self.ground_to_image = np.eye(3)  # (3, 3): first-frame pixels -> current frame pixels
        self._image_to_ground = np.eye(3)
        self._scale = 1.0

    def advance(self, motion: np.ndarray | None) -> None:
        """The next frame, `motion` (2, 3) from the previous frame's pixels to its own (None: the identity)."""
        if motion is not None:
            step = np.vstack([np.asarray(motion, dtype=np.float64).reshape(2, 3), [0.0, 0.0, 1.0]])
            self.ground_to_image = step @ self.ground_to_image
            self._image_to_ground = np.linalg.inv(self.ground_to_image)
            self._scale = float(np.sqrt(abs(np.linalg.det(self.ground_to_image[:2, :2]))))

    @property
    def scale(self) -> float:
        """Current-frame pixels per ground pixel (the accumulated zoom)."""
        return self._scale

    def to_ground(self, points: np.ndarray) -> np.ndarray:
        """(N, 2) ground coordinates of points (N, 2) in current-frame pixels."""
        return _apply(self._image_to_ground, points)

    def to_image(self, points: np.ndarray) -> np.ndarray:
        """(N, 2) current-frame pixels of ground points (N, 2)."""
        return _apply(self.ground_to_image, points)


def _apply(matrix: np.ndarray, points: np.ndarray) -> np.ndarray:
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    return points @ matrix[:2, :2].T + matrix[:2, 2]
