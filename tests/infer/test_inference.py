"""The inference core: its config and flags, the merge-IoU rule, and a backend that is not a torch module run
through Detector and evaluate, with boxes mapped to original pixels by hand."""

import argparse

import pytest
import torch

from tphyolo.data.loader import Batch
from tphyolo.evaluation.loop import evaluate
from tphyolo.evaluation.settings import EvalSettings
from tphyolo.flags import add_flags, from_flags
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.config import (
    MAX_DET,
    NMS_IOU,
    PREDICT_CONF,
    VAL_DEFAULTS,
    VALIDATION,
    WBF_IOU,
    InferenceConfig,
    inference_config,
)
from tphyolo.infer.detector import Detector, View
from tphyolo.infer.tta_config import PAPER_SCALES, PLAIN, TTAConfig


def _parse(*argv, **kwargs) -> InferenceConfig:
    parser = argparse.ArgumentParser()
    add_flags(parser, InferenceConfig, **kwargs)
    return from_flags(InferenceConfig, parser.parse_args(list(argv)))


def test_flags_round_trip_to_the_config():
    assert _parse() == InferenceConfig() and InferenceConfig().conf == PREDICT_CONF
    assert InferenceConfig().max_det == MAX_DET
    argv = ["--imgsz", "1536", "--batch", "4", "--conf", "0.1", "--iou", "0.5", "--max-det", "300", "--classes", "0"]
    argv += ["3", "--agnostic-nms", "--augment", "--tta-scales", "1", "0.5", "--tta-flips", "none", "ud"]
    argv += ["--merge", "nms", "--merge-iou", "0.7"]
    assert _parse(*argv) == InferenceConfig(1536, 4, 0.1, 0.5, 300, (0, 3), True, True, (1.0, 0.5), ("none", "ud"),
                                            "nms", 0.7)  # fmt: skip
    with pytest.raises(SystemExit):
        _parse("--merge", "mean")
    with pytest.raises(SystemExit):
        _parse("--tta-flips", "diagonal")


def test_validation_defaults_are_one_config():
    assert _parse(defaults=VAL_DEFAULTS, exclude=("classes", "agnostic")) == VALIDATION
    assert (VALIDATION.conf, VALIDATION.iou, VALIDATION.batch) == (0.001, 0.45, 32)


def test_val_predict_and_training_suppress_at_one_iou():
    """Before, val suppressed at 0.6 and predict at 0.45: one model, two mAPs (0.834 and 0.898 on the main job's)."""
    from tphyolo.commands.val import nms_header
    from tphyolo.training.config import TrainConfig

    assert InferenceConfig().iou == VALIDATION.iou == TrainConfig().val_iou == NMS_IOU
    assert nms_header(VALIDATION) == "NMS: conf 0.001, iou 0.45, max_det 500, agnostic no"
    assert nms_header(InferenceConfig(conf=0.3, iou=0.7, max_det=1000, agnostic=True)) == (
        "NMS: conf 0.3, iou 0.7, max_det 1000, agnostic yes"
    )


def test_merge_iou_is_the_wbf_default_unless_given_and_nms_uses_iou():
    assert InferenceConfig(merge="wbf", iou=0.3).merge_threshold == WBF_IOU == 0.55
    assert InferenceConfig(merge="nms", iou=0.3).merge_threshold == 0.3
    assert InferenceConfig(merge="nms", iou=0.3, merge_iou=0.8).merge_threshold == 0.8
    assert InferenceConfig(merge="wbf", merge_iou=0.7).merge_threshold == 0.7


def test_tta_shorthand_and_bad_settings():
    assert InferenceConfig().tta == PLAIN
    assert inference_config(tta=True).tta == TTAConfig() and TTAConfig().scales == PAPER_SCALES
    custom = inference_config(VALIDATION, tta=TTAConfig((1.0, 0.5), ("lr",)), max_det=7)
    assert custom.tta.passes() == [(1.0, "lr"), (0.5, "lr")] and custom.max_det == 7 and custom.conf == 0.001
    assert inference_config(custom, tta=False).tta == PLAIN
    assert InferenceConfig(classes=[2, 1]).classes == (2, 1)  # lists from Python become tuples
    for bad, match in (({"merge": "mean"}, "merge must be one of"), ({"conf": 1.5}, "conf"), ({"batch": 0}, ">= 1")):
        with pytest.raises(ValueError, match=match):
            InferenceConfig(**bad)
    with pytest.raises(ValueError, match="flips"):
        InferenceConfig(tta_flips=("diagonal",))


