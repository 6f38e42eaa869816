"""YOLO-style detection metrics, as reported during training (YOLOv5 v6.0 validation semantics).

Per image, predictions are matched to labels once at the lowest IoU threshold (each label and each prediction
used at most once, highest IoU first) and a match counts as correct at every threshold its IoU reaches. Per
class, AP is the area under the precision envelope sampled at 101 recall points; P, R and F1 are read at the
confidence where the mean F1 over classes peaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from tphyolo.ops.boxes import box_iou

IOU_THRESHOLDS = torch.linspace(0.5, 0.95, 10)
CURVE_POINTS = 1000  # confidence samples of the P, R and F1 curves


def match_predictions(detections: torch.Tensor, labels: torch.Tensor, iou_thresholds: torch.Tensor) -> torch.Tensor:
    """Which predictions are correct at each IoU threshold.

    detections (N, 6): x1, y1, x2, y2, score, class; labels (M, 5): class, x1, y1, x2, y2 (same units).
    Returns (N, T) bool. Among pairs of equal class with IoU >= the first threshold, each prediction keeps its
    best label, then each label keeps its lowest-index prediction (YOLOv5 v6.0); a kept pair is correct at
    the thresholds its IoU reaches.
    """
    thresholds = iou_thresholds.to(detections.device)
    correct = torch.zeros(len(detections), len(thresholds), dtype=torch.bool, device=detections.device)
    if not len(detections) or not len(labels):
        return correct
    iou = box_iou(labels[:, 1:], detections[:, :4])  # (M, N)
    li, di = torch.nonzero((iou >= thresholds[0]) & (labels[:, 0:1] == detections[:, 5]), as_tuple=True)
    if not len(li):
        return correct
    pair_iou = iou[li, di].cpu().numpy()
    li, di = li.cpu().numpy(), di.cpu().numpy()
    order = pair_iou.argsort()[::-1]  # best overlap first
    li, di, pair_iou = li[order], di[order], pair_iou[order]
    keep = np.unique(di, return_index=True)[1]  # each prediction's best label
    li, di, pair_iou = li[keep], di[keep], pair_iou[keep]
    keep = np.unique(li, return_index=True)[1]  # then each label once: first in prediction order
    li, di, pair_iou = li[keep], di[keep], pair_iou[keep]
    ious = torch.as_tensor(pair_iou, device=detections.device)[:, None]
    correct[torch.as_tensor(di, device=detections.device)] = ious >= thresholds
    return correct


def compute_ap(recall: np.ndarray, precision: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AP of one PR curve (points by descending confidence): area under the precision envelope, sampled at
    101 recall values. Returns the AP, the envelope and the recall with sentinels (0 and 1) added."""
    mrec = np.concatenate(([0.0], recall, [1.0]))
    mpre = np.concatenate(([1.0], precision, [0.0]))
    mpre = np.flip(np.maximum.accumulate(np.flip(mpre)))
    x = np.linspace(0, 1, 101)
    return float(np.trapezoid(np.interp(x, mrec, mpre), x)), mpre, mrec


@dataclass(frozen=True)
class APResult:
    """Per-class results for the classes that have labels (`classes`, ascending).

    p, r, f1: (nc,) at the best mean-F1 confidence; ap: (nc, T) per IoU threshold; curves over confidence
    `px` (1000,): p_curve, r_curve, f1_curve (nc, 1000); pr_curve (nc, 1000) precision at recall `px`, IoU 0.5.
    """

    classes: np.ndarray
    p: np.ndarray
    r: np.ndarray
    f1: np.ndarray
    ap: np.ndarray
    px: np.ndarray
    p_curve: np.ndarray
    r_curve: np.ndarray
    f1_curve: np.ndarray
    pr_curve: np.ndarray

    @property
    def ap50(self) -> np.ndarray:
        return self.ap[:, 0]

    @property
    def ap50_95(self) -> np.ndarray:
        return self.ap.mean(1)


def ap_per_class(tp: np.ndarray, conf: np.ndarray, pred_cls: np.ndarray, target_cls: np.ndarray) -> APResult:
    """tp (N, T) bool correctness of every prediction of the dataset, conf (N,), pred_cls (N,); target_cls (M,)
    the class of every label. Classes without predictions get zeros."""
    tp = np.asarray(tp, dtype=np.float64).reshape(len(conf), -1)
    order = np.argsort(-conf)
    tp, conf, pred_cls = tp[order], conf[order], pred_cls[order]
    classes = np.unique(target_cls).astype(np.int64)
    nc, n_thr = len(classes), tp.shape[1]
    px = np.linspace(0, 1, CURVE_POINTS)
    ap = np.zeros((nc, n_thr))
    p_curve, r_curve, pr_curve = (np.zeros((nc, CURVE_POINTS)) for _ in range(3))
    for ci, c in enumerate(classes):
        mine = pred_cls == c
        n_labels = int((target_cls == c).sum())
        if not mine.any():
            continue
        tpc = tp[mine].cumsum(0)
        fpc = (1 - tp[mine]).cumsum(0)
        recall = tpc / (n_labels + 1e-16)
        precision = tpc / (tpc + fpc)
        r_curve[ci] = np.interp(-px, -conf[mine], recall[:, 0], left=0)  # confidence decreases along the curve
        p_curve[ci] = np.interp(-px, -conf[mine], precision[:, 0], left=1)
        for j in range(n_thr):
            ap[ci, j], mpre, mrec = compute_ap(recall[:, j], precision[:, j])
            if j == 0:
                pr_curve[ci] = np.interp(px, mrec, mpre)
    f1_curve = 2 * p_curve * r_curve / (p_curve + r_curve + 1e-16)
    best = int(f1_curve.mean(0).argmax()) if nc else 0
    return APResult(
        classes=classes,
        p=p_curve[:, best],
        r=r_curve[:, best],
        f1=f1_curve[:, best],
        ap=ap,
        px=px,
        p_curve=p_curve,
        r_curve=r_curve,
        f1_curve=f1_curve,
        pr_curve=pr_curve,
    )


