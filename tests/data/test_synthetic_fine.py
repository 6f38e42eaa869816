"""The synthetic-fine dataset: deterministic, and its confusable classes differ only in a full-resolution detail."""


import cv2
import numpy as np
import pytest

from tphyolo.classify.data import confusable_classes
from tphyolo.data.builtin.synthetic_fine import (
    CONFUSABLE,
    NAMES,
    SCENE_SIZE,
    STRIPE_CONTRAST,
    draw_tricycle,
    generate_synthetic_fine,
)
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.scan import scan_split

DETECTOR_SIZE = 320
LOW = SCENE_SIZE // DETECTOR_SIZE  # 4: scene pixels per detector-input pixel


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _line_contrast(pixels: np.ndarray) -> float:
    """Mean absolute difference of neighbouring pixels along the axis where it is largest."""
    pixels = pixels.astype(np.float32)
    return max(float(np.abs(np.diff(pixels, axis=0)).mean()), float(np.abs(np.diff(pixels, axis=1)).mean()))


def test_deterministic_by_seed(tmp_path):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generate_synthetic_fine(tmp_path / name, n_train=2, n_val=1, seed=seed)
    a, b, c = (_files(tmp_path / n) for n in "abc")
    assert a == b
    assert a.keys() == c.keys() and a != c


@pytest.mark.parametrize("box", [(40, 40, 96, 84), (41, 37, 77, 99)])  # horizontal, vertical (odd edges)
def test_the_two_kinds_differ_only_in_stripes_that_vanish_at_detector_size(box):
    plain, striped = (np.full((160, 160, 3), 100, np.uint8) for _ in range(2))
    draw_tricycle(plain, box, striped=False, rng=np.random.default_rng(7))
    draw_tricycle(striped, box, striped=True, rng=np.random.default_rng(7))
    full = np.abs(plain.astype(np.int16) - striped)
    changed = full.max(2) > 0
    assert changed.sum() > 0.5 * (box[2] - box[0]) * (box[3] - box[1])  # the canopy
    assert (full[changed] == STRIPE_CONTRAST).all()
    size = (160 // LOW, 160 // LOW)
    low = np.abs(
        cv2.resize(plain, size, interpolation=cv2.INTER_AREA).astype(np.float32)
        - cv2.resize(striped, size, interpolation=cv2.INTER_AREA)
    )
    assert low.mean() < 0.5 and low.max() <= STRIPE_CONTRAST / LOW + 1  # only at an odd-sized edge


def test_confusable_classes_look_alike_at_detector_size_and_differ_at_full_size(tmp_path):
    cfg = load_data_config(generate_synthetic_fine(tmp_path, n_train=6, n_val=1, seed=3))
    plain, awning = NAMES.index(CONFUSABLE[0]), NAMES.index(CONFUSABLE[1])
    colour, low_contrast, full_contrast = {plain: [], awning: []}, {plain: [], awning: []}, {plain: [], awning: []}
    for record in scan_split(cfg.train, names=cfg.names, cache=False).records:
        image = cv2.imread(record.im_file)
        small = cv2.resize(image, (DETECTOR_SIZE, DETECTOR_SIZE), interpolation=cv2.INTER_AREA)
        for c, (x1, y1, x2, y2) in zip(record.labels.classes, record.labels.boxes.astype(int), strict=True):
            if c not in colour:
                continue
            inner = small[-(-y1 // LOW) + 1 : y2 // LOW - 1, -(-x1 // LOW) + 1 : x2 // LOW - 1]  # whole low pixels
            colour[c].append(inner.reshape(-1, 3).mean(0))
            low_contrast[c].append(_line_contrast(inner))
            full_contrast[c].append(_line_contrast(image[y1:y2, x1:x2]))
    assert min(len(v) for v in colour.values()) >= 10
    # at detector size: same mean colour and the same texture, within the spread between objects
    spread = np.std(np.concatenate([colour[plain], colour[awning]]), axis=0)
    assert (np.abs(np.mean(colour[plain], 0) - np.mean(colour[awning], 0)) < 0.5 * spread).all()
    assert abs(np.mean(low_contrast[plain]) - np.mean(low_contrast[awning])) < 0.5 * np.std(low_contrast[plain])
    # at full size the stripes separate them completely
    assert min(full_contrast[awning]) > 5 * max(full_contrast[plain])


@pytest.mark.slow
def test_builtin_name_generates_once_and_lists_the_confusable_classes(tmp_path):
    cfg = load_data_config("synthetic-fine", cache_dir=tmp_path)
    mtime = cfg.source.stat().st_mtime_ns
    again = load_data_config("synthetic-fine", cache_dir=tmp_path)
    assert again.source.stat().st_mtime_ns == mtime and again.names == NAMES
    assert confusable_classes(cfg) == CONFUSABLE
    train = scan_split(cfg.train, names=cfg.names, cache=False)
    assert len(train.records) == 80 and train.report.formats == ["visdrone"] and not train.report.problems
    counts = np.bincount(np.concatenate([r.labels.classes for r in train.records]), minlength=len(NAMES))
    assert counts.min() >= 250  # enough of every class, the confusable ones included
    sides = np.concatenate([r.labels.boxes[:, 2:] - r.labels.boxes[:, :2] for r in train.records])
    assert sides.min() >= 12  # >= 3 px at the detector's 320 px
