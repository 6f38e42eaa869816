"""The trackers' defaults against the settings published for MOT17 (`<name>-mot17`), on drone-like detections:
synthetic-mot trajectories (no pixels drawn) turned into detections by `tphyolo.track.simulated`'s drone
detector (low scores, misses, false positives near and away from objects), seen by a still camera, scored
with the VisDrone-MOT protocol."""

import numpy as np
import pytest

from tphyolo.data.builtin.synthetic_mot import FRAME_SIZE, simulate_sequence
from tphyolo.data.mot.table import TrackTable
from tphyolo.metrics.tracking import evaluate_tables
from tphyolo.track.job import DEFAULT_TRACKER, TrackerChoice
from tphyolo.track.registry import make_tracker
from tphyolo.track.simulated import DRONE_DETECTOR, simulate_detections

LENGTH = 40


def drone_scenes() -> list:
    """Two sequences (truth, detections), seen by a still camera: each frame's boxes are carried back into the
    first frame's pixels (centres by the camera's motion, sizes by its zoom), as a hovering drone films them."""
    out = []
    for seed in (5, 6):
        sequence = simulate_sequence(np.random.default_rng([seed, 0]), LENGTH, draw=False)
        truth, camera = sequence.truth, sequence.camera
        boxes = truth.boxes.copy()
        for t in range(LENGTH):
            rows = truth.frames == t + 1
            back = (np.vstack([camera.affine(0), [0, 0, 1]]) @ np.linalg.inv(np.vstack([camera.affine(t), [0, 0, 1]])))
            centre = (boxes[rows, :2] + boxes[rows, 2:]) / 2
            half = (boxes[rows, 2:] - boxes[rows, :2]) / 2 * camera.zoom[0] / camera.zoom[t]
            centre = centre @ back[:2, :2].T + back[:2, 2]
            boxes[rows] = np.concatenate([centre - half, centre + half], axis=1)
        truth = TrackTable(**{**vars(truth), "boxes": boxes})
        objects = truth.select((truth.ids > 0) & (truth.classes <= 10))
        out.append((truth, simulate_detections(objects, DRONE_DETECTOR, seed=seed, frame=FRAME_SIZE)))
    return out


@pytest.fixture(scope="module")
def scenes():
    return drone_scenes()


def scores(name: str, scenes) -> dict[str, float]:
    """Combined HOTA, IDF1 and MOTA of tracker `name` (cmc none: there are no pixels) over `scenes`."""
    truths, outputs = {}, {}
    for index, (truth, detections) in enumerate(scenes):
        tracker = make_tracker(name, **({} if name.startswith("ocsort") else {"cmc": "none"}))
        rows = []
        for t in range(1, LENGTH + 1):
            now = detections.select(detections.frames == t)
            out = tracker.update(now.boxes, now.scores, now.classes - 1)
            rows.append(TrackTable.from_columns(np.full(len(out), t), out.ids, out.boxes, out.scores, out.labels + 1))
        truths[f"seq{index}"], outputs[f"seq{index}"] = truth, TrackTable.concatenate(rows)
    combined = evaluate_tables(truths, outputs, fmt="visdrone-mot").combined
    return {metric: combined[metric] for metric in ("HOTA", "IDF1", "MOTA")}


def test_a_user_without_flags_gets_bytetrack_with_the_drone_settings():
    assert TrackerChoice().tracker == DEFAULT_TRACKER == "bytetrack"
    settings = make_tracker(DEFAULT_TRACKER).config
    assert (settings.track_high_thresh, settings.new_track_thresh, settings.motion) == (0.3, 0.3, "xywh")
    assert make_tracker("bytetrack-mot17").config.track_high_thresh == 0.5  # the published setting, kept by name


@pytest.mark.parametrize("name", ["bytetrack", "botsort", "ocsort"])
def test_the_defaults_beat_the_mot17_settings_on_drone_like_detections(scenes, name):
    ours, published = scores(name, scenes), scores(f"{name}-mot17", scenes)
    for metric in ("HOTA", "IDF1", "MOTA"):
        assert ours[metric] > published[metric] + 2.0, (metric, ours, published)