def fitness(map50: float, map50_95: float) -> float:
    """The checkpoint-selection score: 0.1 * mAP@0.5 + 0.9 * mAP@0.5:0.95."""
    return 0.1 * map50 + 0.9 * map50_95


@dataclass(frozen=True)
class Summary:
    """Dataset-level YOLO metrics; per-class arrays follow `result.classes`; `labels_per_class` (nc_total,) the
    objects of each class, `images_per_class` (nc_total,) the images holding at least one."""

    images: int
    labels_per_class: np.ndarray
    mp: float
    mr: float
    map50: float
    map: float
    result: APResult | None
    images_per_class: np.ndarray | None = None

    @property
    def fitness(self) -> float:
        return fitness(self.map50, self.map)

    def table(self, names: Mapping[int, str] | Sequence[str]) -> str:
        """The familiar table (`yolo_table`): a row for all, one per class when more than one has a row."""
        rows = [("all", self.images, int(self.labels_per_class.sum()), self.mp, self.mr, self.map50, self.map)]
        if self.result is not None and len(self.result.classes) > 1:
            res, holding = self.result, self.images_per_class
            rows += [(str(names[int(c)]), int(holding[c]) if holding is not None else self.images,
                      int(self.labels_per_class[c]), res.p[i], res.r[i], res.ap50[i], res.ap50_95[i])
                     for i, c in enumerate(res.classes)]  # fmt: skip
        return yolo_table(rows)


def yolo_table(rows: Sequence[tuple[str, int, int, float, float, float, float]]) -> str:
    """The familiar table: Class, Images, Labels, P, R, mAP@.5, mAP@.5:.95, a line per row of `rows` (name,
    images, labels, P, R, mAP@.5, mAP@.5:.95 as fractions). As YOLOv5 and ultralytics print it, a class row's
    images are those holding the class; the 'all' row's are every image scored."""
    head = f"{'Class':>20}{'Images':>11}{'Labels':>11}{'P':>11}{'R':>11}{'mAP@.5':>11}{'mAP@.5:.95':>11}"
    lines = [head]
    for name, images, labels, p, r, m50, m in rows:
        lines.append(f"{name:>20}{images:>11d}{labels:>11d}{p:>11.3g}{r:>11.3g}{m50:>11.3g}{m:>11.3g}")
    return "\n".join(lines)


class DetectionStats:
    """Accumulates per-image matches over a dataset, then summarises them (YOLO metrics)."""

    def __init__(self, num_classes: int, *, iou_thresholds: torch.Tensor = IOU_THRESHOLDS) -> None:
        self.num_classes = num_classes
        self.iou_thresholds = iou_thresholds
        self._correct, self._conf, self._pred_cls, self._target_cls = [], [], [], []
        self.images = 0
        self._holding = np.zeros(num_classes, dtype=np.int64)  # images holding each class

    def update(self, detections: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Add one image: detections (N, 6) x1, y1, x2, y2, score, class; labels (M, 5) class, x1, y1, x2, y2.
        Returns the (N, T) correctness matrix."""
        correct = match_predictions(detections, labels, self.iou_thresholds)
        self.images += 1
        self._correct.append(correct.cpu().numpy())
        self._conf.append(detections[:, 4].detach().cpu().double().numpy())
        self._pred_cls.append(detections[:, 5].detach().cpu().numpy().astype(np.int64))
        self._target_cls.append(labels[:, 0].detach().cpu().numpy().astype(np.int64))
        present = np.unique(self._target_cls[-1])
        self._holding[present[present < self.num_classes]] += 1
        return correct

    def summarize(self) -> Summary:
        n_thr = len(self.iou_thresholds)
        correct = np.concatenate(self._correct) if self._correct else np.zeros((0, n_thr), dtype=bool)
        conf = np.concatenate(self._conf) if self._conf else np.zeros(0)
        pred_cls = np.concatenate(self._pred_cls) if self._pred_cls else np.zeros(0, dtype=np.int64)
        target_cls = np.concatenate(self._target_cls) if self._target_cls else np.zeros(0, dtype=np.int64)
        labels_per_class = np.bincount(target_cls, minlength=self.num_classes)
        if not correct.any():
            return Summary(self.images, labels_per_class, 0.0, 0.0, 0.0, 0.0, None, self._holding.copy())
        res = ap_per_class(correct, conf, pred_cls, target_cls)
        return Summary(
            images=self.images,
            labels_per_class=labels_per_class,
            mp=float(res.p.mean()),
            mr=float(res.r.mean()),
            map50=float(res.ap50.mean()),
            map=float(res.ap50_95.mean()),
            result=res,
            images_per_class=self._holding.copy(),
        )
