"""`tphyolo data slice`: a sliced copy of a VisDrone-format dataset, checked box by box, and its yaml trains."""

from pathlib import Path

import numpy as np
import pytest
import yaml
from tests.helpers import exit_code

from tphyolo.data.convert import convert_visdrone
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.data.formats.visdrone import parse_visdrone
from tphyolo.data.labels import ImageLabels
from tphyolo.data.scan import scan_split
from tphyolo.data.tiles import DatasetSlicing, slice_dataset, tile_labels
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.trainer import train

# A 200 x 120 image cut into 128 px tiles with overlap 0.25 (step 96): tiles at x 0 and 72, y 0.
# car A (class 3) lies in both tiles; van B (class 4) straddles x = 128 with 10 of its 40 px in tile 0;
# pedestrian C (class 0) lies only in tile 72; an ignored region crosses the seam; a blank image has no objects.
ANNOTATIONS = "80,10,30,20,1,4,0,0\n100,60,40,20,1,5,0,0\n150,90,20,20,1,1,0,0\n60,40,40,10,0,0,0,0\n"


@pytest.fixture
def visdrone_split(tmp_path):
    import cv2

    root = tmp_path / "src"
    (root / "images").mkdir(parents=True)
    (root / "annotations").mkdir()
    rng = np.random.default_rng(0)
    cv2.imwrite(str(root / "images" / "scene.jpg"), rng.integers(0, 255, (120, 200, 3), dtype=np.uint8))
    (root / "annotations" / "scene.txt").write_text(ANNOTATIONS)
    for k in range(4):  # images without objects: one tile each, negatives
        cv2.imwrite(str(root / "images" / f"blank{k}.jpg"), np.full((100, 100, 3), 40 * k, np.uint8))
        (root / "annotations" / f"blank{k}.txt").write_text("")
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {list(VISDRONE_NAMES)}\n")
    return path


def test_tile_labels_keep_visible_boxes_and_turn_cut_parts_into_ignore_regions():
    labels = ImageLabels([3, 4], [[80, 10, 110, 30], [100, 60, 140, 80]], [[60, 40, 100, 50]])
    left = tile_labels(labels, (0, 0, 128, 120), min_visible=0.5)
    assert left.classes.tolist() == [3, 4]  # B: 28 of 40 px wide inside, 70 % visible
    np.testing.assert_allclose(left.boxes, [[80, 10, 110, 30], [100, 60, 128, 80]])
    np.testing.assert_allclose(left.ignore, [[60, 40, 100, 50]])
    strict = tile_labels(labels, (0, 0, 128, 120), min_visible=0.8)
    assert strict.classes.tolist() == [3]
    np.testing.assert_allclose(strict.ignore, [[60, 40, 100, 50], [100, 60, 128, 80]])  # B's part: ignored
    right = tile_labels(labels, (72, 0, 200, 120), min_visible=0.5)
    np.testing.assert_allclose(right.boxes, [[8, 10, 38, 30], [28, 60, 68, 80]])  # in the tile's pixels
    np.testing.assert_allclose(right.ignore, [[0, 40, 28, 50]])


@pytest.mark.slow  # a one-epoch training run (~5 s on two cores)
def test_slice_writes_visdrone_tiles_negatives_at_the_ratio_and_a_yaml_that_trains(visdrone_split, tmp_path):
    out = tmp_path / "sliced"
    data = load_data_config(visdrone_split)
    cfg = DatasetSlicing(size=128, overlap=0.25, min_visible=0.5, empty_ratio=0.5)
    result = slice_dataset(data, out, cfg, splits=("train",))
    (train_split,) = result.splits
    assert (train_split.images, train_split.positive, train_split.negative_found) == (5, 2, 4)
    assert train_split.negative_kept == 1 and train_split.label_format == "visdrone"
    tiles = sorted(p.name for p in (out / "train" / "images").iterdir())
    assert "scene_0_0.jpg" in tiles and "scene_72_0.jpg" in tiles and len(tiles) == 3
    left = parse_visdrone(out / "train" / "annotations" / "scene_0_0.txt")
    assert left.classes.tolist() == [3, 4]
    np.testing.assert_allclose(left.boxes, [[80, 10, 110, 30], [100, 60, 128, 80]])
    np.testing.assert_allclose(left.ignore, [[60, 40, 100, 50]])  # VisDrone category 0 carried over
    right = parse_visdrone(out / "train" / "annotations" / "scene_72_0.txt")
    assert right.classes.tolist() == [3, 4, 0]
    config = yaml.safe_load(result.yaml.read_text())
    assert config["train"] == "train/images" and config["val"] == [str(visdrone_split.parent / "images")]
    run = train(data=str(result.yaml), imgsz=64, batch=2, epochs=1, workers=0, plots=False, project=str(tmp_path),
                name="sliced", runtime=RuntimeConfig(device="cpu"), verbose=False)  # fmt: skip
    assert run.last.is_file()


def test_data_slice_command_refuses_in_one_line(visdrone_split, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("")
    assert exit_code(["data", "slice", "--data", str(visdrone_split), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert exit_code(["data", "check", "--data", str(visdrone_split), "--size", "320"]) == 2
    assert "for 'data slice'" in capsys.readouterr().err
    assert exit_code(["data", "slice", "--data", str(visdrone_split), "--min-visible", "2", "--out", "o"]) == 2
    assert "--min-visible: must be in [0, 1]" in capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["yolo", "coco"])
def test_slice_keeps_the_dataset_format(visdrone_split, tmp_path, fmt):
    converted = convert_visdrone(visdrone_split.parent, tmp_path / fmt, to=fmt, log=lambda line: None)
    result = slice_dataset(load_data_config(converted), tmp_path / "out", DatasetSlicing(size=128, overlap=0.25),
                           splits=("train",))  # fmt: skip
    assert result.splits[0].label_format == fmt
    scan = scan_split(tmp_path / "out" / "train" / "images", names=VISDRONE_NAMES, cache=False)
    labels = {Path(r.im_file).name: r.labels for r in scan.records}
    np.testing.assert_allclose(labels["scene_0_0.jpg"].boxes, [[80, 10, 110, 30], [100, 60, 128, 80]], atol=1e-3)
    np.testing.assert_allclose(labels["scene_0_0.jpg"].ignore, [[60, 40, 100, 50]], atol=1e-3)


def test_data_slice_warns_in_one_line_when_val_is_the_training_images(visdrone_split, tmp_path, capsys):
    argv = ["data", "slice", "--data", str(visdrone_split), "--out", str(tmp_path / "sliced"), "--size", "128"]
    assert exit_code(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    images = (visdrone_split.parent / "images").resolve()
    assert err == [f"tphyolo data: warning: {visdrone_split}: val names the same images as train ({images}): the "
                   "sliced val scores a model on its train tiles"]  # fmt: skip
    assert exit_code([*argv[:4], "--out", str(tmp_path / "train-only"), "--splits", "train"]) == 0
    assert "warning" not in capsys.readouterr().err
