"""One DetectorSpec, one detector: `tphyolo.val` and `Predictor` build it with `build_detector` and so detect the
same boxes in the same image."""

import subprocess
import sys

import torch

import tphyolo
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.data.dataset_config import load_data_config
from tphyolo.infer.build import build_detector
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.config import RuntimeConfig


def test_val_and_predictor_detect_the_same_boxes_from_one_spec(tmp_path):
    data = generate_synthetic(tmp_path / "data", n_train=0, n_val=2, imgsz=192, seed=3)
    names = list(load_data_config(data).names)
    torch.manual_seed(0)
    model = build_model("tph-yolov5n", names=names).eval()  # untrained: many low-score boxes to compare
    # 120 is rounded up to the stride, 128; the AUTO windows follow it; both paths must agree on each step
    spec = DetectorSpec(model, inference=InferenceConfig(imgsz=120, conf=0.001, batch=2, merge="nms"),
                        runtime=RuntimeConfig(device="cpu", amp="off"), slicing=SliceConfig("auto", 0.25))  # fmt: skip
    built = build_detector(spec)
    assert built.config.imgsz == 128 and built.slicing.size == 128
    scored = tphyolo.val(model, data, inference=spec.inference, runtime=spec.runtime, slicing=spec.slicing,
                         workers=0, scan_cache=False, keep_images=True)  # fmt: skip
    predictor = Predictor(model, spec.inference, runtime=spec.runtime, slice=spec.slicing)
    assert predictor.config == built.config and predictor.slicing == built.slicing
    assert len(scored.image_results) == 2
    for image in scored.image_results:
        (predicted,) = predictor(image.path)
        rows = torch.cat([predicted.boxes, predicted.scores[:, None], predicted.labels[:, None].float()], 1)
        assert len(rows) > 10
        torch.testing.assert_close(rows, image.detections.float(), rtol=0, atol=1e-4)


def test_a_spec_is_data_that_imports_no_torch():
    # a job built from the command line may hold a spec, and `tphyolo X -h` imports no torch
    code = ("import sys; from tphyolo.infer.spec import DetectorSpec; DetectorSpec(('best.pt',)); "
            "sys.exit(sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3] or None)")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]


def test_predictor_keywords_make_the_spec_from_keywords_makes():
    spec = DetectorSpec.from_keywords(("a.pt", "b.pt"), InferenceConfig(conf=0.3), imgsz=320, tta=True, slice=256,
                                      device=torch.device("cpu"), model_weights=[2, 1], classifier="c.pt")  # fmt: skip
    assert spec.inference == InferenceConfig(conf=0.3, imgsz=320, augment=True)
    assert spec.slicing == SliceConfig(256) and spec.device == "cpu" and spec.model_weights == (2, 1)
    assert spec.classifier == "c.pt" and spec.classifier_weight is None and spec.fuse
    assert DetectorSpec.from_keywords("a.pt", slice=0).slicing is None  # `--slice 0`: whole images
    assert DetectorSpec.from_keywords("a.pt", slice="model").slicing == SliceConfig()  # left to the model


def test_a_predictor_from_a_spec_is_the_predictor_of_its_keywords():
    torch.manual_seed(0)
    model = build_model("tph-yolov5n", names=["a", "b"]).eval()
    keywords = {"imgsz": 96, "conf": 0.001, "slice": 64, "runtime": RuntimeConfig(device="cpu", amp="off")}
    by_keywords = Predictor(model, **keywords)
    by_spec = Predictor.from_spec(DetectorSpec.from_keywords(model, **keywords))
    assert by_spec.spec == by_keywords.spec and by_spec.config == by_keywords.config
    assert by_spec.slicing == by_keywords.slicing == SliceConfig(64)
    image = (torch.rand(100, 140, 3) * 255).to(torch.uint8).numpy()
    (a,), (b,) = by_keywords(image), by_spec(image)
    assert len(a.boxes) > 0
    torch.testing.assert_close(a.boxes, b.boxes)
    torch.testing.assert_close(a.scores, b.scores)
