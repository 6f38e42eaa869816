"""Anchor fit to a dataset: best possible recall of the anchors, and anchors fitted by k-means plus evolution.

Units: box sizes `wh` and anchors are (w, h) in pixels at the training size. The match metric is the one the
loss assigns targets with: a box fits an anchor when both side ratios are within `thr` (hyp `anchor_t`).
Everything is seeded through an explicit `numpy.random.Generator`; no global random state is touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tphyolo.errors import InputError

BPR_TARGET = 0.98  # refit anchors whose best possible recall is below this
MIN_FIT_SIZE = 2.0  # boxes smaller than this (pixels, both sides) do not shape the fitted anchors


def label_wh(
    boxes_wh: Sequence[np.ndarray],
    image_shapes: np.ndarray,
    *,
    imgsz: int,
    scale_jitter: float = 0.0,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Box sizes in pixels at the training size, where each image's longer side is resized to `imgsz`.

    boxes_wh: per image, (k, 2) box w, h normalised to that image (0..1).
    image_shapes: (num_images, 2) original image w, h in pixels.
    scale_jitter: each image's scale is multiplied by a uniform factor in [1 - s, 1 + s] (drawn from `rng`),
        as the scale augmentation does; 0 = none.
    Returns (n, 2) float64.
    """
    shapes = np.asarray(image_shapes, dtype=np.float64).reshape(-1, 2)
    if len(shapes) != len(boxes_wh):
        raise ValueError(f"{len(boxes_wh)} label arrays for {len(shapes)} image shapes")
    sizes = imgsz * shapes / shapes.max(1, keepdims=True)  # (num_images, 2) resized image w, h
    if scale_jitter:
        if rng is None:
            raise ValueError("scale_jitter needs an rng (numpy.random.Generator)")
        sizes = sizes * rng.uniform(1 - scale_jitter, 1 + scale_jitter, size=(len(sizes), 1))
    parts = [np.asarray(wh, dtype=np.float64).reshape(-1, 2) * size for wh, size in zip(boxes_wh, sizes, strict=True)]
    return np.concatenate(parts) if parts else np.zeros((0, 2))


