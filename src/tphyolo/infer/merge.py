"""Merging several detection lists of one image (TTA passes, ensemble members, slices) into one list.

    rows = merge_detections([rows_a, rows_b], method="greedy-nmm", width=w, height=h, iou=0.5, max_det=500,
                            match="ios")

"wbf": weighted boxes fusion (`tphyolo.ops.wbf`), per class, by IoU. "nms": suppression by IoU or IoS
(`tphyolo.ops.nms.suppress_overlaps`: a box is dropped at an overlap of at least the threshold, as SAHI). "nmm"
and "greedy-nmm": non-maximum merging as SAHI defines it (`tphyolo.ops.nmm`). Every method but WBF works within
a class unless `agnostic`; equal scores are visited by ascending box corners, as SAHI visits them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tphyolo.errors import InputError
from tphyolo.infer.config import MATCH_MEASURES, MERGE_METHODS
from tphyolo.ops import clip_boxes
from tphyolo.ops.nmm import non_maximum_merge
from tphyolo.ops.nms import suppress_overlaps
from tphyolo.ops.wbf import weighted_boxes_fusion


def _fuse(lists, *, width: float, height: float, iou: float, weights) -> torch.Tensor:
    scale = torch.tensor([width, height, width, height], dtype=torch.float64)
    boxes, scores, labels = weighted_boxes_fusion(
        [(r[:, :4].double().cpu() / scale).numpy() for r in lists],
        [r[:, 4].double().cpu().numpy() for r in lists],
        [r[:, 5].double().cpu().numpy() for r in lists],
        weights=weights,
        iou_thr=iou,
        conf_type="avg",
    )
    rows = torch.from_numpy(np.concatenate([boxes * scale.numpy(), scores[:, None], labels[:, None]], axis=1))
    rows = rows.float().reshape(-1, 6)
    rows[:, :4] = clip_boxes(rows[:, :4], width=width, height=height)  # undo rounding past the edges
    return rows


def merge_detections(
    lists: Sequence[torch.Tensor],
    *,
    method: str,
    width: float,
    height: float,
    iou: float,
    max_det: int,
    weights: Sequence[float] | None = None,
    agnostic: bool = False,
    match: str = "iou",
) -> torch.Tensor:
    """Merge several (n_i, 6) detection lists of one width x height image (pixels) into one (n, 6) list.

    method: one of MERGE_METHODS (module docstring); iou: its overlap threshold; match: the overlap measure of
    nms/nmm/greedy-nmm, "iou" or "ios"; weights: each list's WBF weight; agnostic: nms/nmm/greedy-nmm across
    classes. Result on the lists' device, by descending score, at most `max_det` rows.
    """
    if method not in MERGE_METHODS:
        raise InputError(f"unknown merge method {method!r}; known: {list(MERGE_METHODS)}")
    if match not in MATCH_MEASURES:
        raise InputError(f"unknown overlap measure {match!r}; known: {list(MATCH_MEASURES)}")
    if method == "wbf" and (match != "iou" or agnostic):
        raise InputError("wbf fuses boxes of one class by IoU; merge with nms, nmm or greedy-nmm instead")
    device = lists[0].device if lists else torch.device("cpu")
    rows = torch.cat(list(lists)).float() if lists else torch.zeros((0, 6), device=device)
    if method == "wbf":
        return _fuse(lists, width=width, height=height, iou=iou, weights=weights)[:max_det].to(device)
    array = rows.detach().cpu().double().numpy()
    if method == "nms":
        merged = array[suppress_overlaps(array, threshold=iou, measure=match, agnostic=agnostic)]
    else:
        merged = non_maximum_merge(array, threshold=iou, measure=match, greedy=method == "greedy-nmm",
                                   agnostic=agnostic)  # fmt: skip
    return torch.from_numpy(merged[:max_det]).float().reshape(-1, 6).to(device)
