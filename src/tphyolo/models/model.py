"""DetectionModel: the layers of a model yaml run in order, ending in an anchor-based detection head."""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.blocks import Conv
from tphyolo.models.heads import DetectionHead
from tphyolo.models.parse import Source, parse_model

STRIDE_PROBE_SIZE = 256  # square probe image for measuring strides (a multiple of every stride up to 256)


class DetectionModel(nn.Module):
    """A YOLOv5-format model.

    Input: images (B, C, H, W), values in [0, 1], H and W multiples of the largest stride.
    Train mode: list of nl raw head tensors (B, na, H_l, W_l, 5 + nc).
    Eval mode: (B, N, 5 + nc) float32: (cx, cy, w, h) in input pixels, objectness and class scores after
    sigmoid; levels in stride order (YOLOv5 returns `(this, raw)` in eval; this returns only the tensor).

    The state dict uses YOLOv5's keys (`model.{i}.…`); `yaml` (the parsed config, nc and channels filled in)
    and `names` (class names) are plain data for checkpoints. `anchors_need_fitting` is True when the yaml
    gave only an anchor count and the head holds placeholder anchors; loading a state dict that holds the
    head's anchors (`load_state_dict`, strict or not) clears it.
    """

    def __init__(
        self,
        cfg: Mapping[str, Any],
        *,
        num_classes: int | None = None,
        in_channels: int | None = None,
        names: Sequence[str] | None = None,
    ) -> None:
        super().__init__()
        self.yaml: dict[str, Any] = copy.deepcopy(dict(cfg))
        if num_classes is not None:
            self.yaml["nc"] = num_classes
        self.yaml["ch"] = in_channels if in_channels is not None else self.yaml.get("ch", 3)
        parsed = parse_model(copy.deepcopy(self.yaml), in_channels=self.yaml["ch"])
        self.model = nn.ModuleList(parsed.layers)
        self.sources: tuple[Source, ...] = tuple(parsed.sources)
        self.save = parsed.save
        self.anchors_need_fitting = parsed.anchors_need_fitting
        head = self.model[-1]
        if not isinstance(head, DetectionHead):
            raise InputError(f"the last layer of a model yaml must be a detection head, got {type(head).__name__}")
        nc = self.yaml["nc"]
        self.names = list(names) if names is not None else [str(i) for i in range(nc)]
        if len(self.names) != nc:
            raise InputError(f"{len(self.names)} class names for nc={nc}")

        head.set_stride_(self._measure_strides())
        if self.anchors_need_fitting:
            head.set_anchors_(placeholder_anchors(head.nl, head.na))
        else:
            pixels = anchors_in_stride_order(head.anchors, head.stride)
            head.set_anchors_(pixels / head.stride.view(-1, 1, 1))
        head.initialize_biases()

    @property
    def head(self) -> DetectionHead:
        return self.model[-1]

    @property
    def stride(self) -> torch.Tensor:
        """(nl,) input pixels per grid cell of each output level."""
        return self.head.stride

    @property
    def nc(self) -> int:
        return self.head.nc

    def forward(self, x: torch.Tensor) -> list[torch.Tensor] | torch.Tensor:
        return self.head(self.features(x))

    def features(self, x: torch.Tensor) -> list[torch.Tensor]:
        """Runs every layer but the head; returns the head's input maps in its `from` order."""
        outputs: list[torch.Tensor | None] = []
        for i, layer in enumerate(itertools.islice(self.model, len(self.model) - 1)):  # no ModuleList slice
            x = layer(self._gather(i, x, outputs))
            outputs.append(x if i in self.save else None)
        head_inputs = self._gather(len(self.model) - 1, x, outputs)
        return head_inputs if isinstance(head_inputs, list) else [head_inputs]

    def _gather(self, i: int, x: torch.Tensor, outputs: list[torch.Tensor | None]) -> torch.Tensor | list[torch.Tensor]:
        source = self.sources[i]
        if isinstance(source, tuple):
            return [x if j == i - 1 else outputs[j] for j in source]
        return x if source == i - 1 else outputs[source]

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, *args: Any, **kwargs: Any) -> None:
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        anchors = state_dict.get(f"{prefix}model.{len(self.model) - 1}.anchors")
        if isinstance(anchors, torch.Tensor) and anchors.shape == self.head.anchors.shape:
            self.anchors_need_fitting = False  # the head is about to receive fitted anchors

    @torch.no_grad()
    def _measure_strides(self) -> torch.Tensor:
        """Strides from the head's output sizes for a square probe image, in eval mode (no state changes)."""
        was_training = self.training
        self.eval()
        try:
            probe = torch.zeros(1, self.yaml["ch"], STRIDE_PROBE_SIZE, STRIDE_PROBE_SIZE)
            levels = self.head.predict_levels(self.features(probe))
        finally:
            self.train(was_training)
        return torch.tensor([STRIDE_PROBE_SIZE / p.shape[-2] for p in levels])

    def fuse(self) -> DetectionModel:
        """A new model, in eval mode, with every Conv's BatchNorm folded into its convolution."""
        fused = copy.deepcopy(self).eval()
        for parent in list(fused.modules()):
            for name, child in parent.named_children():
                if isinstance(child, Conv) and isinstance(child.bn, nn.BatchNorm2d):
                    setattr(parent, name, child.fused())
        return fused


def placeholder_anchors(nl: int, na: int) -> torch.Tensor:
    """(nl, na, 2) anchors in grid units until they are fitted to data: sizes from 1.25 to 5 cells,
    aspect ratios cycling through 1, 1/2 and 2, the same on every level."""
    anchors = torch.empty(nl, na, 2)
    for j in range(na):
        size = 1.25 * 4 ** (j / max(na - 1, 1))
        ratio = (1.0, 0.5, 2.0)[j % 3]  # w / h
        anchors[:, j] = torch.tensor([size * math.sqrt(ratio), size / math.sqrt(ratio)])
    return anchors


def anchors_in_stride_order(anchors: torch.Tensor, stride: torch.Tensor) -> torch.Tensor:
    """Anchors (nl, na, 2), with the levels reversed when their area order disagrees with the stride order.

    Compares the first anchor of the first level with the last anchor of the last level, in pixels
    (YOLOv5 makes the same comparison after dividing by the strides).
    """
    area = anchors.prod(-1).view(-1)  # (nl * na,)
    if torch.sign(area[-1] - area[0]) != torch.sign(stride[-1] - stride[0]):
        return anchors.flip(0)
    return anchors
