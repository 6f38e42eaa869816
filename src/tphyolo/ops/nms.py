"""Non-maximum suppression: of a detector's eval output, batched over images and classes; and of detection rows
by either overlap measure (IoU or IoS), as merging slices needs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torchvision.ops import batched_nms

from tphyolo.errors import InputError
from tphyolo.ops.boxes import cxcywh_to_xyxy
from tphyolo.ops.nmm import by_score
from tphyolo.ops.overlap import class_groups, overlapping_pairs

MAX_NMS = 30000  # most candidates per image handed to NMS (highest scores first)


def _rank_within(groups: torch.Tensor) -> torch.Tensor:
    """For (n,) group ids in any order: the position of each element among those of its group, in order."""
    order = torch.sort(groups, stable=True).indices
    sorted_groups = groups[order]
    n = groups.numel()
    positions = torch.arange(n, device=groups.device)
    is_start = torch.ones(n, dtype=torch.bool, device=groups.device)
    is_start[1:] = sorted_groups[1:] != sorted_groups[:-1]
    start_pos = torch.cummax(torch.where(is_start, positions, 0), dim=0).values
    rank = torch.empty_like(positions)
    rank[order] = positions - start_pos
    return rank


def _keep_top(image: torch.Tensor, scores: torch.Tensor, limit: int) -> torch.Tensor:
    """Indices of the `limit` best scores of each image, in descending score order overall."""
    order = torch.sort(scores, descending=True, stable=True).indices
    rank = _rank_within(image[order])
    return order[rank < limit]


def non_max_suppression(
    prediction: torch.Tensor,
    *,
    conf_thres: float = 0.25,
    iou_thres: float = 0.45,
    classes: Sequence[int] | None = None,
    agnostic: bool = False,
    multi_label: bool = False,
    max_det: int = 500,
) -> list[torch.Tensor]:
    """Suppress overlapping detections of each image and class.

    `prediction` is the detector's eval output (B, N, 5 + nc): xywh boxes in input pixels, sigmoid objectness,
    sigmoid class scores. A candidate's confidence is objectness * class score; candidates with objectness or
    confidence <= `conf_thres` are dropped. With `multi_label` every class above the threshold gives a
    candidate, otherwise only the best class. `classes` keeps only those class ids; `agnostic` suppresses
    across classes. Returns one (n, 6) tensor per image: x1, y1, x2, y2 (input pixels), confidence, class,
    sorted by descending confidence, at most `max_det` rows.
    """
    if not 0.0 <= conf_thres <= 1.0:
        raise InputError(f"conf_thres must be in [0, 1], got {conf_thres}")
    if not 0.0 <= iou_thres <= 1.0:
        raise InputError(f"iou_thres must be in [0, 1], got {iou_thres}")
    if prediction.ndim != 3 or prediction.shape[2] < 6:
        raise ValueError(f"prediction must be (B, N, 5 + nc) with nc >= 1, got {tuple(prediction.shape)}")
    b, _, c = prediction.shape
    nc = c - 5
    multi_label = multi_label and nc > 1
    device = prediction.device

    image, anchor = (prediction[..., 4] > conf_thres).nonzero(as_tuple=True)  # candidates by objectness
    x = prediction[image, anchor].float()  # (n, 5 + nc)
    scores = x[:, 5:] * x[:, 4:5]  # (n, nc) obj * cls
    boxes = cxcywh_to_xyxy(x[:, :4])  # (n, 4)
    if multi_label:
        row, cls = (scores > conf_thres).nonzero(as_tuple=True)
        conf = scores[row, cls]
    else:
        conf, cls = scores.max(dim=1)
        row = (conf > conf_thres).nonzero(as_tuple=True)[0]
        conf, cls = conf[row], cls[row]
    boxes, image = boxes[row], image[row]
    if classes is not None:
        keep = torch.isin(cls, torch.as_tensor(list(classes), device=device, dtype=cls.dtype))
        boxes, conf, cls, image = boxes[keep], conf[keep], cls[keep], image[keep]

    top = _keep_top(image, conf, MAX_NMS)
    boxes, conf, cls, image = boxes[top], conf[top], cls[top], image[top]
    groups = image if agnostic else image * nc + cls
    kept = batched_nms(boxes, conf, groups, iou_thres)  # descending confidence
    kept = kept[_rank_within(image[kept]) < max_det]
    kept = kept[torch.sort(image[kept], stable=True).indices]  # group by image, keep score order
    out = torch.cat((boxes[kept], conf[kept, None], cls[kept, None].float()), dim=1)  # (n, 6)
    counts = torch.bincount(image[kept], minlength=b).tolist()
    return list(out.split(counts))


def suppress_overlaps(
    rows: np.ndarray, *, threshold: float, measure: str = "iou", agnostic: bool = False
) -> np.ndarray:
    """Non-maximum suppression of (n, 6) rows x1, y1, x2, y2, score, class by either overlap measure
    (`tphyolo.ops.overlap`: "iou", or "ios", intersection over the smaller box): visited by descending score, a
    box is kept unless it overlaps a kept box of its class (any class with `agnostic`) by at least `threshold`;
    equal scores are visited by ascending corners (`tphyolo.ops.nmm.by_score`, as SAHI).
    Returns the indices kept, by descending score."""
    rows = np.asarray(rows, dtype=np.float64).reshape(-1, 6)
    kept = []
    for group in class_groups(rows[:, 5], agnostic=agnostic):
        matches = overlapping_pairs(rows[group, :4], threshold, measure)
        suppressed = np.zeros(len(group), dtype=bool)
        for i in by_score(rows[group, 4], rows[group, :4]).tolist():
            if not suppressed[i]:
                kept.append(group[i])
                suppressed[matches[i]] = True
    kept = np.asarray(kept, dtype=np.int64)
    return kept[by_score(rows[kept, 4], rows[kept, :4])]
