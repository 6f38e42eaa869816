"""The crop classifier in the inference core: Predictor and evaluate re-label the merged detections of its classes,
with plain inference, TTA and slicing, and leave everything else as the detector gave it."""

import pytest
import torch
from reclassify_scene import NAMES, OBJECTS, ColourOracle, Forced, SceneDetector, by_box, scene, write_scene_data

from tphyolo.classify.classifier import CropClassifier
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.evaluation.loop import evaluate
from tphyolo.evaluation.results import format_results, results_json
from tphyolo.evaluation.settings import EvalSettings
from tphyolo.infer.config import VALIDATION, inference_config
from tphyolo.infer.slicing import SliceConfig
from tphyolo.predict.predictor import Predictor

TRICYCLE, AWNING = NAMES.index("tricycle"), NAMES.index("awning-tricycle")
WEIGHT = 0.7


SETTINGS = {
    "plain": {},
    "tta": {"tta": True},
    "slice": {"slice": SliceConfig(160, 0.25, full=True)},
    "tta+slice+nms": {"tta": True, "slice": 160, "merge": "nms"},
}


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_classifier_forced_to_one_class_relabels_exactly_the_boxes_of_its_set(setting):
    images = [scene(), scene()[:, ::-1].copy()]  # two images of one batch
    kwargs = {"imgsz": 256, "batch": 2, "device": "cpu", **SETTINGS[setting]}
    base = Predictor(SceneDetector(), **kwargs)(images)
    net = Forced(0)  # always "tricycle"
    classifier = CropClassifier(net, names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1, weight=WEIGHT)
    relabelled = Predictor(SceneDetector(), classifier=classifier, **kwargs)(images)
    in_set = sum(int((d.labels >= TRICYCLE).sum()) for d in base)
    assert net.batches and sum(net.batches) == in_set and net.batches[0] == min(in_set, 64)  # the batch's crops at once
    changed = 0
    for before, after in zip(base, relabelled, strict=True):
        boxes0, scores0, labels0 = by_box(before)
        boxes1, scores1, labels1 = by_box(after)
        torch.testing.assert_close(boxes1, boxes0)  # the same boxes
        outside = labels0 < TRICYCLE
        assert labels1[outside].tolist() == labels0[outside].tolist()
        torch.testing.assert_close(scores1[outside], scores0[outside])
        assert (labels1[~outside] == TRICYCLE).all()
        moved = labels0 == AWNING  # one-hot detections: w = 0.7 > 0.5 overrules, the score becomes score * 0.7
        torch.testing.assert_close(scores1[moved], scores0[moved] * WEIGHT)
        kept = labels0 == TRICYCLE
        torch.testing.assert_close(scores1[kept], scores0[kept])
        assert (after.scores[:-1] >= after.scores[1:]).all()
        changed += int(moved.sum())
    assert changed >= 4 and (torch.cat([d.labels for d in base]) < TRICYCLE).any()


def test_classifier_weight_replaces_the_saved_one():
    classifier = CropClassifier(Forced(0), names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1)
    (detections,) = Predictor(SceneDetector(), imgsz=256, device="cpu", classifier=classifier, classifier_weight=0.4)(
        scene()
    )
    assert (detections.labels == AWNING).sum() == 2  # w < 0.5 cannot overrule a one-hot detection
    with pytest.raises(ValueError, match="weight"):
        Predictor(SceneDetector(), imgsz=256, device="cpu", classifier=classifier, classifier_weight=1.5)


def test_a_classifier_of_other_classes_is_refused():
    classifier = CropClassifier(Forced(0), names=["van", "bus"], class_ids=[0, 1], img=16, context=0.1)
    with pytest.raises(ValueError, match=r"\['van', 'bus'\] are not among the detector's classes"):
        Predictor(SceneDetector(), imgsz=256, device="cpu", classifier=classifier)


@pytest.fixture(scope="module")
def scene_loader(tmp_path_factory):
    data = load_data_config(write_scene_data(tmp_path_factory.mktemp("scene")))
    dataset, _ = build_dataset(
        data, "val", DatasetSettings(imgsz=256, rect=True, batch_size=2, stride=32, scan_cache=False)
    )
    return build_dataloader(dataset, LoaderSettings(batch_size=2))


