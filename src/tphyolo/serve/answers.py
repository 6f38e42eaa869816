"""The JSON of `POST /v1/detect`, both ways: detection rows -> the answer, and an answer -> `Results`.

An answer (`format=json`, the default):

    {"model": {"name": "best.pt", "hash": "3f2a..."},
     "timings": {"queue_ms": 1.2, "inference_ms": 20.5, "total_ms": 24.0},
     "images": [{"file": "a.jpg" or null, "width": 1920, "height": 1080,
                 "boxes": [[x1, y1, x2, y2], ...], "scores": [...], "classes": [...], "names": [...]}]}

boxes in original pixels, best score first, one entry per image in the order sent; timings of the slowest
image. Numbers are the float32 values the model gave (JSON keeps them exactly), so that a client's `Results`
equal those of `Predictor` on the same pixels. `format=coco`: a list of COCO result records, `image_id` the
image's position in the request (`tphyolo.predict.writers.coco_records`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from tphyolo.ops.detections import Detections, class_name
from tphyolo.predict.results import Results
from tphyolo.predict.writers import coco_records


def _detections(rows: np.ndarray) -> Detections:
    return Detections.from_rows(torch.from_numpy(np.asarray(rows, dtype=np.float32).reshape(-1, 6)))


def image_answer(rows: np.ndarray, *, names: Sequence[str], shape: tuple[int, int], file: str | None) -> dict:
    """One image's entry: its (n, 6) rows x1, y1, x2, y2, score, class; `shape` (height, width)."""
    detections = _detections(rows)
    labels = detections.labels.tolist()
    return {
        "file": file,
        "width": int(shape[1]),
        "height": int(shape[0]),
        "boxes": detections.boxes.tolist(),
        "scores": detections.scores.tolist(),
        "classes": labels,
        "names": [class_name(names, label) for label in labels],
    }


def coco_answer(rows_per_image: Sequence[np.ndarray]) -> list[dict]:
    """COCO result records of the images, `image_id` their positions (0, 1, ...)."""
    return [record for i, rows in enumerate(rows_per_image) for record in coco_records(_detections(rows), i)]


def results_from_answer(entry: dict, *, names: Sequence[str], path=None, image: np.ndarray | None = None) -> Results:
    """The `Results` of one image entry of an answer (class names from `names`, the model's)."""
    boxes = torch.tensor(entry["boxes"], dtype=torch.float32).reshape(-1, 4)
    scores = torch.tensor(entry["scores"], dtype=torch.float32).reshape(-1)
    labels = torch.tensor(entry["classes"], dtype=torch.int64).reshape(-1)
    shape = (int(entry["height"]), int(entry["width"]))
    return Results(boxes, scores, labels, names=tuple(names), path=path, shape=shape, image=image)
