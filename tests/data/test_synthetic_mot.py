"""The synthetic tracking set: deterministic, both layouts readable, and frames that agree with the camera path
and the ground truth."""

import numpy as np
import pytest

from tphyolo.data.builtin.synthetic_mot import FRAME_SIZE, generate_synthetic_mot, render_sequence
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.mot.sequences import read_ground_truth, tracking_split
from tphyolo.data.scan import scan_split
from tphyolo.track.cmc import CameraMotion


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic_by_seed(tmp_path):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generate_synthetic_mot(tmp_path / name, n_train=0, n_val=1, length=3, seed=seed)
    a, b, c = (_files(tmp_path / n) for n in "abc")
    assert a == b
    assert a.keys() == c.keys() and a != c


@pytest.fixture(scope="module")
def small_set(tmp_path_factory):
    return load_data_config(generate_synthetic_mot(tmp_path_factory.mktemp("smot"), n_train=1, n_val=1, length=12))


def test_both_layouts_hold_the_same_frames_and_objects(small_set):
    split = tracking_split(small_set, "val")
    assert split.fmt == "visdrone-mot" and list(split.sequences) == ["val-000"]
    [sequence] = read_ground_truth(split.annotations, split.fmt)
    truth = sequence.truth
    assert truth.last_frame == 12 and len(list(split.sequences["val-000"].glob("*.jpg"))) == 12
    objects = truth.select(truth.ids > 0)
    assert {1, 4} <= set(objects.classes.tolist())  # pedestrians and cars at least
    assert (truth.classes == 0).any() or len(objects) > 0
    per_id = np.bincount(objects.ids)
    assert (per_id[per_id > 0] > 1).mean() > 0.8  # objects are seen in several frames under one id
    width, height = FRAME_SIZE
    assert objects.boxes.min() >= 0 and objects.boxes[:, 2].max() <= width and objects.boxes[:, 3].max() <= height
    scan = scan_split(small_set.val, names=small_set.names, cache=False)
    assert scan.report.formats == ["visdrone"] and scan.report.counts["found"] == 12
    frame_one = next(r for r in scan.records if r.im_file.endswith("val-000/0000001.jpg"))
    first = objects.select((objects.frames == 1) & (objects.classes <= 10))
    assert len(frame_one.labels.classes) == len(first)
    assert sorted(frame_one.labels.classes.tolist()) == sorted((first.classes - 1).tolist())
    with pytest.raises(ValueError, match="no 'tracking:' entry with a 'test' folder"):
        tracking_split(small_set, "test")


def test_the_camera_path_is_the_motion_of_the_frames():
    frames, truth, camera = render_sequence(np.random.default_rng(3), 8)
    estimate = CameraMotion("sparse")
    corners = np.array([[0, 0, 1], [FRAME_SIZE[0], 0, 1], [0, FRAME_SIZE[1], 1], [*FRAME_SIZE, 1]], float)
    errors, moves = [], []
    for t, frame in enumerate(frames):
        found = estimate(frame, truth.select(truth.frames == t + 1).boxes)
        if t == 0:
            continue
        previous, now = np.vstack([camera.affine(t - 1), [0, 0, 1]]), np.vstack([camera.affine(t), [0, 0, 1]])
        true = (now @ np.linalg.inv(previous))[:2]
        errors.append(np.abs(corners @ found.T - corners @ true.T).max())
        moves.append(np.abs(corners @ true.T - corners[:, :2]).max())
    assert np.median(errors) < 1.0 and max(errors) < 3.0
    assert np.median(moves) > 2.0  # the camera does move


@pytest.mark.slow
def test_built_in_name_generates_the_default_set_once(tmp_path):
    config = load_data_config("synthetic-mot", cache_dir=tmp_path)
    mtime = config.source.stat().st_mtime_ns
    assert load_data_config("synthetic-mot", cache_dir=tmp_path).source.stat().st_mtime_ns == mtime
    assert config.recipe == "synthetic" and len(config.names) == 10
    assert list(tracking_split(config, "train").sequences) == [f"train-{i:03d}" for i in range(4)]
    assert list(tracking_split(config, "val").sequences) == ["val-000", "val-001"]
