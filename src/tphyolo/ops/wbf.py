"""Weighted boxes fusion (WBF) of several detectors' boxes for one image, vectorised.

Same call, conventions and results as `ensemble_boxes.weighted_boxes_fusion`: boxes are normalised xyxy in
[0, 1]; within each label, boxes are visited by descending weighted score and each joins the existing cluster
whose fused box overlaps it most (IoU > `iou_thr`, first such cluster on ties) or starts a new one; a cluster's
fused box is the score-weighted mean of its members, held in float32 once it has two members.

The visit order inside a label is sequential by definition. It is made cheap, and bounded in the clusters
each box is compared with, by two facts: a fused box lies inside the bounding hull of its members, so sets of
boxes whose hulls are apart (split recursively along x and y) never interact; small sets (up to LOCKSTEP_MAX
boxes) are stepped through side by side, one visit of every set per step, on numpy arrays for CPU (least
overhead per call) or torch tensors for other devices; a large set (one dense scene: a finely sliced image) is
visited box by box, each compared only with the clusters near it (`tphyolo.ops.wbf_grid`). The work grows with
the boxes times the clusters near each box, never with the square of a label's boxes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tphyolo.errors import InputError
from tphyolo.ops.wbf_grid import grid_clusters

CONF_TYPES = ("avg", "max", "box_and_model_avg", "absent_model_aware_avg")

# A fused box of k members may stray past its members' hull by k float32 roundings (each under 2**-24 of a
# coordinate <= 1); groups are kept apart only by gaps wider than that bound for the largest possible k.
_ROUNDING_PER_MEMBER = 2.0**-23
# Groups up to this many boxes step side by side (_cluster): the WBF study's inputs, CPU time, median of 5, for
# 32/64/128/256: 2400 boxes 23/18/18/24 ms, 10^4 boxes 86/87/91/98 ms.
LOCKSTEP_MAX = 64
_FAR_BOX = (2.0, 2.0, 3.0, 3.0)  # stands for "no cluster yet": IoU 0 with any box inside [0, 1]


def _as_numpy(x, dtype) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x, dtype=dtype)


def _prefilter(boxes_list, scores_list, labels_list, weights: np.ndarray, skip_box_thr: float):
    """Concatenate every model's boxes; swap reversed corners, clip to [0, 1], drop low scores and empty boxes.

    Returns boxes (n, 4) float64, weighted scores (n,), labels (n,) int64, model index (n,), in model order.
    """
    boxes, scores, labels, counts = [], [], [], []
    for t, (b, s, lab) in enumerate(zip(boxes_list, scores_list, labels_list, strict=True)):
        boxes.append(_as_numpy(b, np.float64).reshape(-1, 4))
        scores.append(_as_numpy(s, np.float64).reshape(-1))
        labels.append(_as_numpy(lab, np.float64).reshape(-1))
        counts.append(len(boxes[-1]))
        if not counts[-1] == len(scores[-1]) == len(labels[-1]):
            raise InputError(f"model {t}: {counts[-1]} boxes, {len(scores[-1])} scores, {len(labels[-1])} labels")
    b, s, lab = np.concatenate(boxes), np.concatenate(scores), np.concatenate(labels)
    models = np.repeat(np.arange(len(counts)), counts)
    b = np.clip(np.concatenate([np.minimum(b[:, :2], b[:, 2:]), np.maximum(b[:, :2], b[:, 2:])], axis=1), 0.0, 1.0)
    keep = ~(s < skip_box_thr) & ((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]) != 0.0)
    models = models[keep]
    return b[keep], s[keep] * weights[models], np.trunc(lab[keep]).astype(np.int64), models


def _visit_order(scores: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the boxes label by label (labels in order of first appearance), each label by descending
    score with the tie order of numpy's default argsort; and each visited box's label rank."""
    uniq, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank_of_label = np.empty_like(first)
    rank_of_label[np.argsort(first)] = np.arange(len(first))
    rank = rank_of_label[inverse.reshape(-1)]
    order = np.lexsort((-scores, rank))
    if not ((rank[order][1:] == rank[order][:-1]) & (scores[order][1:] == scores[order][:-1])).any():
        return order, rank[order]  # no equal scores within a label: every sort agrees
    order = []
    for r in range(len(first)):  # equal scores: keep numpy's argsort tie order, label by label
        idx = np.flatnonzero(rank == r)
        order.append(idx[np.argsort(scores[idx])[::-1]])
    order = np.concatenate(order)
    return order, rank[order]


