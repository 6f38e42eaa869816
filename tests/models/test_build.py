"""build_model: built-in names, yaml files, yaml text and dicts; every built-in trains a step."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from tphyolo.models import build_model, builtin_model_names, load_model_config
from tphyolo.models.build import FAMILIES, SCALES


def smallest_of_each_family() -> list[str]:
    return [f"{family}{scales[0]}" for family, (_, scales) in FAMILIES.items()]


def test_builtin_names() -> None:
    names = builtin_model_names()
    assert "yolov5s" in names and "tph-yolov5l" in names and "tph-yolov5-swinm" in names
    assert "tph-yolov5ppn" in names and "tph-yolov5-swinn" not in names
    assert len(names) == 19


@pytest.mark.parametrize("name", smallest_of_each_family())
def test_builtin_forward_backward(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(name, num_classes=3).train()
    x = torch.rand(2, 3, 64, 96)
    out = model(x)
    assert len(out) == model.head.nl
    for level, (t, s) in enumerate(zip(out, model.stride.tolist(), strict=True)):
        assert t.shape == (2, model.head.na, 64 // s, 96 // s, 8), level
    loss = sum(t.float().square().mean() for t in out)
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    model.eval()
    with torch.no_grad():
        decoded = model(x)
    assert decoded.shape[-1] == 8 and torch.isfinite(decoded).all()


@pytest.mark.parametrize(
    ("name", "strides", "anchors_per_level"),
    [("yolov5n", [8, 16, 32], 3), ("tph-yolov5n", [4, 8, 16, 32], 4), ("tph-yolov5ppn", [8, 16, 32], 3)],
)
def test_builtin_levels(name: str, strides: list[int], anchors_per_level: int) -> None:
    model = build_model(name)
    assert model.stride.tolist() == strides
    assert model.head.na == anchors_per_level
    assert not model.anchors_need_fitting


def test_yolov5_parameter_counts_match_the_published_models() -> None:
    assert sum(p.numel() for p in build_model("yolov5n").parameters()) == 1_872_157
    assert sum(p.numel() for p in build_model("yolov5s").parameters()) == 7_235_389


def test_tph_yolov5_default_anchors_are_the_visdrone_ones() -> None:
    model = build_model("tph-yolov5s")
    pixels = (model.head.anchors * model.stride.view(-1, 1, 1)).view(4, 8)
    assert pixels[0].tolist() == [3, 5, 5, 9, 8, 6, 7, 14]
    assert pixels[3].tolist() == [80, 50, 60, 110, 120, 90, 200, 160]


def test_scales_set_the_multiples() -> None:
    for scale, (depth, width) in SCALES.items():
        cfg = load_model_config(f"tph-yolov5{scale}")
        assert (cfg["depth_multiple"], cfg["width_multiple"]) == (depth, width)
    assert load_model_config("yolov5n")["nc"] == 80


def test_path_text_and_dict_build_the_same_model(tmp_path: Path) -> None:
    cfg = load_model_config("tph-yolov5n")
    text = yaml.safe_dump(cfg)
    path = tmp_path / "custom.yaml"
    path.write_text(text)
    keys = {k: v.shape for k, v in build_model("tph-yolov5n").state_dict().items()}
    for source in (path, str(path), text, cfg):
        assert {k: v.shape for k, v in build_model(source).state_dict().items()} == keys


def test_num_classes_and_names() -> None:
    model = build_model("yolov5n", names=["car", "van"])
    assert model.nc == 2 and model.yaml["nc"] == 2 and model.names == ["car", "van"]
    assert model.head.m[0].out_channels == 3 * 7
    model = build_model("yolov5n", num_classes=5)
    assert model.names == ["0", "1", "2", "3", "4"]
    with pytest.raises(ValueError, match="2 class names for nc=5"):
        build_model("yolov5n", num_classes=5, names=["a", "b"])


def test_bad_inputs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown model 'yolov9q'"):
        build_model("yolov9q")
    with pytest.raises(FileNotFoundError, match="missing.yaml"):
        build_model(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nc: [1,\n")
    with pytest.raises(ValueError, match="bad.yaml: invalid yaml"):
        build_model(bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="bad.yaml: a model yaml must be a mapping"):
        build_model(bad)
