"""A checkpoint trained on tiles (`tphyolo train --tile`) is sliced at its tile size by default, with the merge it
was validated with, in one line that says so; `--slice 0` runs whole images, and other checkpoints run whole
images as before.

Before, no checkpoint made inference slice: without `--slice` every image ran whole, letterboxed to --img.
"""

import logging

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import exit_code

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.infer.slicing import MODEL, SliceConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

NAMES = ["car", "van"]
LINE = "--slice 64: tiles.pt was trained on 64 px tiles and validated sliced (--merge nms)"


def _checkpoint(path, train_args):
    torch.manual_seed(0)
    model = build_model("yolov5n", names=NAMES)
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": NAMES, "nc": len(NAMES),
               "train_args": train_args}  # fmt: skip
    return save_checkpoint(path, payload)


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    folder = tmp_path_factory.mktemp("weights")
    tiles = _checkpoint(folder / "tiles.pt", {"imgsz": 64, "tile": True, "merge": "nms"})
    whole = _checkpoint(folder / "whole.pt", {"imgsz": 64, "tile": False})
    return tiles, whole


def test_a_checkpoint_trained_on_tiles_slices_by_default(weights, caplog):
    tiles, whole = weights
    with caplog.at_level(logging.INFO, logger="tphyolo.infer.input_shape"):
        sliced = Predictor(tiles, slice=SliceConfig(MODEL), device="cpu", backend="pytorch")
    assert (sliced.slicing, sliced.config.merge) == (SliceConfig(64), "nms")
    assert [r.getMessage() for r in caplog.records].count(LINE + "; --slice 0 runs whole images") == 1
    assert Predictor(whole, slice=SliceConfig(MODEL), device="cpu", backend="pytorch").slicing is None
    assert Predictor(tiles, slice=SliceConfig(128), device="cpu", backend="pytorch").slicing == SliceConfig(128)


@pytest.mark.parametrize("flags", [[], ["--slice", "0"]])
def test_predict_says_it_slices_and_slice_0_turns_it_off(weights, flags, tmp_path, monkeypatch, capsys):
    configured = []
    build = Predictor._build

    def spy(self, *args):
        build(self, *args)
        configured.append(self.slicing)

    monkeypatch.setattr(Predictor, "_build", spy)
    image = tmp_path / "one.png"
    cv2.imwrite(str(image), np.random.default_rng(0).integers(0, 255, (150, 200, 3), dtype=np.uint8))
    argv = ["predict", "--weights", str(weights[0]), "--source", str(image), "--device", "cpu", "--runtime",
            "pytorch", "--project", str(tmp_path), "--name", "run", "--nosave", *flags]  # fmt: skip
    assert exit_code(argv) == 0
    assert configured == ([SliceConfig(64)] if not flags else [None])
    assert capsys.readouterr().out.count(LINE) == (0 if flags else 1)
