"""The geometry of lines and zones, and the counting rules on hand-made tracks whose answers are known."""

from pathlib import Path

import numpy as np
import pytest

from tphyolo.analyze import Counter, TrackPoints, Zones
from tphyolo.analyze.geometry import inside_polygon, is_simple_polygon, paths_cross, signed_distance

SQUARE = np.array([[20.0, 20], [80, 20], [80, 80], [20, 80]])


def walk(ys, x=50.0, track=1, label=0):
    """TrackPoints of one track at (x, y) for each y, frames from 1."""
    for n, y in enumerate(ys, start=1):
        yield TrackPoints(n, np.array([track]), np.array([label]), np.array([[x, y]]), np.array([[x, y]]))


def test_the_side_follows_the_cross_product_in_image_coordinates():
    a, b = np.array([0.0, 270]), np.array([1024.0, 270])  # left to right along the image
    below, above = np.array([[500.0, 300]]), np.array([[500.0, 200]])
    # y grows downwards: below the line is its right, (B - A) x (p - A) = 1024 * 30 > 0: a positive distance
    assert signed_distance(np.vstack([below, above]), np.stack([a, b])).tolist() == [30.0, -70.0]
    assert signed_distance(np.vstack([below, above]), np.stack([b, a])).tolist() == [-30.0, 70.0]  # reversed


def test_paths_cross_the_line_itself_not_its_extension():
    line = np.array([[0.0, 50], [100, 50]])
    start, end = np.array([[50.0, 0], [150, 0]]), np.array([[50.0, 100], [150, 100]])
    assert paths_cross(start, end, line).tolist() == [True, False]


def test_polygons_inside_and_self_intersection():
    assert is_simple_polygon(SQUARE) and not is_simple_polygon(SQUARE[[0, 2, 1, 3]])  # a bow tie
    points = np.array([[50.0, 50], [10, 50], [79, 21], [90, 90]])
    assert inside_polygon(points, SQUARE).tolist() == [True, False, True, False]


def test_a_track_crossing_downwards_counts_forward_once_with_its_frame_and_time():
    counter = Counter([("h", [[0, 50], [100, 50]])], names=["car"], fps=10)
    events = [e for p in walk([40, 44, 48, 53, 58]) for e in counter.update(p)]
    assert [(e.direction, e.frame, e.time, e.label) for e in events] == [("forward", 4, pytest.approx(0.3), "car")]
    assert counter.counts == {"h": {"forward": {"car": 1}, "backward": {}}}


def test_an_oscillating_track_counts_once():
    counter = Counter([("h", [[0, 50], [100, 50]])], names=["car"], margin=2.0)
    ys = [40, 49, 51, 49.5, 50.5, 47, 53, 46, 54, 45, 56, 60]  # jitter in the band, then swings over the line
    for points in walk(ys):
        counter.update(points)
    assert counter.counts["h"] == {"forward": {"car": 1}, "backward": {}}
    assert len(counter.events) == 1 and counter.events[0].frame == 7  # the first time it is clear of the band


def test_a_track_going_up_counts_backward_and_going_around_the_end_counts_nothing():
    counter = Counter([("h", [[0, 50], [100, 50]])], names=["car", "van"])
    for (a, b) in zip(walk([70, 60, 40, 30], track=1), walk([70, 70, 30, 30], x=150, track=2, label=1),
                      strict=True):  # fmt: skip
        counter.update(TrackPoints(a.number, np.r_[a.ids, b.ids], np.r_[a.labels, b.labels], np.r_[a.image, b.image],
                                   np.r_[a.ground, b.ground]))  # fmt: skip
    assert counter.counts["h"] == {"forward": {}, "backward": {"car": 1}}


