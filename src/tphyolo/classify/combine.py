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

import torch

from tphyolo.errors import InputError


def combine_class_scores(
    class_scores: torch.Tensor, probabilities: torch.Tensor, class_ids: Sequence[int], *, weight: float
) -> torch.Tensor:
    """(N, nc) detector class confidences a, (N, K) classifier probabilities q over the classes `class_ids`
    -> (N, nc) combined confidences a' (module docstring). Rows whose mass on S is zero are unchanged."""
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"classifier weight must be in [0, 1], got {weight}")
    if probabilities.shape != (class_scores.shape[0], len(class_ids)):
        raise InputError(
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
