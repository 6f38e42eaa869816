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
- drawn frames (`save_img`), with track ids and trails (`tphyolo.track.draw.TrailPainter`): `<seq>.mp4` for a
  video or a stream, `<seq>/<frame file name>` for image frames.

Frames are numbered from 1 in their sequence; boxes are in pixels of the frame. The text files of a sequence
are written when it ends (`end_sequence`, or `close`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tphyolo.data.categories import NONE, VISDRONE, CategoryTable, table_for, write_table
from tphyolo.data.files.image_io import write_image
from tphyolo.data.mot.layouts import MOT_TEXT, VISDRONE_TEXT
from tphyolo.data.mot.motchallenge import write_mot
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.visdrone_mot import write_visdrone_mot
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.predict.video_out import VideoOut
from tphyolo.predict.writers import visdrone_categories
from tphyolo.track.draw import TrailPainter


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
