"""The trackers' constant-velocity Kalman filters over many boxes at once: two motion models.

`KalmanBoxFilter` (ByteTrack, BoT-SORT), in elementwise array operations: the state of a box is 4 box
parameters and their velocities per frame, in one of two parametrisations, as the trackers that introduced them:

- `xyah` (ByteTrack, after SORT/DeepSORT): centre x, centre y, aspect ratio w / h, height; process and
  measurement noise grow with the height;
- `xywh` (BoT-SORT): centre x, centre y, width, height; the noise of x and w grows with the width, of y and h
  with the height, which fits boxes that change shape (a turning car seen from above) better.

The noise weights are the published ones: position 1/20 and velocity 1/160 of the box size per frame.

With diagonal noise, the covariance never couples a size parameter with anything but its own velocity, and
couples the centre's x and y only through a rotating camera (`warp`). `KalmanStates` keeps exactly those
blocks: the centre block (N, 4, 4) over (cx, cy, vx, vy) and per size parameter a 2 x 2 block, so predicting
and updating 100 boxes is a few dozen elementwise operations instead of 100 small matrix inversions. The
result equals the textbook filter with the full 8 x 8 covariance (`KalmanStates.covariance`; the tests check).

SORT's model (Bewley et al. 2016; OC-SORT keeps it), `predict` and `correct` on (N, 7) states and (N, 7, 7)
covariances: centre x, y, area s, aspect ratio r and the velocities of x, y and s (r is held constant), with
SORT's fixed noise; `to_measurement` and `to_boxes` convert xyxy boxes to its measurements and back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tphyolo.errors import InputError

MOTION_MODELS = ("xyah", "xywh")
POSITION_WEIGHT = 1 / 20
VELOCITY_WEIGHT = 1 / 160
_ASPECT_STD = {"initiate": (1e-2, 1e-5), "predict": (1e-2, 1e-5), "measure": 1e-1}  # xyah's fixed noise
_SIZE_COLUMNS = {"xyah": [3, 3, 3, 3], "xywh": [2, 3, 2, 3]}  # which of (cx, cy, p2, p3) each noise follows
_DIAGONAL = np.arange(4)
_CENTRE = [0, 1, 4, 5]  # the columns of (cx, cy, vx, vy) in `mean`


@dataclass
class KalmanStates:
    """N box states: `mean` (N, 8) = 4 box parameters then their velocities; `centre` (N, 4, 4) the covariance
    of (cx, cy, vx, vy); `size` (N, 2, 3) per size parameter (the two after the centre) the variance of the
    parameter, its covariance with its velocity, and the velocity's variance."""

    mean: np.ndarray
    centre: np.ndarray
    size: np.ndarray

    def __len__(self) -> int:
        return len(self.mean)

    def __getitem__(self, rows) -> KalmanStates:
        return KalmanStates(self.mean[rows], self.centre[rows], self.size[rows])

    def __setitem__(self, rows, value: KalmanStates) -> None:
        self.mean[rows], self.centre[rows], self.size[rows] = value.mean, value.centre, value.size

    @classmethod
    def empty(cls) -> KalmanStates:
        return cls(np.zeros((0, 8)), np.zeros((0, 4, 4)), np.zeros((0, 2, 3)))

    @classmethod
    def concatenate(cls, parts: Sequence[KalmanStates]) -> KalmanStates:
        return cls(*(np.concatenate([getattr(p, name) for p in parts]) for name in ("mean", "centre", "size")))

    def covariance(self) -> np.ndarray:
        """The full (N, 8, 8) covariance over the order of `mean`."""
        full = np.zeros((len(self), 8, 8))
        centre = [0, 1, 4, 5]
        full[:, np.array(centre)[:, None], np.array(centre)[None, :]] = self.centre
        for k, (p, v) in enumerate(((2, 6), (3, 7))):
            full[:, p, p], full[:, p, v], full[:, v, v] = self.size[:, k, 0], self.size[:, k, 1], self.size[:, k, 2]
            full[:, v, p] = self.size[:, k, 1]
        return full


