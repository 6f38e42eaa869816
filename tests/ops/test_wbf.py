import warnings

import numpy as np
import pytest
import torch

from tphyolo.ops import wbf, weighted_boxes_fusion
from tphyolo.ops.wbf import _steps
from tphyolo.ops.wbf_grid import grid_clusters

ensemble_boxes = pytest.importorskip("ensemble_boxes")


def drone_scene(rng, *, models=8, objects=300, classes=10, jitter=0.1, size=(0.005, 0.04), miss=0.1, coarse=False):
    """Boxes of several detectors around the same small objects: jittered copies, some objects missed."""
    centres = rng.random((objects, 2))
    wh = rng.uniform(*size, (objects, 2))
    cls = rng.integers(0, classes, objects)
    boxes, scores, labels = [], [], []
    for _ in range(models):
        seen = rng.random(objects) > miss
        c = centres[seen] + rng.normal(0, jitter, (seen.sum(), 2)) * wh[seen]
        w = wh[seen] * np.exp(rng.normal(0, jitter, (seen.sum(), 2)))
        b = np.concatenate([c - w / 2, c + w / 2], 1)
        s = rng.random(len(b))
        if coarse:  # many equal coordinates and equal scores: exercises tie order
            b, s = np.round(b, 2), np.round(s, 1)
        boxes.append(b.astype(np.float32))
        scores.append(s.astype(np.float32))
        labels.append(cls[seen])
    return boxes, scores, labels


def random_boxes(rng, *, models, n, classes=3):
    """Uniform boxes, partly outside [0, 1] and with reversed corners."""
    boxes = [rng.random((n, 4)) * 1.2 - 0.1 for _ in range(models)]
    return boxes, [rng.random(n) for _ in range(models)], [rng.integers(0, classes, n) for _ in range(models)]


