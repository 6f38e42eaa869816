"""The trackers' optional capabilities as protocols, found by `isinstance` on any class with the members, and the
live-track table both engines keep: a third-party tracker that reports its camera motion keeps it in the
analytics, one without `skip_empty` is visited frame by frame."""

from dataclasses import dataclass

import numpy as np
import pytest

from tphyolo.analyze.inputs.streams import FrameMotion
from tphyolo.track.interface import (
    CameraMotionSettings,
    CompensatesCameraMotion,
    MultiObjectTracker,
    SkipsEmptyFrames,
    Tracks,
    camera_compensation,
    compensates_camera_motion,
)
from tphyolo.track.kalman import KalmanBoxFilter, KalmanStates
from tphyolo.track.live import LiveTracks
from tphyolo.track.ocsort import OCSort
from tphyolo.track.precomputed import _visited_frames
from tphyolo.track.registry import make_tracker
from tphyolo.track.stream import Tracker

SHIFT = np.array([[1.0, 0.0, 7.0], [0.0, 1.0, -3.0]])  # what the third-party tracker says the camera did


@dataclass(frozen=True)
class GyroSettings:
    tracker: str = "gyro"
    cmc: str = "gyro"


class GyroTracker:
    """A tracker from elsewhere: the contract, plus the camera motion it read from a gyroscope."""

    def __init__(self, cmc: str = "gyro") -> None:
        self.config = GyroSettings(cmc=cmc)
        self.camera_motion = SHIFT.copy()

    def reset(self) -> None:
        pass

    def update(self, boxes, scores, labels=None, *, frame=None, camera_motion=None) -> Tracks:
        empty = np.zeros(0, np.int64)
        return Tracks(np.zeros((0, 4)), empty, np.zeros(0), empty, empty)


def test_a_third_party_tracker_keeps_its_camera_motion_in_the_analytics():
    gyro = GyroTracker()
    assert isinstance(gyro, MultiObjectTracker) and isinstance(gyro, CompensatesCameraMotion)
    assert isinstance(gyro.config, CameraMotionSettings) and camera_compensation(gyro) == "gyro"
    image = np.zeros((64, 64, 3), np.uint8)
    assert np.array_equal(FrameMotion(gyro, "sparse")(image, np.zeros((0, 4))), SHIFT)
    assert not compensates_camera_motion(GyroTracker(cmc="none"))  # its settings turn it off: estimated instead
    assert np.array_equal(FrameMotion(GyroTracker(cmc="none"), "none")(image, np.zeros((0, 4))), np.eye(2, 3))


def test_the_built_in_trackers_declare_their_capabilities():
    botsort, bytetrack, ocsort = make_tracker("botsort"), make_tracker("bytetrack"), make_tracker("ocsort")
    assert all(isinstance(t, SkipsEmptyFrames) for t in (botsort, bytetrack, ocsort))
    assert [compensates_camera_motion(t) for t in (botsort, bytetrack, ocsort)] == [True, False, False]
    assert [camera_compensation(t) for t in (botsort, bytetrack, ocsort)] == ["sparse", "none", "none"]
    assert not isinstance(GyroTracker(), SkipsEmptyFrames)


def test_frames_are_skipped_only_by_a_tracker_that_can():
    frames = [3, 9]  # detections in frames 3 and 9, no track kept in between
    assert list(_visited_frames(frames, OCSort())) == [3, 9]  # 1-2 and 4-8 passed by skip_empty
    assert list(_visited_frames(frames, GyroTracker())) == list(range(1, 10))


def test_the_live_track_table_keeps_and_appends_every_column():
    kalman = KalmanBoxFilter("xywh")
    table = LiveTracks(ids=np.zeros(0, np.int64), states=KalmanStates.empty(), score=np.zeros(0))
    boxes = np.array([[0.0, 0, 10, 20], [5, 5, 9, 9], [30, 40, 50, 60]])
    table.append({"ids": np.array([4, 5, 6]), "states": kalman.initiate(boxes), "score": np.array([0.9, 0.2, 0.5])})
    table.keep(table.score > 0.3)
    assert len(table) == 2 and table.ids.tolist() == [4, 6]
    assert np.array_equal(kalman.boxes(table.states), boxes[[0, 2]])
    with pytest.raises(ValueError, match=r"needs the columns \['ids', 'score', 'states'\], got \['ids'\]"):
        table.append({"ids": np.array([7])})
    with pytest.raises(ValueError, match="different lengths"):
        LiveTracks(ids=np.zeros(2), score=np.zeros(3))


class NoDetector:
    """A `SequenceDetector` that sees nothing: enough for `tphyolo.Tracker` to take it as the detector."""

    names = ["car"]

    def track_sequence(self, sequence, tracker, *, on_skip=None, vid_stride=1):
        return iter(())


def test_tracker_names_and_settings_of_any_tracker():
    tracking = Tracker(NoDetector(), tracker=GyroTracker())
    assert tracking.predictor is not None and tracking.names == ("car",)
    assert tracking.tracker_name == "gyro" and tracking.cmc == "gyro"
    assert tracking.tracker_settings() == {"tracker": "gyro", "cmc": "gyro"}
    assert Tracker(NoDetector(), tracker="ocsort").tracker_settings()["delta_t"] == 3