class KalmanBoxFilter:
    """Predict, update and warp the states of N boxes with one parametrisation (`MOTION_MODELS`).

    Boxes go in and out as (N, 4) xyxy pixels; every method returns new states and leaves its inputs alone.
    """

    def __init__(self, model: str = "xywh") -> None:
        if model not in MOTION_MODELS:
            raise InputError(f"unknown motion model {model!r}; known: {list(MOTION_MODELS)}")
        self.model = model

    def measure(self, boxes: np.ndarray) -> np.ndarray:
        """(N, 4) xyxy -> (N, 4) measurements in this filter's box parameters."""
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        out = np.empty_like(boxes)
        w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
        out[:, 0], out[:, 1] = boxes[:, 0] + w / 2, boxes[:, 1] + h / 2
        out[:, 2] = w / np.maximum(h, 1e-6) if self.model == "xyah" else w
        out[:, 3] = h
        return out

    def boxes(self, states: KalmanStates) -> np.ndarray:
        """(N, 4) xyxy boxes of the states."""
        mean = states.mean
        h = mean[:, 3]
        half_w = (mean[:, 2] * h if self.model == "xyah" else mean[:, 2]) / 2
        out = np.empty((len(mean), 4))
        out[:, 0], out[:, 2] = mean[:, 0] - half_w, mean[:, 0] + half_w
        out[:, 1], out[:, 3] = mean[:, 1] - h / 2, mean[:, 1] + h / 2
        return out

    def _variances(self, params: np.ndarray, position: float, velocity: float, aspect: tuple[float, float]):
        """(N, 8) variances in the order of `mean`: (`position` x size)^2 for the 4 box parameters and
        (`velocity` x size)^2 for their velocities, where the size is the height (xyah; the aspect ratio has the
        fixed standard deviations `aspect`) or the width for x and w and the height for y and h (xywh)."""
        size = params[:, _SIZE_COLUMNS[self.model]]
        size *= size
        variances = np.empty((len(params), 8))
        np.multiply(size, position * position, out=variances[:, :4])
        np.multiply(size, velocity * velocity, out=variances[:, 4:])
        if self.model == "xyah":
            variances[:, 2], variances[:, 6] = aspect[0] ** 2, aspect[1] ** 2
        return variances

    def initiate(self, boxes: np.ndarray) -> KalmanStates:
        """New states for (N, 4) xyxy boxes: zero velocity, an uncertainty of a tenth of the box (position) and
        of 1/16 of it per frame (velocity)."""
        z = self.measure(boxes)
        n = len(z)
        var = self._variances(z, 2 * POSITION_WEIGHT, 10 * VELOCITY_WEIGHT, _ASPECT_STD["initiate"])
        centre = np.zeros((n, 4, 4))
        centre[:, _DIAGONAL, _DIAGONAL] = var[:, _CENTRE]
        size = np.zeros((n, 2, 3))
        size[:, :, 0], size[:, :, 2] = var[:, 2:4], var[:, 6:8]
        return KalmanStates(np.concatenate([z, np.zeros_like(z)], axis=1), centre, size)

    def predict(self, states: KalmanStates, *, hold_size: np.ndarray | None = None) -> KalmanStates:
        """States one frame later. `hold_size` (N,) bool: rows whose size velocities are zeroed first (tracks
        not seen in the last frame, whose size would otherwise drift on without measurements)."""
        mean = states.mean.copy()
        if hold_size is not None and hold_size.any():
            mean[hold_size, 7] = 0.0
            if self.model == "xywh":
                mean[hold_size, 6] = 0.0
        var = self._variances(mean[:, :4], POSITION_WEIGHT, VELOCITY_WEIGHT, _ASPECT_STD["predict"])
        mean[:, :4] += mean[:, 4:]
        centre = states.centre.copy()  # F P F^T with F = [[I, I], [0, I]] on (cx, cy, vx, vy)
        centre[:, :2, :] += centre[:, 2:, :]
        centre[:, :, :2] += centre[:, :, 2:]
        centre[:, _DIAGONAL, _DIAGONAL] += var[:, _CENTRE]
        p, c, v = states.size[:, :, 0], states.size[:, :, 1], states.size[:, :, 2]
        size = np.empty_like(states.size)
        np.add(p + c + c + v, var[:, 2:4], out=size[:, :, 0])
        np.add(c, v, out=size[:, :, 1])
        np.add(v, var[:, 6:8], out=size[:, :, 2])
        return KalmanStates(mean, centre, size)

    def update(self, states: KalmanStates, boxes: np.ndarray) -> KalmanStates:
        """States corrected by the measured (N, 4) xyxy boxes (row i of the states with box i)."""
        noise = self._variances(states.mean[:, :4], POSITION_WEIGHT, 0.0, (_ASPECT_STD["measure"], 0.0))[:, :4]
        innovation = self.measure(boxes)
        innovation -= states.mean[:, :4]
        mean = states.mean.copy()
        # centre: 2 x 2 innovation covariance S, inverted in closed form
        centre = states.centre
        s00, s01, s11 = centre[:, 0, 0] + noise[:, 0], centre[:, 0, 1], centre[:, 1, 1] + noise[:, 1]
        det = s00 * s11 - s01 * s01
        i00, i01, i11 = (s11 / det)[:, None], (-s01 / det)[:, None], (s00 / det)[:, None]
        ph0, ph1 = centre[:, :, 0], centre[:, :, 1]  # P H^T columns, (N, 4)
        gain0 = ph0 * i00 + ph1 * i01  # (N, 4): gain for the x innovation
        gain1 = ph0 * i01 + ph1 * i11
        step = gain0 * innovation[:, 0:1] + gain1 * innovation[:, 1:2]  # (N, 4): cx, cy, vx, vy
        mean[:, 0:2] += step[:, 0:2]
        mean[:, 4:6] += step[:, 2:4]
        centre = centre - gain0[:, :, None] * centre[:, None, 0, :] - gain1[:, :, None] * centre[:, None, 1, :]
        # sizes: one scalar measurement each
        p, c, v = states.size[:, :, 0], states.size[:, :, 1], states.size[:, :, 2]
        s = p + noise[:, 2:]
        gain_p, gain_v = p / s, c / s
        mean[:, 2:4] += gain_p * innovation[:, 2:]
        mean[:, 6:8] += gain_v * innovation[:, 2:]
        size = np.empty_like(states.size)
        np.subtract(p, gain_p * p, out=size[:, :, 0])
        np.subtract(c, gain_p * c, out=size[:, :, 1])
        np.subtract(v, gain_v * c, out=size[:, :, 2])
        return KalmanStates(mean, centre, size)

    def warp(self, states: KalmanStates, affine: np.ndarray) -> KalmanStates:
        """States moved by the camera motion `affine` (2, 3), mapping previous-frame pixels to this frame's.

        Centres and their velocities go through its linear part (centres also through its translation); widths,
        heights and their velocities scale by its scale sqrt(|det|); an aspect ratio stays."""
        affine = np.asarray(affine, dtype=np.float64).reshape(2, 3)
        linear, shift = affine[:, :2], affine[:, 2]
        scale = float(np.sqrt(abs(np.linalg.det(linear))))
        mean = states.mean.copy()
        mean[:, 0:2] = states.mean[:, 0:2] @ linear.T + shift
        mean[:, 4:6] = states.mean[:, 4:6] @ linear.T
        size_scale = np.array([1.0, scale] if self.model == "xyah" else [scale, scale])
        mean[:, [2, 3, 6, 7]] *= np.tile(size_scale, 2)
        transform = np.zeros((4, 4))
        transform[:2, :2] = transform[2:, 2:] = linear
        centre = transform @ states.centre @ transform.T
        size = states.size * (size_scale**2)[None, :, None]
        return KalmanStates(mean, centre, size)