def assert_same(args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = ensemble_boxes.weighted_boxes_fusion(*args, **kwargs)
    got = weighted_boxes_fusion(*args, **kwargs)
    for name, w, g in zip(("boxes", "scores", "labels"), want, got, strict=True):
        assert g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("conf_type", ["avg", "max", "box_and_model_avg", "absent_model_aware_avg"])
@pytest.mark.parametrize("allows_overflow", [False, True])
def test_matches_ensemble_boxes_on_many_scenes(conf_type, allows_overflow):
    rng = np.random.default_rng([len(conf_type), int(allows_overflow)])
    for i in range(24):
        models = int(rng.integers(1, 9))
        if i % 3 == 0:
            args = random_boxes(rng, models=models, n=int(rng.integers(0, 60)))
        else:
            args = drone_scene(
                rng,
                models=models,
                objects=int(rng.integers(1, 120)),
                classes=int(rng.integers(1, 5)),
                jitter=float(rng.uniform(0.05, 0.4)),
                size=(0.01, 0.3),
                coarse=i % 3 == 2,
            )
        weights = None if i % 4 == 0 else list(rng.choice([0.5, 1.0, 2.0, 3.0], models))
        assert_same(
            args,
            weights=weights,
            iou_thr=float(rng.choice([0.3, 0.55, 0.7])),
            skip_box_thr=float(rng.choice([0.0, 0.2])),
            conf_type=conf_type,
            allows_overflow=allows_overflow,
        )


def test_dense_scene_and_exact_duplicates():
    rng = np.random.default_rng(7)
    assert_same(drone_scene(rng))
    box = np.array([[0.1, 0.1, 0.3, 0.3], [0.1, 0.1, 0.3, 0.3], [0.5, 0.5, 0.6, 0.6]])
    same = ([box, box, box], [np.array([0.5, 0.5, 0.9])] * 3, [np.array([1, 1, 1])] * 3)
    for conf_type in ("avg", "max", "box_and_model_avg", "absent_model_aware_avg"):
        assert_same(same, conf_type=conf_type)
    # a grid of boxes that touch their neighbours, threshold 0: any overlap at all would merge clusters
    edges = np.linspace(0.1, 0.9, 9)
    grid = np.array([[x, y, x + 0.1, y + 0.1] for x in edges[:-1] for y in edges[:-1]])
    noisy = [np.clip(grid + rng.normal(0, 1e-9, grid.shape), 0, 1) for _ in range(3)]
    assert_same((noisy, [rng.random(len(grid)) for _ in range(3)], [np.zeros(len(grid))] * 3), iou_thr=0.0)


def test_hand_worked_fusion():
    """Two models, one object (IoU 0.39 > 0.3): fused box is the score-weighted mean, score the mean over 2 models."""
    boxes = [np.array([[0.0, 0.0, 0.4, 0.4]]), np.array([[0.1, 0.1, 0.5, 0.5]])]
    scores = [np.array([0.9]), np.array([0.3])]
    labels = [np.array([2]), np.array([2])]
    b, s, lab = weighted_boxes_fusion(boxes, scores, labels, iou_thr=0.3)  # their IoU is 0.39
    np.testing.assert_allclose(b, [[0.025, 0.025, 0.425, 0.425]], atol=1e-7)
    np.testing.assert_allclose(s, [0.6], atol=1e-7)
    assert lab.tolist() == [2.0]


def test_accepts_tensors_and_empty_input():
    rng = np.random.default_rng(3)
    boxes, scores, labels = drone_scene(rng, models=3, objects=40)
    want = weighted_boxes_fusion(boxes, scores, labels)
    got = weighted_boxes_fusion(
        [torch.from_numpy(b) for b in boxes],
        [torch.from_numpy(s) for s in scores],
        [torch.from_numpy(lab) for lab in labels],
    )
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(w, g)
    b, s, lab = weighted_boxes_fusion([np.zeros((0, 4))], [np.zeros(0)], [np.zeros(0)])
    assert b.shape == (0, 4) and s.shape == (0,) and lab.shape == (0,)


def test_torch_steps_equal_numpy_steps():
    """The step loop used on accelerators gives the numpy results bit for bit."""
    rng = np.random.default_rng(5)
    box_at = np.sort(rng.random((6, 9, 4)).reshape(6, 9, 2, 2), axis=2).transpose(0, 1, 3, 2).reshape(6, 9, 4)
    box_at = box_at[..., [0, 2, 1, 3]]
    score = rng.random((6, 9, 1))
    add_at = np.concatenate([box_at * score, score, np.ones_like(score)], axis=2)
    active = [6, 6, 5, 5, 3, 3, 2, 1, 1]
    want = _steps(np, box_at, add_at, active, 0.1)
    got = _steps(torch, torch.from_numpy(box_at), torch.from_numpy(add_at), active, 0.1)
    for w, g in zip(want, got, strict=True):
        np.testing.assert_array_equal(w, g.numpy())


def test_rejects_bad_arguments():
    b, s, lab = [np.array([[0.1, 0.1, 0.2, 0.2]])], [np.array([0.5])], [np.array([0])]
    with pytest.raises(ValueError, match="conf_type"):
        weighted_boxes_fusion(b, s, lab, conf_type="median")
    with pytest.raises(ValueError, match="weights"):
        weighted_boxes_fusion(b, s, lab, weights=[1, 2])
    with pytest.raises(ValueError, match="model 0"):
        weighted_boxes_fusion(b, [np.array([0.5, 0.6])], lab)


def dense_scene(rng, *, boxes, objects, classes=2, spread=0.15):
    """One list of many boxes around few small objects (the merge of a finely sliced image at a low
    threshold): groups far larger than LOCKSTEP_MAX, clustered box by box."""
    centres, wh = rng.random((objects, 2)), rng.uniform(0.01, 0.05, (objects, 2))
    pick = rng.integers(0, objects, boxes)
    c = centres[pick] + rng.normal(0, spread, (boxes, 2)) * wh[pick]
    w = wh[pick] * np.exp(rng.normal(0, 0.2, (boxes, 2)))
    return [np.concatenate([c - w / 2, c + w / 2], 1)], [rng.random(boxes)], [rng.integers(0, classes, boxes)]


@pytest.mark.parametrize("iou_thr", [0.0, 0.1, 0.55, 0.9])
def test_large_groups_match_ensemble_boxes(iou_thr):
    """Groups of hundreds of mutually overlapping boxes (compared with nearby clusters only) fuse as
    ensemble_boxes fuses them, at every threshold regime of the nearness bound (none, 1/t, 1 - t)."""
    rng = np.random.default_rng([7, int(iou_thr * 100)])
    for boxes, objects in ((1500, 20), (600, 3)):
        args = dense_scene(rng, boxes=boxes, objects=objects)
        assert_same(args, iou_thr=iou_thr)
        sizes = np.bincount(args[2][0])
    assert sizes.min() > wbf.LOCKSTEP_MAX  # the box-by-box path ran


def test_large_groups_with_zero_weights_and_big_boxes_match_ensemble_boxes():
    """A model of weight 0 (scores of zero: NaN clusters, which take every later box of their label) and
    boxes spanning most of the image among small ones."""
    rng = np.random.default_rng(11)
    small = dense_scene(rng, boxes=400, objects=10, classes=1)
    big = np.clip([0.05, 0.05, 0.9, 0.9] + rng.normal(0, 0.05, (60, 4)), 0, 1)
    args = ([small[0][0], big], [small[1][0], rng.random(60)], [small[2][0], np.zeros(60)])
    for weights in ([1.0, 1.0], [1.0, 0.0], [0.0, 2.0]):
        for conf_type in ("avg", "max"):
            assert_same(args, weights=weights, iou_thr=0.3, conf_type=conf_type)


def test_grid_clusters_equal_the_lockstep_bit_for_bit():
    rng = np.random.default_rng(13)
    (b,), (s,), _ = dense_scene(rng, boxes=300, objects=4, classes=1)
    order = np.argsort(-s, kind="stable")
    b, s = b[order].clip(0, 1), s[order]
    weights = rng.choice([0.5, 1.0], len(b))
    want = wbf._lockstep(b, s, weights, np.zeros(len(b), dtype=np.int64), 0.55, "cpu")
    got = grid_clusters(b, s, weights, 0.55)
    cluster_w, opened_w = want[0][want[1]], want[0]  # lockstep ids are slots: renumber by creation
    renumber = {int(c): k for k, c in enumerate(cluster_w)}
    np.testing.assert_array_equal([renumber[int(c)] for c in opened_w], got[0])
    np.testing.assert_array_equal(want[1], got[1])
    np.testing.assert_array_equal(want[2][cluster_w], got[2])
    np.testing.assert_array_equal(want[3][cluster_w], got[3])


@pytest.mark.parametrize(
    ("scores", "weights", "words"),
    [([np.nan], None, "model 0"), ([-0.5], None, ">= 0"), ([0.5], [-1.0], "weights"), ([0.5], [np.inf], "weights")],
)
def test_refuses_what_has_no_fused_box(scores, weights, words):
    with pytest.raises(ValueError, match=words):
        weighted_boxes_fusion([np.array([[0.1, 0.1, 0.2, 0.2]])], [np.array(scores)], [np.array([0])],
                              weights=weights, skip_box_thr=-1.0)  # fmt: skip
