"""Speed and Heatmap on hand-made tracks whose answers are known: km/h from a GSD, the window, the flag for
implausible speeds, a still object under a panning camera, and the heatmap's growth with the pan."""

import cv2
import numpy as np
import pytest

from tphyolo.analyze import GroundMotion, Heatmap, Speed, TrackPoints, ground_sampling_distance
from tphyolo.analyze.heatmap import COLOUR_MAP, SCALE_MIN_HEIGHT, SCALE_WIDTH


def test_km_per_hour_from_the_gsd_and_implausible_speeds_flagged():
    speed = Speed(fps=10, gsd=0.5, window=4, max_speed=15.0)  # 1 px per frame = 0.5 m per 0.1 s = 18 km/h
    found = [speed.update(TrackPoints(n, np.array([7]), np.array([2]), np.zeros((1, 2)), np.array([[n, 0.0]])))[0]
             for n in range(1, 7)]  # fmt: skip
    assert np.isnan(found[0]) and found[1:] == pytest.approx([18.0] * 5)
    assert speed.rows[-1] == (6, 7, 2, pytest.approx(18.0), True) and speed.mean_speed(7) == pytest.approx(18.0)
    assert np.isnan(speed.mean_speed(8))


def test_a_still_object_under_a_panning_zooming_camera_has_no_speed():
    ground, speed = GroundMotion(), Speed(fps=25, gsd=0.1)
    step = np.array([[1.02, 0.0, -6.0], [0.0, 1.02, 3.0]])  # the camera pans and zooms in each frame
    world = np.array([[200.0, 150.0]])
    moved, without = np.eye(3), Speed(fps=25, gsd=0.1)
    for n in range(1, 16):
        if n > 1:
            moved = np.vstack([step, [0, 0, 1]]) @ moved
        ground.advance(step if n > 1 else None)
        image = world @ moved[:2, :2].T + moved[:2, 2]  # where the still object appears in frame n
        points = TrackPoints.from_boxes(n, np.hstack([image - 5, image + 5]), [1], [0], ground)
        kmh = speed.update(points)[0]
        naive = without.update(TrackPoints.from_boxes(n, np.hstack([image - 5, image + 5]), [1], [0]))[0]
    assert ground.scale == pytest.approx(1.02**14) and kmh == pytest.approx(0.0, abs=1e-6)
    assert naive > 10  # the pan, read as the object's own motion


def test_the_gsd_from_height_and_lens_and_its_bounds():
    assert ground_sampling_distance(100.0, focal_mm=8.8, sensor_mm=13.2, image_width=5472) == pytest.approx(
        100 * 13.2 / (8.8 * 5472)
    )
    with pytest.raises(ValueError, match="altitude must be > 0"):
        ground_sampling_distance(0.0, focal_mm=8.8, sensor_mm=13.2, image_width=5472)


def test_the_heatmap_counts_each_track_frame_in_its_cell_and_grows_with_the_pan():
    heatmap = Heatmap((64, 32), cell=8)
    heatmap.update(TrackPoints(1, np.array([1, 2]), np.zeros(2, int), np.zeros((2, 2)), np.array([[4.0, 4], [12, 4]])))
    heatmap.update(TrackPoints(2, np.array([1]), np.zeros(1, int), np.zeros((1, 2)), np.array([[-20.0, 40]])))
    assert heatmap.origin == (-24, 0) and heatmap.array.shape == (6, 11) and heatmap.array.sum() == 3
    assert heatmap.array[0, 3] == 1 and heatmap.array[0, 4] == 1 and heatmap.array[5, 0] == 1
    overlay = heatmap.overlay(np.full((32, 64, 3), 200, np.uint8))
    assert overlay.shape == (SCALE_MIN_HEIGHT, 88 + SCALE_WIDTH, 3)  # the grid, padded for the scale beside it
    assert (overlay[:8, :8] == 96).all()  # grey where the first frame is not
    assert (overlay[0, 24:32] != 200).any() and (overlay[16, 50] == 200).all()  # heat over the frame, else the frame


def test_without_frames_the_heat_is_drawn_over_a_plain_canvas_beside_its_colour_scale():
    """Four track-frames in one cell, one in another: the busier cell gets the scale's top colour, the other
    the colour of one track-frame, each blended 0.6 over the grey canvas; the scale runs between the two."""
    heatmap = Heatmap((1, 1), cell=10)  # no first frame: the grid is what the tracks cover
    for _ in range(4):
        heatmap.update(TrackPoints(1, np.array([1]), np.zeros(1, int), np.zeros((1, 2)), np.array([[125.0, 5]])))
    heatmap.update(TrackPoints(2, np.array([2]), np.zeros(1, int), np.zeros((1, 2)), np.array([[5.0, 105]])))
    overlay = heatmap.overlay()
    assert overlay.shape == (110, 130 + SCALE_WIDTH, 3) and (overlay[50, 50] == 96).all()
    jet = cv2.applyColorMap(np.arange(256, dtype=np.uint8)[:, None], COLOUR_MAP)[:, 0].astype(float)
    one = round(255 * np.log(2) / np.log(5))  # the colour index of one track-frame (log scale)
    np.testing.assert_array_equal(overlay[5, 125], (0.6 * jet[255] + 0.4 * 96).astype(np.uint8))
    np.testing.assert_array_equal(overlay[105, 5], (0.6 * jet[one] + 0.4 * 96).astype(np.uint8))
    strip = overlay[:, 130 + 6 + 7]  # the middle of the scale's colour strip
    np.testing.assert_array_equal(strip[18], jet[255])  # the top: the busiest cell
    np.testing.assert_array_equal(strip[110 - 9], jet[one])  # the bottom: one track-frame
