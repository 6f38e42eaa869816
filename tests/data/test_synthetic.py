"""The synthetic dataset: deterministic by seed, fast, in VisDrone format with learnable objects."""


import numpy as np
import pytest

from tphyolo.data.builtin.synthetic import NAMES, generate_synthetic
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.scan import scan_split


def _files(root):
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_deterministic_by_seed(tmp_path):
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        generate_synthetic(tmp_path / name, n_train=3, n_val=1, imgsz=320, seed=seed)
    a, b, c = (_files(tmp_path / n) for n in "abc")
    assert a == b
    assert a.keys() == c.keys() and a != c


@pytest.mark.slow
def test_default_dataset_content(tmp_path):
    data_yaml = load_data_config("synthetic", cache_dir=tmp_path).source
    mtime = data_yaml.stat().st_mtime_ns
    cfg = load_data_config("synthetic", cache_dir=tmp_path)  # generated once, then reused
    assert cfg.source.stat().st_mtime_ns == mtime and cfg.names == NAMES
    train = scan_split(cfg.train, names=cfg.names, cache=False)
    val = scan_split(cfg.val, names=cfg.names, cache=False)
    assert (len(train.records), len(val.records)) == (80, 20)
    assert train.report.formats == ["visdrone"] and not train.report.problems
    classes = np.concatenate([r.labels.classes for r in train.records])
    counts = np.bincount(classes, minlength=len(NAMES))
    assert len(NAMES) >= 5 and counts.min() > 100
    boxes = np.concatenate([r.labels.boxes for r in train.records])
    long_side = (boxes[:, 2:] - boxes[:, :2]).max(1)
    assert long_side.min() >= 4 and long_side.max() <= 60
    assert ((long_side >= 12) & (long_side <= 50)).mean() > 0.7
    assert 8 <= len(classes) / len(train.records) <= 25
    assert sum(len(r.labels.ignore) for r in train.records) > 20


def test_classes_are_separable_by_colour(tmp_path):
    """A proxy for learnability: the mean colour of an object's central pixels alone identifies its class."""
    import cv2

    cfg = load_data_config(generate_synthetic(tmp_path, n_train=12, n_val=6, imgsz=640, seed=2))

    def features(split):
        xs, ys = [], []
        for r in scan_split(split, names=cfg.names, cache=False).records:
            image = cv2.imread(r.im_file).astype(np.float32)
            for c, (x1, y1, x2, y2) in zip(r.labels.classes, r.labels.boxes.astype(int), strict=True):
                w, h = x2 - x1, y2 - y1
                core = image[y1 + h // 4 : y2 - h // 4 + 1, x1 + w // 4 : x2 - w // 4 + 1]
                xs.append(core.reshape(-1, 3).mean(0))
                ys.append(c)
        return np.array(xs), np.array(ys)

    x_train, y_train = features(cfg.train)
    x_val, y_val = features(cfg.val)
    centroids = np.stack([x_train[y_train == c].mean(0) for c in range(len(NAMES))])
    predicted = np.linalg.norm(x_val[:, None] - centroids[None], axis=2).argmin(1)
    assert (predicted == y_val).mean() > 0.9


def test_generation_happens_once_and_says_so(tmp_path, caplog):
    from tphyolo.data.builtin.synthetic import generated_once

    def generate(root):
        root.mkdir()
        (root / "data.yaml").write_text("nc: 1\n")
        calls.append(root)

    calls = []
    with caplog.at_level("INFO", logger="tphyolo"):
        first = generated_once(tmp_path / "set", generate)
        second = generated_once(tmp_path / "set", generate)
    assert first == second == tmp_path / "set" / "data.yaml" and len(calls) == 1
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("generating the built-in dataset") for m in messages)
    assert sum(m.startswith("generated set in") for m in messages) == 1


def test_large_scenes_have_visdrone_sized_objects(tmp_path):
    """`large=True`: 1536-2048 px scenes whose objects are mostly under 32 px and many under 16 px, read back from
    the VisDrone files as written (the 640 px scenes' objects are 4-60 px, mostly 12-50)."""
    data = load_data_config(generate_synthetic(tmp_path, n_train=3, n_val=1, large=True))
    scan = scan_split(data.train, names=data.names, cache=False)
    assert all(1536 <= r.width <= 2048 and 0.56 * r.width <= r.height + 1 <= 0.75 * r.width + 2
               for r in scan.records)  # fmt: skip
    boxes = np.concatenate([r.labels.boxes for r in scan.records])
    sides = np.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
    assert len(sides) > 150 and np.mean(sides < 32) > 0.8 and np.mean(sides < 16) > 0.3
