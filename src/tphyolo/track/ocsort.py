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

from tphyolo.errors import InputError
from tphyolo.flags import AT_LEAST_ONE, FRACTION, NON_NEGATIVE, check_field_types, checked
from tphyolo.ops.overlap import box_overlap
from tphyolo.track.interface import Tracks, detections_of_frame
from tphyolo.track.kalman import SORT_P0, correct, predict, to_boxes, to_measurement
from tphyolo.track.live import LiveTracks, SparseFrames


@dataclass(frozen=True)
class OCSortConfig:
    """OC-SORT's settings (see the module docstring for what each one does); `class_aware`: a detection matches
    only tracks of its class. The defaults are the published ones (`OCSORT_MOT17`) but three, chosen for drone
    video by `benchmarks/tracking_defaults.py` (docs/tracking.md): `det_thresh` 0.5 (published 0.6), `min_hits`
    1 (3) and `use_byte` (off). A drone detector scores small objects low, and a track that shows only after
    three matches in a row loses the short, broken tracks of objects seen from above: on UAVDT M0101 with a
    drone detector's simulated scores HOTA / IDF1 / MOTA 45.1 / 56.0 / 53.6 against 0.3 / 0.3 / 0.1."""

    tracker: str = checked("ocsort", choices=("ocsort",))
    det_thresh: float = checked(0.5, bounds=FRACTION)
    low_thresh: float = checked(0.1, bounds=FRACTION)
    iou_threshold: float = checked(0.3, bounds=FRACTION)
    max_age: int = checked(30, bounds=NON_NEGATIVE)
    min_hits: int = checked(1, bounds=NON_NEGATIVE)
    delta_t: int = checked(3, bounds=AT_LEAST_ONE)
    inertia: float = checked(0.2, bounds=FRACTION)
    use_byte: bool = True
    class_aware: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
        if self.low_thresh > self.det_thresh:
            raise InputError(f"low_thresh {self.low_thresh} is above det_thresh {self.det_thresh}")


OCSORT_MOT17 = OCSortConfig(det_thresh=0.6, min_hits=3, use_byte=False)  # as published (Cao et al. 2023, MOT17)


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


def live_tracks(delta_t: int) -> LiveTracks:
    """OC-SORT's table of live tracks, empty. `last_obs` (N, 5) is the last matched box and its score (-1
    everywhere before the first match); `history` (N, delta_t, 5) holds the observations of the last `delta_t`
    ages at row `age % delta_t`, with `history_age` the age each was seen at (-1: none); `x_obs`, `p_obs` the
    filter right after the last observation (for the re-update); `velocity` the direction of motion (dy, dx),
    0 until known; `ids` 0 until first reported."""
    return LiveTracks(**new_rows(np.zeros((0, 4)), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64),
                                 delta_t=delta_t))  # fmt: skip


def new_rows(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, dets: np.ndarray, *, delta_t: int
             ) -> dict[str, np.ndarray]:  # fmt: skip
    """The rows of the tracks that detections `dets` (their `boxes`, `scores`, `labels`) start."""
    n = len(boxes)
    x = np.zeros((n, 7))
    x[:, :4] = to_measurement(boxes)
    return {
        "ids": np.zeros(n, np.int64), "x": x, "p": np.repeat(SORT_P0[None], n, 0), "x_obs": x.copy(),
        "p_obs": np.repeat(SORT_P0[None], n, 0), "age": np.zeros(n, np.int64), "since_update": np.zeros(n, np.int64),
        "hit_streak": np.zeros(n, np.int64), "last_obs": np.full((n, 5), -1.0),
        "last_obs_age": np.full(n, -1, np.int64), "velocity": np.zeros((n, 2)),
        "history": np.full((n, delta_t, 5), -1.0), "history_age": np.full((n, delta_t), -1, np.int64),
        "score": scores.copy(), "label": labels.copy(), "detection": dets.astype(np.int64),
    }  # fmt: skip


def previous_observations(t: LiveTracks, delta_t: int) -> np.ndarray:
    """(N, 5) each track's observation from `delta_t` ages back, or the nearest younger one, or its last one
    (-1 rows for tracks never matched)."""
    out = t.last_obs.copy()
    found = np.zeros(len(t), dtype=bool)
    for back in range(delta_t, 0, -1):  # oldest first
        want = t.age - back
        slot = want % delta_t
        rows = np.flatnonzero(~found & (t.history_age[np.arange(len(t)), slot] == want) & (want >= 0))
        out[rows] = t.history[rows, slot[rows]]
        found[rows] = True
    return out


