"""Prediction on exported models: the same detections as the PyTorch model they came from (plain, with TTA's
scales and flips, and sliced), exported and PyTorch models mixed in one ensemble, and a fixed-size export
refusing TTA's other sizes."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from tphyolo.ops import box_iou
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.config import RuntimeConfig

NAMES = ["car", "van", "bus"]  # those of the dynamic_exports fixture


@pytest.fixture(scope="module")
def model_and_onnx(dynamic_exports):
    return dynamic_exports["model"], dynamic_exports["onnx"]


@pytest.fixture(scope="module")
def image():
    rng = np.random.default_rng(0)
    return rng.integers(0, 255, (150, 230, 3), dtype=np.uint8)


def test_exported_model_predicts_what_the_pytorch_model_predicts(model_and_onnx, image):
    model, onnx_path = model_and_onnx
    common = {"imgsz": 128, "conf": 1e-4, "max_det": 100, "device": "cpu"}
    ours = Predictor(model, **common)(image)[0]
    exported = Predictor(str(onnx_path), **common)(image)[0]
    assert len(ours) > 10  # random weights at conf 1e-4: many detections, so the comparison means something
    assert abs(len(exported) - len(ours)) <= 0.05 * len(ours)
    # The strongest detections are the same ones, in the same order. Further down, a random network's boxes
    # overlap almost entirely with near-equal scores (1e-6 apart), so float differences of the runtime can swap
    # NMS's choice between two of them: the rest are matched as sets, most of them exactly.
    torch.testing.assert_close(exported.boxes[:10], ours.boxes[:10], atol=1e-2, rtol=0)
    torch.testing.assert_close(exported.scores[:10], ours.scores[:10], atol=1e-4, rtol=0)
    assert torch.equal(exported.labels[:10], ours.labels[:10])
    assert matched_fraction(exported, ours) >= 0.8


@pytest.mark.parametrize("mode", ["tta", "sliced"])
def test_tta_and_slicing_on_a_dynamic_export_find_what_the_pytorch_model_finds(dynamic_exports, image, mode):
    """TTA runs the export at 4 sizes, flipped and not, merged by WBF; slicing runs 96-px windows of the image
    4 at a time (batches of 4, and of other sizes at the image's edges). Both need the free sizes and batch.
    At conf 1e-3 the random network's candidates are few enough that NMS and WBF pick the same boxes whatever
    the runtime's float differences (at 1e-4, near-equal overlapping boxes make their choice arbitrary)."""
    extra = {"tta": True} if mode == "tta" else {"slice": 96, "batch": 4}
    common = {"imgsz": 128, "conf": 1e-3, "max_det": 100, "device": "cpu"}
    ours = Predictor(dynamic_exports["model"], **common, **extra)(image)[0]
    plain = Predictor(dynamic_exports["model"], **common)(image)[0]
    assert len(ours) > 10 and not torch.equal(ours.boxes, plain.boxes)  # the option changed what was found
    for fmt in ("onnx", "openvino", "torchscript"):
        trusted = RuntimeConfig(trust_code=True)  # the TorchScript file is ours
        exported = Predictor(str(dynamic_exports[fmt]), runtime=trusted, **common, **extra)(image)[0]
        assert len(exported) == len(ours), fmt
        torch.testing.assert_close(exported.scores.max(), ours.scores.max(), atol=1e-6, rtol=0)
        assert matched_fraction(exported, ours, score_tolerance=1e-6) >= 0.95, fmt


def matched_fraction(a, b, *, score_tolerance: float = 1e-4) -> float:
    """The share of detections of `b` that `a` has too: same class, IoU > 0.99, score within `score_tolerance`."""
    iou = box_iou(b.boxes, a.boxes)
    close = (b.scores[:, None] - a.scores[None]).abs() < score_tolerance
    same = (b.labels[:, None] == a.labels[None]) & close
    return ((iou > 0.99) & same).any(1).float().mean().item()


def test_exported_and_pytorch_models_form_one_ensemble(model_and_onnx, image):
    model, onnx_path = model_and_onnx
    predictor = Predictor([model, str(onnx_path)], imgsz=128, conf=1e-4, max_det=100, merge="nms", device="cpu")
    assert predictor.names == NAMES
    alone = Predictor(model, imgsz=128, conf=1e-4, max_det=100, device="cpu")(image)[0]
    both = predictor(image)[0]
    # Two copies of one model merged by NMS: the strongest detection is the single model's strongest.
    assert len(alone) > 10 and len(both) > 10
    torch.testing.assert_close(both.boxes[0], alone.boxes[0], atol=1e-2, rtol=0)
    torch.testing.assert_close(both.scores[0], alone.scores[0], atol=1e-4, rtol=0)


def test_a_fixed_size_export_refuses_tta_scales_with_a_clear_message(fixed_exports, image):
    predictor = Predictor(str(fixed_exports["onnx"]), imgsz=64, tta=True, device="cpu")
    with pytest.raises(ValueError, match="--dynamic"):
        predictor(image)


@pytest.fixture(scope="module")
def fixed_640(tmp_path_factory):
    """yolov5n with 3 classes (random weights, seed 0) exported at a fixed 640 x 640, batch 1, to ONNX and
    OpenVINO: {format: path}, plus "model"."""
    from tphyolo.export import ExportConfig, export_model
    from tphyolo.models import build_model

    torch.manual_seed(0)
    model = build_model("yolov5n", names=NAMES).eval()
    folder = tmp_path_factory.mktemp("fixed640")
    results = export_model(model, ExportConfig(formats=("onnx", "openvino"), imgsz=640), stem=folder / "m",
                           model_name="yolov5n", source="m.pt")  # fmt: skip
    assert all(r.ok for r in results), [r.summary() for r in results]
    return {"model": model, **{r.format: r.path for r in results}}


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_a_fixed_size_export_predicts_a_non_square_image_as_the_pytorch_model_does(fixed_640, fmt):
    """A 640 x 384 image (w x h) through a 640 x 640 export: letterboxed to the file's square. The oracle is
    the PyTorch model on the same image padded to 640 x 640 by hand (128 rows of grey above and below), its
    boxes moved back up by the padding."""
    rng = np.random.default_rng(1)
    image = rng.integers(0, 255, (384, 640, 3), dtype=np.uint8)
    padded = np.full((640, 640, 3), 114, np.uint8)
    padded[128:512] = image
    common = {"imgsz": 640, "conf": 1e-3, "max_det": 100, "device": "cpu"}
    oracle = Predictor(fixed_640["model"], **common)(padded)[0]
    oracle = replace(oracle, boxes=(oracle.boxes - torch.tensor([0, 128, 0, 128])).clamp(min=0))
    oracle = replace(oracle, boxes=torch.minimum(oracle.boxes, torch.tensor([640, 384, 640, 384])))
    exported = Predictor(str(fixed_640[fmt]), **common)(image)[0]
    assert len(oracle) > 10
    assert abs(len(exported) - len(oracle)) <= 0.05 * len(oracle)
    torch.testing.assert_close(exported.scores.max(), oracle.scores.max(), atol=1e-4, rtol=0)
    assert matched_fraction(exported, oracle) >= 0.9


def test_a_fixed_size_export_runs_a_smaller_batch_and_refuses_a_larger_one(fixed_exports, image):
    backend_batch = 1
    with pytest.raises(ValueError, match=f"exported for batch {backend_batch}, but --batch is 2; give --batch 1"):
        Predictor(str(fixed_exports["onnx"]), imgsz=64, batch=2, device="cpu")
    results = Predictor(str(fixed_exports["onnx"]), imgsz=64, conf=1e-3, device="cpu")([image, image[:40]])
    assert [r.shape for r in results] == [(150, 230), (40, 230)]


def test_val_letterboxes_non_square_images_to_a_fixed_size_export(fixed_exports, tmp_path):
    """Validation of a fixed 64 x 64 export on images of two other shapes: every image is letterboxed to the
    file's square (rect batches would give the export shapes it cannot run) and scored."""
    import cv2

    from tphyolo.evaluation.val import val

    rng = np.random.default_rng(3)
    for folder in ("images", "labels"):
        (tmp_path / folder).mkdir()
    for i, (h, w) in enumerate([(60, 100), (90, 50), (64, 64)]):
        cv2.imwrite(str(tmp_path / "images" / f"{i}.png"), rng.integers(0, 255, (h, w, 3), dtype=np.uint8))
        (tmp_path / "labels" / f"{i}.txt").write_text("3 0.5 0.5 0.4 0.4\n")
    common = {"imgsz": 64, "batch": 1, "conf": 1e-3, "device": "cpu", "workers": 0, "scan_cache": False}
    exported = val(str(fixed_exports["onnx"]), tmp_path / "images", **common)
    assert exported.images == 3 and exported.instances == 3


def test_val_of_a_fixed_batch_export_runs_at_its_batch_unless_batch_is_given(fixed_exports, tmp_path, capsys):
    """`tphyolo val` scores with batch 32 unless told; a file exported for batch 1 runs at 1 and says so in one
    line, as at its own size; an explicit --batch 2 is still refused in one line."""
    import cv2

    from tphyolo.cli import main

    rng = np.random.default_rng(3)
    for folder in ("images", "labels"):
        (tmp_path / folder).mkdir()
    for i in range(3):
        cv2.imwrite(str(tmp_path / "images" / f"{i}.png"), rng.integers(0, 255, (60, 100, 3), dtype=np.uint8))
        (tmp_path / "labels" / f"{i}.txt").write_text("3 0.5 0.5 0.4 0.4\n")
    argv = ["val", "--weights", str(fixed_exports["onnx"]), "--data", str(tmp_path / "images"), "--device", "cpu",
            "--workers", "0", "--project", str(tmp_path / "runs")]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("what runs: ")]
    name = fixed_exports["onnx"].name
    assert lines[:2] == [f"--img 64: the image size {name} was exported at (--img overrides)",
                         f"--batch 1: {name} is exported for batch 1 (a larger --batch needs an export with "
                         "--dynamic)"]  # fmt: skip
    assert main([*argv, "--batch", "2"]) == 2
    assert "exported for batch 1, but --batch is 2; give --batch 1" in capsys.readouterr().err


def test_the_service_runs_a_fixed_batch_export_at_its_batch_unless_max_batch_is_given(fixed_exports):
    """serve's default max batch (4 on a CPU) above a batch-1 export: the engine runs batches of 1; a given
    --max-batch 4 (from_model without "batch") is refused as predict's --batch is."""
    from tphyolo.infer.config import InferenceConfig
    from tphyolo.infer.spec import DetectorSpec
    from tphyolo.serve.engine import InferenceEngine

    path = str(fixed_exports["onnx"])
    engine = InferenceEngine(DetectorSpec((path,), InferenceConfig(from_model=("imgsz", "batch"))), max_batch=4)
    assert engine.max_batch == 1 and engine.info.imgsz == 64
    with pytest.raises(ValueError, match="exported for batch 1, but --batch is 4"):
        InferenceEngine(DetectorSpec((path,), InferenceConfig(from_model=("imgsz",))), max_batch=4)
