"""Crop-classifier checkpoints: a round trip keeps weights, settings and outputs; foreign files are refused."""

import dataclasses

import numpy as np
import pytest
import torch

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.classify.checkpoint import (
    ClassifierCheckpoint,
    ClassifierCheckpointError,
    load_classifier,
    save_classifier,
)
from tphyolo.classify.classifier import CropClassifier
from tphyolo.classify.model import build_classifier, load_start_weights
from tphyolo.models import build_model

DATASET_NAMES = ("car", "pedestrian", "tricycle", "awning-tricycle")


def _checkpoint(net) -> ClassifierCheckpoint:
    return ClassifierCheckpoint(
        model={k: v.clone() for k, v in net.state_dict().items()},
        arch="resnet18",
        names=("tricycle", "awning-tricycle"),
        class_ids=(2, 3),
        dataset_names=DATASET_NAMES,
        img=32,
        context=0.15,
        weight=0.6,
        epoch=4,
        metrics={"accuracy": 0.9},
        train_args={"data": "synthetic-fine", "classes": None, "epochs": 5},
    )


@pytest.mark.parametrize("arch", ["resnet18", "crop-cnn"])
def test_round_trip_keeps_weights_settings_and_outputs(tmp_path, arch):
    torch.manual_seed(0)
    net = build_classifier(arch, num_classes=2).eval()
    original = dataclasses.replace(_checkpoint(net), arch=arch)
    path = save_classifier(tmp_path / "c.pt", original)
    torch.load(path, weights_only=True)  # plain data only
    loaded = load_classifier(path)
    assert dataclasses.replace(loaded, model={}) == dataclasses.replace(original, model={})
    assert loaded.model.keys() == original.model.keys()
    for key, value in original.model.items():
        torch.testing.assert_close(loaded.model[key], value, rtol=0, atol=0)
    x = torch.rand(3, 3, 32, 32)
    with torch.inference_mode():
        torch.testing.assert_close(loaded.build()(x), net(x), rtol=0, atol=0)
    crops = np.random.default_rng(0).integers(0, 255, (5, 32, 32, 3), dtype=np.uint8)
    classifier = CropClassifier.load(path, detector_names=["x", "awning-tricycle", "tricycle"])
    assert (
        classifier.class_ids == (2, 1)
        and classifier.weight == 0.6
        and (classifier.img, classifier.context) == (32, 0.15)
    )
    probabilities = classifier.probabilities(crops)
    assert probabilities.shape == (5, 2)
    torch.testing.assert_close(probabilities.sum(1), torch.ones(5))


def test_a_classifier_whose_classes_the_detector_lacks_is_refused(tmp_path):
    net = build_classifier("resnet18", num_classes=2)
    path = save_classifier(tmp_path / "c.pt", _checkpoint(net))
    with pytest.raises(ValueError, match=r"\['awning-tricycle'\] are not among the detector's classes"):
        CropClassifier.load(path, detector_names=["car", "tricycle"])


def test_foreign_files_are_refused_with_the_file_named(tmp_path):
    model = build_model("yolov5n", names=["a", "b"])
    detector = save_checkpoint(tmp_path / "det.pt", {"model": model.state_dict(), "model_yaml": model.yaml,
                                                     "names": ["a", "b"], "nc": 2})  # fmt: skip
    with pytest.raises(ClassifierCheckpointError, match="det.pt: not a crop-classifier checkpoint .*detector"):
        load_classifier(detector)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ClassifierCheckpointError, match="junk.pt"):
        load_classifier(junk)
    with pytest.raises(FileNotFoundError):
        load_classifier(tmp_path / "missing.pt")


def test_inconsistent_settings_are_refused():
    net = build_classifier("resnet18", num_classes=2)
    with pytest.raises(ValueError, match="has id 1"):
        dataclasses.replace(_checkpoint(net), class_ids=(1, 3))
    with pytest.raises(ValueError, match="weight"):
        dataclasses.replace(_checkpoint(net), weight=1.5)


def test_start_weights_from_a_checkpoint_with_another_class_count(tmp_path):
    torch.manual_seed(0)
    source = build_classifier("resnet18", num_classes=2)
    path = save_classifier(tmp_path / "c.pt", _checkpoint(source))
    target = build_classifier("resnet18", num_classes=3)
    left = load_start_weights(target, path)
    assert left == ["fc.bias", "fc.weight"]
    torch.testing.assert_close(target.backbone.conv1.weight, source.backbone.conv1.weight)
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "bad.pt")
    with pytest.raises(ValueError, match="tensors fit"):
        load_start_weights(target, tmp_path / "bad.pt")


def test_unknown_architecture_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown classifier architecture 'resnet1'.*resnet18"):
        build_classifier("resnet1", num_classes=2)
