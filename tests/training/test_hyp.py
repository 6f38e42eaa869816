"""Hyp files: the built-in ones load, bad ones are explained, and scaling matches the original's training."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml
from tests.helpers import load_parity

from tphyolo.data.augment import Hyp
from tphyolo.training.hyp import HYP_KEYS, builtin_hyps, load_hyp, scale_hyp, train_hyp, validate_hyp

FIXTURES = ("tph-yolov5", "tph-yolov5-swin", "tph-yolov5pp", "yolov5n")


def test_builtin_hyps_load() -> None:
    assert {"visdrone", "scratch-low", "scratch-high", "synthetic"} <= set(builtin_hyps())
    for name in builtin_hyps():
        hyp = load_hyp(name)
        assert set(HYP_KEYS) <= set(hyp), name


def test_visdrone_hyp_has_the_original_values(parity_dir: Path) -> None:
    fixture = load_parity(parity_dir, "tph-yolov5.parity.pt")
    assert load_hyp("visdrone") == fixture["hyp_raw"]


@pytest.mark.parametrize("name", FIXTURES)
def test_scale_hyp_matches_the_original(parity_dir: Path, name: str) -> None:
    fixture = load_parity(parity_dir, f"{name}.parity.pt")
    raw = dict(fixture["hyp_raw"])
    scaled = scale_hyp(
        raw, num_levels=len(fixture["stride"]), num_classes=fixture["nc"], imgsz=fixture["imgsz_for_hyp"]
    )
    assert scaled == pytest.approx(fixture["hyp_scaled"], rel=1e-12)
    assert raw == fixture["hyp_raw"], "scale_hyp must not change its input"


def test_scale_hyp_by_hand() -> None:
    hyp = {"box": 0.05, "cls": 0.5, "obj": 1.0, "lr0": 0.01}
    scaled = scale_hyp(hyp, num_levels=4, num_classes=10, imgsz=320, label_smoothing=0.1)
    assert scaled == pytest.approx(
        {"box": 0.0375, "cls": 0.5 * 10 / 80 * 0.75, "obj": 0.25 * 0.75, "lr0": 0.01, "label_smoothing": 0.1}
    )
    assert scale_hyp({**hyp, "label_smoothing": 0.05}, num_levels=3, num_classes=80, imgsz=640)[
        "label_smoothing"
    ] == pytest.approx(0.05)


def write(tmp_path: Path, hyp: object) -> Path:
    path = tmp_path / "hyp.custom.yaml"
    path.write_text(yaml.safe_dump(hyp))
    return path


def test_unknown_key_names_the_file_and_key(tmp_path: Path) -> None:
    path = write(tmp_path, {**load_hyp("scratch-low"), "lr_zero": 0.1})
    with pytest.raises(ValueError, match=r"hyp\.custom\.yaml.*unknown.*lr_zero"):
        load_hyp(path)


def test_missing_key_names_the_file_and_key(tmp_path: Path) -> None:
    hyp = load_hyp("scratch-low")
    del hyp["anchor_t"]
    with pytest.raises(ValueError, match=r"hyp\.custom\.yaml.*missing.*anchor_t"):
        load_hyp(write(tmp_path, hyp))


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("lr0", "fast", "lr0 must be a finite number"),
        ("mosaic", 1.5, "mosaic is a probability"),
        ("anchor_t", 0.5, "anchor_t must be > 1"),
        ("box", -1.0, "box must be >= 0"),
        ("anchors", 2.5, "anchors is a count"),
    ],
)
def test_bad_values_are_explained(key: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"my.yaml: {message}"):
        validate_hyp({**load_hyp("visdrone"), key: value}, source="my.yaml")


def test_not_a_mapping_and_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be a mapping"):
        load_hyp(write(tmp_path, [1, 2]))
    with pytest.raises(FileNotFoundError, match="visdrone"):
        load_hyp("no-such-hyp")


def test_label_smoothing_of_the_run_replaces_the_files_even_when_zero(tmp_path: Path) -> None:
    path = write(tmp_path, {**load_hyp("scratch-low"), "label_smoothing": 0.1})
    assert train_hyp(path)["label_smoothing"] == 0.1  # None: the file's value
    assert train_hyp(path, label_smoothing=0.0)["label_smoothing"] == 0.0
    assert train_hyp(path, label_smoothing=0.2)["label_smoothing"] == 0.2
    assert "label_smoothing" not in train_hyp("scratch-low")
    scaled = scale_hyp(train_hyp(path, label_smoothing=0.0), num_levels=3, num_classes=80, imgsz=640)
    assert scaled["label_smoothing"] == 0.0


def test_copy_paste_is_accepted_but_said_once_to_have_no_effect(caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="tphyolo.train"):
        hyp = train_hyp("scratch-high")  # copy_paste: 0.1, as the original's file
    assert hyp["copy_paste"] == 0.1
    said = [r.getMessage() for r in caplog.records if "copy_paste" in r.getMessage()]
    assert len(said) == 1 and "no effect on box labels" in said[0], said
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tphyolo.train"):
        train_hyp("scratch-low")  # copy_paste: 0.0
    assert not caplog.records
    # The augmentation never sees it: a file with and one without the key augment the same way.
    without = {k: v for k, v in hyp.items() if k != "copy_paste"}
    assert "copy_paste" not in HYP_KEYS and validate_hyp(without) == without
    assert Hyp.from_dict(hyp) == Hyp.from_dict(without)
    with pytest.raises(ValueError, match="copy_paste is a probability"):
        validate_hyp({**hyp, "copy_paste": 2.0})