# SORT's constant-velocity model on (x, y, s, r, vx, vy, vs) and its noise (Bewley et al. 2016)
SORT_F = np.eye(7)
SORT_F[0, 4] = SORT_F[1, 5] = SORT_F[2, 6] = 1.0
SORT_Q = np.diag([1.0, 1.0, 1.0, 1.0, 0.01, 0.01, 0.0001])
SORT_R = np.diag([1.0, 1.0, 10.0, 10.0])
SORT_P0 = np.diag([10.0, 10.0, 10.0, 10.0, 1e4, 1e4, 1e4])  # a new box's covariance


def to_measurement(xyxy: np.ndarray) -> np.ndarray:
    """(N, 4) xyxy -> (N, 4) centre x, centre y, area, aspect ratio w / h (SORT's measurement)."""
    w, h = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    return np.stack([xyxy[:, 0] + w / 2, xyxy[:, 1] + h / 2, w * h, w / h], axis=1)


def to_boxes(states: np.ndarray) -> np.ndarray:
    """(N, >= 4) SORT states -> (N, 4) xyxy; NaN where the area or the ratio has turned negative."""
    with np.errstate(invalid="ignore"):
        w = np.sqrt(states[:, 2] * states[:, 3])
        h = states[:, 2] / w
    return np.stack([states[:, 0] - w / 2, states[:, 1] - h / 2, states[:, 0] + w / 2, states[:, 1] + h / 2], 1)


def predict(x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of SORT's filter for (N, 7) states and (N, 7, 7) covariances; an area that would shrink below 0
    keeps its size instead (its velocity is zeroed first)."""
    x = x.copy()
    x[x[:, 6] + x[:, 2] <= 0, 6] = 0.0
    return x @ SORT_F.T, SORT_F @ p @ SORT_F.T + SORT_Q


def correct(x: np.ndarray, p: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """SORT's update of (N, 7) states and (N, 7, 7) covariances with (N, 4) measurements (Joseph form)."""
    s = p[:, :4, :4] + SORT_R  # (N, 4, 4)
    gain = np.linalg.solve(s, p[:, :4, :]).transpose(0, 2, 1)  # P H^T S^-1, (N, 7, 4); S and P symmetric
    x = x + np.einsum("nij,nj->ni", gain, z - x[:, :4])
    i_kh = np.eye(7) - np.concatenate([gain, np.zeros((len(x), 7, 3))], axis=2)  # I - K H
    p = i_kh @ p @ i_kh.transpose(0, 2, 1) + gain @ SORT_R @ gain.transpose(0, 2, 1)
    return x, p
