"""Model yaml sizes are bounded before any layer is built: a small yaml cannot make the build run for ever."""

import copy
import re

import pytest
import yaml
from tests.helpers import constructions
from torch import nn

from tphyolo.models import build_model
from tphyolo.models.build import load_model_config


def _changed(change) -> dict:
    cfg = copy.deepcopy(load_model_config("yolov5n"))
    change(cfg)
    return cfg


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["backbone"][2].__setitem__(1, 10_000_000), "layer 2 \\(C3\\): .* repeats, above the limit of 100"),
        (lambda c: c["backbone"][1][3].__setitem__(0, 10**7), "layer 1 \\(Conv\\): argument out of bounds"),
        (
            lambda c: c.update(width_multiple=4, backbone=[c["backbone"][0], [-1, 1, "Conv", [2048, 3, 2]]]),
            "layer 1 \\(Conv\\): 8192 channels, above the limit of 4096",
        ),  # fmt: skip
        (lambda c: c["backbone"][1][3].__setitem__(1, 100_000), "layer 1 \\(Conv\\): argument out of bounds"),
        (lambda c: c.__setitem__("backbone", c["backbone"] * 400), "layers, above the limit of 1000"),
        (lambda c: c.__setitem__("nc", 10**9), "nc=1000000000 is above the limit"),
        (lambda c: c.__setitem__("anchors", 10**9), "anchors must be a positive int"),
        (lambda c: c.__setitem__("depth_multiple", 1e308), "depth_multiple must be a number in"),
        (lambda c: c.__setitem__("width_multiple", float("nan")), "width_multiple must be a number in"),
    ],
)
def test_oversized_model_yaml_is_refused_before_building(change, message):
    with constructions(nn.Conv2d) as built, pytest.raises(ValueError, match=message):
        build_model(_changed(change))
    assert len(built) <= 2  # at most the convolutions of the rows before the refused one


def test_a_refused_model_yaml_is_named_by_where_it_came_from(tmp_path):
    cfg = _changed(lambda c: c["backbone"][2].__setitem__(1, 3300))
    path = tmp_path / "huge.yaml"
    path.write_text(yaml.safe_dump(cfg))
    limit = "layer 2 \\(C3\\): 1089 repeats, above the limit of 100"
    for given, origin in ((path, str(path)), (str(path), str(path)), (yaml.safe_dump(cfg), "model yaml text")):
        with pytest.raises(ValueError, match=f"^{re.escape(origin)}: {limit}$"):
            build_model(given)
    with pytest.raises(ValueError, match=f"^best.pt \\(embedded model yaml\\): {limit}$"):
        build_model(cfg, origin="best.pt (embedded model yaml)")
    with pytest.raises(ValueError, match=f"^{limit}$"):  # a mapping without an origin: the caller names it
        build_model(cfg)