class OCSort(SparseFrames):
    """OC-SORT (see the module docstring): `update` per frame, `reset()` between streams. `config`: an
    OCSortConfig; keywords override its fields."""

    def __init__(self, config: OCSortConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or OCSortConfig(), **overrides)
        self.reset()

    def reset(self) -> None:
        """Forget every track, the frame count and the id counter."""
        self.tracks = live_tracks(self.config.delta_t)
        self.frame_count = 0
        self.next_id = 1

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
        previous = previous_observations(t, cfg.delta_t)
        iou = self._masked(box_overlap(boxes[high], predicted), labels[high], t.label)
        motion = direction(previous[None, :, :4], boxes[high, None, :4])  # (D, T, 2): old observation -> detection
        cos = np.clip((motion * t.velocity[None]).sum(-1), -1.0, 1.0)
        momentum = (np.pi / 2 - np.abs(np.arccos(cos))) / np.pi * (previous[:, 4] >= 0)[None]
        pairs = assign(iou + cfg.inertia * scores[high, None] * momentum, iou, cfg.iou_threshold)
        self._apply(t, high[pairs[:, 0]], pairs[:, 1], boxes, scores, labels)
        tracks_left = np.setdiff1d(np.arange(len(t)), pairs[:, 1])
        high_left = np.setdiff1d(high, high[pairs[:, 0]])
        # 2: (BYTE) weak detections with the tracks left, by IoU of the prediction
        if cfg.use_byte and len(low) and len(tracks_left):
            iou = self._masked(box_overlap(boxes[low], predicted[tracks_left]), labels[low], t.label[tracks_left])
            pairs = assign(iou, iou, cfg.iou_threshold)
            self._apply(t, low[pairs[:, 0]], tracks_left[pairs[:, 1]], boxes, scores, labels)
            tracks_left = np.delete(tracks_left, pairs[:, 1])
        # 3: (OCR) confident detections left with the tracks left, by IoU of their last observation
        observed = tracks_left[t.last_obs[tracks_left, 4] >= 0]
        if len(high_left) and len(observed):
            iou = self._masked(box_overlap(boxes[high_left], t.last_obs[observed, :4]), labels[high_left],
                               t.label[observed])  # fmt: skip
            pairs = assign(iou, iou, cfg.iou_threshold)
            self._apply(t, high_left[pairs[:, 0]], observed[pairs[:, 1]], boxes, scores, labels)
            high_left = np.delete(high_left, pairs[:, 0])

        t.append(new_rows(boxes[high_left], scores[high_left], labels[high_left], high_left, delta_t=cfg.delta_t))
        return self._report()

    def _masked(self, iou: np.ndarray, det_labels: np.ndarray, track_labels: np.ndarray) -> np.ndarray:
        if self.config.class_aware:
            iou = np.where(det_labels[:, None] == track_labels[None, :], iou, 0.0)
        return iou

    def _apply(self, t: LiveTracks, dets: np.ndarray, rows: np.ndarray, boxes, scores, labels) -> None:
        """Update tracks `rows` with detections `dets`: the direction of motion, the observation history, the
        re-update of tracks that missed frames, the filter."""
        if not len(rows):
            return
        new = np.concatenate([boxes[dets], scores[dets, None]], axis=1)  # (K, 5)
        seen = t.last_obs[rows, 4] >= 0
        old = previous_observations(t, self.config.delta_t)[rows]
        t.velocity[rows[seen]] = direction(old[seen, :4], new[seen, :4])
        missed = rows[seen & (t.since_update[rows] > 1)]
        for row in missed:  # ORU: rewind to the last observation and walk a straight path to this one
            self._reupdate(t, row, new[rows == row][0, :4])
        slot = t.age[rows] % self.config.delta_t
        t.history[rows, slot], t.history_age[rows, slot] = new, t.age[rows]
        t.last_obs[rows], t.last_obs_age[rows] = new, t.age[rows]
        t.since_update[rows] = 0
        t.hit_streak[rows] += 1
        t.x[rows], t.p[rows] = correct(t.x[rows], t.p[rows], to_measurement(new[:, :4]))
        t.x_obs[rows], t.p_obs[rows] = t.x[rows], t.p[rows]
        t.score[rows], t.label[rows], t.detection[rows] = scores[dets], labels[dets], dets

    @staticmethod
    def _reupdate(t: LiveTracks, row: int, box: np.ndarray) -> None:
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

