"""OC-SORT (Cao et al., "Observation-Centric SORT", CVPR 2023): SORT's Kalman filter made to lean on the
detections it has seen rather than on its own estimates.

    tracker = OCSort()                                   # or make_tracker("ocsort", inertia=0.3)
    tracks = tracker.update(boxes, scores, labels)       # per frame; tracks.boxes are the matched detections

Per frame, with detections scoring above `det_thresh` (the confident ones):
1. every track's state (centre x, y, area s, aspect ratio r and the velocities of x, y, s; SORT's filter and
   noise) is predicted one frame on; a track whose prediction has no valid box is dropped;
2. the confident detections are matched with all tracks at the largest total of IoU plus the observation-centric
   momentum term (OCM): `inertia` x the detection's score x (pi/2 - angle) / pi, where the angle lies between the
   track's direction of motion (from its observation `delta_t` frames back to its last one) and the direction
   from that old observation to the detection; a pair under `iou_threshold` is not a match (when the pairs
   above the threshold are already one to one, they are taken as they are);
3. with `use_byte`, tracks left take the weak detections (`low_thresh` < score <= `det_thresh`) by IoU;
4. observation-centric recovery (OCR): tracks left are matched by IoU of their *last observation* (not their
   prediction) with the confident detections left;
5. a track matched again after missing frames is re-updated (ORU): its filter is rewound to its last
   observation and fed a straight virtual path from there to the new detection, one box per missed frame,
   so that the errors accumulated while it was unseen do not linger in its velocity;
6. confident detections left start tracks; a track unmatched for more than `max_age` frames is dropped.

A track is reported in a frame where it was matched (or born) once it has been matched `min_hits` frames in a
row, and in the stream's first `min_hits` frames at once; its id is given when it is first reported. Its box is
the detection it was matched with. Without appearance or camera-motion cues, as the method is published; the
frame given to `update` is not used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tphyolo.flags import check_field_types
from tphyolo.track.interface import Tracks, detections_of_frame

# SORT's constant-velocity model on (x, y, s, r, vx, vy, vs) and its noise (Bewley et al. 2016)
F = np.eye(7)
F[0, 4] = F[1, 5] = F[2, 6] = 1.0
Q = np.diag([1.0, 1.0, 1.0, 1.0, 0.01, 0.01, 0.0001])
R = np.diag([1.0, 1.0, 10.0, 10.0])
P0 = np.diag([10.0, 10.0, 10.0, 10.0, 1e4, 1e4, 1e4])


@dataclass(frozen=True)
class OCSortConfig:
    """OC-SORT's settings (see the module docstring for what each one does); `class_aware`: a detection matches
    only tracks of its class. The defaults are the published ones (`OCSORT_MOT17`) but three, chosen for drone
    video by `benchmarks/tracking_defaults.py` (docs/tracking.md): `det_thresh` 0.5 (published 0.6), `min_hits`
    1 (3) and `use_byte` (off). A drone detector scores small objects low, and a track that shows only after
    three matches in a row loses the short, broken tracks of objects seen from above: on UAVDT M0101 with a
    drone detector's simulated scores HOTA / IDF1 / MOTA 45.1 / 56.0 / 53.6 against 0.3 / 0.3 / 0.1."""

    tracker: str = "ocsort"
    det_thresh: float = 0.5
    low_thresh: float = 0.1
    iou_threshold: float = 0.3
    max_age: int = 30
    min_hits: int = 1
    delta_t: int = 3
    inertia: float = 0.2
    use_byte: bool = True
    class_aware: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        if self.tracker != "ocsort":
            raise ValueError(f"OCSortConfig is the settings of 'ocsort', not {self.tracker!r}")
        for name in ("det_thresh", "low_thresh", "iou_threshold", "inertia"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.low_thresh > self.det_thresh:
            raise ValueError(f"low_thresh {self.low_thresh} is above det_thresh {self.det_thresh}")
        for name in ("max_age", "min_hits"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0 frames, got {getattr(self, name)}")
        if self.delta_t < 1:
            raise ValueError(f"delta_t must be >= 1 frame, got {self.delta_t}")


OCSORT_MOT17 = OCSortConfig(det_thresh=0.6, min_hits=3, use_byte=False)  # as published (Cao et al. 2023, MOT17)


def to_measurement(xyxy: np.ndarray) -> np.ndarray:
    """(N, 4) xyxy -> (N, 4) centre x, centre y, area, aspect ratio w / h."""
    w, h = xyxy[:, 2] - xyxy[:, 0], xyxy[:, 3] - xyxy[:, 1]
    return np.stack([xyxy[:, 0] + w / 2, xyxy[:, 1] + h / 2, w * h, w / h], axis=1)


def to_boxes(states: np.ndarray) -> np.ndarray:
    """(N, >= 4) states -> (N, 4) xyxy; NaN where the area or the ratio has turned negative."""
    with np.errstate(invalid="ignore"):
        w = np.sqrt(states[:, 2] * states[:, 3])
        h = states[:, 2] / w
    return np.stack([states[:, 0] - w / 2, states[:, 1] - h / 2, states[:, 0] + w / 2, states[:, 1] + h / 2], 1)


def predict(x: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of the filter for (N, 7) states and (N, 7, 7) covariances; an area that would shrink below 0
    keeps its size instead (its velocity is zeroed first)."""
    x = x.copy()
    x[x[:, 6] + x[:, 2] <= 0, 6] = 0.0
    return x @ F.T, F @ p @ F.T + Q


def correct(x: np.ndarray, p: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The filter's update of (N, 7) states and (N, 7, 7) covariances with (N, 4) measurements (Joseph form)."""
    s = p[:, :4, :4] + R  # (N, 4, 4)
    gain = np.linalg.solve(s, p[:, :4, :]).transpose(0, 2, 1)  # P H^T S^-1, (N, 7, 4); S and P symmetric
    x = x + np.einsum("nij,nj->ni", gain, z - x[:, :4])
    i_kh = np.eye(7) - np.concatenate([gain, np.zeros((len(x), 7, 3))], axis=2)  # I - K H
    p = i_kh @ p @ i_kh.transpose(0, 2, 1) + gain @ R @ gain.transpose(0, 2, 1)
    return x, p


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(N, 4) and (M, 4) xyxy -> (N, M) IoU (0 for boxes without area)."""
    w = np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0])
    h = np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1])
    inter = np.clip(w, 0, None) * np.clip(h, 0, None)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def direction(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """(..., 2) unit vectors (dy, dx) from the centres of xyxy boxes `start` to those of `end` (broadcast)."""
    dx = (end[..., 0] + end[..., 2] - start[..., 0] - start[..., 2]) / 2
    dy = (end[..., 1] + end[..., 3] - start[..., 1] - start[..., 3]) / 2
    norm = np.sqrt(dx**2 + dy**2) + 1e-6
    return np.stack([dy / norm, dx / norm], axis=-1)


def assign(score: np.ndarray, iou: np.ndarray, threshold: float) -> np.ndarray:
    """(K, 2) (row, column) pairs of the largest total `score`, keeping those whose IoU reaches `threshold`;
    when the pairs above the threshold are already one to one, they are taken as they are."""
    from scipy.optimize import linear_sum_assignment  # as track.matching: scipy only when a frame needs it

    if not iou.size:
        return np.zeros((0, 2), np.int64)
    above = iou > threshold
    if above.sum(1).max() <= 1 and above.sum(0).max() <= 1:
        rows, cols = np.nonzero(above)
    else:
        rows, cols = linear_sum_assignment(-score)
    keep = iou[rows, cols] >= threshold
    return np.stack([rows[keep], cols[keep]], axis=1).astype(np.int64)


class _LiveTracks:
    """All live tracks as parallel arrays (row i is one track). `last_obs` (N, 5) is the last matched box and
    its score (-1 everywhere before the first match); `history` (N, delta_t, 5) holds the observations of the
    last `delta_t` ages at row `age % delta_t`, with `history_age` the age each was seen at (-1: none);
    `x_obs`, `p_obs` the filter right after the last observation (for the re-update)."""

    def __init__(self, delta_t: int) -> None:
        self.delta_t = delta_t
        self.x, self.p = np.zeros((0, 7)), np.zeros((0, 7, 7))
        self.x_obs, self.p_obs = np.zeros((0, 7)), np.zeros((0, 7, 7))
        self.ids = np.zeros(0, np.int64)  # 0 until first reported
        self.age = np.zeros(0, np.int64)
        self.since_update = np.zeros(0, np.int64)
        self.hit_streak = np.zeros(0, np.int64)
        self.last_obs = np.zeros((0, 5))
        self.last_obs_age = np.zeros(0, np.int64)
        self.velocity = np.zeros((0, 2))  # (dy, dx), 0 until known
        self.history = np.zeros((0, delta_t, 5))
        self.history_age = np.zeros((0, delta_t), np.int64)
        self.score = np.zeros(0)
        self.label = np.zeros(0, np.int64)
        self.detection = np.zeros(0, np.int64)

    def __len__(self) -> int:
        return len(self.ids)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: value for name, value in vars(self).items() if isinstance(value, np.ndarray)}

    def keep(self, rows: np.ndarray) -> None:
        for name, value in self.arrays().items():
            setattr(self, name, value[rows])

    def add(self, boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, dets: np.ndarray) -> None:
        n = len(boxes)
        x = np.zeros((n, 7))
        x[:, :4] = to_measurement(boxes)
        new = {
            "x": x, "p": np.repeat(P0[None], n, 0), "x_obs": x.copy(), "p_obs": np.repeat(P0[None], n, 0),
            "ids": np.zeros(n, np.int64), "age": np.zeros(n, np.int64), "since_update": np.zeros(n, np.int64),
            "hit_streak": np.zeros(n, np.int64), "last_obs": np.full((n, 5), -1.0),
            "last_obs_age": np.full(n, -1, np.int64), "velocity": np.zeros((n, 2)),
            "history": np.full((n, self.delta_t, 5), -1.0), "history_age": np.full((n, self.delta_t), -1, np.int64),
            "score": scores.copy(), "label": labels.copy(), "detection": dets.astype(np.int64),
        }  # fmt: skip
        for name, value in new.items():
            setattr(self, name, np.concatenate([getattr(self, name), value]))

    def previous_observations(self) -> np.ndarray:
        """(N, 5) each track's observation from `delta_t` ages back, or the nearest younger one, or its last
        one (-1 rows for tracks never matched)."""
        out = self.last_obs.copy()
        found = np.zeros(len(self), dtype=bool)
        for back in range(self.delta_t, 0, -1):  # oldest first
            want = self.age - back
            slot = want % self.delta_t
            rows = np.flatnonzero(~found & (self.history_age[np.arange(len(self)), slot] == want) & (want >= 0))
            out[rows] = self.history[rows, slot[rows]]
            found[rows] = True
        return out


class OCSort:
    """OC-SORT (see the module docstring): `update` per frame, `reset()` between streams. `config`: an
    OCSortConfig; keywords override its fields."""

    def __init__(self, config: OCSortConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or OCSortConfig(), **overrides)
        self.reset()

    def reset(self) -> None:
        """Forget every track, the frame count and the id counter."""
        self.tracks = _LiveTracks(self.config.delta_t)
        self.frame_count = 0
        self.next_id = 1

    def skip_empty(self, frames: int) -> None:
        """Advance `frames` frames that have no detection at once, which only moves the frame count while no
        track is kept. ValueError when a track is kept (its age must move frame by frame)."""
        if len(self.tracks) or frames < 0:
            raise ValueError(f"skip_empty({frames}) with {len(self.tracks)} track(s) kept; update frame by frame")
        self.frame_count += frames

    def update(self, boxes, scores, labels=None, *, frame=None, camera_motion=None) -> Tracks:
        """Advance one frame: `boxes` (N, 4) xyxy pixels, `scores` (N,), `labels` (N,) class ids (default 0).
        `frame` and `camera_motion` are accepted for the common contract and not used. Returns the tracks
        reported in this frame, their boxes the detections they were matched with."""
        boxes, scores, labels = detections_of_frame(boxes, scores, labels)
        cfg, t = self.config, self.tracks
        self.frame_count += 1
        valid = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        high = np.flatnonzero(valid & (scores > cfg.det_thresh))
        low = np.flatnonzero(valid & (scores > cfg.low_thresh) & (scores <= cfg.det_thresh))

        t.x, t.p = predict(t.x, t.p)
        t.hit_streak[t.since_update > 0] = 0
        t.age += 1
        t.since_update += 1
        predicted = to_boxes(t.x)
        alive = ~np.isnan(predicted).any(1)
        if not alive.all():
            t.keep(alive)
            predicted = predicted[alive]

        # 1: confident detections with every track, IoU plus the momentum term
        previous = t.previous_observations()
        iou = self._masked(iou_matrix(boxes[high], predicted), labels[high], t.label)
        motion = direction(previous[None, :, :4], boxes[high, None, :4])  # (D, T, 2): old observation -> detection
        cos = np.clip((motion * t.velocity[None]).sum(-1), -1.0, 1.0)
        momentum = (np.pi / 2 - np.abs(np.arccos(cos))) / np.pi * (previous[:, 4] >= 0)[None]
        pairs = assign(iou + cfg.inertia * scores[high, None] * momentum, iou, cfg.iou_threshold)
        self._apply(t, high[pairs[:, 0]], pairs[:, 1], boxes, scores, labels)
        tracks_left = np.setdiff1d(np.arange(len(t)), pairs[:, 1])
        high_left = np.setdiff1d(high, high[pairs[:, 0]])
        # 2: (BYTE) weak detections with the tracks left, by IoU of the prediction
        if cfg.use_byte and len(low) and len(tracks_left):
            iou = self._masked(iou_matrix(boxes[low], predicted[tracks_left]), labels[low], t.label[tracks_left])
            pairs = assign(iou, iou, cfg.iou_threshold)
            self._apply(t, low[pairs[:, 0]], tracks_left[pairs[:, 1]], boxes, scores, labels)
            tracks_left = np.delete(tracks_left, pairs[:, 1])
        # 3: (OCR) confident detections left with the tracks left, by IoU of their last observation
        observed = tracks_left[t.last_obs[tracks_left, 4] >= 0]
        if len(high_left) and len(observed):
            iou = self._masked(iou_matrix(boxes[high_left], t.last_obs[observed, :4]), labels[high_left],
                               t.label[observed])  # fmt: skip
            pairs = assign(iou, iou, cfg.iou_threshold)
            self._apply(t, high_left[pairs[:, 0]], observed[pairs[:, 1]], boxes, scores, labels)
            high_left = np.delete(high_left, pairs[:, 0])

        t.add(boxes[high_left], scores[high_left], labels[high_left], high_left)
        return self._report()

    def _masked(self, iou: np.ndarray, det_labels: np.ndarray, track_labels: np.ndarray) -> np.ndarray:
        if self.config.class_aware:
            iou = np.where(det_labels[:, None] == track_labels[None, :], iou, 0.0)
        return iou

    def _apply(self, t: _LiveTracks, dets: np.ndarray, rows: np.ndarray, boxes, scores, labels) -> None:
        """Update tracks `rows` with detections `dets`: the direction of motion, the observation history, the
        re-update of tracks that missed frames, the filter."""
        if not len(rows):
            return
        new = np.concatenate([boxes[dets], scores[dets, None]], axis=1)  # (K, 5)
        seen = t.last_obs[rows, 4] >= 0
        old = t.previous_observations()[rows]
        t.velocity[rows[seen]] = direction(old[seen, :4], new[seen, :4])
        missed = rows[seen & (t.since_update[rows] > 1)]
        for row in missed:  # ORU: rewind to the last observation and walk a straight path to this one
            self._reupdate(t, row, new[rows == row][0, :4])
        slot = t.age[rows] % t.delta_t
        t.history[rows, slot], t.history_age[rows, slot] = new, t.age[rows]
        t.last_obs[rows], t.last_obs_age[rows] = new, t.age[rows]
        t.since_update[rows] = 0
        t.hit_streak[rows] += 1
        t.x[rows], t.p[rows] = correct(t.x[rows], t.p[rows], to_measurement(new[:, :4]))
        t.x_obs[rows], t.p_obs[rows] = t.x[rows], t.p[rows]
        t.score[rows], t.label[rows], t.detection[rows] = scores[dets], labels[dets], dets

    @staticmethod
    def _reupdate(t: _LiveTracks, row: int, box: np.ndarray) -> None:
        """Track `row`'s filter rewound to its last observation and fed the virtual boxes of the frames it
        missed, on the straight line (in centre, width and height) from that observation to `box`; left
        predicted to this frame, for the real update."""
        gap = int(t.age[row] - t.last_obs_age[row])
        start, end = t.last_obs[row, :4], box
        x, p = t.x_obs[row : row + 1], t.p_obs[row : row + 1]
        for step in range(1, gap):
            x, p = predict(x, p)
            virtual = start + (end - start) * step / gap  # xyxy corners move linearly with centre and size
            x, p = correct(x, p, to_measurement(virtual[None]))
        x, p = predict(x, p)
        t.x[row], t.p[row] = x[0], p[0]

    def _report(self) -> Tracks:
        t, cfg = self.tracks, self.config
        shown = (t.since_update == 0) & ((t.hit_streak >= cfg.min_hits) | (self.frame_count <= cfg.min_hits))
        fresh = np.flatnonzero(shown & (t.ids == 0))
        t.ids[fresh] = self.next_id + np.arange(len(fresh))
        self.next_id += len(fresh)
        rows = np.flatnonzero(shown)
        rows = rows[np.argsort(t.ids[rows])]
        boxes = np.where((t.last_obs[rows, 4] >= 0)[:, None], t.last_obs[rows, :4], to_boxes(t.x[rows]))
        result = Tracks(boxes, t.ids[rows].copy(), t.score[rows].copy(), t.label[rows].copy(),
                        t.detection[rows].copy())  # fmt: skip
        t.keep(t.since_update <= cfg.max_age)
        return result

