"""The trackers on hand-made scenes whose identities are known: crossing, occlusion, weak detections, births,
and a camera pan with the motion given (the image-based estimate is in test_camera_pan.py)."""

import numpy as np
import pytest
from track_scenes import Frame, box_at, crossing_scene, identity_switches, run

from tphyolo.track.tracker import ByteTracker

TRACKERS = ["bytetrack", "botsort"]


@pytest.mark.parametrize("name", TRACKERS)
@pytest.mark.parametrize("motion", ["xyah", "xywh"])
def test_two_objects_crossing_keep_their_ids(name, motion):
    ids = run(ByteTracker(name, cmc="none", motion=motion), crossing_scene())
    assert identity_switches(ids) == 0
    assert len(ids[0]) == 60 and len(ids[1]) == 55  # every detection of both objects was tracked
    assert ids[0][0] != ids[1][0]


def test_without_motion_the_crossing_swaps():
    """The same scene with the velocity forgotten every frame (a tracker that only knows last positions)
    swaps or loses the identities: the scene does test the motion model."""
    tracker = ByteTracker("bytetrack")
    ids = {0: [], 1: []}
    for frame in crossing_scene():
        tracker.tracks.states.mean[:, 4:] = 0.0
        out = tracker.update(np.array(frame.boxes), np.array(frame.scores))
        for det, track_id in zip(out.detections.tolist(), out.ids.tolist(), strict=True):
            ids[frame.truth[det]].append(track_id)
    assert identity_switches(ids) > 0


@pytest.mark.parametrize("name", TRACKERS)
@pytest.mark.parametrize(("gap", "buffer", "expected_ids"), [(20, 30, 1), (20, 10, 2)])
def test_an_occluded_object_keeps_its_id_within_the_track_buffer(name, gap, buffer, expected_ids):
    frames = []
    for t in range(60):
        frame = Frame()
        if not 20 <= t < 20 + gap:
            frame.add(box_at(30 + 3 * t, 50 + t), 0.9, truth=0)
        frame.add(box_at(400, 300), 0.9, truth=1)  # a parked car
        frames.append(frame)
    ids = run(ByteTracker(name, cmc="none", track_buffer=buffer), frames)
    assert len(set(ids[0])) == expected_ids
    assert len(set(ids[1])) == 1 and not set(ids[0]) & set(ids[1])


@pytest.mark.parametrize("name", TRACKERS)
def test_weak_detections_continue_tracks_but_never_start_them(name):
    frames = []
    for t in range(30):
        frame = Frame()
        frame.add(box_at(50 + 2 * t, 50), 0.2 if 10 <= t < 20 else 0.9, truth=0)  # weak: under 0.3, over 0.1
        frame.add(box_at(300, 300 + t), 0.2, truth=1)
        frames.append(frame)
    ids = run(ByteTracker(name, cmc="none"), frames)
    assert len(ids[0]) == 30 and len(set(ids[0])) == 1
    assert 1 not in ids


def test_ids_are_given_when_a_track_is_confirmed_and_stay_contiguous():
    tracker = ByteTracker("bytetrack")
    first = tracker.update([box_at(10, 10), box_at(100, 100)], [0.9, 0.9])
    assert first.ids.tolist() == [1, 2]  # the stream's first frame: at once
    second = tracker.update([box_at(11, 10), box_at(101, 100), box_at(300, 300), box_at(500, 50)], [0.9] * 4)
    assert second.ids.tolist() == [1, 2]  # the newcomers wait for a second sighting
    third = tracker.update([box_at(12, 10), box_at(102, 100), box_at(301, 300)], [0.9, 0.9, 0.9])
    assert third.ids.tolist() == [1, 2, 3]  # (500, 50) was seen once: no id was spent on it
    assert third.detections.tolist() == [0, 1, 2]
    assert third.boxes.shape == (3, 4) and np.allclose(third.boxes[2], box_at(301, 300), atol=1.0)


def test_tracks_carry_the_score_and_label_of_their_detection_and_class_aware_matching():
    tracker = ByteTracker("bytetrack")
    tracker.update([box_at(10, 10)], [0.9], [3])
    out = tracker.update([box_at(11, 10)], [0.7], [5])
    assert out.ids.tolist() == [1] and out.labels.tolist() == [5] and out.scores.tolist() == [0.7]
    aware = ByteTracker("bytetrack", class_aware=True)
    aware.update([box_at(10, 10)], [0.9], [3])
    assert len(aware.update([box_at(11, 10)], [0.9], [5])) == 0  # a new track of class 5, not yet confirmed


def pan_scene(step: float = 25.0) -> list[Frame]:
    """Six 12-pixel objects drifting 0.5 px per frame; from frame 10 the camera pans `step` px per frame to the
    right (the objects move left in the image), with the true motion recorded."""
    frames = []
    for t in range(30):
        shift = step * max(0, t - 9)
        frame = Frame(motion=np.array([[1.0, 0, -step if t >= 10 else 0.0], [0, 1.0, 0]]))
        for k in range(6):
            frame.add(box_at(700 + 40 * k + 0.5 * t - shift, 200 + 30 * (k % 2), size=12), 0.9, truth=k)
        frames.append(frame)
    return frames


@pytest.mark.parametrize("name", TRACKERS)
def test_a_camera_pan_breaks_tracks_unless_the_motion_is_compensated(name):
    broken = run(ByteTracker(name, cmc="none"), pan_scene())
    assert sum(len(set(seq)) for seq in broken.values()) > 6
    compensated = run(ByteTracker(name, cmc="none"), pan_scene(), give_motion=True)
    assert identity_switches(compensated) == 0
    assert all(len(compensated[k]) == 30 for k in range(6))


def test_reset_starts_a_new_stream_and_compensation_needs_frames():
    tracker = ByteTracker("bytetrack")
    tracker.update([box_at(10, 10)], [0.9])
    tracker.reset()
    assert tracker.update([box_at(300, 300)], [0.9]).ids.tolist() == [1]
    with pytest.raises(ValueError, match="needs each frame"):
        ByteTracker("botsort").update([box_at(10, 10)], [0.9])
    with pytest.raises(ValueError, match="2 boxes, 1 scores"):
        tracker.update([box_at(10, 10), box_at(50, 50)], [0.9])
    assert len(tracker.update(np.zeros((0, 4)), np.zeros(0))) == 0
