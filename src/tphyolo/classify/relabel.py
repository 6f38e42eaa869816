"""Re-labelling a detector's detections with a crop classifier: crop the detections of the classifier's
classes from the original images, classify the crops together, combine (`combine.py`), take the argmax.

Two entry points share one rule (`relabel`):

- `reclassify(image, boxes, scores, labels, classifier)`: one image, detections as separate tensors, with
  optional full per-class confidences;
- `reclassify_rows(classifier, rows, images)`: the final (n, 6) detection rows of a batch of images, the step
  the inference core (`tphyolo.infer.detector.Detector.reclassify`) runs for prediction and validation. It
  is `relabel_rows(rows, classify_rows(...))`: classifying (the costly part) and combining are separate so
  that several weights can be tried on one classification (`sweep.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tphyolo.classify.classifier import CropClassifier
from tphyolo.classify.combine import combine_class_scores, one_hot_scores
from tphyolo.classify.crops import crop_objects
from tphyolo.data.files.image_io import read_image

Image = np.ndarray | str | Path  # a uint8 BGR (H, W, 3) array, or the path of one (read only when needed)


def _chosen(scores: torch.Tensor, labels: torch.Tensor, class_ids: Sequence[int], min_score: float) -> torch.Tensor:
    """Indices of the detections whose label is one of `class_ids` and whose score is at least `min_score`."""
    ids = torch.as_tensor(list(class_ids), dtype=torch.long, device=labels.device)
    return (torch.isin(labels.long(), ids) & (scores >= min_score)).nonzero().flatten()


def relabel(
    scores: torch.Tensor,
    labels: torch.Tensor,
    chosen: torch.Tensor,
    probabilities: torch.Tensor,
    class_ids: Sequence[int],
    *,
    weight: float,
    class_scores: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """New (scores, labels) copies: the `chosen` (M,) detections get the argmax and the confidence of their
    combined class confidences, given the (M, K) classifier `probabilities` over `class_ids`; class_scores:
    optional (N, nc) detector confidences (else score * one_hot(label))."""
    scores, labels = scores.clone(), labels.clone()
    if len(chosen) == 0:
        return scores, labels
    if class_scores is None:
        nc = max(int(labels.max()), max(class_ids)) + 1
        a = one_hot_scores(scores[chosen], labels[chosen], nc)
    else:
        if class_scores.shape[0] != len(scores) or class_scores.shape[1] <= max(class_ids):
            raise ValueError(f"class_scores {tuple(class_scores.shape)} do not fit {len(scores)} detections")
        a = class_scores[chosen].float()
    combined = combine_class_scores(a, probabilities.to(a.device), class_ids, weight=weight)
    new_scores, new_labels = combined.max(1)
    scores[chosen] = new_scores.to(scores.dtype)
    labels[chosen] = new_labels.to(labels.dtype)
    return scores, labels


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
    chosen = _chosen(scores, labels, classifier.class_ids, min_score)  # (M,)
    if len(chosen) == 0:
        return boxes, scores, labels
    q = classifier.classify(image, boxes[chosen])  # (M, K)
    scores, labels = relabel(scores, labels, chosen, q, classifier.class_ids, weight=weight, class_scores=class_scores)
    order = torch.sort(scores, descending=True, stable=True).indices
    return boxes[order], scores[order], labels[order]


@dataclass(frozen=True)
class Classified:
    """The classifier's verdict on the detection rows of a batch of images: per image, the indices of the rows
    it classified (M_i,) and their probabilities (M_i, K) over `class_ids`."""

    chosen: list[torch.Tensor]
    probabilities: list[torch.Tensor]
    class_ids: tuple[int, ...]


def classify_rows(
    classifier: CropClassifier, rows: Sequence[torch.Tensor], images: Sequence[Image], *, min_score: float = 0.0
) -> Classified:
    """Crop the rows (n_i, 6: x1, y1, x2, y2 in original pixels, score, class) of each image whose class is one
    of the classifier's and whose score is at least `min_score`, from that image (read from its path only when
    it has such rows), and classify all crops of the batch together."""
    if len(rows) != len(images):
        raise ValueError(f"{len(rows)} detection lists for {len(images)} images")
    chosen = [_chosen(r[:, 4], r[:, 5], classifier.class_ids, min_score) for r in rows]
    crops = []
    for image, r, c in zip(images, rows, chosen, strict=True):
        if len(c):
            pixels = read_image(image) if isinstance(image, (str, Path)) else image
            crops.append(crop_objects(pixels, r[c, :4].cpu().numpy(), context=classifier.context, size=classifier.img))
    k = len(classifier.names)
    probabilities = classifier.probabilities(np.concatenate(crops)) if crops else torch.zeros((0, k))  # (M, K)
    split = list(torch.split(probabilities, [len(c) for c in chosen]))
    return Classified(chosen, split, classifier.class_ids)


def relabel_rows(rows: Sequence[torch.Tensor], classified: Classified, *, weight: float) -> list[torch.Tensor]:
    """New rows: each image's classified rows re-labelled and re-scored (`relabel`) with the classifier's share
    `weight`, the rows re-sorted by descending score (stable). Boxes are unchanged."""
    out = []
    for r, chosen, q in zip(rows, classified.chosen, classified.probabilities, strict=True):
        if len(chosen) == 0:
            out.append(r)
            continue
        scores, labels = relabel(r[:, 4], r[:, 5], chosen, q, classified.class_ids, weight=weight)
        new = torch.cat([r[:, :4], scores[:, None], labels[:, None]], dim=1)
        out.append(new[torch.sort(scores, descending=True, stable=True).indices])
    return out


def reclassify_rows(
    classifier: CropClassifier,
    rows: Sequence[torch.Tensor],
    images: Sequence[Image],
    *,
    weight: float | None = None,
    min_score: float = 0.0,
) -> list[torch.Tensor]:
    """The final detection rows of a batch of images re-labelled by `classifier` (`classify_rows`, then
    `relabel_rows` with `weight`, default `classifier.weight`)."""
    classified = classify_rows(classifier, rows, images, min_score=min_score)
    return relabel_rows(rows, classified, weight=classifier.weight if weight is None else weight)
