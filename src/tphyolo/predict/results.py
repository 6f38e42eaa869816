"""What the predictor returns per image: the detections with what they belong to (class names, the source, the
original size, the image), and the helpers to look at them: `plot`, `save`, `to_dict`/`to_json`, `crop`.

    for result in predictor("images/"):
        result.save(f"out/{result.path.name}", conf=False)
        for record in result.to_dict()["detections"]:
            record["name"], record["score"], record["box"]  # box: x1, y1, x2, y2 in original pixels
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import numpy as np
import torch

from tphyolo.data.files.image_io import read_image, write_image
from tphyolo.errors import InputError
from tphyolo.ops.detections import Detections, class_name
from tphyolo.predict.draw import draw_detections
from tphyolo.predict.draw_style import DrawStyle
from tphyolo.predict.sources import is_video_name, video_capture


def crop_boxes(image: np.ndarray, detections: Detections, *, pad: int = 0) -> list[np.ndarray]:
    """One copy of the region of each detection's box in `image` (grown by `pad` pixels each side, rounded
    outwards, clipped to the image), in the detections' order; an empty (0, 0, 3) array for a box outside
    the image."""
    h, w = image.shape[:2]
    crops = []
    for x1, y1, x2, y2 in detections.boxes.tolist():
        left, top = max(int(np.floor(x1)) - pad, 0), max(int(np.floor(y1)) - pad, 0)
        right, bottom = min(int(np.ceil(x2)) + pad, w), min(int(np.ceil(y2)) + pad, h)
        if right <= left or bottom <= top:
            crops.append(np.zeros((0, 0, 3), image.dtype))
        else:
            crops.append(image[top:bottom, left:right].copy())
    return crops


def save_crops(
    image: np.ndarray, detections: Detections, names: Sequence[str], folder: str | Path, stem: str
) -> list[Path]:
    """Write each detection's crop to `folder/CLASS/STEM_K.jpg` (CLASS: its class name with every run of
    characters other than letters, digits, `-`, `_` and `.` made one `_`, and leading dots made `_`, so that a
    name such as `..` stays inside `folder`; K its rank in the image, 0 for the best score); returns the files
    written (boxes outside the image write nothing)."""
    written = []
    for k, (crop, label) in enumerate(zip(crop_boxes(image, detections), detections.labels.tolist(), strict=True)):
        if not crop.size:
            continue
        name = class_name(names, label)
        safe = re.sub(r"^\.+", lambda dots: "_" * len(dots.group()), re.sub(r"[^\w.-]+", "_", name))
        path = Path(folder) / (safe or str(label)) / f"{stem}_{k}.jpg"
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(write_image(path, crop))
    return written


@dataclass(frozen=True)
class Results(Detections):
    """Detections of one image (boxes (N, 4) xyxy in original pixels, scores (N,), labels (N,), by descending
    score; see Detections) with `names` (class id -> name), `path` (the file it came from, a stream's source
    text, or None for an in-memory image), `shape` (original height, width), `frame` (the frame's number in its
    video or sequence, from 1 as MOT files and TrackEval number frames; 0 for a still image), `image` (the uint8
    BGR image, or None where it can be read again from `path`) and `ids` ((N,) int64 track ids >= 1 when the
    results come from tracking, `Predictor.track`; else None)."""

    names: tuple[str, ...] = ()
    path: Path | str | None = None
    shape: tuple[int, int] = (0, 0)
    frame: int = 0
    image: np.ndarray | None = field(default=None, repr=False, compare=False)
    ids: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.ids is not None and self.ids.shape != self.scores.shape:
            raise InputError(f"Results: {tuple(self.ids.shape)} track ids for {len(self.scores)} detections")

    def tracked(self, boxes, ids, scores, labels) -> Results:
        """These results replaced by the tracks seen in this frame: (M, 4) xyxy boxes, (M,) ids, scores and
        labels (array-likes), sorted by descending score like any Results."""
        scores = torch.as_tensor(np.asarray(scores), dtype=torch.float32).reshape(-1)
        order = scores.argsort(descending=True, stable=True)
        return replace(
            self,
            boxes=torch.as_tensor(np.asarray(boxes), dtype=torch.float32).reshape(-1, 4)[order],
            scores=scores[order],
            labels=torch.as_tensor(np.asarray(labels), dtype=torch.int64).reshape(-1)[order],
            ids=torch.as_tensor(np.asarray(ids), dtype=torch.int64).reshape(-1)[order],
        )

    def load_image(self) -> np.ndarray:
        """The uint8 BGR image: kept, or read again from an image file or a video file's frame. Raises
        ValueError when neither is possible (an in-memory image dropped, a stream)."""
        if self.image is not None:
            return self.image
        if not isinstance(self.path, Path):
            raise InputError(f"{self.path or 'in-memory image'}: the image was not kept and cannot be read again")
        if not is_video_name(self.path):
            return read_image(self.path)
        capture = video_capture(self.path)
        try:
            capture.set(cv2.CAP_PROP_POS_FRAMES, self.frame - 1)
            ok, image = capture.read()
        finally:
            capture.release()
        if not ok:
            raise InputError(f"{self.path}: cannot read frame {self.frame} again")
        return image

    def plot(self, *, labels: bool = True, conf: bool = True, line_width: int | None = None) -> np.ndarray:
        """A uint8 BGR copy of the image with the boxes drawn in their class colours, labelled `name score`
        (`name` without `conf`; boxes only without `labels`), lines `line_width` pixels wide (default: from the
        image size)."""
        style = DrawStyle(hide_labels=not labels, hide_conf=not conf, line_width=line_width)
        ids = None if self.ids is None else self.ids.tolist()
        return draw_detections(self.load_image(), self, self.names, style=style, ids=ids)

    def save(self, path: str | Path, **plot_options) -> Path:
        """Write `plot(**plot_options)` to `path` (its suffix picks the format); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_image(path, self.plot(**plot_options))

    def crop(self, *, pad: int = 0) -> list[np.ndarray]:
        """The image region of each detection (see `crop_boxes`), in the detections' order."""
        return crop_boxes(self.load_image(), self, pad=pad)

    def save_crops(self, folder: str | Path, *, stem: str | None = None) -> list[Path]:
        """Write the crops to `folder/CLASS/STEM_K.jpg` (see `save_crops`; STEM defaults to the file's stem,
        `image` for an in-memory image)."""
        if stem is None:
            stem = Path(self.path).stem if isinstance(self.path, Path) else "image"
        return save_crops(self.load_image(), self, self.names, folder, stem)

    def to_dict(self) -> dict:
        """Plain data: {"path": str or None, "shape": [height, width], "frame": int, "detections": [{"box":
        [x1, y1, x2, y2], "score": float, "class": int, "name": str}, ...]} in original pixels, best first;
        tracked results give each detection its "id" too."""
        detections = []
        rows = zip(self.boxes.tolist(), self.scores.tolist(), self.labels.tolist(), strict=True)
        ids = [None] * len(self) if self.ids is None else self.ids.tolist()
        for (box, score, label), track_id in zip(rows, ids, strict=True):
            name = class_name(self.names, label)
            record = {"box": box, "score": score, "class": label, "name": name}
            detections.append(record if track_id is None else record | {"id": track_id})
        path = None if self.path is None else str(self.path)
        return {"path": path, "shape": list(self.shape), "frame": self.frame, "detections": detections}

    def to_json(self, **dumps_options) -> str:
        """`to_dict()` as JSON text (`dumps_options` go to json.dumps, e.g. indent=2)."""
        return json.dumps(self.to_dict(), **dumps_options)
