"""Non-maximum merging and NMS by IoU or IoS, checked on hand-made boxes against SAHI's definitions."""

import numpy as np
import pytest

from tphyolo.ops.nmm import greedy_members, nmm_members, non_maximum_merge
from tphyolo.ops.nms import suppress_overlaps
from tphyolo.ops.overlap import box_overlap, overlapping_pairs

# A chain along x, all 10 px high: IoU(A, B) = 40/160 = 0.25, IoU(B, C) = 60/140 = 0.43, IoU(A, C) = 0.
A, B, C = (0, 0, 10, 10, 0.9, 0), (6, 0, 16, 10, 0.8, 0), (10, 0, 20, 10, 0.7, 0)
CHAIN = np.array([A, B, C], dtype=np.float64)


def test_iou_and_ios_of_a_box_inside_another():
    big, small = [[0, 0, 20, 20]], [[0, 0, 5, 5]]
    assert box_overlap(big, small, "iou")[0, 0] == pytest.approx(25 / 400)
    assert box_overlap(big, small, "ios")[0, 0] == pytest.approx(1.0)
    assert box_overlap([[0, 0, 10, 10]], [[5, 0, 25, 10]], "ios")[0, 0] == pytest.approx(50 / 100)
    assert box_overlap([[0, 0, 0, 10]], [[0, 0, 10, 10]], "ios")[0, 0] == 0.0  # no area: no overlap
    with pytest.raises(ValueError, match="measure"):
        box_overlap(big, small, "giou")


def test_overlapping_pairs_are_symmetric_and_thresholded_inclusively():
    pairs = overlapping_pairs(CHAIN[:, :4], 0.25, "iou")
    assert [sorted(p.tolist()) for p in pairs] == [[1], [0, 2], [1]]  # A-B at exactly 0.25 matches
    assert [sorted(p.tolist()) for p in overlapping_pairs(CHAIN[:, :4], 0.3, "iou")] == [[], [2], [1]]


def test_greedy_nmm_merges_a_with_b_and_leaves_c():
    assert greedy_members(CHAIN[:, :4], CHAIN[:, 4], 0.2, "iou") == {0: [1], 2: []}
    merged = non_maximum_merge(CHAIN, threshold=0.2, measure="iou", greedy=True)
    np.testing.assert_allclose(merged, [[0, 0, 16, 10, 0.9, 0], [10, 0, 20, 10, 0.7, 0]])


def test_nmm_passes_c_through_b_to_a_and_merges_the_chain():
    assert nmm_members(CHAIN[:, :4], CHAIN[:, 4], 0.2, "iou") == {0: [1, 2]}
    merged = non_maximum_merge(CHAIN, threshold=0.2, measure="iou", greedy=False)
    np.testing.assert_allclose(merged, [[0, 0, 20, 10, 0.9, 0]])  # A+B = (0..16) still overlaps C by 60/200


def test_nmm_drops_a_member_the_grown_box_no_longer_matches():
    far_c = np.array([A, B, (12, 0, 22, 10, 0.7, 0)])  # IoU(B, C) = 0.25; IoU(A+B, C) = 40/220 = 0.18
    assert nmm_members(far_c[:, :4], far_c[:, 4], 0.2, "iou") == {0: [1, 2]}
    np.testing.assert_allclose(non_maximum_merge(far_c, threshold=0.2, greedy=False), [[0, 0, 16, 10, 0.9, 0]])


def test_merging_is_per_class_unless_agnostic_and_takes_the_better_class():
    rows = np.array([[0, 0, 10, 10, 0.6, 0], [1, 0, 11, 10, 0.8, 1]], dtype=np.float64)
    assert len(non_maximum_merge(rows, threshold=0.5)) == 2
    np.testing.assert_allclose(non_maximum_merge(rows, threshold=0.5, agnostic=True), [[0, 0, 11, 10, 0.8, 1]])


def test_nms_by_ios_suppresses_a_box_inside_a_better_one_where_iou_does_not():
    rows = np.array([[0, 0, 20, 20, 0.9, 0], [2, 2, 7, 7, 0.5, 0], [30, 30, 40, 40, 0.4, 0]], dtype=np.float64)
    assert suppress_overlaps(rows, threshold=0.5, measure="iou").tolist() == [0, 1, 2]
    assert suppress_overlaps(rows, threshold=0.5, measure="ios").tolist() == [0, 2]
    assert suppress_overlaps(CHAIN, threshold=0.2, measure="iou").tolist() == [0, 2]  # B goes, C stays
    mixed = rows.copy()
    mixed[1, 5] = 1  # another class: kept unless agnostic
    assert suppress_overlaps(mixed, threshold=0.5, measure="ios").tolist() == [0, 1, 2]
    assert suppress_overlaps(mixed, threshold=0.5, measure="ios", agnostic=True).tolist() == [0, 2]


def test_empty_input_gives_empty_output():
    assert non_maximum_merge(np.zeros((0, 6))).shape == (0, 6)
    assert suppress_overlaps(np.zeros((0, 6)), threshold=0.5).tolist() == []


def test_an_overlap_exactly_at_the_threshold_matches_and_merges():
    at = non_maximum_merge(CHAIN[:2], threshold=0.25, measure="iou")  # IoU(A, B) = 40/160 = 0.25 exactly
    np.testing.assert_allclose(at, [[0, 0, 16, 10, 0.9, 0]])
    np.testing.assert_allclose(non_maximum_merge(CHAIN[:2], threshold=0.26), CHAIN[:2])


def test_equal_scores_are_visited_by_ascending_corners_whatever_the_listing_order():
    left, right = (0, 0, 10, 10, 0.5, 0), (2, 0, 12, 10, 0.5, 0)  # IoU 80/120: one suppresses the other
    for rows in (np.array([left, right]), np.array([right, left])):
        kept = rows[suppress_overlaps(rows, threshold=0.5)]
        np.testing.assert_allclose(kept, [left])
        np.testing.assert_allclose(non_maximum_merge(rows, threshold=0.5), [[0, 0, 12, 10, 0.5, 0]])