def _split_apart(group: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """Refine (n,) group ids until no two groups' hulls overlap along x or y cuts; returns new dense ids."""
    n = len(group)
    gap = _ROUNDING_PER_MEMBER * (n + 2)
    count = int(group.max()) + 1
    while True:
        before = count
        for axis in (0, 1):
            offset = 2.0 * group  # keeps groups apart on the line; coordinates lie in [0, 1]
            lo, hi = boxes[:, axis] + offset, boxes[:, axis + 2] + offset
            order = np.argsort(lo)
            reach = np.maximum.accumulate(hi[order])
            starts = np.ones(n, dtype=bool)
            starts[1:] = lo[order][1:] >= reach[:-1] + gap
            group = np.empty_like(group)
            group[order] = np.cumsum(starts) - 1
        count = int(group.max()) + 1
        if count == before:
            return group


def _cluster(boxes: np.ndarray, scores: np.ndarray, weights: np.ndarray, label_rank: np.ndarray, iou_thr, device):
    """Sequential clustering of the boxes (in visit order) of each label (`label_rank` (n,)). Returns each
    box's cluster id (n,), whether the box opened its cluster (n,), and per cluster id: sums (K, 6) of score *
    box, score and weight (box sums rounded to float32 after each addition) and fused boxes (K, 4).

    A label whose scores are all positive is split into independent groups (`_split_apart`). Groups of at most
    LOCKSTEP_MAX boxes are stepped through side by side (`_lockstep`), in buckets of groups of similar size so
    that none waits on a much larger one; larger groups, and labels with zero scores, go one box at a time,
    each box compared only with the clusters near it (`tphyolo.ops.wbf_grid`). No box is compared with every
    cluster of its label: the work grows with the boxes times LOCKSTEP_MAX, or times the clusters near a box.
    """
    n = len(boxes)
    group = label_rank.copy()
    positive = scores > 0
    split = ~np.isin(label_rank, label_rank[~positive])  # labels of positive scores only
    if split.any():  # fused boxes stay inside their members' hull only for positive scores
        group[split] = int(label_rank.max()) + 1 + _split_apart(label_rank[split], boxes[split])
    group = np.unique(group, return_inverse=True)[1].reshape(-1)
    sizes = np.bincount(group)
    all_positive = np.ones(len(sizes), dtype=bool)
    all_positive[group[~positive]] = False
    bucket = np.ceil(np.log2(sizes)).astype(np.int64)  # groups of sizes in (2^(b-1), 2^b] step together
    bucket[(sizes > LOCKSTEP_MAX) | ~all_positive] = -1  # one box at a time
    cluster, opened = np.empty(n, dtype=np.int64), np.empty(n, dtype=bool)
    sums, fused, count = [], [], 0
    parts = [
        (members, _lockstep(boxes[members], scores[members], weights[members], local, iou_thr, device))
        for b in np.unique(bucket[bucket >= 0])
        for members in [np.flatnonzero(bucket[group] == b)]
        for local in [np.unique(group[members], return_inverse=True)[1].reshape(-1)]
    ]
    by_group = np.argsort(group, kind="stable")  # each group's boxes in visit order
    ends = np.cumsum(sizes)
    for g in np.flatnonzero(bucket < 0):
        members = by_group[ends[g] - sizes[g] : ends[g]]
        parts.append((members, grid_clusters(boxes[members], scores[members], weights[members], iou_thr)))
    for members, (part_cluster, part_opened, part_sums, part_fused) in parts:
        cluster[members], opened[members] = part_cluster + count, part_opened
        sums.append(part_sums)
        fused.append(part_fused)
        count += len(part_sums)
    return cluster, opened, np.concatenate(sums), np.concatenate(fused)


def _lockstep(boxes: np.ndarray, scores: np.ndarray, weights: np.ndarray, group: np.ndarray, iou_thr, device):
    """Sequential clustering, all groups in lock-step. Inputs are in visit order; `group` (n,) dense ids.

    Returns each box's cluster id (n,), whether the box opened its cluster (n,), and per cluster id: sums
    (K, 6) of score * box, score and weight (box sums rounded to float32 after each addition) and fused boxes
    (K, 4).
    """
    n = len(boxes)
    sizes = np.bincount(group)
    by_size = np.argsort(-sizes, kind="stable")
    slot_of_group = np.empty_like(by_size)
    slot_of_group[by_size] = np.arange(len(by_size))
    g = slot_of_group[group]  # (n,) slot of each box's group, largest group first
    order = np.argsort(g, kind="stable")  # by slot, then by visit order
    first_of_slot = np.searchsorted(g[order], np.arange(len(sizes)))
    r = np.empty_like(g)
    r[order] = np.arange(n) - first_of_slot[g[order]]  # (n,) step at which each box is visited

    n_groups, steps = len(sizes), int(sizes.max())
    active = np.cumsum(np.bincount(sizes, minlength=steps + 1)[::-1])[::-1][1:].tolist()  # groups > step
    box_at = np.zeros((n_groups, steps, 4))
    box_at[g, r] = boxes
    add_at = np.zeros((n_groups, steps, 6))
    add_at[g, r] = np.concatenate((boxes * scores[:, None], scores[:, None], weights[:, None]), axis=1)
    if torch.device(device).type == "cpu":  # numpy: far less overhead per call on small arrays
        with np.errstate(invalid="ignore", divide="ignore"):  # zero scores give NaN boxes, as in the original
            cluster_at, sums, fused = _steps(np, box_at, add_at, active, iou_thr)
    else:
        box_at, add_at = torch.from_numpy(box_at).to(device), torch.from_numpy(add_at).to(device)
        cluster_at, sums, fused = (x.cpu().numpy() for x in _steps(torch, box_at, add_at, active, iou_thr))
    code = cluster_at[g, r]
    opened = code < 0
    cluster = g * steps + np.where(opened, -1 - code, code)
    return cluster, opened, sums.reshape(-1, 6), fused.reshape(-1, 4)


def _to_float32(xp, x):
    """Round float64 values to float32 precision, keeping float64 storage."""
    return x.astype(np.float32).astype(np.float64) if xp is np else x.float().double()


def _steps(xp, box_at, add_at, active: list[int], iou_thr: float):
    """Visit step r of every group at once. `xp` is numpy or torch (the arrays' library).

    box_at (G, S, 4) and add_at (G, S, 6) hold each group's boxes in visit order, groups by descending size;
    `active[r]` groups have a box at step r. Returns cluster index k (G, S) of each box within its group
    (stored as -1 - k by the box that opens the cluster),
    running sums (G, S, 6) and fused boxes (G, S, 4) per cluster slot.
    """
    n_groups, steps = box_at.shape[:2]
    if xp is np:
        zeros, far, all_rows = np.zeros_like, np.asarray(_FAR_BOX), np.arange(n_groups)
    else:  # new tensors on the inputs' device
        zeros, far = torch.zeros_like, box_at.new_tensor(_FAR_BOX)
        all_rows = torch.arange(n_groups, device=box_at.device)
    area_at = (box_at[..., 2] - box_at[..., 0]) * (box_at[..., 3] - box_at[..., 1])
    sums = zeros(add_at)
    fused = zeros(box_at) + far
    fused_area = zeros(area_at) + 1.0
    n_clusters = zeros(area_at[:, 0], dtype=xp.int64)
    cluster_at = zeros(area_at, dtype=xp.int64)
    for step in range(steps):
        m = active[step]
        rows = all_rows[:m]
        box = box_at[:m, step]  # (m, 4)
        if step == 0:
            target = rows * 0  # a new array, not a view of n_clusters
            matched = target > 0
        else:
            f = fused[:m, :step]  # (m, k, 4)
            lt = xp.maximum(f[..., :2], box[:, None, :2])
            rb = xp.minimum(f[..., 2:], box[:, None, 2:])
            wh = (rb - lt).clip(min=0)
            inter = wh[..., 0] * wh[..., 1]  # (m, k)
            iou = inter / (fused_area[:m, :step] + area_at[:m, step, None] - inter)
            best = iou.argmax(1)  # first cluster among equals
            matched = ~(iou[rows, best] <= iou_thr)  # a NaN overlap (zero-score cluster) also matches
            target = xp.where(matched, best, n_clusters[:m])
        total = sums[rows, target] + add_at[:m, step]  # (m, 6)
        total[:, :4] = _to_float32(xp, total[:, :4])
        sums[rows, target] = total
        mean = _to_float32(xp, total[:, :4] / total[:, 4:5])
        new_box = xp.where(matched[:, None], mean, box)
        fused[rows, target] = new_box
        fused_area[rows, target] = (new_box[:, 2] - new_box[:, 0]) * (new_box[:, 3] - new_box[:, 1])
        n_clusters[:m] += ~matched
        cluster_at[:m, step] = xp.where(matched, target, -1 - target)  # negative: opened the cluster
    return cluster_at, sums, fused


def _model_weight_sums(present: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """(k, T) bool -> (k,) `weights[mask].sum()` for each row, computed exactly as numpy does."""
    patterns, inverse = np.unique(present, axis=0, return_inverse=True)
    per_pattern = np.array([weights[p].sum() for p in patterns], dtype=np.float64)
    return per_pattern[inverse.reshape(-1)]


def weighted_boxes_fusion(
    boxes_list: Sequence,
    scores_list: Sequence,
    labels_list: Sequence,
    weights: Sequence[float] | None = None,
    iou_thr: float = 0.55,
    skip_box_thr: float = 0.0,
    conf_type: str = "avg",
    allows_overflow: bool = False,
    *,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fuse the boxes of T models for one image.

    boxes_list: T arrays/tensors (n_t, 4) of normalised xyxy in [0, 1] (out-of-range values are clipped,
    reversed corners swapped, empty boxes dropped); scores_list: T (n_t,) scores; labels_list: T (n_t,) labels;
    weights: T model weights >= 0 (default 1 each); boxes scoring below `skip_box_thr` are dropped, those kept
    must score >= 0 (ValueError otherwise, and for NaN coordinates or scores).
    `conf_type`: "avg", "max", "box_and_model_avg" or "absent_model_aware_avg" (fused score rule);
    `allows_overflow`: with "avg", let a cluster with more boxes than models score above 1.
    `device`: where the side-by-side clustering steps run (`_cluster`); CPU (the default) has the least
    overhead per step.
    Returns numpy float64 arrays: boxes (N, 4) normalised xyxy, scores (N,), labels (N,), by descending score.
    """
    if conf_type not in CONF_TYPES:
        raise InputError(f"unknown conf_type {conf_type!r}; expected one of {CONF_TYPES}")
    if iou_thr < 0:
        raise InputError(f"iou_thr must be >= 0, got {iou_thr}")
    n_models = len(boxes_list)
    if not n_models == len(scores_list) == len(labels_list):
        raise InputError(
            f"{n_models} box lists, {len(scores_list)} score lists, {len(labels_list)} label lists; must be equal"
        )
    weights = np.ones(n_models) if weights is None else _as_numpy(weights, np.float64).reshape(-1)
    if len(weights) != n_models:
        raise InputError(f"{len(weights)} weights for {n_models} models")
    if not (np.isfinite(weights) & (weights >= 0)).all():
        raise InputError(f"model weights must be finite and >= 0, got {weights.tolist()}")

    boxes, scores, labels, models = _prefilter(boxes_list, scores_list, labels_list, weights, skip_box_thr)
    bad = ~(np.isfinite(scores) & (scores >= 0)) | np.isnan(boxes).any(axis=1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"model {models[i]}: a box {boxes[i].tolist()} scoring {scores[i]}; boxes must be numbers "
                         "and kept scores finite and >= 0")  # fmt: skip
    if len(boxes) == 0:
        return np.zeros((0, 4)), np.zeros((0,)), np.zeros((0,))
    visit, label_rank = _visit_order(scores, labels)
    boxes, scores, labels, models = boxes[visit], scores[visit], labels[visit], models[visit]

    cluster, opened, sums, fused = _cluster(boxes, scores, weights[models], label_rank, float(iou_thr), device)

    # Clusters in creation order: by label, then by the visit of their first box.
    first = np.flatnonzero(opened)  # boxes are in visit order
    ids = cluster[first]
    position = np.empty(len(sums), dtype=np.int64)
    position[ids] = np.arange(len(ids))
    member_of = position[cluster]  # (n,) each box's cluster, in creation order
    count = np.bincount(member_of, minlength=len(ids))
    single = count == 1
    conf_sum, weight_sum = sums[ids, 4], sums[ids, 5]
    if conf_type == "max":
        best = np.full(len(ids), -np.inf)
        np.maximum.at(best, member_of, scores)
        score = np.where(single, conf_sum, best.astype(np.float32).astype(np.float64))
    else:
        score = np.where(single, conf_sum, (conf_sum / count).astype(np.float32).astype(np.float64))
    weight = np.where(single, weight_sum, weight_sum.astype(np.float32).astype(np.float64))
    if conf_type == "box_and_model_avg" or conf_type == "absent_model_aware_avg":
        present = np.zeros((len(ids), n_models), dtype=bool)
        present[member_of, models] = True
        if conf_type == "box_and_model_avg":
            score = score * count / weight
            score = score * _model_weight_sums(present, weights) / weights.sum()
        else:
            score = score * count / (weight + _model_weight_sums(~present, weights))
    elif conf_type == "max":
        score = score / weights.max()
    elif allows_overflow:
        score = score * count / weights.sum()
    else:
        score = score * np.minimum(n_models, count) / weights.sum()

    out_boxes = fused[ids]
    out_labels = labels[first].astype(np.float64)
    order = score.argsort()[::-1]
    return out_boxes[order], score[order], out_labels[order]
