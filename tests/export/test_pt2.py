"""`--format pt2`: a torch.export program with the metadata of every export, equal to PyTorch within the export
tolerance at sizes and batches it was not traced at, refused unless trusted (loading it unpickles), and run by
prediction, validation and `bench predict` as any exported model."""

import pytest
import torch
from tests.helpers import BLOCKS_SIZE

from tphyolo.bench.export import BackendBenchSettings, bench_backends
from tphyolo.evaluation.val import val
from tphyolo.export import ExportConfig, export_model
from tphyolo.export.formats import FORMAT_BY_NAME
from tphyolo.export.parity import FP32_TOLERANCE, relative_error, sample_images
from tphyolo.infer.backends import load_backend
from tphyolo.models import build_model
from tphyolo.ops import box_iou
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.config import RuntimeConfig

TRUSTED = RuntimeConfig(trust_code=True)  # the files are exported here


@pytest.fixture(scope="module")
def pt2_export(tmp_path_factory):
    """yolov5n with the block images' two classes (random weights, seed 0), exported with --dynamic at 64 px:
    (model, ExportResult)."""
    torch.manual_seed(0)
    model = build_model("yolov5n", names=["red", "blue"]).eval()
    cfg = ExportConfig(formats=("pt2",), imgsz=BLOCKS_SIZE, dynamic=True)
    (result,) = export_model(model, cfg, stem=tmp_path_factory.mktemp("pt2") / "m", model_name="yolov5n",
                             source="m.pt")  # fmt: skip
    return model, result


def test_a_pt2_file_equals_pytorch_at_other_batches_and_sizes(pt2_export):
    model, result = pt2_export
    assert result.ok and result.path.name == "m.pt2" and result.tolerance == FP32_TOLERANCE
    assert [shape for shape, _ in result.checks] == [(1, 3, 64, 64), (2, 3, 64, 96)], result.summary()
    backend = load_backend(result.path, trust_code=True)
    meta = backend.metadata
    assert (meta.format, meta.model, meta.source, meta.names) == ("pt2", "yolov5n", "m.pt", ("red", "blue"))
    assert meta.dynamic and meta.stride == 32 and meta.imgsz == (64, 64) and meta.dtype == "float32"
    images = sample_images(3, 96, 160)  # neither the traced batch nor its size
    with torch.no_grad():
        expected = model.fuse()(images)
    assert relative_error(backend.run(images), expected) <= FP32_TOLERANCE


def test_a_pt2_file_is_refused_unless_trusted(pt2_export):
    """torch.export.load unpickles the archive's weights and constants: a forged file runs code on load."""
    with pytest.raises(ValueError, match="--trust-code"):
        load_backend(pt2_export[1].path)


def test_a_pt2_file_predicts_and_validates_as_pytorch_does(pt2_export, blocks_data):
    model, result = pt2_export
    image = (sample_images(1, 80, 112)[0].permute(1, 2, 0) * 255).to(torch.uint8).numpy()
    common = {"imgsz": BLOCKS_SIZE, "conf": 1e-3, "max_det": 50, "device": "cpu"}
    ours = Predictor(model, **common)(image)[0]
    exported = Predictor(str(result.path), runtime=TRUSTED, **common)(image)[0]
    assert len(ours) > 5 and len(exported) == len(ours)
    torch.testing.assert_close(exported.boxes, ours.boxes, atol=1e-3, rtol=0)
    torch.testing.assert_close(exported.scores, ours.scores, atol=1e-5, rtol=0)
    # val scores the file on the block images as it scores the model: the same detections per image (as sets:
    # at val's conf 0.001 a random network's near-equal overlapping boxes make NMS's choice among them arbitrary)
    runs = [val(w, str(blocks_data), imgsz=BLOCKS_SIZE, batch=4, workers=0, keep_images=True, device="cpu",
                runtime=TRUSTED) for w in (model, str(result.path))]  # fmt: skip
    pairs = list(zip(*(run.image_results for run in runs), strict=True))
    assert len(pairs) == 16 and sum(len(a.detections) for a, _ in pairs) > 16
    for a, b in pairs:
        assert len(b.detections) == len(a.detections)
        iou = box_iou(a.detections[:, :4], b.detections[:, :4])
        same = (a.detections[:, None, 4:] - b.detections[None, :, 4:]).abs().amax(2) < 1e-4  # score and class
        assert ((iou > 0.99) & same).any(1).float().mean() >= 0.9


def test_bench_predict_times_pt2_beside_the_other_runtimes(tmp_path):
    assert FORMAT_BY_NAME["pt2"].runtime == "pt2"
    settings = BackendBenchSettings(model="yolov5n", imgsz=BLOCKS_SIZE, backends=("onnxruntime", "pt2"), warmup=0,
                                    repeats=1)  # fmt: skip
    rows = {row.name: row.to_json() for row in bench_backends(settings, workdir=tmp_path, log=lambda line: None)}
    assert list(rows) == ["predict/onnxruntime", "predict/pt2"]
    assert rows["predict/pt2"]["ours_ms"] > 0 and rows["predict/pt2"]["extra"]["rel_error"] <= FP32_TOLERANCE
