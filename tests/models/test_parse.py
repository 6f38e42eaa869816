"""The model-yaml parser: scaling rules, symbol and name resolution, and errors that name the layer."""

from __future__ import annotations

import copy

import pytest
from torch import nn

from tphyolo.models.attention import C3TR
from tphyolo.models.blocks import C3, Concat, Conv
from tphyolo.models.heads import Detect
from tphyolo.models.parse import make_divisible, parse_model

TINY = {
    "nc": 3,
    "depth_multiple": 0.33,
    "width_multiple": 0.25,
    "anchors": [[10, 13, 16, 30], [30, 61, 62, 45]],
    "backbone": [
        [-1, 1, "Conv", [64, 3, 2]],  # 0: 16 channels, stride 2
        [-1, 3, "C3", [128]],  # 1: 32 channels, one bottleneck
        [-1, 1, "Conv", [256, 3, 2]],  # 2: 64 channels, stride 4
        [-1, 3, "C3TR", [256]],  # 3
    ],
    "head": [
        [-1, 1, "nn.Upsample", ["None", 2, "nearest"]],  # 4
        [[-1, 1], 1, "Concat", [1]],  # 5: 64 + 32
        [-1, 2, "Conv", [128, 1, 1]],  # 6: two stacked Convs (number 2 -> round(0.66) = 1)
        [-1, 1, "Conv", [21, 1, 1]],  # 7: equals na * (nc + 5) -> not scaled
        [[6, 3], 1, "Detect", ["nc", "anchors"]],  # 8
    ],
}


def tiny(**changes) -> dict:
    cfg = copy.deepcopy(TINY)
    cfg.update(changes)
    return cfg


def test_channels_depth_and_sources() -> None:
    parsed = parse_model(tiny())
    layers = parsed.layers
    assert parsed.channels == [16, 32, 64, 64, 64, 96, 32, 8, 2 * 8]
    assert isinstance(layers[1], C3) and len(layers[1].m) == 1
    assert isinstance(layers[3], C3TR) and len(layers[3].m.tr) == 1
    assert isinstance(layers[4], nn.Upsample) and layers[4].scale_factor == 2 and layers[4].mode == "nearest"
    assert isinstance(layers[5], Concat)
    assert isinstance(layers[6], Conv)  # depth 2 * 0.33 rounds to 1: no Sequential
    assert layers[7].conv.out_channels == 8  # 21 * 0.25 rounded up to a multiple of 8
    head = layers[8]
    assert isinstance(head, Detect) and head.nl == 2 and head.na == 2 and head.no == 8
    assert [conv.in_channels for conv in head.m] == [32, 64]
    assert parsed.sources == [-1, 0, 1, 2, 3, (4, 1), 5, 6, (6, 3)]
    assert parsed.save == frozenset({1, 3, 6})
    assert not parsed.anchors_need_fitting


def test_output_channel_count_is_not_scaled() -> None:
    cfg = tiny()
    cfg["head"][3] = [-1, 1, "Conv", [16, 1, 1]]  # 16 == na * (nc + 5): the output count stays
    assert parse_model(cfg).channels[7] == 16
    cfg["head"][3] = [-1, 1, "Conv", [17, 1, 1]]
    assert parse_model(cfg).channels[7] == 8


def test_repeated_plain_layer_is_sequential() -> None:
    cfg = tiny(depth_multiple=1.0)
    parsed = parse_model(cfg)
    assert isinstance(parsed.layers[6], nn.Sequential) and len(parsed.layers[6]) == 2
    assert len(parsed.layers[1].m) == 3


def test_anchor_count_gives_placeholders() -> None:
    parsed = parse_model(tiny(anchors=3))
    head = parsed.layers[-1]
    assert parsed.anchors_need_fitting
    assert (head.nl, head.na) == (2, 3)


def test_make_divisible() -> None:
    assert [make_divisible(x) for x in (1, 8, 8.5, 16, 17.0)] == [8, 8, 16, 16, 24]


def test_upsample_spellings() -> None:
    for spelling in ("Upsample", "nn.Upsample", "torch.nn.Upsample"):
        cfg = tiny()
        cfg["head"][0][2] = spelling
        assert isinstance(parse_model(cfg).layers[4], nn.Upsample)


def test_unknown_module_names_the_layer_and_known_names() -> None:
    cfg = tiny()
    cfg["backbone"][2][2] = "Conv3D"
    with pytest.raises(ValueError, match=r"layer 2: unknown module 'Conv3D'; known: .*'C3TR'.*'Detect'"):
        parse_model(cfg)


@pytest.mark.parametrize("bad", ["ncc", "__import__('os').system('true')", "2 * nc"])
def test_unknown_symbol_names_the_layer(bad: str) -> None:
    cfg = tiny()
    cfg["head"][0][3] = [bad, 2, "nearest"]
    with pytest.raises(ValueError, match=r"layer 4 \(nn.Upsample\): unknown argument .*known symbols"):
        parse_model(cfg)


def test_bad_from_names_the_layer() -> None:
    cfg = tiny()
    cfg["head"][1][0] = [-1, 7]
    with pytest.raises(ValueError, match=r"layer 5: from=\[-1, 7\] refers to layer 7"):
        parse_model(cfg)


def test_builder_error_names_the_layer() -> None:
    cfg = tiny()
    cfg["backbone"][0][3] = [64, 3, 2, None, 1, True, 7]  # one argument too many for Conv
    with pytest.raises(ValueError, match=r"layer 0 \(Conv, args"):
        parse_model(cfg)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"anchors": "four"}, "anchors must be"),
        ({"anchors": [[1, 2, 3]]}, "anchors must be"),
        ({"nc": 0}, "nc must be"),
        ({"backbone": [[-1, 1, "Conv"]]}, "layer 0: a row must be"),
    ],
)
def test_invalid_yaml_values(changes: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_model(tiny(**changes))


def test_missing_keys() -> None:
    cfg = tiny()
    del cfg["anchors"]
    with pytest.raises(ValueError, match=r"lacks \['anchors'\]"):
        parse_model(cfg)