def test_leaving_and_coming_back_is_two_entries_and_the_dwell_counts_the_frames_inside():
    zones = Zones([("z", SQUARE)], names=["person"], fps=5)
    ys = [10, 30, 40, 50, 90, 95, 60, 50, 10]  # in at 2, out at 5, in again at 7, out at 9
    kinds = [(e.kind, e.frame) for p in walk(ys) for e in zones.update(p)]
    assert kinds == [("entry", 2), ("exit", 5), ("entry", 7), ("exit", 9)]
    assert zones.entries["z"] == {"person": 2} and zones.exits["z"] == {"person": 2}
    assert zones.dwell_frames("z", 1) == 3 + 2 and zones.dwell("z", 1) == pytest.approx(1.0)
    assert zones.live["z"] == {} and zones.dwell_frames("z", 99) == 0


def test_the_live_count_holds_the_tracks_inside_now():
    zones = Zones([("z", SQUARE)], names=["a", "b"])
    zones.update(TrackPoints(1, np.array([1, 2, 3]), np.array([0, 1, 1]), np.zeros((3, 2)),
                             np.array([[50.0, 50], [60, 60], [5, 5]])))  # fmt: skip
    assert zones.live["z"] == {"a": 1, "b": 1}
    assert zones.summary()["z"]["dwell_s"] == {1: pytest.approx(1 / 30, abs=1e-3), 2: pytest.approx(1 / 30, abs=1e-3)}


def test_the_anchor_is_the_box_centre_or_its_bottom_middle():
    from tphyolo.analyze import anchor_points

    boxes = np.array([[10.0, 20, 30, 60]])
    assert anchor_points(boxes).tolist() == [[20.0, 40.0]] and anchor_points(boxes, "bottom").tolist() == [[20.0, 60.0]]
    counter = Counter([("h", [[0, 50], [100, 50]])])  # a box whose bottom crosses the line before its centre does
    for n, top in enumerate([0.0, 20.0], start=1):
        counter.update(TrackPoints.from_boxes(n, [[40, top, 60, top + 40]], [1], [0], anchor="bottom"))
    assert counter.counts["h"]["forward"] == {"0": 1}
    with pytest.raises(ValueError, match="unknown anchor 'top'"):
        anchor_points(boxes, "top")


def test_a_track_lost_inside_stays_inside_so_inside_is_entries_minus_exits():
    """Track 1 enters and is never seen again (hidden, or out of view); track 2 enters and leaves: one inside,
    as the summary and the video's panel both say."""
    zones = Zones([("z", SQUARE)], names=["car", "bus"])
    zones.update(TrackPoints(1, np.array([1, 2]), np.array([0, 1]), np.zeros((2, 2)), np.array([[5.0, 5], [5, 5]])))
    zones.update(TrackPoints(2, np.array([1, 2]), np.array([0, 1]), np.zeros((2, 2)), np.array([[50.0, 50], [50, 50]])))
    zones.update(TrackPoints(3, np.array([2]), np.array([1]), np.zeros((1, 2)), np.array([[95.0, 95]])))
    assert zones.entries["z"] == {"car": 1, "bus": 1} and zones.exits["z"] == {"bus": 1}
    assert zones.live["z"] == {"car": 1}


def test_the_summary_names_classes_without_stray_spaces():
    from types import SimpleNamespace

    from tphyolo.analyze.outputs.summary import summary_text

    counts = {"lines": {"h": {"forward": {}, "backward": {"bus": 1, "car": 2}}},
              "zones": {"z": {"live": {"car": 1}, "entries": {"car": 1}, "exits": {}, "dwell_s": {}}}}  # fmt: skip
    report = SimpleNamespace(name="seq", frames=10, seconds=0.1, counts=counts, mean_speeds={})
    assert summary_text([report], Path("runs/analyze/exp")).splitlines() == [
        "seq: 10 frames, analytics at 100 frames/s",
        "  line h: 0 forward, 3 backward (bus 1, car 2)",
        "  zone z: 1 entries, 0 exits, 1 inside at the end",
        "results in runs/analyze/exp",
    ]
