"""OC-SORT and the tracker contract: every registered tracker keeps it, OC-SORT on hand-made scenes with known
identities, its reporting rule, its re-update checked against the filter fed the virtual path by hand, and the
command line."""

import numpy as np
import pytest
from track_scenes import Frame, box_at, crossing_scene, identity_switches, run

from tphyolo.cli import main
from tphyolo.track.interface import MultiObjectTracker, Tracks
from tphyolo.track.ocsort import OCSORT_MOT17, OCSort, OCSortConfig, correct, predict, to_measurement
from tphyolo.track.registry import TRACKER_NAMES, TRACKERS, make_tracker, tracker_settings


def straight_walk(length: int = 30, *, start: int = 0, hidden=()) -> list[Frame]:
    """One object walking right 4 px a frame from frame `start` on, undetected in the frames of `hidden`."""
    frames = []
    for t in range(length):
        frame = Frame()
        if t >= start and t not in hidden:
            frame.add(box_at(40 + 4 * t, 60), 0.9, truth=0)
        frames.append(frame)
    return frames


@pytest.mark.parametrize("name", TRACKER_NAMES)
def test_every_registered_tracker_keeps_the_contract(name):
    tracker = make_tracker(name, **({"cmc": "none"} if not name.startswith("ocsort") else {}))
    assert isinstance(tracker, MultiObjectTracker) and tracker.config.tracker == name.removesuffix("-mot17")
    first = [tracker.update(*frame_input(frame)) for frame in straight_walk(10)]
    assert all(isinstance(out, Tracks) for out in first)
    assert first[-1].ids.tolist() == [1] and first[-1].detections.tolist() == [0]
    np.testing.assert_allclose(first[-1].boxes, [box_at(76, 60)], atol=1.0)  # the box of the object
    tracker.reset()
    again = [tracker.update(*frame_input(frame)) for frame in straight_walk(10)]
    assert again[-1].ids.tolist() == [1]  # a new stream numbers its tracks from 1 again


def frame_input(frame: Frame):
    return np.array(frame.boxes).reshape(-1, 4), np.array(frame.scores), None


def test_the_registry_reads_names_settings_and_yaml_files(tmp_path):
    assert type(make_tracker("ocsort")) is OCSort and make_tracker("ocsort", inertia=0.3).config.inertia == 0.3
    assert set(TRACKERS) == {"bytetrack", "botsort", "ocsort", "bytetrack-mot17", "botsort-mot17", "ocsort-mot17"}
    assert tracker_settings("ocsort-mot17") == OCSORT_MOT17 and OCSORT_MOT17.det_thresh == 0.6  # as published
    path = tmp_path / "oc.yaml"
    path.write_text("tracker: ocsort\nmax_age: 50\nuse_byte: true\n")
    assert tracker_settings(path) == OCSortConfig(max_age=50, use_byte=True)
    assert tracker_settings(path, max_age=5).max_age == 5  # keywords win over the file
    path.write_text("tracker: ocsort\ncmc: sparse\n")
    with pytest.raises(ValueError, match=r"oc.yaml: unknown tracker setting\(s\) \['cmc'\]"):
        tracker_settings(path)
    with pytest.raises(ValueError, match=r"tracker ocsort: unknown tracker setting\(s\) \['cmc'\]"):
        make_tracker("ocsort", cmc="sparse")
    with pytest.raises(ValueError, match="delta_t must be >= 1"):
        OCSortConfig(delta_t=0)


def test_two_objects_crossing_keep_their_ids():
    ids = run(OCSort(OCSORT_MOT17), crossing_scene())  # published: reported after min_hits 3 in a row
    assert identity_switches(ids) == 0 and ids[0][0] != ids[1][0]
    assert len(ids[0]) == 60 and len(ids[1]) == 55 - 2  # B reported again from its third frame after hiding