@pytest.mark.parametrize("tta", [False, True])
def test_validation_with_an_oracle_classifier_fixes_the_confused_class(scene_loader, tta):
    config = inference_config(VALIDATION, tta=tta)
    base = evaluate(SceneDetector(), scene_loader, names=NAMES, config=config)
    oracle = CropClassifier(ColourOracle(), names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1)
    fixed = evaluate(
        SceneDetector(), scene_loader, names=NAMES, config=config, settings=EvalSettings(classifier=oracle)
    )
    ap50 = {r.name: r.map50 for r in base.per_class}
    ap50_fixed = {r.name: r.map50 for r in fixed.per_class}
    assert ap50["tricycle"] == 0 and ap50_fixed["tricycle"] > 0.9  # every tricycle was an awning-tricycle
    assert ap50_fixed["awning-tricycle"] > ap50["awning-tricycle"] and ap50_fixed["awning-tricycle"] > 0.9
    assert ap50_fixed["car"] == ap50["car"] > 0.9 and ap50_fixed["pedestrian"] == ap50["pedestrian"] > 0.9
    assert fixed.map50 > base.map50 + 0.2
    assert "classify" in fixed.speed and "classify" not in base.speed
    assert "ms crop classifier" in format_results(fixed)
    assert fixed.classifier_classes == NAMES[2:] and base.classifier_classes == ()


def test_results_json_holds_the_printed_numbers(scene_loader):
    oracle = CropClassifier(ColourOracle(), names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1)
    results = evaluate(
        SceneDetector(), scene_loader, names=NAMES, config=VALIDATION, settings=EvalSettings(classifier=oracle)
    )
    data = results_json(results)
    assert set(data) == {"protocol", "metrics", "per_class", "classifier_classes"}
    assert data["protocol"] == "yolo" and data["classifier_classes"] == list(NAMES[2:])
    assert data["metrics"] == {"P": results.mp, "R": results.mr, "mAP50": results.map50, "mAP50-95": results.map}
    assert data["metrics"]["mAP50"] > 0.9
    assert set(data["per_class"]) == set(NAMES)
    table = [line for line in format_results(results, verbose=True).splitlines()[1:] if not line.startswith("Speed")]
    for line in table:
        name, images, instances, p, r, ap50, ap = line.split()
        row = data["metrics"] if name == "all" else data["per_class"][name]
        assert [float(v) for v in (p, r, ap50, ap)] == [
            float(f"{row[k]:.3g}") for k in ("P", "R", "mAP50" if name == "all" else "AP50",
                                             "mAP50-95" if name == "all" else "AP50-95")
        ]  # fmt: skip
        if name != "all":
            assert (row["images"], row["instances"]) == (int(images), int(instances)) == (2, 2)
    assert len(table) == len(OBJECTS) + 1  # an 'all' row and one per class, each checked above
    without = results_json(evaluate(SceneDetector(), scene_loader, names=NAMES, config=VALIDATION))
    assert "classifier_classes" not in without and without["metrics"]["mAP50"] < data["metrics"]["mAP50"]


def test_results_json_adds_the_numbers_of_another_protocol(scene_loader):
    results = evaluate(
        SceneDetector(), scene_loader, names=NAMES, config=VALIDATION, settings=EvalSettings(protocol="coco")
    )
    data = results_json(results)
    assert data["protocol"] == "coco" and data["metrics"]["mAP50"] == results.map50
    assert data["metrics"]["coco/AP50"] == pytest.approx(100 * results.map50) and data["metrics"]["coco/AP50"] > 40
    assert data["per_class"]["car"]["coco/AP"] == results.protocol_per_class["car"]["AP"]


def test_the_weight_sweep_scores_each_weight_and_keeps_the_smallest_best(tmp_path, monkeypatch):
    from reclassify_scene import save_forced_classifier

    from tphyolo.classify.checkpoint import load_classifier
    from tphyolo.infer.backends.pytorch import TorchBackend
    from tphyolo.runtime.config import RuntimeConfig
    from tphyolo.training.classifier.sweep import save_weight, sweep_weight

    def scene_backends(weights, *, runtime, device, **loading):
        return [TorchBackend(SceneDetector(), runtime=runtime, device=device)]

    monkeypatch.setattr("tphyolo.infer.build.load_backends", scene_backends)  # the sweep builds with build_detector
    oracle = CropClassifier(ColourOracle(), names=NAMES[2:], class_ids=[TRICYCLE, AWNING], img=16, context=0.1)
    data = write_scene_data(tmp_path / "scene")
    sweep = sweep_weight(oracle, "scene.pt", data, runtime=RuntimeConfig(device="cpu"), imgsz=256, batch=2)
    # w = 0: the detector alone; w < 0.5: the mislabelled tricycle's score drops below the real awning-tricycle
    # (awning-tricycle AP 1), but it stays an awning-tricycle; w > 0.5: every label right (w = 0.5 is a tie)
    assert sweep.map50[0.0] < sweep.map50[0.3] < sweep.map50[0.6] == sweep.map50[0.8] == sweep.map50[1.0]
    assert sweep.map50[1.0] > 0.99 and sweep.map[1.0] > 0.9
    assert sweep.best in (0.5, 0.6) and sweep.map50[sweep.best] == sweep.map50[1.0] and "<- chosen" in sweep.table()
    path = save_forced_classifier(tmp_path / "c.pt", k=0)
    save_weight(path, sweep.best)
    assert load_classifier(path).weight == sweep.best
