"""Combining a detector's class scores with a crop classifier's probabilities.

The rule, for one detection: let a (nc,) be its per-class confidences obj * cls_k (what YOLOv5's NMS ranks;
the detection's score is a[label]), S the classifier's classes, q (|S|,) the classifier's probabilities over
S and w its weight. The detector's class distribution is p = a / sum(a). Within S,

    p'_S = sum(p_S) * normalise((1 - w) * p_S / sum(p_S) + w * q)

-- the classifier's opinion is mixed into the detector's distribution *within* S, and S keeps the share it
had; classes outside S are unchanged. The final label is argmax p', and the score is recomputed as
objectness * new class probability, with the detector's total mass sum(a) as the objectness of p:
score' = sum(a) * p'[label']. Because the rule is homogeneous (scaling a scales the result), this is the same
as applying it to a directly: a' = rule(a), label' = argmax a', score' = a'[label']. With w = 0 nothing
changes; with w = 1 the classifier alone decides within S.

When only the final label and score are known (the usual output after NMS), a is formed as
score * one_hot(label): the detector's distribution is all on its label, and its score is its objectness.
Then a detection keeps its label unless w q_j > (1 - w) + w q_label for some other class j of S (so the
classifier can overrule only when w > 0.5), and its score becomes score * p'[label'].
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tphyolo.classify.classifier import CropClassifier


def combine_class_scores(
    class_scores: torch.Tensor, probabilities: torch.Tensor, class_ids: Sequence[int], *, weight: float
) -> torch.Tensor:
    """(N, nc) detector class confidences a, (N, K) classifier probabilities q over the classes `class_ids`
    -> (N, nc) combined confidences a' (module docstring). Rows whose mass on S is zero are unchanged."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"classifier weight must be in [0, 1], got {weight}")
    if probabilities.shape != (class_scores.shape[0], len(class_ids)):
        raise ValueError(
            f"probabilities {tuple(probabilities.shape)} do not match {class_scores.shape[0]} detections x "
            f"{len(class_ids)} classifier classes"
        )
    ids = torch.as_tensor(list(class_ids), dtype=torch.long, device=class_scores.device)
    a = class_scores.float()
    a_s = a[:, ids]  # (N, K)
    share = a_s.sum(1, keepdim=True)  # (N, 1) mass of S
    p_s = a_s / share.clamp_min(torch.finfo(torch.float32).tiny)
    mixed = (1 - weight) * p_s + weight * probabilities.float().to(a.device)
    mixed = mixed / mixed.sum(1, keepdim=True).clamp_min(torch.finfo(torch.float32).tiny)
    out = a.clone()
    out[:, ids] = share * mixed
    return out


def one_hot_scores(scores: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(N,) scores and labels -> (N, num_classes) confidences score * one_hot(label) (module docstring)."""
    out = torch.zeros((len(scores), num_classes), dtype=torch.float32, device=scores.device)
    out[torch.arange(len(scores), device=scores.device), labels.long()] = scores.float()
    return out


def reclassify(
    image: np.ndarray,
    boxes: torch.Tensor,
    scores: torch.Tensor,
    labels: torch.Tensor,
    classifier: CropClassifier,
    *,
    class_scores: torch.Tensor | None = None,
    weight: float | None = None,
    min_score: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Re-label the detections of one image with `classifier`.

    image: the original uint8 BGR (H, W, 3) image; boxes (N, 4) xyxy in its pixels, scores (N,), labels (N,)
    in the classifier's detector class ids (`classifier.class_ids`); class_scores: optional (N, nc) per-class
    confidences obj * cls with scores == class_scores[i, labels[i]] (else formed from score and label);
    weight: the classifier's share w (default `classifier.weight`); min_score: detections scoring below it are
    left as they are, not cropped (validation keeps thousands of near-zero boxes that cannot change AP much).

    The detections whose label is one of the classifier's classes are cropped and classified together (in
    batches of `classifier.batch_size`); their class confidences are combined (`combine_class_scores`), the
    label becomes the argmax and the score the confidence of that label. Other detections are unchanged.
    Returns (boxes, scores, labels) -- boxes unchanged -- re-sorted by descending score (stable), on the
    device and in the dtypes of the inputs.
    """
    weight = classifier.weight if weight is None else weight
    ids = torch.as_tensor(classifier.class_ids, dtype=torch.long, device=labels.device)
    chosen = (torch.isin(labels.long(), ids) & (scores >= min_score)).nonzero().flatten()  # (M,)
    if len(chosen) == 0:
        return boxes, scores, labels
    if class_scores is None:
        nc = max(int(labels.max()), int(ids.max())) + 1
        a = one_hot_scores(scores[chosen], labels[chosen], nc)
    else:
        if class_scores.shape[0] != len(scores) or class_scores.shape[1] <= int(ids.max()):
            raise ValueError(f"class_scores {tuple(class_scores.shape)} do not fit {len(scores)} detections")
        a = class_scores[chosen].float()
    q = classifier.classify(image, boxes[chosen])  # (M, K)
    combined = combine_class_scores(a, q.to(a.device), classifier.class_ids, weight=weight)
    new_scores, new_labels = combined.max(1)
    scores, labels = scores.clone(), labels.clone()
    scores[chosen] = new_scores.to(scores.dtype)
    labels[chosen] = new_labels.to(labels.dtype)
    order = torch.sort(scores, descending=True, stable=True).indices
    return boxes[order], scores[order], labels[order]