def test_a_track_is_reported_after_min_hits_matches_in_a_row():
    """In a stream's first min_hits frames every track is reported at once; later, a new object's track from
    the frame of its min_hits-th match (born at 10, matched at 11, 12, 13)."""
    tracker = OCSort(OCSORT_MOT17)
    assert [len(tracker.update(*frame_input(f))) for f in straight_walk(20, start=10)] == [0] * 13 + [1] * 7
    tracker = OCSort(OCSORT_MOT17)
    assert [len(tracker.update(*frame_input(f))) for f in straight_walk(5)] == [1] * 5  # reported from the start


def test_weak_detections_need_use_byte():
    frames = straight_walk(20)
    for frame in frames[12:16]:
        frame.scores[0] = 0.3  # below det_thresh 0.6, above low_thresh 0.1
    plain = run(OCSort(OCSORT_MOT17), frames)[0]
    byte = run(OCSort(OCSORT_MOT17, use_byte=True), frames)[0]
    assert len(byte) == 20 and len(plain) < 20  # with BYTE the weak boxes keep the track reported
    assert len(set(byte)) == 1


def test_the_reupdate_replays_the_straight_path_over_the_missed_frames():
    """A walk seen for 10 frames, unseen for 6, seen again 1 px a frame on: the track's filter after the
    re-match equals the filter rewound to frame 9 and fed the straight path from there, one box a frame, by hand."""
    tracker = OCSort(min_hits=1)
    for t in range(10):
        tracker.update([box_at(40 + 4 * t, 60)], [0.9])
    x_seen, p_seen = tracker.tracks.x_obs.copy(), tracker.tracks.p_obs.copy()
    for _ in range(6):
        tracker.update(np.zeros((0, 4)), np.zeros(0))
    last, new = np.array(box_at(76, 60)), np.array(box_at(76 + 7, 60))
    out = tracker.update([new], [0.9])
    assert out.ids.tolist() == [1]  # found again by its last observation (OCR)

    x, p = x_seen, p_seen
    for step in range(1, 7):
        x, p = predict(x, p)
        x, p = correct(x, p, to_measurement((last + (new - last) * step / 7)[None]))
    x, p = predict(x, p)
    x, p = correct(x, p, to_measurement(new[None]))
    np.testing.assert_allclose(tracker.tracks.x, x, rtol=1e-9, atol=1e-9)
    assert 1.0 < tracker.tracks.x[0, 4] < 3.0  # slowed from the 4 px a frame it was seen at, towards the path's 1


def test_class_aware_tracks_match_only_their_class():
    tracker = OCSort(class_aware=True, min_hits=2)
    tracker.update([box_at(50, 50)], [0.9], [0])
    out = tracker.update([box_at(51, 50)], [0.9], [1])  # the same place, another class: a new track
    assert out.ids.tolist() == [2] and out.labels.tolist() == [1]
    tracker = OCSort(min_hits=2)
    tracker.update([box_at(50, 50)], [0.9], [0])
    assert tracker.update([box_at(51, 50)], [0.9], [1]).ids.tolist() == [1]  # class-agnostic: the same track


def test_track_command_runs_ocsort_on_detection_files(tmp_path, capsys):
    dets = tmp_path / "dets"
    dets.mkdir()
    rows = [f"{t + 1},-1,{20 + 4 * t},50,20,20,0.9,1,-1,-1" for t in range(12)]  # VisDrone-MOT: one pedestrian
    (dets / "seq.txt").write_text("\n".join(rows) + "\n")
    argv = ["track", "--detections", str(dets), "--tracker", "ocsort", "--save-mot", "--project", str(tmp_path)]
    assert main([*argv, "--name", "r"]) == 0
    assert "(ocsort, cmc none)" in capsys.readouterr().out
    written = np.loadtxt(tmp_path / "r" / "mot" / "seq.txt", delimiter=",", ndmin=2)
    assert written[:, 0].tolist() == list(range(1, 13)) and set(written[:, 1]) == {1}
    assert main([*argv, "--cmc", "sparse", "--name", "s"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown tracker setting(s) ['cmc']" in err[0]
