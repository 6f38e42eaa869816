"""A crop classifier ready to run: its network on a device, with the classes, crop size and context it
was trained for."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tphyolo.classify.checkpoint import DEFAULT_WEIGHT, load_classifier
from tphyolo.classify.crops import crop_objects
from tphyolo.errors import InputError
from tphyolo.runtime.config import RuntimeConfig, autocast

DEFAULT_BATCH = 64  # crops per forward pass


def resolve_class_ids(names: Sequence[str], detector_names: Sequence[str]) -> tuple[int, ...]:
    """The ids of the classifier's class `names` among `detector_names`; ValueError naming those not found."""
    missing = [n for n in names if n not in detector_names]
    if missing:
        raise InputError(
            f"classifier classes {missing} are not among the detector's classes {list(detector_names)}; "
            "train the classifier on the detector's dataset"
        )
    return tuple(list(detector_names).index(n) for n in names)


class CropClassifier:
    """Classifies object crops of original-resolution images.

    net: (B, 3, img, img) float RGB in [0, 1] -> (B, K) logits (`CropClassifierNet`, or any module with that
    contract); names: its K classes; class_ids: their ids in the detector's classes; img, context: crop size
    and context (see `crops.py`); weight: its default share w in `combine.py`. The net is placed on `device` by
    `runtime` (its autocast applies); `batch_size` crops run per forward.
    """

    def __init__(
        self,
        net: nn.Module,
        *,
        names: Sequence[str],
        class_ids: Sequence[int],
        img: int,
        context: float,
        weight: float = DEFAULT_WEIGHT,
        device: str | torch.device = "cpu",
        runtime: RuntimeConfig | None = None,
        batch_size: int = DEFAULT_BATCH,
    ) -> None:
        if len(names) != len(class_ids) or len(set(class_ids)) != len(class_ids):
            raise InputError(f"classes {list(names)} need one distinct id each, got {list(class_ids)}")
        self.runtime = runtime or RuntimeConfig(amp="off")
        self.device = torch.device(device)
        self.net = self.runtime.place_model(net, self.device).eval()
        self.names, self.class_ids = tuple(names), tuple(int(i) for i in class_ids)
        if not 0.0 <= weight <= 1.0:
            raise InputError(f"classifier weight must be in [0, 1], got {weight}")
        self.img, self.context, self.weight, self.batch_size = img, context, weight, batch_size

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        detector_names: Sequence[str] | None = None,
        device: str | torch.device = "cpu",
        runtime: RuntimeConfig | None = None,
        batch_size: int = DEFAULT_BATCH,
        weight: float | None = None,
    ) -> CropClassifier:
        """From a checkpoint. With `detector_names`, the classes are mapped to that detector's ids by name
        (ValueError naming the file when one is missing); otherwise the ids of the dataset it was trained on are
        kept. `weight` replaces the checkpoint's default share."""
        checkpoint = load_classifier(path)
        class_ids = checkpoint.class_ids
        if detector_names is not None:
            try:
                class_ids = resolve_class_ids(checkpoint.names, detector_names)
            except ValueError as error:
                raise InputError(f"{path}: {error}") from None
        return cls(
            checkpoint.build(),
            names=checkpoint.names,
            class_ids=class_ids,
            img=checkpoint.img,
            context=checkpoint.context,
            weight=checkpoint.weight if weight is None else weight,
            device=device,
            runtime=runtime,
            batch_size=batch_size,
        )

    @torch.inference_mode()
    def probabilities(self, crops: np.ndarray) -> torch.Tensor:
        """(N, img, img, 3) uint8 BGR crops -> (N, K) float32 softmax probabilities on CPU."""
        out = []
        for start in range(0, len(crops), self.batch_size):
            chunk = crops[start : start + self.batch_size][..., ::-1].transpose(0, 3, 1, 2)  # BGR -> RGB, NCHW
            x = self.runtime.prepare_images(torch.from_numpy(np.ascontiguousarray(chunk)), self.device)
            with autocast(self.runtime, self.device):
                logits = self.net(x)
            out.append(logits.float().softmax(1).cpu())
        return torch.cat(out) if out else torch.zeros((0, len(self.names)))

    def classify(self, image: np.ndarray, boxes: torch.Tensor | np.ndarray) -> torch.Tensor:
        """(N, K) probabilities for the (N, 4) xyxy `boxes` (original pixels) of the uint8 BGR `image`."""
        boxes = boxes.detach().cpu().numpy() if isinstance(boxes, torch.Tensor) else np.asarray(boxes)
        return self.probabilities(crop_objects(image, boxes, context=self.context, size=self.img))


def as_classifier(
    classifier: str | Path | CropClassifier,
    *,
    detector_names: Sequence[str],
    device: str | torch.device = "cpu",
    runtime: RuntimeConfig | None = None,
    weight: float | None = None,
) -> CropClassifier:
    """A classifier for a detector with classes `detector_names`: a checkpoint path is loaded for it (on
    `device` by `runtime`); a CropClassifier is checked to use that detector's class ids. `weight` replaces
    its default share. Raises ValueError (naming the file) when its classes are not the detector's."""
    if isinstance(classifier, (str, Path)):
        return CropClassifier.load(classifier, detector_names=detector_names, device=device, runtime=runtime,
                                   weight=weight)  # fmt: skip
    if tuple(resolve_class_ids(classifier.names, detector_names)) != classifier.class_ids:
        raise InputError(
            f"the classifier's classes {list(classifier.names)} have ids {list(classifier.class_ids)}, but "
            f"the detector's classes are {list(detector_names)}"
        )
    if weight is not None and weight != classifier.weight:
        if not 0.0 <= weight <= 1.0:
            raise InputError(f"classifier weight must be in [0, 1], got {weight}")
        classifier = copy.copy(classifier)
        classifier.weight = weight
    return classifier
