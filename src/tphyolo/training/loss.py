"""YOLOv5 detection loss: anchor-ratio target assignment, CIoU box loss, IoU-weighted objectness, BCE classes.

The loss knows numbers, not models: anchors per level in grid units, the number of classes and the loss
hyperparameters. `YoloLoss.from_model` reads those numbers from a detection head.

Conventions
-----------
- Head outputs: one raw (pre-sigmoid) tensor per level, (B, na, H, W, 5 + nc): x, y, w, h, obj, classes.
  Box decoding: xy = 2 * sigmoid - 0.5 (cells, from the cell corner), wh = (2 * sigmoid)^2 * anchor.
- Targets: (n, 6) rows image index, class, cx, cy, w, h with the box normalised to the input image (0..1).
- The result is (total * B, items): total = box + obj + cls after the hyp gains, items = (box, obj, cls).

Memory: the box and class terms hold about 40 KiB per target until the backward pass (every level, cell
offset and anchor is a candidate: 60 of them for 4 levels, with their CIoU and class BCE). Up to
`TARGET_CHUNK` targets are computed at once; a batch with more is computed `TARGET_CHUNK` targets at a time
under activation checkpointing (each chunk's intermediates are recomputed in the backward pass instead of
kept), so that the loss's memory stays that of `TARGET_CHUNK` targets whatever the labels hold (a label file
of 300,000 boxes asked for 12 GB).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from tphyolo.errors import InputError

# Objectness weight per level, from the finest level (largest map) to the coarsest.
OBJ_BALANCE_3 = (4.0, 1.0, 0.4)
OBJ_BALANCE_DEFAULT = (4.0, 1.0, 0.25, 0.06, 0.02)

# The offsets (in cells) of the extra cells that also predict a target whose centre lies in the half of its
# cell nearest to them: self, left, up, right, down. Multiplied by NEIGHBOUR_BIAS.
NEIGHBOUR_OFFSETS = ((0.0, 0.0), (1.0, 0.0), (0.0, 1.0), (-1.0, 0.0), (0.0, -1.0))
NEIGHBOUR_BIAS = 0.5
FOCAL_ALPHA = 0.25
OBJ_IOU_RATIO = 1.0  # objectness target = (1 - r) + r * IoU
LOSS_HYP_KEYS = ("box", "obj", "cls", "cls_pw", "obj_pw", "fl_gamma", "anchor_t")
TARGET_CHUNK = 4096  # targets whose box and class terms are computed at once (about 160 MiB)


def objectness_balance(num_levels: int) -> tuple[float, ...]:
    """Per-level objectness weights: (4, 1, 0.4) for 3 levels, else the first `num_levels` of
    (4, 1, 0.25, 0.06, 0.02) (P2/P3 ... P7)."""
    if num_levels == 3:
        return OBJ_BALANCE_3
    if not 1 <= num_levels <= len(OBJ_BALANCE_DEFAULT):
        raise InputError(f"objectness balance is defined for 1 to {len(OBJ_BALANCE_DEFAULT)} levels, got {num_levels}")
    return OBJ_BALANCE_DEFAULT[:num_levels]


def complete_iou(box1: Tensor, box2: Tensor, eps: float = 1e-7) -> Tensor:
    """CIoU of box1[i] with box2[i]; boxes (n, 4) as cx, cy, w, h in the same units. Returns (n,).

    The aspect-ratio trade-off weight alpha is treated as a constant (no gradient), as in the CIoU paper.
    """
    x1, y1, w1, h1 = box1.unbind(-1)
    x2, y2, w2, h2 = box2.unbind(-1)
    h1, h2 = h1 + eps, h2 + eps
    left = torch.maximum(x1 - w1 / 2, x2 - w2 / 2)
    right = torch.minimum(x1 + w1 / 2, x2 + w2 / 2)
    top = torch.maximum(y1 - h1 / 2, y2 - h2 / 2)
    bottom = torch.minimum(y1 + h1 / 2, y2 + h2 / 2)
    inter = (right - left).clamp(min=0) * (bottom - top).clamp(min=0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    # Smallest enclosing box: squared diagonal; squared distance between centres.
    enclose_w = torch.maximum(x1 + w1 / 2, x2 + w2 / 2) - torch.minimum(x1 - w1 / 2, x2 - w2 / 2)
    enclose_h = torch.maximum(y1 + h1 / 2, y2 + h2 / 2) - torch.minimum(y1 - h1 / 2, y2 - h2 / 2)
    diagonal2 = enclose_w**2 + enclose_h**2 + eps
    centre2 = (x2 - x1) ** 2 + (y2 - y1) ** 2
    v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)) ** 2
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (centre2 / diagonal2 + v * alpha)


def bce_terms(logits: Tensor, target: Tensor, *, pos_weight: Tensor, focal_gamma: float) -> Tensor:
    """Elementwise BCE-with-logits with a positive-class weight, optionally focal-modulated (alpha 0.25)."""
    loss = F.binary_cross_entropy_with_logits(logits, target, pos_weight=pos_weight, reduction="none")
    if focal_gamma > 0:
        prob = logits.sigmoid()
        p_t = target * prob + (1 - target) * (1 - prob)
        alpha = target * FOCAL_ALPHA + (1 - target) * (1 - FOCAL_ALPHA)
        loss = loss * alpha * (1.0 - p_t) ** focal_gamma
    return loss


class YoloLoss(nn.Module):
    """The YOLOv5 training loss for one detection head.

    anchors: (nl, na, 2) anchor w, h per level in grid units (pixels / stride).
    strides: the stride of each level (used only to pick the reference level of autobalance: stride 16).
    num_classes: nc; with one class there is no classification term.
    hyp: loss hyperparameters, already scaled for the model (see `tphyolo.training.hyp.scale_hyp`): box, obj,
        cls gains, cls_pw, obj_pw (BCE positive weights), fl_gamma (focal gamma, 0 = plain BCE), anchor_t
        (largest allowed target/anchor side ratio), optional label_smoothing (eps, default 0).
    autobalance: adapt the per-level objectness weights during training (state kept in a buffer).

    Call with the head's raw outputs [(B, na, H, W, 5 + nc)] * nl and targets (n, 6) (class ids in [0, nc),
    not checked); returns (loss (1,) = (box + obj + cls) * B, items (3,) detached box, obj, cls). Computes
    in float32 with autocast disabled, whatever the dtype of the predictions. Shapes depend only on the input
    shapes (a masked, fixed-size candidate set per level), so there is no host sync and torch.compile
    captures it whole.
    """

    def __init__(
        self,
        *,
        anchors: Tensor,
        strides: Sequence[float] | Tensor,
        num_classes: int,
        hyp: Mapping[str, float],
        autobalance: bool = False,
    ) -> None:
        super().__init__()
        anchors = torch.as_tensor(anchors, dtype=torch.float32)
        if anchors.ndim != 3 or anchors.shape[-1] != 2:
            raise ValueError(f"anchors must be (num_levels, num_anchors, 2) in grid units, got {tuple(anchors.shape)}")
        strides = [float(s) for s in torch.as_tensor(strides).flatten().tolist()]
        if len(strides) != anchors.shape[0]:
            raise ValueError(f"{len(strides)} strides for {anchors.shape[0]} anchor levels")
        missing = [k for k in LOSS_HYP_KEYS if k not in hyp]
        if missing:
            raise KeyError(f"loss hyperparameters missing: {missing}; the loss needs {list(LOSS_HYP_KEYS)}")
        if num_classes < 1:
            raise InputError(f"num_classes must be >= 1, got {num_classes}")
        if autobalance and 16.0 not in strides:
            raise InputError(f"autobalance needs a stride-16 level as reference, strides are {strides}")

        self.num_levels, self.num_anchors = int(anchors.shape[0]), int(anchors.shape[1])
        self.num_classes = int(num_classes)
        self.box_gain, self.obj_gain, self.cls_gain = float(hyp["box"]), float(hyp["obj"]), float(hyp["cls"])
        self.anchor_t = float(hyp["anchor_t"])
        self.focal_gamma = float(hyp["fl_gamma"])
        eps = float(hyp.get("label_smoothing", 0.0))
        self.cls_positive, self.cls_negative = 1.0 - 0.5 * eps, 0.5 * eps
        self.autobalance = autobalance
        self.reference_level = strides.index(16.0) if autobalance else 0
        self.register_buffer("anchors", anchors.clone())  # (nl, na, 2) grid units
        self.register_buffer("balance", torch.tensor(objectness_balance(self.num_levels)))  # (nl,)
        self.register_buffer("cls_pos_weight", torch.tensor([float(hyp["cls_pw"])]))
        self.register_buffer("obj_pos_weight", torch.tensor([float(hyp["obj_pw"])]))
        offsets = torch.tensor(NEIGHBOUR_OFFSETS) * NEIGHBOUR_BIAS
        self.register_buffer("neighbour_offsets", offsets, persistent=False)  # (5, 2)
        self.register_buffer("unit_box", torch.tensor([0.5, 0.5, 1.0, 1.0]), persistent=False)  # (4,)

    @classmethod
    def from_model(cls, model: nn.Module, hyp: Mapping[str, float], *, autobalance: bool = False) -> YoloLoss:
        """A loss for `model`'s detection head (its nl, na, nc, `anchors` (nl, na, 2) grid units, `stride`).

        The head is the last submodule of `model` (or `model` itself) with those attributes. The anchors are
        copied: build the loss after any anchor change (autoanchor). The loss is moved to the model's device.
        """
        head = _find_head(model)
        loss = cls(
            anchors=head.anchors.detach().float().cpu(),
            strides=torch.as_tensor(head.stride).float().cpu(),
            num_classes=int(head.nc),
            hyp=hyp,
            autobalance=autobalance,
        )
        param = next(model.parameters(), None)
        return loss.to(param.device) if param is not None else loss

    def forward(self, preds: Sequence[Tensor], targets: Tensor) -> tuple[Tensor, Tensor]:
        if len(preds) != self.num_levels:
            raise ValueError(f"expected {self.num_levels} prediction levels, got {len(preds)}")
        with torch.autocast(device_type=targets.device.type, enabled=False):
            return self._loss([p.float() for p in preds], targets.float())

    def _loss(self, preds: list[Tensor], targets: Tensor) -> tuple[Tensor, Tensor]:
        # The box and class terms of the targets, all at once up to TARGET_CHUNK of them (one candidate set, no
        # data-dependent shapes, no host sync), else chunk by chunk under checkpointing (see the module
        # docstring); then the objectness terms of every level, whose targets the chunks' scores fill.
        if targets.shape[0] <= TARGET_CHUNK:
            parts = [self._matched_terms(targets, *preds)]
        else:
            parts = [
                checkpoint(self._matched_terms, targets[start : start + TARGET_CHUNK], *preds, use_reentrant=False)
                for start in range(0, targets.shape[0], TARGET_CHUNK)
            ]
        box_sum, cls_sum, count = (sum(part[k] for part in parts) for k in range(3))
        count = count.clamp(min=1)  # (nl,)
        lbox = (box_sum / count).sum().view(1)
        lcls = (cls_sum / (count * self.num_classes)).sum().view(1)

        lobj, new_balance = torch.zeros(1, device=targets.device), []
        balance = self.balance.clone()  # autobalance updates the buffer in place below; backward needs these
        for level, pred in enumerate(preds):
            n, na, h, w = pred.shape[:4]
            flat = torch.cat([part[3][level] for part in parts])
            score = torch.cat([part[4][level] for part in parts])
            obj_target = pred.new_zeros(n * na * h * w).scatter_reduce(0, flat, score, "amax")
            obj_terms = bce_terms(
                pred[..., 4], obj_target.view(n, na, h, w), pos_weight=self.obj_pos_weight, focal_gamma=self.focal_gamma
            )
            level_obj = obj_terms.mean()
            lobj = lobj + level_obj * balance[level]
            if self.autobalance:
                new_balance.append(balance[level] * 0.9999 + 0.0001 / level_obj.detach())

        if self.autobalance:
            with torch.no_grad():
                updated = torch.stack(new_balance)
                self.balance.copy_(updated / updated[self.reference_level])
        lbox, lobj, lcls = lbox * self.box_gain, lobj * self.obj_gain, lcls * self.cls_gain
        batch_size = preds[0].shape[0]
        return (lbox + lobj + lcls) * batch_size, torch.cat((lbox, lobj, lcls)).detach()

    def _matched_terms(self, targets: Tensor, *preds: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """The box and class terms of `targets` (n, 6) on the predictions `preds` (B, na, H, W, 5 + nc) of every
        level, summed per level (nl,) over the valid candidates (box: 1 - CIoU; class: BCE over the classes),
        the candidate count per level (nl,), and per candidate (nl, m) the flat index of its prediction in its
        level's objectness map and its objectness target (detached). Sums, not means: chunks add up."""
        cand = self._candidates([p.shape for p in preds], targets)  # fields (nl, m, ...)
        nl, m = cand.valid.shape
        picked = torch.cat(
            [p[i, a, r, c] for p, i, a, r, c in zip(preds, cand.image, cand.anchor, cand.row, cand.col, strict=True)]
        )  # (nl * m, 5 + nc)
        valid, level_anchor = cand.valid.reshape(-1), self._level_anchor_index(cand.anchor)

        xy = picked[:, :2].sigmoid() * 2 - 0.5
        wh = (picked[:, 2:4].sigmoid() * 2) ** 2 * self.anchors.view(-1, 2)[level_anchor]
        iou = complete_iou(torch.cat((xy, wh), 1), cand.box.reshape(-1, 4))  # (nl * m,)
        box_sum = torch.where(valid, 1.0 - iou, 0.0).view(nl, m).sum(1)

        # Objectness target: the IoU of the matched prediction; the best one wins where cells repeat.
        score = (1.0 - OBJ_IOU_RATIO) + OBJ_IOU_RATIO * iou.detach().clamp(min=0)
        score = torch.where(valid, score, 0.0).view(nl, m)

        cls_sum = box_sum.new_zeros(nl)
        if self.num_classes > 1:
            classes = torch.arange(self.num_classes, device=targets.device)
            one_hot = (cand.cls.reshape(-1, 1) == classes).float()  # (nl * m, nc); F.one_hot would sync to check
            cls_target = self.cls_negative + (self.cls_positive - self.cls_negative) * one_hot
            terms = bce_terms(picked[:, 5:], cls_target, pos_weight=self.cls_pos_weight, focal_gamma=self.focal_gamma)
            cls_sum = torch.where(valid[:, None], terms, 0.0).view(nl, -1).sum(1)

        flat = torch.stack(
            [((cand.image[k] * p.shape[1] + cand.anchor[k]) * p.shape[2] + cand.row[k]) * p.shape[3] + cand.col[k]
             for k, p in enumerate(preds)]
        )  # (nl, m)  # fmt: skip
        return box_sum, cls_sum, cand.valid.sum(1), flat, score

    def _level_anchor_index(self, anchor: Tensor) -> Tensor:
        """(nl * m,) row of `self.anchors.view(-1, 2)` for the anchor indices (nl, m) of each level."""
        levels = torch.arange(anchor.shape[0], device=anchor.device)[:, None]
        return (levels * self.num_anchors + anchor).reshape(-1)

    def assign(self, level: int, shape: torch.Size, targets: Tensor) -> Assignment:
        """Which predictions of `level` (output shape (B, na, H, W, 5 + nc)) learn which targets.

        A target goes to every anchor whose w and h are both within a factor anchor_t of the target's, in the
        cell holding its centre and in the (up to) two neighbouring cells nearest to that centre.
        """
        cand = self.candidates(level, shape, targets)
        return Assignment(*(field[cand.valid] for field in cand))

    def candidates(self, level: int, shape: torch.Size, targets: Tensor) -> Assignment:
        """Every (cell offset, anchor, target) pair of `level`, 5 * na * n of them in that order; `valid` marks
        those `assign` keeps. Boxes of invalid pairs are replaced by a harmless unit box."""
        shapes = [torch.Size((0, 0, 1, 1))] * self.num_levels
        shapes[level] = shape
        return Assignment(*(field[level] for field in self._candidates(shapes, targets)))

    def _candidates(self, shapes: Sequence[torch.Size], targets: Tensor) -> Assignment:
        """`candidates` of every level at once, for prediction shapes (B, na, H, W, 5 + nc) per level: each
        field gains a leading level axis (nl, 5 * na * n, ...)."""
        nl, na, nt = self.num_levels, self.num_anchors, targets.shape[0]
        grid = torch.tensor([[s[3], s[2]] for s in shapes], dtype=targets.dtype, device=targets.device)  # (nl, 2)
        gxy = targets[None, :, 2:4] * grid[:, None]  # (nl, n, 2) grid units, (x, y)
        gwh = targets[None, :, 4:6] * grid[:, None]  # (nl, n, 2)

        ratio = gwh[:, None] / self.anchors[:, :, None]  # (nl, na, n, 2)
        fits = torch.maximum(ratio, 1 / ratio).amax(3) < self.anchor_t  # (nl, na, n)
        near_low = ((gxy % 1) < NEIGHBOUR_BIAS) & (gxy > 1)  # (nl, n, 2): left / upper neighbour is nearer
        inverse = grid[:, None] - gxy
        near_high = ((inverse % 1) < NEIGHBOUR_BIAS) & (inverse > 1)  # right / lower neighbour
        near = torch.cat((torch.ones_like(near_low[..., :1]), near_low, near_high), 2).transpose(1, 2)  # (nl, 5, n)
        valid = near[:, :, None, :] & fits[:, None]  # (nl, 5, na, n)

        cell = (gxy[:, None] - self.neighbour_offsets[None, :, None]).long()  # (nl, 5, n, 2); floor where valid
        cell = torch.minimum(cell.clamp(min=0), grid.long()[:, None, None] - 1)  # (col, row) inside the grid
        box = torch.cat((gxy[:, None] - cell, gwh[:, None].expand(-1, 5, -1, -1)), -1)  # (nl, 5, n, 4)
        box = torch.where(valid[..., None], box[:, :, None], self.unit_box)  # (nl, 5, na, n, 4)

        def spread(x: Tensor) -> Tensor:  # (nl or 1, 5 or 1, na or 1, n) -> (nl, 5 * na * n)
            return x.expand(nl, 5, na, nt).reshape(nl, -1)

        return Assignment(
            image=spread(targets[:, 0].long()[None, None, None]),
            anchor=spread(torch.arange(na, device=targets.device)[None, None, :, None]),
            row=spread(cell[:, :, None, :, 1]),
            col=spread(cell[:, :, None, :, 0]),
            box=box.reshape(nl, -1, 4),
            cls=spread(targets[:, 1].long()[None, None, None]),
            valid=valid.reshape(nl, -1),
        )


class Assignment(NamedTuple):
    """Predictions paired with targets on one level; every field has the same leading length m."""

    image: Tensor  # (m,) image index in the batch
    anchor: Tensor  # (m,) anchor index
    row: Tensor  # (m,) grid row (y)
    col: Tensor  # (m,) grid column (x)
    box: Tensor  # (m, 4) target cx, cy relative to the cell's top-left corner, w, h; grid units
    cls: Tensor  # (m,) class index
    valid: Tensor  # (m,) bool


HEAD_ATTRIBUTES = ("nl", "na", "nc", "anchors", "stride")


def _find_head(model: nn.Module) -> nn.Module:
    """The last submodule (or `model` itself) that carries the detection-head attributes."""
    heads = [m for m in model.modules() if all(hasattr(m, k) for k in HEAD_ATTRIBUTES)]
    if not heads:
        raise InputError(f"{type(model).__name__} has no detection head (a module with {list(HEAD_ATTRIBUTES)})")
    return heads[-1]
