"""The detections of one image, as prediction returns them and writers and metrics read them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch


def class_name(names: Sequence[str], label: int) -> str:
    """The name of class `label`, or the id itself as text where `names` has no entry for it (a model with
    more classes than the names it was given)."""
    return str(names[label]) if 0 <= label < len(names) else str(label)


@dataclass(frozen=True)
class Detections:
    """Detections of one image: boxes (N, 4) float32 xyxy in original-image pixels, scores (N,) float32,
    labels (N,) int64 class ids; sorted by descending score."""

    boxes: torch.Tensor
    scores: torch.Tensor
    labels: torch.Tensor

    def __len__(self) -> int:
        return len(self.scores)

    @classmethod
    def from_rows(cls, rows: torch.Tensor) -> Detections:
        """From (N, 6) rows x1, y1, x2, y2, score, class (on any device; the result is on the CPU)."""
        rows = rows.detach().float().cpu()
        return cls(rows[:, :4].contiguous(), rows[:, 4].contiguous(), rows[:, 5].long())

    def rows(self) -> torch.Tensor:
        """(N, 6) float32 rows x1, y1, x2, y2, score, class: the inverse of `from_rows`."""
        return torch.cat([self.boxes.float(), self.scores.float()[:, None], self.labels.float()[:, None]], dim=1)
