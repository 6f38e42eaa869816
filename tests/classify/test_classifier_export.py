"""The crop classifier behind an exported detector: an ONNX export with a classifier re-labels exactly the
detections of the classifier's classes, and leaves the others and every box as the export alone gives them."""

import pytest
import torch
from reclassify_scene import NAMES, Forced, by_box, scene

from tphyolo.classify.classifier import CropClassifier
from tphyolo.export import ExportConfig, export_model
from tphyolo.infer.config import RECLASSIFY_MIN_SCORE
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

TRICYCLE, AWNING = NAMES.index("tricycle"), NAMES.index("awning-tricycle")
WEIGHT = 0.7
COMMON = {"imgsz": 128, "conf": 0.05, "max_det": 1000, "device": "cpu"}


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory) -> str:
    """yolov5n with the scene's classes (random weights, seed 0, confident objectness) exported to ONNX."""
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed: ONNX exports cannot run")
    torch.manual_seed(0)
    model = build_model("yolov5n", names=list(NAMES)).eval()
    head = model.model[-1]
    with torch.no_grad():  # confident objectness: detections score above the classifier's minimum score
        for conv in head.m:
            conv.bias.view(head.na, -1)[:, 4] = 6.0
    folder = tmp_path_factory.mktemp("onnx")
    (result,) = export_model(model, ExportConfig(formats=("onnx",), imgsz=128, dynamic=True), stem=folder / "m",
                             model_name="yolov5n", source="m.pt")  # fmt: skip
    assert result.ok, result.summary()
    return str(result.path)


def _forced_classifier() -> CropClassifier:
    return CropClassifier(Forced(0), names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1, weight=WEIGHT)


def test_an_onnx_detector_with_a_classifier_relabels_exactly_the_boxes_of_its_set(onnx_path):
    image = scene()
    alone = Predictor(onnx_path, **COMMON)(image)[0]
    classifier = _forced_classifier()
    relabelled = Predictor(onnx_path, classifier=classifier, **COMMON)(image)[0]
    assert alone.scores.min() >= RECLASSIFY_MIN_SCORE and len(alone) < COMMON["max_det"]
    boxes0, scores0, labels0 = by_box(alone)
    boxes1, scores1, labels1 = by_box(relabelled)
    outside, moved, kept = labels0 < TRICYCLE, labels0 == AWNING, labels0 == TRICYCLE
    assert outside.sum() >= 5 and moved.sum() >= 5 and kept.sum() >= 5  # random weights, confident: all kinds occur
    assert sum(classifier.net.batches) == int((~outside).sum())  # every detection of its classes cropped once
    torch.testing.assert_close(boxes1, boxes0)  # the same boxes
    assert torch.equal(labels1[outside], labels0[outside]) and (labels1[~outside] == TRICYCLE).all()
    torch.testing.assert_close(scores1[outside], scores0[outside])
    torch.testing.assert_close(scores1[moved], scores0[moved] * WEIGHT)  # w = 0.7 overrules a one-hot detection
    torch.testing.assert_close(scores1[kept], scores0[kept])
    assert (relabelled.scores[:-1] >= relabelled.scores[1:]).all()
