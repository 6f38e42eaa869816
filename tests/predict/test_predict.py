"""Predictor: checkpoints, ensembles, sources (files, folders, globs, lists, video) and the output formats."""

import json

import cv2
import numpy as np
import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.infer.detector import merge_detections
from tphyolo.models import build_model
from tphyolo.ops import box_iou
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw import image_grid
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.sources import count_frames, resolve_source
from tphyolo.predict.writers import PredictionWriter
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.run_dir import OutputDir

NAMES = ["car", "van", "bus"]


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return build_model("yolov5n", names=NAMES).eval()


@pytest.fixture(scope="module")
def checkpoint(model, tmp_path_factory):
    path = tmp_path_factory.mktemp("weights") / "tiny.pt"
    return save_model_checkpoint(path, model, NAMES)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    folder = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(3)
    for name, shape in (("a.jpg", (64, 128, 3)), ("b.png", (96, 96, 3)), ("0007.png", (80, 60, 3))):
        cv2.imwrite(str(folder / name), rng.integers(0, 255, shape, dtype=np.uint8))
    return folder


def _rows(d: Detections) -> torch.Tensor:
    return torch.cat([d.boxes, d.scores[:, None], d.labels[:, None].float()], dim=1)


def _sorted(rows: torch.Tensor) -> torch.Tensor:
    """Rows in a canonical order (WBF orders clusters of equal score arbitrarily)."""
    order = np.lexsort(rows.round(decimals=2).numpy().T[::-1])
    return rows[torch.from_numpy(order)]


def test_checkpoint_and_model_give_the_same_detections(model, checkpoint, images):
    from_model = Predictor(model, imgsz=128, conf=0.001, device="cpu")(images)
    from_file = Predictor(str(checkpoint), imgsz=128, conf=0.001, device="cpu")
    assert from_file.names == NAMES
    for a, b in zip(from_model, from_file(images), strict=True):
        torch.testing.assert_close(a.boxes, b.boxes)
        torch.testing.assert_close(a.scores, b.scores)
        assert torch.equal(a.labels, b.labels)


def test_ensemble_of_one_model_twice_equals_the_model(model, images):
    """WBF of identical lists is the identity when no two boxes of a list fuse (IoU <= 0.55 within a label)."""
    files = [images / "a.jpg", images / "b.png"]
    settings = dict(imgsz=128, conf=0.001, iou=0.2, max_det=12, device="cpu")
    single = Predictor(model, **settings)(files)
    ensemble = Predictor([model, model], model_weights=[2.0, 2.0], **settings)(files)
    for one, two in zip(single, ensemble, strict=True):
        for label in one.labels.unique():
            overlaps = box_iou(one.boxes[one.labels == label], one.boxes[one.labels == label]).fill_diagonal_(0)
            assert (overlaps <= 0.55).all()  # precondition of the identity
        assert len(two) == len(one) > 0
        torch.testing.assert_close(_sorted(_rows(two)), _sorted(_rows(one)), atol=1e-3, rtol=0)


def test_wbf_of_identical_separate_lists_returns_the_list():
    rows = torch.tensor([[10.0, 10.0, 30.0, 40.0, 0.9, 1.0], [50.0, 5.0, 90.0, 25.0, 0.6, 0.0]])
    for weights in (None, [1.0, 3.0]):
        merged = merge_detections(
            [rows, rows], method="wbf", width=100, height=50, iou=0.55, max_det=10, weights=weights
        )
        torch.testing.assert_close(merged, rows, atol=1e-4, rtol=0)
    nms = merge_detections([rows, rows + 0.5], method="nms", width=100, height=50, iou=0.5, max_det=10)
    torch.testing.assert_close(nms, rows, atol=0.5, rtol=0)
    assert len(nms) == 2


def test_sources_folder_glob_list_and_errors(images, tmp_path):
    files = resolve_source(images)
    assert [f.name for f in files] == ["0007.png", "a.jpg", "b.png"]
    assert [f.name for f in resolve_source(str(images / "*.png"))] == ["0007.png", "b.png"]
    listing = tmp_path / "list.txt"
    listing.write_text(f"# two images\n{images / 'b.png'}\n{images / 'a.jpg'}\n")
    assert [f.name for f in resolve_source(listing)] == ["b.png", "a.jpg"]
    listing.write_text("missing.jpg\n")
    with pytest.raises(FileNotFoundError, match=r"list.txt:1: .*missing.jpg"):
        resolve_source(listing)
    with pytest.raises(FileNotFoundError, match="no such file"):
        resolve_source(tmp_path / "nope.jpg")
    with pytest.raises(FileNotFoundError, match="matches no"):
        resolve_source(str(tmp_path / "*.jpg"))


