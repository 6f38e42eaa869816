"""Autoanchor: recall of anchors on hand-made boxes, fitting on synthetic box-size distributions."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from tphyolo.training.model.autoanchor import (
    anchor_fitness,
    autoanchor,
    check_anchors,
    fit_anchors,
    kmeans,
    label_wh,
    match_anchor_order,
    ratio_metric,
)

# Anchors far too large for the small objects of drone imagery.
LARGE_ANCHORS = np.array(
    [[100, 100, 120, 90, 150, 200], [300, 300, 400, 350, 500, 400], [600, 600, 500, 640, 640, 500]]
)


def drone_like_wh(n: int = 3000, seed: int = 1) -> np.ndarray:
    """Log-normal box sizes around 12x16 px with a long tail, (n, 2) pixels."""
    rng = np.random.default_rng(seed)
    return np.exp(rng.normal([2.5, 2.8], [0.8, 0.7], size=(n, 2)))


def test_check_anchors_by_hand() -> None:
    wh = np.array([[10, 10], [40, 40], [100, 100], [2, 50]], dtype=float)
    anchors = np.array([[10, 10], [30, 30]], dtype=float)
    # 10x10 fits both (ratio 1/3 > 1/4); 40x40 only the 30 one (40/10 = 4 is not within 4);
    # 100x100 the 30 one (0.3); 2x50 none (2/10 = 0.2).
    bpr, above = check_anchors(wh, anchors, thr=4.0)
    assert bpr == pytest.approx(0.75)
    assert above == pytest.approx(1.0)


def test_log_space_fitness_equals_the_ratio_definition() -> None:
    wh = drone_like_wh(500)
    anchors = np.array([[8.0, 10.0], [20.0, 14.0], [40.0, 60.0]])
    best = ratio_metric(wh, anchors).max(1)
    expected = (best * (best > 1 / 3.0)).mean()
    assert anchor_fitness(np.log(wh), anchors, thr=3.0) == pytest.approx(expected, rel=1e-12)
    assert 0 < expected < 1


def test_label_wh_resizes_longer_side() -> None:
    boxes = [np.array([[0.5, 0.25]]), np.array([[0.1, 0.1], [1.0, 1.0]])]
    shapes = np.array([[1000, 500], [300, 600]])  # w, h
    wh = label_wh(boxes, shapes, imgsz=640)
    np.testing.assert_allclose(wh, [[320, 80], [32, 64], [320, 640]])
    jittered = label_wh(boxes, shapes, imgsz=640, scale_jitter=0.1, rng=np.random.default_rng(0))
    ratio = jittered / wh
    assert np.all((ratio > 0.9) & (ratio < 1.1))
    assert ratio[1, 0] == pytest.approx(ratio[2, 0])  # one factor per image


def test_kmeans_finds_separated_clusters() -> None:
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = np.concatenate([c + rng.normal(0, 0.3, size=(50, 2)) for c in centres])
    found = kmeans(points, 3, rng=np.random.default_rng(5))
    distance = np.linalg.norm(centres[:, None] - found[None], axis=2)  # (3, 3)
    assert np.all(distance.min(1) < 0.2) and len(set(distance.argmin(1))) == 3


def test_fitting_improves_recall() -> None:
    wh = drone_like_wh()
    before = check_anchors(wh, LARGE_ANCHORS.reshape(-1, 2), thr=4.0)
    fitted = fit_anchors(wh, num_levels=3, anchors_per_level=3, thr=4.0, generations=200, seed=0)
    after = check_anchors(wh, fitted, thr=4.0)
    assert fitted.shape == (3, 3, 2)
    assert before.bpr < 0.2 and after.bpr > 0.98
    area = fitted.reshape(-1, 2).prod(1)
    assert np.all(np.diff(area) >= 0), "anchors sorted by area across levels"


def test_evolution_does_not_lower_fitness() -> None:
    wh = drone_like_wh(800)
    start = fit_anchors(wh, num_levels=2, anchors_per_level=2, thr=3.0, generations=0, seed=3)
    evolved = fit_anchors(wh, num_levels=2, anchors_per_level=2, thr=3.0, generations=150, seed=3)
    assert check_anchors(wh, evolved, thr=3.0).bpr >= check_anchors(wh, start, thr=3.0).bpr


def test_fit_is_deterministic_by_seed() -> None:
    wh = drone_like_wh(1000)
    first = fit_anchors(wh, num_levels=2, anchors_per_level=3, thr=4.0, generations=50, seed=7)
    again = fit_anchors(wh, num_levels=2, anchors_per_level=3, thr=4.0, generations=50, seed=7)
    other = fit_anchors(wh, num_levels=2, anchors_per_level=3, thr=4.0, generations=50, seed=8)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_autoanchor_keeps_good_anchors_and_replaces_bad_ones() -> None:
    wh = drone_like_wh()
    good = fit_anchors(wh, num_levels=3, anchors_per_level=3, thr=4.0, generations=100, seed=0)
    kept = autoanchor(wh, good, num_levels=3, thr=4.0, generations=50)
    assert not kept.replaced and kept.bpr_before == kept.bpr_after
    np.testing.assert_array_equal(kept.anchors, good)
    replaced = autoanchor(wh, LARGE_ANCHORS.tolist(), num_levels=3, thr=4.0, generations=100)
    assert replaced.replaced and replaced.bpr_after > 0.98 > replaced.bpr_before
    assert replaced.anchors.shape == (3, 3, 2)


def test_autoanchor_with_only_an_anchor_count() -> None:
    count = yaml.safe_load("anchors: 4  # per level")["anchors"]
    result = autoanchor(drone_like_wh(), count, num_levels=4, thr=4.0, generations=100, seed=1)
    assert result.anchors.shape == (4, 4, 2)
    assert result.bpr_before is None and result.replaced and result.bpr_after > 0.98


def test_too_few_boxes_is_explained() -> None:
    with pytest.raises(ValueError, match="at least 9 boxes"):
        fit_anchors(np.full((5, 2), 10.0), num_levels=3, anchors_per_level=3, thr=4.0)


def test_match_anchor_order() -> None:
    ascending = np.array([[[10, 13]], [[30, 61]], [[116, 90]]], dtype=float)
    np.testing.assert_array_equal(match_anchor_order(ascending, [8, 16, 32]), ascending)
    np.testing.assert_array_equal(match_anchor_order(ascending[::-1], [8, 16, 32]), ascending)
