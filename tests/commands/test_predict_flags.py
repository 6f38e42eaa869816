"""`tphyolo predict` drawing, crop and frame-stride flags: --save-crop, --hide-labels, --hide-conf, --line-width,
--vid-stride; and their one-line errors."""

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import exit_code, save_model_checkpoint

from tphyolo.cli import main
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

NAMES = ["car", "van"]  # VisDrone names: --save-visdrone maps them by name


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    return save_model_checkpoint(path, build_model("yolov5n", names=NAMES), NAMES)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """One PNG image (drawn on without loss) and a 5-frame video."""
    folder = tmp_path_factory.mktemp("source")
    rng = np.random.default_rng(11)
    cv2.imwrite(str(folder / "one.png"), rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    writer = cv2.VideoWriter(str(folder / "clip.avi"), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (96, 64))
    for _ in range(5):
        writer.write(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    writer.release()
    return folder


def _argv(weights, source, tmp_path, name):
    argv = ["predict", "--weights", str(weights), "--source", str(source), "--img", "64", "--conf", "0.001"]
    argv += ["--max-det", "6"]
    return argv + ["--device", "cpu", "--project", str(tmp_path), "--name", name]


@pytest.mark.slow
def test_drawing_crop_and_stride_flags_shape_the_outputs(weights, source, tmp_path):
    argv = _argv(weights, source, tmp_path, "run") + ["--save-visdrone", "--save-crop", "--vid-stride", "2"]
    assert main(argv + ["--hide-labels", "--line-width", "3"]) == 0
    out = tmp_path / "run"
    visdrone = sorted(p.name for p in (out / "visdrone").iterdir())
    assert visdrone == ["clip_000000.txt", "clip_000002.txt", "clip_000004.txt", "one.txt"]  # every 2nd frame
    capture = cv2.VideoCapture(str(out / "clip.mp4"))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    capture.release()

    (result,) = Predictor(weights, imgsz=64, conf=0.001, max_det=6, device="cpu")(source / "one.png")
    assert len(result) > 0
    written = cv2.imread(str(out / "one.png"))
    np.testing.assert_array_equal(written, result.plot(labels=False, line_width=3))
    assert not np.array_equal(written, result.plot(line_width=3))  # labels would have been drawn

    crops = sorted((out / "crops").rglob("one_*.jpg"))
    assert len(crops) == len(result)
    assert {p.parent.name for p in crops} == {NAMES[k] for k in result.labels.tolist()}
    first = cv2.imread(str(next(p for p in crops if p.name == "one_0.jpg")))
    assert first.shape == result.crop()[0].shape
    assert list((out / "crops").rglob("clip_000002_*.jpg")) and not list((out / "crops").rglob("clip_000001_*"))


@pytest.mark.slow
def test_hide_conf_draws_names_without_scores(weights, source, tmp_path):
    argv = _argv(weights, source / "one.png", tmp_path, "names")
    assert main(argv + ["--hide-conf"]) == 0
    (result,) = Predictor(weights, imgsz=64, conf=0.001, max_det=6, device="cpu")(source / "one.png")
    np.testing.assert_array_equal(cv2.imread(str(tmp_path / "names" / "one.png")), result.plot(conf=False))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--vid-stride", "0"], "argument --vid-stride: must be >= 1, got 0"),
        (["--line-width", "0"], "argument --line-width/--line-thickness: must be in [1, 32767], got 0"),
        (["--no-save-img", "--hide-labels"], "style the annotated images; drop --no-save-img"),
    ],
)
def test_nonsense_drawing_flags_are_one_line_errors(weights, source, tmp_path, capsys, flags, message):
    assert exit_code(_argv(weights, source, tmp_path, "bad") + flags) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err
