"""Transfer learning: copy pretrained tensors into a model whose architecture may differ.

A tensor is copied when its name and shape agree. Layer indices only mean the same thing while the two model
yamls agree, so in the head (after the source's backbone) a layer transfers only if its yaml row — from, number,
module, args — is identical in both models and every earlier head row is too. That maps the backbone of a plain
YOLOv5 checkpoint onto TPH-YOLOv5 models, whose head layers are numbered differently. Anchors never transfer:
they belong to the new model's data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

_LAYER = re.compile(r"^model\.(\d+)\.")


def transferable_layers(source_yaml: Mapping[str, Any], target_yaml: Mapping[str, Any]) -> set[int]:
    """Indices of the layers whose pretrained weights may be used by the target model."""
    source_rows = list(source_yaml.get("backbone", [])) + list(source_yaml.get("head", []))
    target_rows = list(target_yaml.get("backbone", [])) + list(target_yaml.get("head", []))
    n_backbone = len(source_yaml.get("backbone", []))
    layers = set(range(min(n_backbone, len(target_rows))))
    for i in range(n_backbone, min(len(source_rows), len(target_rows))):
        if source_rows[i] != target_rows[i]:
            break
        layers.add(i)
    return layers


def transfer_weights(
    model: nn.Module,
    source: Mapping[str, torch.Tensor],
    *,
    source_yaml: Mapping[str, Any] | None = None,
    target_yaml: Mapping[str, Any] | None = None,
) -> tuple[int, int]:
    """Load the matching tensors of `source` into `model`; returns (transferred, total in the model)."""
    target = model.state_dict()
    allowed = transferable_layers(source_yaml, target_yaml) if source_yaml and target_yaml else None
    chosen = {}
    for name, value in source.items():
        if name not in target or "anchors" in name or target[name].shape != value.shape:
            continue
        match = _LAYER.match(name)
        if allowed is not None and match and int(match.group(1)) not in allowed:
            continue
        chosen[name] = value.to(target[name].dtype)
    model.load_state_dict(chosen, strict=False)
    return len(chosen), len(target)
