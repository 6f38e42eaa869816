"""Tracking outputs, sequence by sequence, in `save_dir`:

- `mot/<seq>.txt` (`save_mot`): MOTChallenge rows `frame,id,left,top,width,height,score,category,-1,-1`;
- `visdrone/<seq>.txt` (`save_visdrone`): VisDrone-MOT rows `frame,id,left,top,width,height,score,category,-1,-1`;
  the folders are named after the texts (`MOT_TEXT`, `VISDRONE_TEXT` of `tphyolo.data.mot.layouts`), so that
  `save_dir / split.output_text` is the folder a benchmark's split is scored on.

A row's category is the caller's (precomputed detections keep their files' numbers) or, from a class id, the
class's number in the category table of the files (`categories`: a benchmark's own, e.g. UAVDT's for a UAVDT
split; default VisDrone-DET's when every class is one of VisDrone's -- the table of VisDrone-MOT ground truth,
synthetic-mot's included -- else class index + 1), matched by name as `tphyolo predict --save-visdrone` matches
(`tphyolo.predict.writers.visdrone_categories`); -1 for a track without a class or a class the table lacks.
A class the table lacks is refused for `save_visdrone`. Each text folder gets the table of its rows as
`categories.yaml` (`tphyolo.data.categories.write_table`), which `tphyolo analyze --tracks` reads back.
- drawn frames (`save_img`), with track ids and trails (`TrailPainter`): `<seq>.mp4` for a
  video or a stream, `<seq>/<frame file name>` for image frames.

Frames are numbered from 1 in their sequence; boxes are in pixels of the frame. The text files of a sequence
are written when it ends (`end_sequence`, or `close`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from pathlib import Path

import cv2
import numpy as np

from tphyolo.data.categories import NONE, VISDRONE, CategoryTable, table_for, write_table
from tphyolo.data.files.image_io import write_image
from tphyolo.data.mot.layouts import MOT_TEXT, VISDRONE_TEXT
from tphyolo.data.mot.motchallenge import write_mot
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.predict.draw import class_colour, draw_boxes
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.predict.video_out import VideoOut
from tphyolo.predict.writers import visdrone_categories


class TrackWriter:
    """Writes what the flags ask for (see the module docstring); `saved` lists the files and folders written.

    Per sequence: `start_sequence(name, fps=...)`, then `write(...)` per frame, then `end_sequence()`;
    `close()` ends the sequence in progress. `categories`: the table of the rows' category column (see the
    module docstring)."""

    def __init__(
        self,
        save_dir: Path,
        *,
        names: Sequence[str],
        save_mot: bool = False,
        save_visdrone: bool = False,
        save_img: bool = True,
        style: DrawStyle = DEFAULT_STYLE,
        categories: CategoryTable | None = None,
    ) -> None:
        self.save_dir = Path(save_dir)
        self.save_mot, self.save_visdrone, self.save_img = save_mot, save_visdrone, save_img
        self.painter = TrailPainter(names, style=style)
        if categories is None:
            categories = VISDRONE if all(name in VISDRONE.names for name in names) else table_for(names)
        # refused before anything is written; [-1]: a track without a class
        ids = visdrone_categories(names, categories) if save_visdrone else categories.ids_of(names)
        self._categories = np.array([*ids, -1])
        named = [(name, category) for name, category in zip(names, ids, strict=True) if category != NONE]
        self.table = CategoryTable(tuple(n for n, _ in named), tuple(c for _, c in named))  # of the rows
        self.saved: list[Path] = []
        self.save_dir.mkdir(parents=True, exist_ok=True)
        self._name: str | None = None
        self._rows: list[TrackTable] = []
        self._video: VideoOut | None = None
        self._fps: float | None = None

    def start_sequence(self, name: str, *, fps: float | None = None) -> None:
        """Begin sequence `name`; `fps` is the frame rate of its drawn video (None: its frames are images)."""
        self.end_sequence()
        self._name, self._fps, self._rows = name, fps, []
        self.painter.reset()

    def write(self, number: int, boxes, ids, scores, labels, categories=None, *, image: np.ndarray | None = None,
              image_name: str | None = None) -> None:  # fmt: skip
        """The tracks seen in frame `number` (from 1): (M, 4) xyxy `boxes`, (M,) `ids`, `scores`, `labels` (class
        ids into `names`, -1 for none) and `categories` (the category column; None: from `labels`, see the module
        docstring); `image` to draw on, saved as `image_name` when the sequence has no frame rate."""
        if self._name is None:
            raise RuntimeError("TrackWriter.write before start_sequence")
        ids = np.asarray(ids).reshape(-1)
        if categories is None:
            categories = self.categories(labels)
        if self.save_mot or self.save_visdrone:
            self._rows.append(TrackTable.from_columns(np.full(len(ids), number), ids, boxes, scores, categories))
        if self.save_img and image is not None:
            canvas = self.painter.paint(image, boxes, ids, scores, labels)
            if self._fps is not None:
                self._video_frame(canvas)
            else:
                path = self.save_dir / self._name / (image_name or f"{number:07d}.jpg")
                path.parent.mkdir(parents=True, exist_ok=True)
                write_image(path, canvas)
                if path.parent not in self.saved:
                    self.saved.append(path.parent)

    def categories(self, labels) -> np.ndarray:
        """The category column of class ids `labels` (-1: no class), as the module docstring says."""
        labels = np.asarray(labels, dtype=np.int64).reshape(-1)
        return self._categories[np.where((labels >= 0) & (labels < len(self._categories) - 1), labels, -1)]

    def _video_frame(self, canvas: np.ndarray) -> None:
        if self._video is None:
            height, width = canvas.shape[:2]
            self._video = VideoOut(self.save_dir / f"{self._name}.mp4", self._fps, width, height)
            self.saved.append(self._video.path)
        self._video.write(canvas)

    def end_sequence(self) -> None:
        """Write the text files of the sequence in progress and finish its video (nothing when none is)."""
        if self._name is None:
            return
        rows = TrackTable.concatenate(self._rows)
        rows = TrackTable(**{**vars(rows), "truncation": np.full(len(rows), -1), "occlusion": np.full(len(rows), -1)})
        if self.save_mot:
            self.saved.append(write_mot(self.save_dir / MOT_TEXT / f"{self._name}.txt", rows))
            write_table(self.save_dir / MOT_TEXT, self.table)
        if self.save_visdrone:
            self.saved.append(write_visdrone_mot(self.save_dir / VISDRONE_TEXT / f"{self._name}.txt", rows))
            write_table(self.save_dir / VISDRONE_TEXT, self.table)
        if self._video is not None:
            video, self._video = self._video, None
            video.close()
        self._name, self._rows = None, []

    def close(self) -> None:
        self.end_sequence()


class TrailPainter:
    """Draws the tracks of consecutive frames of one sequence: call `paint` frame by frame, `reset()` between
    sequences. A track's trail joins the centres of its boxes in the last `length` frames it was seen in."""

    def __init__(self, names: Sequence[str], *, length: int = 30, style: DrawStyle = DEFAULT_STYLE) -> None:
        self.names, self.length, self.style = tuple(names), length, style
        self.reset()

    def reset(self) -> None:
        self._trails: dict[int, deque[tuple[int, int]]] = {}
        self._last_seen: dict[int, int] = {}
        self._count = 0

    def paint(self, image: np.ndarray, boxes, ids, scores, labels) -> np.ndarray:
        """A copy of uint8 BGR `image` with the tracks seen in it ((M, 4) xyxy `boxes`, (M,) `ids`, `scores`,
        `labels`) drawn with their trails, as `style` says (`7 car 0.91`)."""
        self._count += 1
        boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        ids = np.asarray(ids).reshape(-1).astype(int).tolist()
        for track_id, (x1, y1, x2, y2) in zip(ids, boxes.tolist(), strict=True):
            trail = self._trails.setdefault(track_id, deque(maxlen=self.length))
            trail.append((round((x1 + x2) / 2), round((y1 + y2) / 2)))
            self._last_seen[track_id] = self._count
        for track_id in [t for t, seen in self._last_seen.items() if self._count - seen >= self.length]:
            del self._trails[track_id], self._last_seen[track_id]
        canvas = image.copy()
        thickness = self.style.line_width or max(1, round(sum(image.shape[:2]) / 1000))
        for track_id, trail in self._trails.items():
            if len(trail) > 1:
                points = np.array(trail, np.int32).reshape(-1, 1, 2)
                cv2.polylines(canvas, [points], False, class_colour(track_id), thickness, cv2.LINE_AA)
        return draw_boxes(canvas, boxes, labels, self.names, scores=None if self.style.hide_conf else scores,
                          labels=not self.style.hide_labels, line_width=self.style.line_width, ids=ids)  # fmt: skip
