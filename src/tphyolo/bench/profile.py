"""Per-module profiler labels for a DetectionModel, and the time per module type and per branch.

`ModuleLabels(model)` is a context manager that registers forward pre- and post-hooks (removed on exit) which
open and close a `torch.profiler.record_function` range around each top-level layer
(`layer07:C3TR`) and each head part (`head:level0/s4`, `head:CLLABlock`). The model itself is not changed.

`layer_strides(model, image_size)` finds each layer's output stride with one probe forward, so that
`summarize` can group the layers into branches:

- "TPH attention": the C3TR, C3STR and CBAM layers, and the head's CLLA block;
- "P2 branch": the layers after the backbone whose output has stride 4, plus the head's stride-4 output
  convolution (the extra prediction head of TPH-YOLOv5).

Times are forward times inside the ranges (backward kernels are not attributed to modules): the CPU time of
each range and, on CUDA, the device time of the kernels launched inside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch
from torch import nn
from torch.profiler import record_function

from tphyolo.models.clla import CLLABlock

TPH_TYPES = frozenset({"C3TR", "C3STR", "CBAM", "CLLABlock"})
_LAYER = re.compile(r"^layer(\d+):(\w+)$")


def layer_labels(model: nn.Module) -> dict[nn.Module, str]:
    """The range label of each top-level layer and head part of a DetectionModel."""
    labels: dict[nn.Module, str] = {}
    for i, layer in enumerate(model.model):
        labels[layer] = f"layer{i:02d}:{type(layer).__name__}"
    head = model.head
    for level, conv in enumerate(head.output_convs()):
        labels[conv] = f"head:level{level}/s{int(head.stride[level])}"
    for module in head.modules():
        if isinstance(module, CLLABlock):
            labels[module] = f"head:{type(module).__name__}"
    return labels


class ModuleLabels:
    """Context manager: `record_function` ranges around the modules of `layer_labels(model)`."""

    def __init__(self, model: nn.Module) -> None:
        self.labels = layer_labels(model)
        self._handles: list = []
        self._open: list[record_function] = []

    def __enter__(self) -> ModuleLabels:
        for module, label in self.labels.items():
            self._handles.append(module.register_forward_pre_hook(self._pre(label)))
            self._handles.append(module.register_forward_hook(self._post))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        while self._open:
            self._open.pop().__exit__(None, None, None)

    def _pre(self, label: str):
        def hook(module, args):
            scope = record_function(label)
            scope.__enter__()
            self._open.append(scope)

        return hook

    def _post(self, module, args, output):
        self._open.pop().__exit__(None, None, None)


@torch.no_grad()
def layer_strides(model: nn.Module, image_size: int, *, device: torch.device) -> dict[int, int]:
    """Output stride of each top-level layer (index -> stride) from one eval forward at `image_size`."""
    strides: dict[int, int] = {}
    handles = []
    for i, layer in enumerate(model.model[:-1]):

        def hook(module, args, output, i=i):
            strides[i] = image_size // output.shape[-1]

        handles.append(layer.register_forward_hook(hook))
    was_training = model.training
    try:
        model.eval()(torch.zeros(1, 3, image_size, image_size, device=device))
    finally:
        model.train(was_training)
        for handle in handles:
            handle.remove()
    return strides


@dataclass(frozen=True)
class LabelTime:
    label: str
    calls: int
    cpu_ms: float
    device_ms: float


def label_times(prof: torch.profiler.profile, labels: list[str], steps: int) -> dict[str, LabelTime]:
    """Per-step times of the ranges named `labels` in a finished profiler run."""
    wanted = set(labels)
    times: dict[str, LabelTime] = {}
    for event in prof.key_averages():
        if event.key in wanted:
            device_us = getattr(event, "device_time_total", 0.0) or 0.0
            times[event.key] = LabelTime(
                event.key, event.count // steps, event.cpu_time_total / 1e3 / steps, device_us / 1e3 / steps
            )
    return times


def summarize(times: dict[str, LabelTime], strides: dict[int, int]) -> list[tuple[str, float, float]]:
    """(group, cpu ms, device ms) per step: one row per module type, then the TPH and P2 branches."""
    by_type: dict[str, list[float]] = {}
    tph = [0.0, 0.0]
    p2 = [0.0, 0.0]
    backbone_end = min((i for i, s in strides.items() if s == max(strides.values())), default=-1)
    for label, t in times.items():
        match = _LAYER.match(label)
        kind = match.group(2) if match else label.split(":", 1)[1].split("/")[0]
        if match:
            entry = by_type.setdefault(kind, [0.0, 0.0])
            entry[0] += t.cpu_ms
            entry[1] += t.device_ms
        if kind in TPH_TYPES:
            tph[0] += t.cpu_ms
            tph[1] += t.device_ms
        in_p2 = match and int(match.group(1)) > backbone_end and strides.get(int(match.group(1))) == 4
        if in_p2 or label.endswith("/s4"):
            p2[0] += t.cpu_ms
            p2[1] += t.device_ms
    rows = [(f"type {kind}", cpu, dev) for kind, (cpu, dev) in sorted(by_type.items(), key=lambda kv: -kv[1][0])]
    head = [(label, t.cpu_ms, t.device_ms) for label, t in sorted(times.items()) if label.startswith("head:")]
    return rows + head + [("branch TPH attention", *tph), ("branch P2 (neck + head)", *p2)]
