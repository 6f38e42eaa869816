"""Camera-motion compensation from pixels: the estimate recovers a known motion, and BoT-SORT with it keeps the
identities of small objects through a camera pan that breaks them without it."""

import cv2
import numpy as np
import pytest
from track_scenes import Frame, identity_switches, run

from tphyolo.track.cmc import CameraMotion
from tphyolo.track.tracker import ByteTracker


def ground(seed: int = 0, size: tuple[int, int] = (900, 700)) -> np.ndarray:
    """A textured world (BGR): smooth noise with scattered rectangles, like fields and roofs from above."""
    rng = np.random.default_rng(seed)
    w, h = size
    coarse = rng.integers(40, 200, (h // 8, w // 8, 3), dtype=np.uint8)
    image = cv2.resize(coarse, (w, h), interpolation=cv2.INTER_CUBIC)
    for _ in range(150):
        x, y = rng.integers(0, w - 30), rng.integers(0, h - 30)
        cv2.rectangle(image, (int(x), int(y)), (int(x + rng.integers(5, 30)), int(y + rng.integers(5, 30))),
                      rng.integers(0, 255, 3).tolist(), -1)  # fmt: skip
    return image


def similarity(angle_deg: float, scale: float, shift: tuple[float, float], centre=(160.0, 120.0)) -> np.ndarray:
    """A 2 x 3 rotation + zoom about `centre`, then a shift."""
    affine = cv2.getRotationMatrix2D(centre, angle_deg, scale)
    affine[:, 2] += shift
    return affine


def corners_error(estimate: np.ndarray, truth: np.ndarray, width: int = 320, height: int = 240) -> float:
    """The largest distance between where the two affines send the corners of a width x height frame."""
    points = np.array([[0, 0, 1], [width, 0, 1], [0, height, 1], [width, height, 1]], dtype=float)
    return float(np.abs(points @ estimate.T - points @ truth.T).max())


@pytest.mark.parametrize("method", ["sparse", "orb", "ecc"])
@pytest.mark.parametrize("size", [640, 200])
def test_a_known_camera_motion_is_recovered(method, size):
    world = ground()
    first = world[100:340, 100:420].copy()  # 320 x 240
    truth = similarity(2.0, 1.03, (6.0, -4.0))
    second = cv2.warpAffine(first, truth, (320, 240), borderMode=cv2.BORDER_REFLECT)
    camera = CameraMotion(method, size=size)
    assert np.array_equal(camera(first), np.eye(2, 3))  # first frame: nothing to compare with
    estimate = camera(second, np.array([[10.0, 10.0, 40.0, 40.0]]))
    assert corners_error(estimate, truth) < (1.5 if size >= 320 else 3.0)


def test_a_blank_frame_gives_the_identity_and_none_does_nothing():
    camera = CameraMotion("sparse")
    blank = np.full((120, 160, 3), 90, np.uint8)
    camera(blank)
    assert np.array_equal(camera(blank), np.eye(2, 3))
    assert np.array_equal(CameraMotion("none")(ground()), np.eye(2, 3))
    with pytest.raises(ValueError, match="expected a"):
        camera(np.zeros((10, 10, 4), np.uint8))
    with pytest.raises(ValueError, match="unknown camera-motion"):
        CameraMotion("sift")


def panning_video(n_frames: int = 24, step: int = 14) -> list[Frame]:
    """Eight 12-pixel squares parked on the textured ground, filmed by a 320 x 240 camera that starts panning
    right and down at frame 6 by `step` px per frame (more than an object's size)."""
    world = ground(seed=3)
    rng = np.random.default_rng(5)
    objects = np.column_stack([rng.uniform(300, 560, 8), rng.uniform(200, 330, 8)])
    frames = []
    for t in range(n_frames):
        x0 = 150 + step * max(0, t - 5)
        y0 = 120 + step // 2 * max(0, t - 5)
        image = world[y0 : y0 + 240, x0 : x0 + 320].copy()
        frame = Frame(image=image)
        for k, (wx, wy) in enumerate(objects):
            x, y = int(wx) - x0, int(wy) - y0
            if x >= 0 and x + 12 <= 320 and y >= 0 and y + 12 <= 240:
                cv2.rectangle(image, (x, y), (x + 11, y + 11), (255, 255, 255), -1)
                frame.add([x, y, x + 12, y + 12], 0.9, truth=k)
        frames.append(frame)
    return frames


@pytest.mark.parametrize("method", ["sparse", "orb", "ecc"])
def test_botsort_keeps_identities_through_a_pan_with_compensation(method):
    frames = panning_video()
    with_cmc = run(ByteTracker("botsort", cmc=method), frames)
    assert identity_switches(with_cmc) == 0
    sightings = {k: sum(k in f.truth for f in frames) for k in range(8)}
    late = {k for k in range(8) if k not in frames[0].truth}  # entered the view later: output from its 2nd frame
    assert {k: len(seq) for k, seq in with_cmc.items()} == {k: n - (k in late) for k, n in sightings.items() if n}
    without = run(ByteTracker("botsort", cmc="none"), frames)  # loses every object once the pan starts
    assert sum(len(seq) for seq in without.values()) < 0.6 * sum(len(seq) for seq in with_cmc.values())
