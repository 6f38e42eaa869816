"""A request's cost, known before it runs: model passes and boxes merged, against the service's limits."""

from __future__ import annotations

import numpy as np
import pytest

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig, slice_windows
from tphyolo.serve.config import ServeConfig
from tphyolo.serve.cost import check_cost, window_count
from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem

LIMITS = {"max_views": ServeConfig().max_views, "max_candidates": ServeConfig().max_candidates}


def test_window_count_is_the_number_of_slicing_windows():
    rng = np.random.default_rng(3)
    for _ in range(200):
        h, w = (int(v) for v in rng.integers(1, 900, 2))
        cfg = SliceConfig(int(rng.integers(32, 400)), float(rng.uniform(0, 0.9)), full=bool(rng.integers(2)))
        assert window_count(h, w, cfg, imgsz=640) == len(slice_windows(h, w, cfg)), (h, w, cfg)
    assert window_count(100, 100, None, imgsz=640) == 1
    assert window_count(1000, 1000, SliceConfig("auto"), imgsz=320) == len(slice_windows(1000, 1000, SliceConfig(320)))


def test_a_finely_sliced_small_image_is_refused_naming_slice_and_overlap():
    """320x180 in 64 px windows at overlap 0.9: 44 x 21 = 924 windows, each pass up to 500 boxes."""
    settings = Settings(InferenceConfig(conf=0.001), SliceConfig(64, 0.9))
    with pytest.raises(RequestProblem) as caught:
        check_cost([(180, 320)], settings, models=1, given=["slice", "overlap", "conf"], **LIMITS)
    assert caught.value.status == 422
    assert caught.value.message.startswith("slice, overlap: 1 image(s) in windows of 64 px x 1 pass(es) is 924 ")
    assert "--max-views" in caught.value.message


def test_passes_times_max_det_over_the_limit_is_refused_naming_max_det():
    settings = Settings(InferenceConfig(max_det=2_000_000))
    with pytest.raises(RequestProblem, match=r"^max_det: 1 pass\(es\) x max_det 2,000,000 .*--max-candidates"):
        check_cost([(100, 100)], settings, models=1, given=["max_det"], **LIMITS)
    tta = Settings(InferenceConfig(augment=True, max_det=40_000))  # 8 passes x 40,000
    with pytest.raises(RequestProblem, match=r"^max_det, augment: 8 pass\(es\) x max_det 40,000 is 320,000 "):
        check_cost([(100, 100)], tta, models=1, given=["max_det", "augment"], **LIMITS)


def test_what_fits_returns_its_model_passes():
    settings = Settings(InferenceConfig(augment=True), SliceConfig(640, 0.2, full=True))
    assert check_cost([(2160, 3840)], settings, models=1, **LIMITS) == 33 * 8  # 8 TTA passes
    assert check_cost([(2160, 3840)], Settings(InferenceConfig()), models=2, **LIMITS) == 2
