"""The trackers on a synthetic-mot sequence (a drone camera that pans, zooms, turns and jitters), fed its true
boxes with noise and misses, scored with the VisDrone-MOT protocol: camera-motion compensation from the pixels
keeps the identities that the jitter breaks without it."""

import numpy as np
import pytest

from tphyolo.data.builtin.synthetic_mot import render_sequence
from tphyolo.data.mot.table import TrackTable
from tphyolo.metrics.tracking import evaluate_tables
from tphyolo.track.tracker import ByteTracker


@pytest.fixture(scope="module")
def sequence():
    frames, truth, camera = render_sequence(np.random.default_rng([7, 0]), 30)
    rng = np.random.default_rng(1)
    objects = truth.select((truth.ids > 0) & (truth.classes <= 10))
    objects = objects.select(rng.random(len(objects)) > 0.1)  # the detector misses one box in ten
    boxes = objects.boxes + rng.normal(0, 1.0, objects.boxes.shape)
    scores = np.clip(rng.normal(0.75, 0.15, len(objects)), 0.05, 1.0)
    return frames, truth, camera, (objects, boxes, scores)


def track(sequence, tracker: ByteTracker, *, true_motion: bool = False):
    frames, truth, camera, (objects, boxes, scores) = sequence
    rows = []
    for t, frame in enumerate(frames):
        now = objects.frames == t + 1
        motion = None
        if true_motion:
            previous = np.vstack([camera.affine(max(t - 1, 0)), [0, 0, 1]])
            motion = (np.vstack([camera.affine(t), [0, 0, 1]]) @ np.linalg.inv(previous))[:2]
        out = tracker.update(boxes[now], scores[now], objects.classes[now], frame=frame, camera_motion=motion)
        rows.append(TrackTable.from_columns(np.full(len(out), t + 1), out.ids, out.boxes, out.scores, out.labels))
    return evaluate_tables({"seq": truth}, {"seq": TrackTable.concatenate(rows)}, fmt="visdrone-mot").combined


@pytest.mark.slow
def test_compensation_from_pixels_keeps_identities_through_camera_motion(sequence):
    without = track(sequence, ByteTracker("botsort", cmc="none"))
    sparse = track(sequence, ByteTracker("botsort", cmc="sparse"))
    told = track(sequence, ByteTracker("botsort", cmc="none"), true_motion=True)
    assert sparse["IDSW"] * 5 < without["IDSW"] and sparse["HOTA"] > without["HOTA"] + 10
    assert sparse["HOTA"] == pytest.approx(told["HOTA"], abs=2.0)  # as good as knowing the true motion
    assert sparse["IDF1"] > 80


def test_bytetrack_gains_from_the_true_camera_motion_too(sequence):
    without = track(sequence, ByteTracker("bytetrack"))
    told = track(sequence, ByteTracker("bytetrack"), true_motion=True)
    assert told["IDSW"] * 5 < without["IDSW"] and told["HOTA"] > without["HOTA"] + 10