class CentreBox(Backend):
    """A backend that is not a torch module: one box of 20 x 10 input pixels in the centre of every input,
    objectness 0.9, class scores (0.1, 0.8)."""

    format = "centre-box"
    names = ["a", "b"]
    stride = 32
    device = torch.device("cpu")
    dtype = torch.float32

    def __init__(self) -> None:
        self.calls = 0

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return images.float() / 255.0

    def run(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        n, _, h, w = x.shape
        return torch.tensor([w / 2, h / 2, 20.0, 10.0, 0.9, 0.1, 0.8]).repeat(n, 1, 1)  # (B, 1, 5 + nc)


def test_detector_maps_runs_to_original_pixels_and_merges_them():
    backend = CentreBox()
    x = backend.prepare(torch.zeros((1, 3, 32, 64), dtype=torch.uint8))
    plain = Detector([backend], InferenceConfig(conf=0.1))
    (run,) = plain.detect(x)  # one run: x1, y1, x2, y2 = 22, 11, 42, 21 in input pixels
    torch.testing.assert_close(run[0], torch.tensor([[22.0, 11.0, 42.0, 21.0, 0.72, 1.0]]))
    # the input holds a 128 x 48 region at (10, 20) of the image, halved and padded 4 pixels at the top
    view = View((0.5, 0.5), (0, 4), 128, 48, offset=(10, 20))
    rows = view.rows_to_original(run[0])
    torch.testing.assert_close(rows, torch.tensor([[54.0, 34.0, 94.0, 54.0, 0.72, 1.0]]))
    assert plain.combine([[rows]], width=200, height=100) is rows  # one run of one view: as it is
    # TTA: the box is mirror-symmetric, so the left-right pass finds it again and WBF fuses the two runs
    tta = Detector([backend, backend], inference_config(conf=0.1, tta=TTAConfig((1.0,), ("none", "lr"))))
    runs = tta.detect(x)
    assert tta.num_runs == len(runs) == 4 and backend.calls == 5
    merged = tta.combine([[view.rows_to_original(r[0])] for r in runs], width=200, height=100)
    torch.testing.assert_close(merged, rows, atol=1e-4, rtol=0)
    with pytest.raises(ValueError, match="1 model weights for 2 models"):
        Detector([backend, backend], InferenceConfig(), weights=[1.0])


def test_evaluate_runs_a_backend_end_to_end():
    """A 64 x 32 batch image holding a 128 x 64 original image (ratio 0.5, no padding) whose one object is where
    the backend puts its box: a perfect score through the whole validation path."""
    batch = Batch(
        images=torch.zeros((1, 3, 32, 64), dtype=torch.uint8),
        targets=torch.tensor([[0.0, 1.0, 0.5, 0.5, 20 / 64, 10 / 32]]),  # image, class, cx, cy, w, h (normalised)
        ignore=[torch.zeros((0, 4))],
        paths=["a.jpg"],
        shapes0=torch.tensor([[64, 128]]),
        ratios=torch.tensor([[0.5, 0.5]]),
        pads=torch.tensor([[0.0, 0.0]]),
    )
    for protocol in ("yolo", "coco"):
        results = evaluate(CentreBox(), [batch], names=["a", "b"], settings=EvalSettings(protocol=protocol))
        assert results.images == 1 and results.instances == 1
        assert results.map50 == pytest.approx(0.995 if protocol == "yolo" else 1.0)
    with pytest.raises(ValueError, match=r"unknown protocol 'voc'; known: \['yolo', 'coco', 'visdrone'\]"):
        evaluate(CentreBox(), [batch], names=["a", "b"], settings=EvalSettings(protocol="voc"))


def test_settings_in_effect_leave_out_what_changes_nothing():
    from tphyolo.infer.config import InferenceConfig

    plain = InferenceConfig().settings_in_effect(runs_merged=False)
    assert not {"tta_scales", "tta_flips", "merge", "merge_iou"} & set(plain) and plain["imgsz"] == 640
    tta = InferenceConfig(augment=True, tta_scales=(1.0, 0.5)).settings_in_effect(runs_merged=True)
    assert tta["tta_scales"] == (1.0, 0.5) and tta["merge"] == "wbf"
    ensemble = InferenceConfig(merge="nms").settings_in_effect(runs_merged=True)
    assert ensemble["merge"] == "nms" and "tta_scales" not in ensemble
