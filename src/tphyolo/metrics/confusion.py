"""Detection confusion matrix (YOLOv5 v6.0 semantics): rows are predicted classes, columns true classes, the
last row and column stand for background."""

from __future__ import annotations

import numpy as np
import torch

from tphyolo.ops.boxes import box_iou


def _one_to_one(iou: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """(M, N) IoU -> matched (label, prediction) index pairs with IoU > threshold, best first, each used once."""
    li, di = np.nonzero(iou > threshold)
    if len(li) > 1:
        pair_iou = iou[li, di]
        order = pair_iou.argsort()[::-1]
        li, di, pair_iou = li[order], di[order], pair_iou[order]
        keep = np.unique(di, return_index=True)[1]
        li, di, pair_iou = li[keep], di[keep], pair_iou[keep]
        order = pair_iou.argsort()[::-1]
        li, di = li[order], di[order]
        keep = np.unique(li, return_index=True)[1]
        li, di = li[keep], di[keep]
    return li, di


class ConfusionMatrix:
    """Counts over a dataset; `matrix` (nc + 1, nc + 1) indexed [predicted, true], background last."""

    def __init__(self, num_classes: int, *, conf: float = 0.25, iou_thres: float = 0.45) -> None:
        self.num_classes = num_classes
        self.conf = conf
        self.iou_thres = iou_thres
        self.matrix = np.zeros((num_classes + 1, num_classes + 1))

    def update(self, detections: torch.Tensor, labels: torch.Tensor) -> None:
        """detections (N, 6) x1, y1, x2, y2, score, class; labels (M, 5) class, x1, y1, x2, y2.

        Each label matched to a prediction (IoU > iou_thres, predictions above `conf`) counts at
        [predicted class, true class], an unmatched label at [background, true class]. Predictions left
        unmatched count at [predicted class, background], only in images where something matched.
        """
        detections = detections[detections[:, 4] > self.conf]
        true_cls = labels[:, 0].long().cpu().numpy()
        pred_cls = detections[:, 5].long().cpu().numpy()
        iou = box_iou(labels[:, 1:].float(), detections[:, :4].float()).cpu().numpy()
        li, di = _one_to_one(iou, self.iou_thres)
        bg = self.num_classes
        pred_of_label = np.full(len(true_cls), -1)
        pred_of_label[li] = di
        matched = pred_of_label >= 0
        np.add.at(self.matrix, (pred_cls[pred_of_label[matched]], true_cls[matched]), 1)
        np.add.at(self.matrix, (bg, true_cls[~matched]), 1)
        if len(li):
            lonely = np.ones(len(pred_cls), dtype=bool)
            lonely[di] = False
            np.add.at(self.matrix, (pred_cls[lonely], bg), 1)

    def normalized(self) -> np.ndarray:
        """Each column (true class) divided by its total; empty columns stay zero."""
        totals = self.matrix.sum(0, keepdims=True)
        return np.divide(self.matrix, totals, out=np.zeros_like(self.matrix), where=totals > 0)
