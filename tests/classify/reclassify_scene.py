"""A painted scene, a detector that knows where its objects are, and crop classifiers with known answers, for the
tests of re-labelling detections in prediction and validation.

The scene (256 x 256) holds a blue car, a white pedestrian, a red tricycle and a green awning-tricycle. The
detector finds every object at its exact place in any input it is given (boxes at fixed fractions of the input),
and labels both tricycles "awning-tricycle": the confusion the crop classifier is there to fix.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import torch
from torch import nn

from tphyolo.classify.checkpoint import ClassifierCheckpoint, save_classifier
from tphyolo.classify.model import build_classifier

NAMES = ("car", "pedestrian", "tricycle", "awning-tricycle")
SIZE = 256
# class, x1, y1, x2, y2 (pixels), BGR colour
OBJECTS = (
    (0, 20, 20, 70, 60, (255, 0, 0)),
    (1, 150, 30, 210, 80, (255, 255, 255)),
    (2, 40, 150, 100, 210, (0, 0, 255)),
    (3, 160, 160, 220, 230, (0, 255, 0)),
)
DETECTED_AS = (0, 1, 3, 3)  # the detector's label of each object
OBJECTNESS = 0.9
CLASS_SCORE = 0.95


def scene() -> np.ndarray:
    """The uint8 BGR (SIZE, SIZE, 3) scene."""
    image = np.full((SIZE, SIZE, 3), 110, np.uint8)
    for _, x1, y1, x2, y2, colour in OBJECTS:
        cv2.rectangle(image, (x1, y1), (x2 - 1, y2 - 1), colour, thickness=-1)
    return image


def write_scene_data(root: Path, *, images: int = 2) -> Path:
    """A YOLO-format dataset of `images` copies of the scene (train and val alike); returns its data yaml."""
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    lines = [
        f"{c} {(x1 + x2) / 2 / SIZE:.6f} {(y1 + y2) / 2 / SIZE:.6f} {(x2 - x1) / SIZE:.6f} {(y2 - y1) / SIZE:.6f}\n"
        for c, x1, y1, x2, y2, _ in OBJECTS
    ]
    for i in range(images):
        cv2.imwrite(str(root / "images" / f"scene{i}.png"), scene())
        (root / "labels" / f"scene{i}.txt").write_text("".join(lines))
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {list(NAMES)}\n")
    return path


def by_box(detections) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(boxes, scores, labels) sorted by box coordinates, so that runs with re-sorted scores compare row by row."""
    keys = [tuple(b) for b in detections.boxes.tolist()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    return detections.boxes[order], detections.scores[order], detections.labels[order]


class SceneDetector(nn.Module):
    """(B, 3, H, W) RGB in [0, 1] -> (B, 4, 5 + nc) decoded output, a detector that knows the scene: each
    object found by its colour wherever it is in the input (letterboxed, rescaled, flipped or cut into
    windows), as the xywh box of its pixels, objectness OBJECTNESS (0 where it is not in the input) and
    CLASS_SCORE on its DETECTED_AS label."""

    def __init__(self) -> None:
        super().__init__()
        self.names = list(NAMES)
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))
        rgb = torch.tensor([colour[::-1] for *_, colour in OBJECTS], dtype=torch.float32) / 255
        self.register_buffer("colours", rgb)  # (4, 3)
        classes = torch.zeros((len(OBJECTS), len(NAMES)))
        classes[torch.arange(len(OBJECTS)), torch.tensor(DETECTED_AS)] = CLASS_SCORE
        self.register_buffer("classes", classes)

    @staticmethod
    def _span(hit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) bool -> first index and one past the last index of True, (B,) float each."""
        length = hit.shape[1]
        first = hit.float().argmax(1)
        last = length - hit.flip(1).float().argmax(1)
        return first.float(), last.float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        out = []
        for k in range(len(OBJECTS)):
            mask = (x.float() - self.colours[k].view(1, 3, 1, 1)).abs().amax(1) < 0.1  # (B, H, W)
            x1, x2 = self._span(mask.any(1))
            y1, y2 = self._span(mask.any(2))
            present = mask.flatten(1).any(1).float()  # (B,)
            xywh = torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], 1)
            cls = self.classes[k].expand(n, -1)
            out.append(torch.cat([xywh, OBJECTNESS * present[:, None], cls], 1))
        return torch.stack(out, 1).to(x.dtype)  # (B, 4, 5 + nc)


class ColourOracle(nn.Module):
    """A crop classifier that knows the answer: (B, 3, S, S) RGB -> logits (tricycle, awning-tricycle), the
    red crops (tricycles) to the first, the green ones to the second; counts the crops of each call."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(len(x))
        red_minus_green = x[:, 0].mean((1, 2)) - x[:, 1].mean((1, 2))  # (B,)
        return 40 * torch.stack([red_minus_green, -red_minus_green], 1)


class Forced(nn.Module):
    """A crop classifier that always answers class `k` of `classes`; counts the crops of each call."""

    def __init__(self, k: int, classes: int = 2) -> None:
        super().__init__()
        self.logits = torch.full((classes,), -20.0)
        self.logits[k] = 20.0
        self.batches: list[int] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.batches.append(len(x))
        return self.logits.to(x.dtype).expand(len(x), -1)


def save_forced_classifier(
    path: Path, *, k: int, names: tuple[str, ...] = NAMES[2:], dataset_names: tuple[str, ...] = NAMES
) -> Path:
    """A crop-classifier checkpoint (resnet18, 16 px crops) whose last layer answers names[k] for every crop."""
    net = build_classifier("resnet18", num_classes=len(names))
    with torch.no_grad():
        net.backbone.fc.weight.zero_()
        net.backbone.fc.bias.fill_(-20.0)
        net.backbone.fc.bias[k] = 20.0
    class_ids = tuple(dataset_names.index(n) for n in names)
    checkpoint = ClassifierCheckpoint(
        model=net.state_dict(), arch="resnet18", names=names, class_ids=class_ids, dataset_names=dataset_names,
        img=16, context=0.1, weight=0.7,
    )  # fmt: skip
    return save_classifier(path, checkpoint)
