"""Tracker settings: presets, yaml files that override a preset, and the errors for bad settings."""

import pytest

from tphyolo.track.config import TRACKER_PRESETS, TrackerConfig, tracker_config


def test_presets_differ_where_the_methods_do():
    byte, bot = TRACKER_PRESETS["bytetrack"], TRACKER_PRESETS["botsort"]
    assert (byte.cmc, bot.cmc) == ("none", "sparse") and TrackerConfig(**{**vars(bot), "tracker": "bytetrack",
                                                                         "cmc": "none"}) == byte  # fmt: skip
    mot17 = TRACKER_PRESETS["bytetrack-mot17"], TRACKER_PRESETS["botsort-mot17"]
    assert [(c.track_high_thresh, c.new_track_thresh, c.motion) for c in mot17] == [(0.5, 0.6, "xyah"),
                                                                                  (0.6, 0.7, "xywh")]  # fmt: skip
    assert tracker_config("botsort-mot17").tracker == "botsort"  # a preset of the method it names
    assert tracker_config("botsort") == bot
    assert tracker_config("bytetrack", track_buffer=60).track_buffer == 60
    assert tracker_config(bot, cmc="ecc").cmc == "ecc"


def test_a_yaml_overrides_its_preset(tmp_path):
    path = tmp_path / "drone.yaml"
    path.write_text("tracker: botsort\ntrack_buffer: 90\ncmc: orb\n", encoding="utf-8")
    config = tracker_config(path)
    assert config == TrackerConfig(**{**vars(TRACKER_PRESETS["botsort"]), "track_buffer": 90, "cmc": "orb"})
    assert tracker_config(path, cmc="none").cmc == "none"  # keywords win over the file
    empty = tmp_path / "empty.yaml"
    empty.write_text("", encoding="utf-8")
    assert tracker_config(empty) == TRACKER_PRESETS["bytetrack"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("trak_buffer: 3\n", r"unknown tracker setting\(s\) \['trak_buffer'\]"),
        ("track_buffer: many\n", "track_buffer must be int"),
        ("tracker: sort\n", "tracker 'sort' is not one of"),
        ("cmc: gyro\n", "cmc must be one of .*, got 'gyro'"),
        ("track_low_thresh: 0.7\n", "track_low_thresh 0.7 is above track_high_thresh"),
        ("- 1\n", "expected a mapping"),
    ],
)
def test_bad_yaml_names_the_file_and_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        tracker_config(path)
    assert str(path) in str(error.value)


def test_bad_names_and_values():
    with pytest.raises(ValueError, match="neither a tracker name"):
        tracker_config("deepsort")
    with pytest.raises(ValueError, match="match_thresh"):
        TrackerConfig(match_thresh=0.0)
    with pytest.raises(ValueError, match="motion must be one of .*, got 'xy'"):
        TrackerConfig(motion="xy")


def test_bytetrack_starts_tracks_from_every_confident_detection_left_over():
    """A detection just above the high threshold starts a track (BoxMOT's rule; ByteTrack's code asks 0.1
    more), which gets its id when it is matched in the next frame."""
    from tphyolo.track.tracker import ByteTracker

    tracker = ByteTracker("bytetrack")
    tracker.update([[0, 0, 10, 10]], [0.9])  # first frame: a track at once, id 1
    box = [[100, 100, 120, 120]]
    assert len(tracker.update(box, [0.55])) == 0  # a new track, not yet confirmed
    tracks = tracker.update(box, [0.55])
    assert tracks.ids.tolist() == [2] and tracks.scores.tolist() == [0.55]
