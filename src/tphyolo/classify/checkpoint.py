"""Crop-classifier checkpoints: a state dict plus what is needed to use it, loaded with `weights_only=True`.

A file is `torch.save` of one dict of plain data:

| key | meaning |
| --- | --- |
| `format`, `format_version` | `"tphyolo-crop-classifier"`, `FORMAT_VERSION` |
| `model` | state dict of `CropClassifierNet` |
| `arch` | architecture name (`crop-cnn` or a torchvision one) |
| `names` | the classifier's classes (output k = names[k]) |
| `class_ids` | their ids in the detector's dataset (`dataset_names[class_ids[k]] == names[k]`) |
| `dataset_names` | all class names of the dataset the classifier was trained on |
| `img`, `context` | crop size (pixels) and context (fraction of the box size added on each side) |
| `weight` | default weight w of the classifier when combined with a detector (`combine.py`) |
| `epoch`, `metrics`, `train_args` | training progress and settings (plain data) |
| `tphyolo_version`, `date` | filled in on saving |
"""

from __future__ import annotations

import datetime
import pickle
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from tphyolo._version import __version__
from tphyolo.checkpoint.format import atomic_torch_save
from tphyolo.classify.model import CropClassifierNet, build_classifier
from tphyolo.errors import InputError

FORMAT = "tphyolo-crop-classifier"
FORMAT_VERSION = 1
DEFAULT_WEIGHT = 0.7  # the classifier's share where no sweep has set one; > 0.5 lets it overrule a confident box


class ClassifierCheckpointError(InputError):
    """A crop-classifier file that cannot be loaded; the message names the file and the problem."""


@dataclass(frozen=True)
class ClassifierCheckpoint:
    """A crop classifier: weights and the settings that go with them (keys in the module docstring)."""

    model: dict[str, torch.Tensor]
    arch: str
    names: tuple[str, ...]
    class_ids: tuple[int, ...]
    dataset_names: tuple[str, ...]
    img: int
    context: float
    weight: float = DEFAULT_WEIGHT
    epoch: int = -1
    metrics: dict[str, float] = field(default_factory=dict)
    train_args: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.names) < 2 or len(self.names) != len(self.class_ids):
            raise InputError(f"a classifier needs >= 2 classes with one id each: {self.names}, {self.class_ids}")
        for name, i in zip(self.names, self.class_ids, strict=True):
            if not 0 <= i < len(self.dataset_names) or self.dataset_names[i] != name:
                raise InputError(f"class {name!r} has id {i}, but the dataset's names are {list(self.dataset_names)}")
        if self.img < 8 or self.context < 0 or not 0 <= self.weight <= 1:
            raise InputError(
                f"bad settings: img={self.img} (>= 8), context={self.context} (>= 0), weight={self.weight}"
            )

    def build(self) -> CropClassifierNet:
        """The network with these weights, in eval mode, float32, on CPU."""
        net = build_classifier(self.arch, num_classes=len(self.names))
        net.load_state_dict(self.model, strict=True)
        return net.eval()

    def payload(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "model": self.model,
            "arch": self.arch,
            "names": list(self.names),
            "class_ids": list(self.class_ids),
            "dataset_names": list(self.dataset_names),
            "img": self.img,
            "context": self.context,
            "weight": self.weight,
            "epoch": self.epoch,
            "metrics": dict(self.metrics),
            "train_args": dict(self.train_args),
            "tphyolo_version": __version__,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }


def save_classifier(path: str | Path, checkpoint: ClassifierCheckpoint) -> Path:
    """Write `checkpoint` to `path` atomically (`tphyolo.checkpoint.format.atomic_torch_save`); returns the path."""
    return atomic_torch_save(checkpoint.payload(), path)


def load_classifier(path: str | Path) -> ClassifierCheckpoint:
    """Read a crop-classifier file written by `save_classifier` (tensors to CPU). Raises FileNotFoundError, or
    ClassifierCheckpointError naming the file for a detector checkpoint, a foreign or a damaged file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"classifier checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, zipfile.BadZipFile) as error:
        raise ClassifierCheckpointError(f"{path}: not a readable crop-classifier checkpoint ({error})") from error
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        detector = isinstance(payload, dict) and "model_yaml" in payload
        hint = " (it is a detector checkpoint)" if detector else ""
        raise ClassifierCheckpointError(f"{path}: not a crop-classifier checkpoint{hint}")
    if type(payload.get("format_version")) is not int or payload["format_version"] > FORMAT_VERSION:
        raise ClassifierCheckpointError(
            f"{path}: crop-classifier format {payload.get('format_version')!r} is newer than this tphyolo reads"
        )
    try:
        return ClassifierCheckpoint(
            model=dict(payload["model"]),
            arch=str(payload["arch"]),
            names=tuple(payload["names"]),
            class_ids=tuple(int(i) for i in payload["class_ids"]),
            dataset_names=tuple(payload["dataset_names"]),
            img=int(payload["img"]),
            context=float(payload["context"]),
            weight=float(payload["weight"]),
            epoch=int(payload.get("epoch", -1)),
            metrics=dict(payload.get("metrics", {})),
            train_args=dict(payload.get("train_args", {})),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise ClassifierCheckpointError(f"{path}: {error}") from error
