"""Reference version of the detection loss that computes the way the original YOLOv5 v6.0 code computes it,
to measure `YoloLoss` against (the train rows of benchmarks/model_vs_original.py): same numbers, the original's
execution strategy.

`OriginalLoss` loops over the levels and, per level, builds every (anchor, target) pair as one (na, n, 7)
tensor, keeps the pairs whose anchor ratio fits and their neighbour cells with boolean-mask indexing (a host
sync per filter, shapes that depend on the data), and computes CIoU, the class terms and the objectness
target on the kept rows only. Where several kept rows land on one objectness cell, the rows are written in
ascending IoU order so that the best one wins (the original's `sort_obj_iou` path), which is what
`YoloLoss` computes. Hyperparameters, balance and the returned (loss, items) are those of `YoloLoss`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tphyolo.errors import InputError
from tphyolo.training.loss import NEIGHBOUR_BIAS, NEIGHBOUR_OFFSETS, OBJ_IOU_RATIO, YoloLoss, bce_terms, complete_iou


class OriginalLoss(nn.Module):
    """The original loss computation with the settings of `loss` (a `YoloLoss`, autobalance off); called
    like it: (preds [(B, na, H, W, 5 + nc)] * nl, targets (n, 6)) -> (loss (1,), items (3,))."""

    def __init__(self, loss: YoloLoss) -> None:
        super().__init__()
        if loss.autobalance:
            raise InputError("OriginalLoss: autobalance is not part of the measured computation")
        self.settings = loss

    def forward(self, preds: list[Tensor], targets: Tensor) -> tuple[Tensor, Tensor]:
        s = self.settings
        device = targets.device
        lbox, lobj, lcls = (torch.zeros(1, device=device) for _ in range(3))
        for level, pred in enumerate(preds):
            pred = pred.float()
            image, anchor, row, col, box, cls = self._build_targets(level, pred.shape, targets.float())
            obj_target = torch.zeros(pred.shape[:4], device=device)
            if image.shape[0]:
                picked = pred[image, anchor, row, col]  # (k, 5 + nc)
                xy = picked[:, :2].sigmoid() * 2 - 0.5
                wh = (picked[:, 2:4].sigmoid() * 2) ** 2 * s.anchors[level][anchor]
                iou = complete_iou(torch.cat((xy, wh), 1), box)
                lbox += (1.0 - iou).mean()
                score = (1.0 - OBJ_IOU_RATIO) + OBJ_IOU_RATIO * iou.detach().clamp(0)
                order = score.argsort()  # ascending: the best row is written last
                obj_target[image[order], anchor[order], row[order], col[order]] = score[order]
                if s.num_classes > 1:
                    cls_target = torch.full_like(picked[:, 5:], s.cls_negative)
                    cls_target[torch.arange(cls.shape[0], device=device), cls] = s.cls_positive
                    lcls += bce_terms(
                        picked[:, 5:], cls_target, pos_weight=s.cls_pos_weight, focal_gamma=s.focal_gamma
                    ).mean()
            obj_terms = bce_terms(pred[..., 4], obj_target, pos_weight=s.obj_pos_weight, focal_gamma=s.focal_gamma)
            lobj += obj_terms.mean() * s.balance[level]
        lbox, lobj, lcls = lbox * s.box_gain, lobj * s.obj_gain, lcls * s.cls_gain
        return (lbox + lobj + lcls) * preds[0].shape[0], torch.cat((lbox, lobj, lcls)).detach()

    def _build_targets(self, level: int, shape: torch.Size, targets: Tensor) -> tuple[Tensor, ...]:
        """The kept (image, anchor, row, col, box (k, 4) in cell units, class) rows of one level."""
        s = self.settings
        na, nt = s.num_anchors, targets.shape[0]
        anchors = s.anchors[level]  # (na, 2)
        gain = torch.ones(7, device=targets.device)
        gain[2:6] = torch.tensor(shape)[[3, 2, 3, 2]].float()  # x, y, w, h scaled to the grid
        anchor_ids = torch.arange(na, device=targets.device).float().view(na, 1).repeat(1, nt)
        pairs = torch.cat((targets.repeat(na, 1, 1), anchor_ids[:, :, None]), 2) * gain  # (na, n, 7)
        if nt:
            ratio = pairs[:, :, 4:6] / anchors[:, None]
            pairs = pairs[torch.max(ratio, 1 / ratio).max(2)[0] < s.anchor_t]  # (k, 7), a host sync
            gxy = pairs[:, 2:4]
            inverse = gain[[2, 3]] - gxy
            j, k = ((gxy % 1 < NEIGHBOUR_BIAS) & (gxy > 1)).T
            l, m = ((inverse % 1 < NEIGHBOUR_BIAS) & (inverse > 1)).T
            keep = torch.stack((torch.ones_like(j), j, k, l, m))  # (5, k)
            offsets = torch.tensor(NEIGHBOUR_OFFSETS, device=targets.device) * NEIGHBOUR_BIAS  # (5, 2)
            pairs = pairs.repeat((5, 1, 1))[keep]  # another host sync
            shift = (torch.zeros_like(gxy)[None] + offsets[:, None])[keep]
        else:
            pairs, shift = pairs[0], 0
        image, cls = pairs[:, :2].long().T
        gxy, gwh = pairs[:, 2:4], pairs[:, 4:6]
        cell = (gxy - shift).long()
        col = cell[:, 0].clamp(0, int(shape[3]) - 1)
        row = cell[:, 1].clamp(0, int(shape[2]) - 1)
        box = torch.cat((gxy - torch.stack((col, row), 1), gwh), 1)
        return image, pairs[:, 6].long(), row, col, box, cls