def test_outputs_parse_back_in_original_pixels(model, images, tmp_path):
    predictor = Predictor(model, imgsz=128, conf=0.001, device="cpu", batch=2)
    writer = PredictionWriter(
        tmp_path / "out", names=NAMES,
        outputs=OutputSettings(save_txt=True, save_conf=True, save_visdrone=True, save_json=True),
    )  # fmt: skip
    results = {}
    for frame, detections in predictor.stream(images):
        writer.write(frame, detections)
        results[frame.path.stem] = (detections, frame.image.shape[:2])
    writer.close()
    records = json.loads((tmp_path / "out" / "predictions.json").read_text())
    image_ids = {"0007": 1, "a": 2, "b": 3}  # integer ids, 1, 2, ... in source order (not every name is a number)
    assert {r["image_id"] for r in records} == set(image_ids.values())
    for stem, (d, (height, width)) in results.items():
        assert len(d) > 0 and (tmp_path / "out" / next(images.glob(f"{stem}.*")).name).is_file()
        xywh = torch.cat([d.boxes[:, :2], d.boxes[:, 2:] - d.boxes[:, :2]], dim=1)

        rows = np.loadtxt(tmp_path / "out" / "visdrone" / f"{stem}.txt", delimiter=",", ndmin=2)
        assert (np.diff(rows[:, 4]) <= 0).all()  # by descending score
        np.testing.assert_allclose(rows[:, :4], xywh.numpy(), atol=0.01)
        np.testing.assert_allclose(rows[:, 4], d.scores.numpy(), atol=1e-5)
        np.testing.assert_array_equal(rows[:, 5], np.array([1, 2, 3])[d.labels.numpy()])  # class index + 1
        np.testing.assert_array_equal(rows[:, 6:], -1)

        yolo = np.loadtxt(tmp_path / "out" / "labels" / f"{stem}.txt", ndmin=2)
        cxcywh = np.concatenate([(yolo[:, 1:3] - yolo[:, 3:5] / 2), yolo[:, 1:3] + yolo[:, 3:5] / 2], axis=1)
        np.testing.assert_allclose(cxcywh * [width, height, width, height], d.boxes.numpy(), atol=1e-3)
        np.testing.assert_array_equal(yolo[:, 0], d.labels.numpy())
        np.testing.assert_allclose(yolo[:, 5], d.scores.numpy(), atol=1e-5)

        mine = [r for r in records if r["image_id"] == image_ids[stem]]
        np.testing.assert_allclose([r["bbox"] for r in mine], xywh.numpy(), atol=1e-3)
        assert [r["category_id"] for r in mine] == d.labels.tolist()


def test_video_is_read_frame_by_frame_and_written_back(model, tmp_path):
    video = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 5.0, (96, 64))
    rng = np.random.default_rng(4)
    for _ in range(3):
        writer.write(rng.integers(0, 255, (64, 96, 3), dtype=np.uint8))
    writer.release()
    assert count_frames([video]) == 3
    predictor = Predictor(model, imgsz=96, conf=0.001, device="cpu", batch=2)
    out = PredictionWriter(tmp_path / "out", names=NAMES, outputs=OutputSettings(save_visdrone=True))
    frames = 0
    for frame, detections in predictor.stream(video):
        assert frame.is_video and frame.index == frames
        out.write(frame, detections)
        frames += 1
    out.close()
    assert frames == 3
    assert sorted(p.name for p in (tmp_path / "out" / "visdrone").iterdir()) == [
        "clip_000000.txt",
        "clip_000001.txt",
        "clip_000002.txt",
    ]
    capture = cv2.VideoCapture(str(tmp_path / "out" / "clip.mp4"))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == 3
    ok, first = capture.read()
    capture.release()
    assert ok and first.shape == (64, 96, 3)


def test_run_dir_increments(tmp_path):
    assert OutputDir(None, "exp").create(tmp_path) == tmp_path / "exp"
    assert OutputDir(str(tmp_path), "exp").create("unused") == tmp_path / "exp2"
    assert OutputDir(str(tmp_path), "exp", exist_ok=True).create("unused") == tmp_path / "exp"


def test_runtime_layout_and_compile_settings_are_applied(model):
    runtime = RuntimeConfig(device="cpu", channels_last=True, compile="reduce-overhead")
    predictor = Predictor(model, imgsz=64, runtime=runtime)
    compiled = predictor.backends[0].model
    assert isinstance(compiled, torch._dynamo.eval_frame.OptimizedModule)  # compiled lazily, on first use
    weight = compiled._orig_mod.model[0].conv.weight
    assert weight.is_contiguous(memory_format=torch.channels_last)


def test_bad_inputs_are_reported(model, caplog):
    with caplog.at_level("WARNING", logger="tphyolo"):
        assert Predictor(model, imgsz=100, device="cpu").config.imgsz == 128  # the one policy: round up, warn
    assert "not a multiple of the largest stride 32; using 128" in caplog.text
    with pytest.raises(ValueError, match="half precision"):
        Predictor(model, imgsz=64, runtime=RuntimeConfig(device="cpu", half=True))
    with pytest.raises(ValueError, match="model weights"):
        Predictor([model, model], imgsz=64, device="cpu", model_weights=[1.0])
    with pytest.raises(ValueError, match="uint8"):
        Predictor(model, imgsz=64, device="cpu")(np.zeros((64, 64), dtype=np.uint8))
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        Predictor("missing.pt", device="cpu")
    assert len(Detections.from_rows(torch.zeros((0, 6)))) == 0


def test_predictor_is_exported_lazily():
    import subprocess
    import sys

    import tphyolo

    code = "import sys, tphyolo; print('torch' in sys.modules, 'tphyolo.predict.predictor' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
    assert tphyolo.Predictor is Predictor
    with pytest.raises(AttributeError, match="Nope"):
        tphyolo.Nope  # noqa: B018


def test_image_grid_rows_are_as_tall_as_their_tallest_image():
    wide, tall = np.zeros((64, 128, 3), np.uint8), np.full((100, 50, 3), 7, np.uint8)
    grid = image_grid([wide, wide, wide, tall, wide], cell=32, columns=4)
    assert grid.shape == (32 + 16, 4 * 32, 3)
    assert (grid[:32, 96:108] == 7).all() and (grid[32:, 32:] == 255).all()
