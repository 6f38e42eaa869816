"""The multi-object tracker: Kalman-predicted boxes associated with each frame's detections by IoU.

    tracker = ByteTracker("botsort")           # or a TrackerConfig, a yaml file; keywords override
    for frame, (boxes, scores, labels) in enumerate(detections):
        tracks = tracker.update(boxes, scores, labels, frame=image)  # image: for the camera-motion estimate
        tracks.ids, tracks.boxes                                     # ids >= 1, stable across the stream

One engine runs both ByteTrack and BoT-SORT (the presets of `tphyolo.track.config`): the two-stage cascade of
ByteTrack (confident detections first, then the weak ones for tracks seen in the last frame), a constant-velocity
Kalman filter, and for BoT-SORT its box parametrisation and camera-motion compensation applied to the predicted
states before association. Tracks are kept as arrays (one row per track), so a frame costs a fixed number of
vectorised steps whatever the number of boxes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from tphyolo.errors import InputError
from tphyolo.ops.overlap import box_overlap
from tphyolo.track.cmc import IDENTITY, CameraMotion
from tphyolo.track.config import TrackerConfig, tracker_config
from tphyolo.track.interface import Tracks, detections_of_frame
from tphyolo.track.kalman import KalmanBoxFilter, KalmanStates
from tphyolo.track.live import LiveTracks, SparseFrames
from tphyolo.track.matching import match_pairs, overlaps

NEW, TRACKED, LOST = 0, 1, 2  # track states: born in the last frame (no id yet), seen in this frame, missing


class ByteTracker(SparseFrames):
    """ByteTrack's cascade, which BoT-SORT's preset extends: tracks objects over the frames of one stream (see the
    module docstring); `reset()` starts a new one.

    `config`: a TrackerConfig, a preset name or a yaml file (`tphyolo.track.config.tracker_config`); keywords
    override single settings. `update` takes one frame's detections and returns the tracks seen in it;
    `camera_motion` is then the (2, 3) affine it applied, from the previous frame's pixels to this frame's (the
    identity without compensation), for callers that follow the ground (`tphyolo.analyze`).
    """

    def __init__(self, config: TrackerConfig | str | Path = "bytetrack", **overrides: Any) -> None:
        self.config = tracker_config(config, **overrides)
        self.kalman = KalmanBoxFilter(self.config.motion)
        self.camera = CameraMotion(self.config.cmc, size=self.config.cmc_size)
        self.reset()

    def reset(self) -> None:
        """Forget every track, the frame count, the id counter and the camera's last frame."""
        self.tracks = LiveTracks(
            ids=np.zeros(0, np.int64),  # 0 until the track is confirmed
            states=KalmanStates.empty(), state=np.zeros(0, np.int8), score=np.zeros(0), label=np.zeros(0, np.int64),
            born=np.zeros(0, np.int64),  # frame of birth
            seen=np.zeros(0, np.int64),  # frame of the last match
            detection=np.zeros(0, np.int64),  # input index of the last match
        )
        self.frame_count = 0
        self.next_id = 1
        self.camera.reset()
        self.camera_motion = IDENTITY.copy()

    def update(
        self,
        boxes,
        scores,
        labels=None,
        *,
        frame: np.ndarray | None = None,
        camera_motion: np.ndarray | None = None,
    ) -> Tracks:
        """Advance one frame with its detections: `boxes` (N, 4) xyxy pixels, `scores` (N,), `labels` (N,) class
        ids (default 0); numpy arrays, tensors or lists. With camera-motion compensation (`config.cmc`), give the
        frame (uint8 BGR image) it is estimated from, or the motion itself, `camera_motion` (2, 3) from the
        previous frame's pixels to this frame's. Returns the confirmed tracks matched in this frame."""
        boxes, scores, labels = detections_of_frame(boxes, scores, labels)
        self.frame_count += 1
        motion = self._camera_motion(frame, boxes, camera_motion)
        self.camera_motion = IDENTITY.copy() if motion is None else motion
        t, cfg = self.tracks, self.config
        if len(t):
            t.states = self.kalman.predict(t.states, hold_size=t.state == LOST)
            if motion is not None:
                t.states = self.kalman.warp(t.states, motion)
        valid = (scores >= cfg.track_low_thresh) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        high = np.nonzero(valid & (scores >= cfg.track_high_thresh))[0]
        low = np.nonzero(valid & (scores < cfg.track_high_thresh))[0]
        pairs_overlapping = overlaps(self.kalman.boxes(t.states), boxes)  # (track, detection, IoU) that intersect
        was_tracked = t.state == TRACKED

        # 1: tracked and lost tracks with the confident detections
        pool = np.nonzero(t.state != NEW)[0]
        pairs, pool_left, high_left = self._associate(pairs_overlapping, pool, high, scores, labels, cfg.match_thresh,
                                                      fuse=cfg.fuse_score)  # fmt: skip
        matched = [pairs]
        # 2: tracks seen in the last frame with the weak detections
        second = pool_left[was_tracked[pool_left]]
        pairs, second_left, _ = self._associate(pairs_overlapping, second, low, scores, labels, cfg.second_match_thresh,
                                                fuse=False)  # fmt: skip
        matched.append(pairs)
        # 3: tracks born in the last frame with the confident detections left
        newborn = np.nonzero(t.state == NEW)[0]
        pairs, newborn_left, high_left = self._associate(pairs_overlapping, newborn, high_left, scores, labels,
                                                         cfg.unconfirmed_match_thresh, fuse=cfg.fuse_score)  # fmt: skip
        matched.append(pairs)
        pairs = np.concatenate(matched)
        self._apply_matches(pairs, boxes, scores, labels)
        t.state[second_left] = LOST
        alive = np.ones(len(t), dtype=bool)
        alive[newborn_left] = False
        alive &= ~((t.state == LOST) & (self.frame_count - t.seen > cfg.track_buffer))
        t.keep(alive)
        self._drop_duplicates()
        self._start_tracks(high_left[scores[high_left] >= cfg.new_track_thresh], boxes, scores, labels)
        return self._seen_now()

    def _camera_motion(self, frame, boxes: np.ndarray, camera_motion) -> np.ndarray | None:
        if camera_motion is not None:
            return np.asarray(camera_motion, dtype=np.float64).reshape(2, 3)
        if self.config.cmc == "none":
            return None
        if frame is None:
            raise InputError(
                f"camera-motion compensation ({self.config.cmc!r}) needs each frame: pass frame= (or camera_motion=),"
                " or set cmc='none'"
            )
        return self.camera(frame, boxes)

    def _associate(self, overlapping, rows, dets, scores, labels, limit: float, *, fuse: bool):
        """Match track rows `rows` with detection indices `dets` at cost 1 - IoU (`overlapping`: the (track,
        detection, IoU) pairs that intersect), times the score with `fuse`. Returns (pairs (K, 2): track row,
        detection index; the rows left; the detections left)."""
        if not len(rows) or not len(dets):
            return np.zeros((0, 2), np.int64), rows, dets
        track, det, iou = overlapping
        in_rows, in_dets = np.zeros(len(self.tracks), dtype=bool), np.zeros(len(scores), dtype=bool)
        in_rows[rows] = in_dets[dets] = True
        chosen = in_rows[track] & in_dets[det]
        if self.config.class_aware:
            chosen &= self.tracks.label[track] == labels[det]
        track, det, iou = track[chosen], det[chosen], iou[chosen]
        pairs = match_pairs(track, det, 1.0 - (iou * scores[det] if fuse else iou), limit)
        in_rows[pairs[:, 0]] = in_dets[pairs[:, 1]] = False
        return pairs, rows[in_rows[rows]], dets[in_dets[dets]]

    def _apply_matches(self, pairs: np.ndarray, boxes, scores, labels) -> None:
        if not len(pairs):
            return
        t = self.tracks
        rows, dets = pairs[:, 0], pairs[:, 1]
        t.states[rows] = self.kalman.update(t.states[rows], boxes[dets])
        confirm = rows[t.ids[rows] == 0]
        t.ids[confirm] = self.next_id + np.arange(len(confirm))
        self.next_id += len(confirm)
        t.state[rows] = TRACKED
        t.score[rows], t.label[rows] = scores[dets], labels[dets]
        t.seen[rows], t.detection[rows] = self.frame_count, dets

    def _drop_duplicates(self) -> None:
        """Of a tracked and a lost track overlapping by more than `duplicate_iou`, drop the younger."""
        t = self.tracks
        tracked, lost = np.nonzero(t.state == TRACKED)[0], np.nonzero(t.state == LOST)[0]
        if not len(tracked) or not len(lost):
            return
        boxes = self.kalman.boxes(t.states)
        a, b = np.nonzero(box_overlap(boxes[tracked], boxes[lost]) > self.config.duplicate_iou)
        if not len(a):
            return
        a, b = tracked[a], lost[b]
        older_tracked = (self.frame_count - t.born[a]) > (self.frame_count - t.born[b])
        alive = np.ones(len(t), dtype=bool)
        alive[np.where(older_tracked, b, a)] = False
        t.keep(alive)

    def _start_tracks(self, dets: np.ndarray, boxes, scores, labels) -> None:
        if not len(dets):
            return
        first = self.frame_count == 1
        ids = self.next_id + np.arange(len(dets)) if first else np.zeros(len(dets), np.int64)
        if first:
            self.next_id += len(dets)
        now = np.full(len(dets), self.frame_count)
        self.tracks.append({
            "ids": ids.astype(np.int64), "states": self.kalman.initiate(boxes[dets]),
            "state": np.full(len(dets), TRACKED if first else NEW, np.int8), "score": scores[dets],
            "label": labels[dets], "born": now, "seen": now.copy(), "detection": dets.astype(np.int64),
        })  # fmt: skip

    def _seen_now(self) -> Tracks:
        t = self.tracks
        rows = np.nonzero((t.state == TRACKED) & (t.seen == self.frame_count) & (t.ids > 0))[0]
        rows = rows[np.argsort(t.ids[rows])]
        return Tracks(self.kalman.boxes(t.states[rows]), t.ids[rows].copy(), t.score[rows].copy(),
                      t.label[rows].copy(), t.detection[rows].copy())  # fmt: skip
