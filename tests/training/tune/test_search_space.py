"""The search space: YOLOv5's evolve ranges, the space yaml, and the hyp a trial trains on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tphyolo.training.tune.space import (
    EVOLVE_RANGES,
    HypRange,
    SearchSpace,
    build_search_space,
    load_space_overrides,
)
from tphyolo.yaml_files import load_yaml_file

HYP_DIR = Path(__file__).resolve().parents[3] / "src" / "tphyolo" / "configs" / "hyps"
NOT_EVOLVED = {"iou_t", "fl_gamma", "perspective", "fliplr", "copy_paste"}  # gain 0


def builtin_hyp(name: str) -> dict[str, float]:
    return load_yaml_file(HYP_DIR / f"hyp.{name}.yaml")


@pytest.mark.parametrize("name", ["scratch-low", "scratch-high", "synthetic", "visdrone"])
def test_every_key_of_the_builtin_hyp_files_has_an_evolve_range(name):
    assert set(builtin_hyp(name)) <= set(EVOLVE_RANGES)


def test_evolve_ranges_are_yolov5s():
    assert EVOLVE_RANGES["lr0"] == HypRange(1e-5, 0.1, 1, log=True)
    assert EVOLVE_RANGES["momentum"] == HypRange(0.6, 0.98, 0.3)
    assert EVOLVE_RANGES["anchors"] == HypRange(2.0, 10.0, 2, integer=True)
    assert EVOLVE_RANGES["degrees"] == HypRange(0.0, 45.0, 1)
    assert {key for key, span in EVOLVE_RANGES.items() if span.gain == 0} == NOT_EVOLVED


def test_the_default_space_searches_the_hyp_files_keys_that_evolve():
    base = builtin_hyp("scratch-low")
    space = build_search_space(base)
    assert space.keys == tuple(key for key in base if key not in NOT_EVOLVED)
    assert space.baseline() == {key: base[key] for key in space.keys}
    assert space.hyp(space.baseline()) == base


def test_a_range_is_widened_to_the_hyp_files_value():
    base = {**builtin_hyp("scratch-low"), "lr0": 0.5, "box": 0.01}
    space = build_search_space(base)
    assert (space.ranges["lr0"].low, space.ranges["lr0"].high) == (1e-5, 0.5)
    assert (space.ranges["box"].low, space.ranges["box"].high) == (0.01, 0.2)


def test_a_trials_hyp_is_the_base_with_searched_values_clipped_and_rounded():
    base = {**builtin_hyp("scratch-low"), "anchors": 3}
    space = build_search_space(base)
    hyp = space.hyp({"lr0": 0.0123456789, "momentum": 1.5, "anchors": 4.6})
    assert hyp["lr0"] == 0.01235 and hyp["momentum"] == 0.98
    assert hyp["anchors"] == 5 and type(hyp["anchors"]) is int
    assert hyp["iou_t"] == base["iou_t"] and list(hyp) == list(base)
    with pytest.raises(KeyError, match="iou_t"):
        space.hyp({"iou_t": 0.3})


def test_overrides_from_a_space_yaml(tmp_path):
    path = tmp_path / "space.yaml"
    path.write_text("lr0: [0.0001, 0.02]\nmomentum: {low: 0.8, high: 0.95, gain: 0.5}\nscale: fixed\n")
    overrides = load_space_overrides(path)
    assert overrides == {"lr0": HypRange(0.0001, 0.02), "momentum": HypRange(0.8, 0.95, 0.5), "scale": None}
    space = build_search_space(builtin_hyp("scratch-low"), overrides=overrides)
    assert space.ranges["lr0"] == HypRange(0.0001, 0.02)  # the override replaces the log-scale default
    assert "scale" not in space.ranges and "mosaic" in space.ranges


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- lr0\n", "a search space is a mapping"),
        ("lr0: [0.1, 0.01]\n", "lr0: low 0.1 is above high 0.01"),
        ("lr0: {low: 0.1}\n", "lr0: a range mapping has low and high"),
        ("lr0: {low: 0.0, high: 0.1, log: true}\n", "lr0: a log-scale range needs low > 0"),
        ("lr0: [a, 0.1]\n", "lr0: low must be a finite number"),
        ("lr0: 0.01\n", "lr0: expected \\[low, high\\]"),
    ],
)
def test_a_bad_space_yaml_is_refused_in_one_line_naming_file_and_key(tmp_path, text, message):
    path = tmp_path / "space.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as error:
        load_space_overrides(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)


def test_an_override_of_a_key_the_hyp_file_lacks_is_refused():
    with pytest.raises(ValueError, match=r"names \['anchors'\], which the hyp file does not set"):
        build_search_space(builtin_hyp("scratch-low"), overrides={"anchors": HypRange(2, 5)})
    with pytest.raises(ValueError, match="not in the hyp file"):
        SearchSpace({"lr0": 0.01}, {"momentum": HypRange(0.6, 0.98)})


def test_random_points_cover_the_ranges_log_uniformly_where_asked():
    space = build_search_space(builtin_hyp("scratch-low"))
    rng = np.random.default_rng(0)
    points = [space.sample(rng) for _ in range(2000)]
    lr0 = np.array([p["lr0"] for p in points])
    momentum = np.array([p["momentum"] for p in points])
    assert all(space.clip(p) == p for p in points[:50])
    # log-uniform on [1e-5, 0.1]: half the draws lie below the geometric mean 1e-3 (uniform would put 1% there)
    assert abs((lr0 < 1e-3).mean() - 0.5) < 0.04
    assert abs(momentum.mean() - (0.6 + 0.98) / 2) < 0.01 and momentum.min() >= 0.6 and momentum.max() <= 0.98
