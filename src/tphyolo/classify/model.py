"""The crop classifier network: a torchvision classification architecture or the small `crop-cnn`
(`small_cnn.py`), chosen by name, behind a fixed input normalisation.

Nothing is downloaded: architectures are built with `weights=None` (random initialisation); starting weights
come only from a local file given to `load_start_weights`.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tphyolo.classify.config import DEFAULT_ARCH
from tphyolo.classify.small_cnn import SMALL_CNN, small_cnn
from tphyolo.errors import InputError

IMAGENET_MEAN = (0.485, 0.456, 0.406)  # RGB; the statistics torchvision's weights were trained with
IMAGENET_STD = (0.229, 0.224, 0.225)


def architectures() -> list[str]:
    """Names of the architectures `build_classifier` accepts: `crop-cnn` and torchvision's classification ones."""
    from torchvision import models

    return sorted([SMALL_CNN, *models.list_models(module=models)])


class CropClassifierNet(nn.Module):
    """(B, 3, S, S) float RGB in [0, 1] -> (B, K) class logits: ImageNet normalisation, then `backbone`."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone
        self.register_buffer("mean", torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(IMAGENET_STD).view(1, 3, 1, 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.backbone((x - self.mean.to(x.dtype)) / self.std.to(x.dtype))


def build_classifier(arch: str = DEFAULT_ARCH, *, num_classes: int) -> CropClassifierNet:
    """A randomly initialised `arch` (`crop-cnn` or a torchvision classification model name) with
    `num_classes` outputs."""
    from torchvision import models

    known = architectures()
    if arch not in known:
        raise InputError(f"unknown classifier architecture {arch!r}; known: {', '.join(known)}")
    if num_classes < 2:
        raise InputError(f"a classifier needs at least 2 classes, got {num_classes}")
    if arch == SMALL_CNN:
        return CropClassifierNet(small_cnn(num_classes))
    return CropClassifierNet(models.get_model(arch, weights=None, num_classes=num_classes))


def load_start_weights(net: CropClassifierNet, path: str | Path) -> list[str]:
    """Load starting weights from a local file into `net`; returns the parameter names left as initialised.

    The file is a torchvision state dict of the same architecture (e.g. ImageNet weights saved by hand) or a
    crop-classifier checkpoint of ours; read with `weights_only=True`. Tensors whose shape does not fit (the
    last layer when the class count differs) are skipped. Raises ValueError when nothing but such a layer fits.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"--weights {path}: no such file")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(payload, dict) and isinstance(payload.get("model"), dict):
        payload = payload["model"]  # our checkpoint, or a {"model": state_dict} wrapper
    if not isinstance(payload, dict) or not all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise InputError(f"--weights {path}: expected a state dict of tensors")
    state = {k.removeprefix("backbone."): v for k, v in payload.items()}
    own = net.backbone.state_dict()
    fitting = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    left = sorted(set(own) - set(fitting))
    if len(fitting) < len(own) // 2:
        raise InputError(
            f"--weights {path}: only {len(fitting)} of {len(own)} tensors fit {type(net.backbone).__name__} "
            f"(first missing: {left[:3]})"
        )
    net.backbone.load_state_dict(fitting, strict=False)
    return left
