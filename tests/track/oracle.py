"""A Predictor that knows the answer: for each frame it reads, the true boxes of a synthetic-mot split (found by
the frame's pixels), so that tracking through `Predictor.track` and `tphyolo track` is measured against a
detector that makes no mistakes."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tphyolo.data.files.image_io import read_image
from tphyolo.data.mot.sequences import TrackingSplit, read_ground_truth
from tphyolo.infer.config import InferenceConfig
from tphyolo.predict.predictor import Predictor
from tphyolo.predict.results import Results

NAMES = ("pedestrian", "people", "bicycle", "car", "van", "truck", "tricycle", "awning-tricycle", "bus", "motor")


def _key(image: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(image).tobytes()).hexdigest()


class OraclePredictor(Predictor):
    """Detections = the ground-truth objects of the frame (score 0.9, class = VisDrone category - 1)."""

    decisions: dict = {}  # no backend: nothing was decided about how a model runs

    def __init__(self, split: TrackingSplit) -> None:  # no model: nothing of Predictor.__init__ is needed
        self.config = InferenceConfig(conf=0.1)
        self.calls = 0
        truth = {s.name: s.truth for s in read_ground_truth(split.annotations, split.fmt)}
        self.answers: dict[str, np.ndarray] = {}
        for name, folder in split.sequences.items():
            objects = truth[name].select((truth[name].ids > 0) & (truth[name].classes <= 10))
            for path in sorted(Path(folder).glob("*.jpg")):
                rows = objects.select(objects.frames == int(path.stem))
                self.answers[_key(read_image(path))] = np.column_stack(
                    [rows.boxes, np.full(len(rows), 0.9), rows.classes - 1]
                )

    @property
    def names(self) -> list[str]:
        return list(NAMES)

    def predict_images(self, images: Sequence[np.ndarray]) -> list[Results]:
        self.calls += len(images)
        out = []
        for image in images:
            rows = torch.from_numpy(self.answers[_key(image)]).float()
            out.append(Results(rows[:, :4], rows[:, 4], rows[:, 5].long(), names=NAMES, shape=image.shape[:2],
                               image=image))  # fmt: skip
        return out