def ratio_metric(wh: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """(n, k) fit of box to anchor: the smaller of min(w/aw, aw/w) and min(h/ah, ah/h), in (0, 1]."""
    r = wh[:, None] / anchors[None]  # (n, k, 2)
    return np.minimum(r, 1 / r).min(2)


class AnchorCheck(NamedTuple):
    """bpr: fraction of boxes that fit at least one anchor; anchors_above_thr: mean anchors each box fits."""

    bpr: float
    anchors_above_thr: float


def check_anchors(wh: np.ndarray, anchors: np.ndarray, *, thr: float) -> AnchorCheck:
    """How well `anchors` (any shape (..., 2), pixels) cover the boxes `wh` (n, 2, pixels) at ratio `thr`."""
    wh = np.asarray(wh, dtype=np.float64).reshape(-1, 2)
    if not len(wh):
        raise InputError("no boxes to check the anchors against")
    x = ratio_metric(wh, np.asarray(anchors, dtype=np.float64).reshape(-1, 2))
    return AnchorCheck(
        bpr=float((x.max(1) > 1 / thr).mean()),
        anchors_above_thr=float((x > 1 / thr).sum(1).mean()),
    )


def squared_distances(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """(n, k) squared Euclidean distances of (n, d) points to (k, d) centres (one column at a time: fast)."""
    d2 = np.zeros((len(points), len(centres)), dtype=points.dtype)
    for j in range(points.shape[1]):
        d2 += (points[:, j : j + 1] - centres[:, j]) ** 2
    return d2


def kmeans(points: np.ndarray, k: int, *, rng: np.random.Generator, iters: int = 30, restarts: int = 3) -> np.ndarray:
    """k-means (k-means++ seeding, Lloyd iterations) of (n, d) points.

    Returns the (k, d) centres of the restart with the lowest mean distance. An empty cluster is reseeded at
    the point farthest from its centre.
    """
    n = len(points)
    if n < k:
        raise InputError(f"k-means needs at least {k} points, got {n}")
    best, best_cost = None, np.inf
    for _ in range(restarts):
        centres = points[[rng.integers(n)]]
        while len(centres) < k:
            d2 = squared_distances(points, centres).min(1)
            p = d2 / d2.sum() if d2.sum() > 0 else np.full(n, 1 / n)
            centres = np.concatenate([centres, points[[rng.choice(n, p=p)]]])
        for _ in range(iters):
            d2 = squared_distances(points, centres)  # (n, k)
            label = d2.argmin(1)
            nearest = d2[np.arange(n), label]
            counts = np.bincount(label, minlength=k)
            sums = np.stack([np.bincount(label, weights=points[:, j], minlength=k) for j in range(points.shape[1])], 1)
            new = sums / np.maximum(counts, 1)[:, None]
            for j in np.flatnonzero(counts == 0):
                far = nearest.argmax()
                new[j], nearest[far] = points[far], 0.0
            converged = np.allclose(new, centres)
            centres = new
            if converged:
                break
        cost = np.sqrt(squared_distances(points, centres).min(1)).mean()
        if cost < best_cost:
            best, best_cost = centres, cost
    return best


def anchor_fitness(log_wh: np.ndarray, anchors: np.ndarray, *, thr: float) -> float:
    """Mean over boxes of the best-anchor fit, fits below 1/thr counting 0 (what the evolution maximises).

    Takes log box sizes (n, 2): the fit min over sides of min(r, 1/r) is exp(-max |log wh - log anchor|),
    which is cheaper to evaluate over many generations.
    """
    log_anchors = np.log(anchors).astype(log_wh.dtype)  # (k, 2)
    dw = np.abs(log_wh[:, :1] - log_anchors[:, 0])  # (n, k)
    dh = np.abs(log_wh[:, 1:] - log_anchors[:, 1])
    distance = np.maximum(dw, dh).min(1)  # (n,)
    return float(np.where(distance < np.log(thr), np.exp(-distance), 0.0).mean())


def fit_anchors(
    wh: np.ndarray,
    *,
    num_levels: int,
    anchors_per_level: int,
    thr: float,
    generations: int = 1000,
    max_boxes: int = 20_000,
    rng: np.random.Generator | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Anchors fitted to box sizes `wh` (n, 2, pixels): k-means on the whitened sizes, then a genetic
    evolution of the anchor fitness (random multiplicative mutations, kept when they improve it).

    Boxes under MIN_FIT_SIZE pixels on both sides are ignored; of more than `max_boxes` boxes a random subset
    of that many is used (the fitness is a mean, well estimated by a large sample). `rng` (or a Generator
    seeded with `seed`) drives every random choice, so equal inputs and seed give equal anchors.
    Returns (num_levels, anchors_per_level, 2) pixels, sorted by area from the first level to the last.
    """
    rng = np.random.default_rng(seed) if rng is None else rng
    wh = np.asarray(wh, dtype=np.float64).reshape(-1, 2)
    wh = wh[(wh >= MIN_FIT_SIZE).any(1)]
    if len(wh) > max_boxes:
        wh = wh[rng.choice(len(wh), size=max_boxes, replace=False)]
    n = num_levels * anchors_per_level
    if len(wh) < n:
        raise InputError(f"fitting {n} anchors needs at least {n} boxes of >= {MIN_FIT_SIZE} px, got {len(wh)}")
    sigma = wh.std(0)
    sigma[sigma == 0] = 1.0
    anchors = kmeans(wh / sigma, n, rng=rng) * sigma  # (n, 2)

    log_wh = np.log(wh).astype(np.float32)
    fitness = anchor_fitness(log_wh, anchors, thr=thr)
    mutation_prob, mutation_sigma = 0.9, 0.1
    for _ in range(generations):
        factor = np.ones_like(anchors)
        while (factor == 1).all():  # mutate until something changes
            mask = rng.random(anchors.shape) < mutation_prob
            factor = (mask * rng.random() * rng.standard_normal(anchors.shape) * mutation_sigma + 1).clip(0.3, 3.0)
        candidate = (anchors * factor).clip(min=MIN_FIT_SIZE)
        candidate_fitness = anchor_fitness(log_wh, candidate, thr=thr)
        if candidate_fitness > fitness:
            anchors, fitness = candidate, candidate_fitness
    anchors = anchors[np.argsort(anchors.prod(1), kind="stable")]
    return anchors.reshape(num_levels, anchors_per_level, 2)


@dataclass(frozen=True)
class AutoAnchorResult:
    """anchors: (nl, na, 2) pixels to train with; replaced: whether they differ from the given ones."""

    anchors: np.ndarray
    bpr_before: float | None
    bpr_after: float
    replaced: bool


def autoanchor(
    wh: np.ndarray,
    anchors: np.ndarray | Sequence | int,
    *,
    num_levels: int,
    thr: float,
    generations: int = 1000,
    seed: int = 0,
) -> AutoAnchorResult:
    """Keep `anchors` when their best possible recall on `wh` (n, 2, pixels) reaches BPR_TARGET, else fit new
    ones and keep whichever recall is higher.

    anchors: (nl, na, 2) pixels, or the model yaml's form (nl lists of flat w, h pairs), or an int: only the
    number of anchors per level, which are then always fitted (bpr_before is None).
    """
    if isinstance(anchors, (int, np.integer)):
        fitted = fit_anchors(
            wh,
            num_levels=num_levels,
            anchors_per_level=int(anchors),
            thr=thr,
            generations=generations,
            seed=seed,
        )
        return AutoAnchorResult(fitted, None, check_anchors(wh, fitted, thr=thr).bpr, replaced=True)
    current = np.asarray(anchors, dtype=np.float64).reshape(num_levels, -1, 2)
    before = check_anchors(wh, current, thr=thr).bpr
    if before >= BPR_TARGET:
        return AutoAnchorResult(current, before, before, replaced=False)
    fitted = fit_anchors(
        wh,
        num_levels=num_levels,
        anchors_per_level=current.shape[1],
        thr=thr,
        generations=generations,
        seed=seed,
    )
    after = check_anchors(wh, fitted, thr=thr).bpr
    if after > before:
        return AutoAnchorResult(fitted, before, after, replaced=True)
    return AutoAnchorResult(current, before, before, replaced=False)


def match_anchor_order(anchors: np.ndarray, strides: Sequence[float]) -> np.ndarray:
    """Anchors (nl, na, 2), levels reversed if their areas grow against the strides; else unchanged."""
    anchors = np.asarray(anchors)
    area = anchors.prod(-1).reshape(-1)
    if np.sign(area[-1] - area[0]) != np.sign(strides[-1] - strides[0]):
        return anchors[::-1].copy()
    return anchors
