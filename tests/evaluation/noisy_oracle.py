"""A detector that knows the answer and gets it partly wrong, the same way whatever batch an image is in.

For each image it was told about, it returns the ground truth with jittered boxes, random scores, some wrong
classes, some missed objects and some false alarms, all drawn from a generator seeded by the image's pixels
(as the loader letterboxes them): its metrics are far from 0 and from 1, and any difference in which image an
output is scored against shows in them. Not a test module."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import nn


def image_key(image: torch.Tensor) -> str:
    """A key of one letterboxed image (3, H, W): uint8 values, or floats in [0, 1] as the detector gets them."""
    if image.is_floating_point():
        image = (image.float() * 255).round().to(torch.uint8)
    return hashlib.sha1(image.contiguous().cpu().numpy().tobytes()).hexdigest()


class NoisyOracle(nn.Module):
    """Eval output (B, N, 5 + nc) — xywh in input pixels, objectness, class scores — for images seen in
    `batches` (Batches of the loader the evaluation will use); `names` as a checkpoint carries them."""

    def __init__(self, batches: Iterable, names: Sequence[str]) -> None:
        super().__init__()
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))
        self.names, nc = list(names), len(names)
        self.outputs: dict[str, torch.Tensor] = {}
        for batch in batches:
            _, _, h, w = batch.images.shape
            for i in range(len(batch)):
                key = image_key(batch.images[i])
                rng = np.random.default_rng(int(key[:12], 16))
                rows = batch.targets[batch.targets[:, 0] == i, 1:].numpy()  # class, cx, cy, w, h (normalised)
                rows = rows[rng.random(len(rows)) < 0.8]  # a fifth missed
                boxes = rows[:, 1:] * np.array([w, h, w, h])
                boxes[:, :2] += rng.normal(0, 0.15, (len(rows), 2)) * boxes[:, 2:]
                boxes[:, 2:] *= np.exp(rng.normal(0, 0.15, (len(rows), 2)))
                classes = np.where(rng.random(len(rows)) < 0.85, rows[:, 0], rng.integers(0, nc, len(rows)))
                alarms = max(len(rows) // 3, 1)
                fake = np.stack([rng.uniform(0, w, alarms), rng.uniform(0, h, alarms), rng.uniform(4, 40, alarms),
                                 rng.uniform(4, 40, alarms)], 1)  # fmt: skip
                boxes = np.concatenate([boxes, fake])
                classes = np.concatenate([classes, rng.integers(0, nc, alarms)])
                scores = np.concatenate([rng.uniform(0.2, 1.0, len(rows)), rng.uniform(0.01, 0.6, alarms)])
                out = torch.zeros(len(boxes), 5 + nc)
                out[:, :4] = torch.from_numpy(boxes).float()
                out[:, 4] = torch.from_numpy(scores).float()
                out[torch.arange(len(boxes)), 5 + torch.from_numpy(classes).long()] = 1.0
                self.outputs[key] = out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = [self.outputs[image_key(image)] for image in x]
        out = torch.zeros(len(rows), max(len(r) for r in rows), rows[0].shape[1])
        for i, r in enumerate(rows):
            out[i, : len(r)] = r
        return out
