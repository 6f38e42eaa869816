"""The analytics on a synthetic-mot sequence filmed by a panning, zooming, turning camera, fed its true tracks:
counts, dwell, speeds and the heatmap against what the generator knows (each object's straight world path and
speed), with the camera motion removed through the true frame-to-frame motion."""

import numpy as np
import pytest
from tests.analyze.simulated import LINES, MARGIN, Truth, expected_counts, observed, simulate

from tphyolo.analyze import Counter, Heatmap, Speed, Zones
from tphyolo.data.formats.visdrone import NAMES

ZONE = (150.0, 220.0, 300.0, 280.0)  # x1, y1, x2, y2 in the first frame: over a road
WINDOW = 10


@pytest.fixture(scope="module")
def truth():
    return Truth(simulate())


@pytest.fixture(scope="module")
def analysed(truth):
    x1, y1, x2, y2 = ZONE
    counter = Counter(LINES, names=NAMES, fps=25, margin=MARGIN)  # fmt: skip
    zones = Zones([("z", [[x1, y1], [x2, y1], [x2, y2], [x1, y2]])], names=NAMES, fps=25, margin=MARGIN)
    speed, heatmap = Speed(fps=25, window=WINDOW), Heatmap((640, 384), cell=8)
    for t, points in truth.points():
        counter.update(points)
        zones.update(points)
        speed.update(points, gsd=truth.gsd(t))
        heatmap.update(points)
    return counter, zones, speed, heatmap


def test_line_counts_per_class_and_direction_are_exact(truth, analysed):
    counter = analysed[0]
    expected = expected_counts(truth)
    assert sum(sum(c.values()) for per in expected.values() for c in per.values()) >= 8  # enough to mean something
    assert counter.counts == expected


def test_zone_dwell_is_within_one_frame_of_the_straight_paths_time_inside(truth, analysed):
    zones = analysed[1]
    x1, y1, x2, y2 = ZONE
    checked = 0
    for track in np.unique(truth.rows.ids).tolist():
        speed = np.hypot(*truth.sequence.velocity[track - 1])
        frames = observed(truth, track)
        if speed < 1.0 or len(frames) != frames[-1] - frames[0] + 1:  # slow (rounding) or hidden on the way
            continue
        t = np.linspace(frames[0], frames[-1], 2001)
        path = truth.ground_path(track, t)
        inner = (path > [x1 + MARGIN, y1 + MARGIN]).all(1) & (path < [x2 - MARGIN, y2 - MARGIN]).all(1)
        outer = (path > [x1 - MARGIN, y1 - MARGIN]).all(1) & (path < [x2 + MARGIN, y2 + MARGIN]).all(1)
        if not inner.any():
            continue
        # hysteresis: in once MARGIN deep, out once MARGIN beyond; a frame seen stands for half a frame each side
        entered = frames[0] - 0.5 if inner[0] else t[np.argmax(inner)]
        left = frames[-1] + 0.5 if outer[-1] else t[len(t) - 1 - np.argmax(outer[::-1])]
        assert zones.dwell_frames("z", track) == pytest.approx(left - entered, abs=1.0), track
        checked += 1
    assert checked >= 4


def speed_errors(truth, speed, *, least_frames=2 * WINDOW):
    """Relative error of each well-seen vehicle-speed track's mean speed (>= 1 px per frame: slower ones are
    dominated by the generator's rounding to whole pixels)."""
    errors = {}
    for track in np.unique(truth.rows.ids).tolist():
        if np.hypot(*truth.sequence.velocity[track - 1]) >= 1.0 and len(observed(truth, track)) >= least_frames:
            errors[track] = speed.mean_speed(track) / truth.speed_kmh(track) - 1
    return errors


def test_speeds_are_within_5_percent_with_the_pan_removed_and_far_off_without(truth, analysed):
    errors = speed_errors(truth, analysed[2])
    assert len(errors) >= 10 and max(abs(e) for e in errors.values()) < 0.05
    still = Speed(fps=25, window=WINDOW)
    for t, points in truth.points(compensate=False):
        still.update(points, gsd=truth.gsd(t))
    uncompensated = speed_errors(truth, still)
    assert np.median(np.abs(list(uncompensated.values()))) > 0.3  # the camera's own motion added in


def test_speeds_from_the_camera_motion_estimated_on_the_frames_are_within_5_percent():
    from tphyolo.track.cmc import CameraMotion

    sequence = simulate(draw=True, length=60)
    truth = Truth(sequence)
    camera = CameraMotion("sparse")
    motions = []
    for t, frame in enumerate(sequence.frames):
        now = sequence.truth.select(sequence.truth.frames == t + 1)
        motions.append(camera(frame, now.boxes))
    speed = Speed(fps=25, window=WINDOW)
    for t, points in truth.points(motions=motions):
        speed.update(points, gsd=truth.gsd(t))
    errors = speed_errors(truth, speed)
    assert len(errors) >= 8 and np.median(np.abs(list(errors.values()))) < 0.05
    assert max(abs(e) for e in errors.values()) < 0.10


def test_heatmap_mass_lies_where_the_objects_were(truth, analysed):
    heatmap = analysed[3]
    rows = truth.rows
    assert heatmap.array.sum() == len(rows)
    affine = truth.sequence.camera.affine(0)
    world = np.array([truth.world_centre(i, f - 1) for i, f in zip(rows.ids.tolist(), rows.frames.tolist(),
                                                                     strict=True)])  # fmt: skip
    ground = world @ affine[:, :2].T + affine[:, 2]
    cells = np.floor((ground - heatmap.origin) / heatmap.cell).astype(int)
    expected = np.zeros_like(heatmap.array)
    np.add.at(expected, (cells[:, 1], cells[:, 0]), 1)
    assert np.abs(heatmap.array - expected).sum() <= 0.01 * len(rows)  # cell edges may take a point either way
    assert heatmap.origin[0] < 0 or heatmap.origin[1] < 0 or heatmap.array.shape != (48, 80)  # grown with the pan
