"""The files of an analysis run: `events.csv`, `counts.json`, `tracks_speed.csv`, `tracks_geo.csv`,
`heatmap.png` and `heatmap.npy`, and the annotated video `<sequence>.mp4` (`VideoFile`)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import cv2
import numpy as np

from tphyolo.analyze.events import EVENT_COLUMNS, Event
from tphyolo.data.files.image_io import write_image

GEO_COLUMNS = ("frame", "track", "class", "latitude", "longitude")


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Sequence]) -> Path:
    """A csv file of `columns` and `rows`."""
    with open(path, "w", newline="", encoding="utf-8") as file:
        writer = csv.writer(file)
        writer.writerow(columns)
        writer.writerows(rows)
    return path


def write_events(path: Path, events: Iterable[Event]) -> Path:
    """`events.csv`: one row per crossing, entry and exit, in frame order."""
    return write_csv(path, EVENT_COLUMNS, (e.row() for e in sorted(events, key=lambda e: (e.frame, e.kind))))


def write_counts(path: Path, counts: dict) -> Path:
    """`counts.json`: {"lines": {name: {"forward": {class: n}, "backward": {...}}}, "zones": {name: {...}}}."""
    path.write_text(json.dumps(counts, indent=1, sort_keys=True), encoding="utf-8")
    return path


def write_heatmap(folder: Path, array: np.ndarray, overlay: np.ndarray) -> list[Path]:
    """`heatmap.npy` (the counts) and `heatmap.png` (`overlay`, the image of them)."""
    np.save(folder / "heatmap.npy", array)
    return [folder / "heatmap.npy", write_image(folder / "heatmap.png", overlay)]


class VideoFile:
    """An mp4 written frame by frame (opened on the first frame, at `fps`)."""

    def __init__(self, path: Path, fps: float) -> None:
        self.path, self.fps = Path(path), fps
        self._writer: cv2.VideoWriter | None = None

    def write(self, image: np.ndarray) -> None:
        if self._writer is None:
            height, width = image.shape[:2]
            self._writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps, (width, height))
            if not self._writer.isOpened():
                raise OSError(f"{self.path}: cannot open a video writer")
        self._writer.write(image)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None
