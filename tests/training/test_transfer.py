"""Weight transfer from a checkpoint of another architecture: which tensors are copied, and which are not.

YOLOv5 v6.0 (train.py, `intersect_dicts(csd, model.state_dict(), exclude=['anchor'])`) copies a tensor when its
name is in the new model, its shape agrees and its name does not contain "anchor". Ours adds one rule when
both model yamls are known: past the source's backbone, layer i transfers only while every head row up to i
is identical in both yamls (the same index may be a different layer once the heads diverge).
"""

from __future__ import annotations

import copy

import torch

from tphyolo.models import build_model
from tphyolo.models.build import load_model_config
from tphyolo.training.model.transfer import transfer_weights, transferable_layers

CONV_KEYS = ("conv.weight", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked")
SOURCE = {
    "nc": 2,
    "depth_multiple": 1.0,
    "width_multiple": 0.25,
    "anchors": [[4, 6, 8, 14]],  # one level, two anchors
    "backbone": [
        [-1, 1, "Conv", [64, 3, 2]],  # 0: 16 channels
        [-1, 1, "Conv", [128, 3, 2]],  # 1: 32
        [-1, 1, "Conv", [128, 3, 2]],  # 2: 32, stride 8
    ],
    "head": [
        [-1, 1, "Conv", [128, 1, 1]],  # 3
        [-1, 1, "Conv", [128, 1, 1]],  # 4
        [[4], 1, "Detect", ["nc", "anchors"]],  # 5: m.0 is a 1x1 conv to 2 * (5 + nc) channels
    ],
}
TARGET = copy.deepcopy(SOURCE)
TARGET["nc"] = 3  # Detect's m.0: 16 output channels here, 14 in the source
TARGET["head"][1] = [2, 1, "Conv", [128, 1, 1]]  # 4: same shapes (layer 2 has 32 channels too), other input


def _models() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    source, target = build_model(SOURCE), build_model(TARGET)
    with torch.no_grad():
        for value in source.state_dict().values():  # make every source tensor recognisable
            value.fill_(7)
    return source, target


def _copied(source: torch.nn.Module, target: torch.nn.Module, before: dict[str, torch.Tensor]) -> set[str]:
    """Target entries that now hold the source's value (7) and did not before."""
    after = target.state_dict()
    return {k for k, v in after.items() if torch.all(v == 7) and not torch.all(before[k] == 7)}


def test_rows_decide_which_head_layers_transfer() -> None:
    # Backbone rows 0-2 always; head row 3 is identical, row 4 differs (input 2 instead of -1): stop there.
    assert transferable_layers(SOURCE, TARGET) == {0, 1, 2, 3}
    assert transferable_layers(SOURCE, SOURCE) == {0, 1, 2, 3, 4, 5}


def test_yolov5_backbone_maps_onto_tph_yolov5() -> None:
    yolov5, tph = load_model_config("yolov5n"), load_model_config("tph-yolov5n")
    # Backbone rows 0-9 by index; head rows 10-17 are the same in both yamls; row 18 is Conv [256, 3, 2] in
    # YOLOv5 (down to P4) and Conv [128, 1, 1] in TPH-YOLOv5 (towards the P2 level).
    assert transferable_layers(yolov5, tph) == set(range(18))


def test_transfer_with_yamls_copies_name_and_shape_matches_up_to_the_first_different_row() -> None:
    source, target = _models()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    done, total = transfer_weights(target, source.state_dict(), source_yaml=SOURCE, target_yaml=TARGET)
    # Target: five Conv layers of 6 entries each, plus Detect's anchors, m.0.weight and m.0.bias = 33 entries.
    # Copied: layers 0-3 (4 x 6 = 24). Layer 4 matches by name and shape but its row differs; Detect's
    # convolution differs in shape (16 vs 14 outputs); anchors never transfer.
    expected = {f"model.{i}.{k}" for i in range(4) for k in CONV_KEYS}
    assert (done, total) == (24, 33)
    assert _copied(source, target, before) == expected
    for k, v in target.state_dict().items():
        if k not in expected:
            assert torch.equal(v, before[k]), k


def test_transfer_without_yamls_is_yolov5s_intersect_dicts() -> None:
    source, target = _models()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    done, total = transfer_weights(target, source.state_dict())
    # By name and shape only: all five Conv layers (30 entries); not Detect's m.0 (shape), not the anchors
    # (name), although the anchors have the same shape (1, 2, 2) in both models.
    assert (done, total) == (30, 33)
    assert _copied(source, target, before) == {f"model.{i}.{k}" for i in range(5) for k in CONV_KEYS}
    assert torch.equal(target.state_dict()["model.5.anchors"], before["model.5.anchors"])


def test_transferred_tensors_take_the_target_dtype() -> None:
    source, target = _models()
    half = {k: v.half() if v.is_floating_point() else v for k, v in source.state_dict().items()}
    transfer_weights(target, half)
    weight = target.state_dict()["model.0.conv.weight"]
    assert weight.dtype == torch.float32 and torch.all(weight == 7)


def test_names_missing_from_the_target_are_ignored() -> None:
    _, target = _models()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    assert transfer_weights(target, {"model.99.conv.weight": torch.ones(1), "extra": torch.ones(1)}) == (0, 33)
    assert all(torch.equal(v, before[k]) for k, v in target.state_dict().items())
