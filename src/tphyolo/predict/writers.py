"""Prediction outputs: annotated images and videos, VisDrone submission txt, YOLO txt, COCO results json.

All boxes are written in original-image pixels (YOLO txt: normalised by the image size). One output name per
image, unique per source file (`tphyolo.predict.sources.source_names`: the path relative to the sources' common
folder without its suffix, e.g. `a/x` and `b/x`; a plain stem for files of one folder), `NAME_FRAME` (frame
number, 6 digits) for a video frame. Annotated images keep the source's suffix (`a/x.jpg`); videos are `NAME.mp4`.

- VisDrone (`visdrone/NAME.txt`): `x,y,w,h,score,category,-1,-1` per line, left/top/width/height in pixels,
  category the class's number in the category table of the files (`categories`, a
  `tphyolo.data.categories.CategoryTable`; default: the table a data set of the model's classes has without a
  `categories:` mapping, class index + 1, which is VisDrone-DET's for VisDrone's classes, matched by name: a
  class the table lacks is refused), lines by descending score (the VisDrone2019-DET submission format).
- YOLO (`labels/NAME.txt`): `class cx cy w h [score]`, normalised to [0, 1].
- COCO (`predictions.json`): a list of `{"image_id": id, "category_id": class id, "bbox": [x, y, w, h],
  "score": s}`; integer image ids by `tphyolo.metrics.coco.coco_image_ids` over the output names in the order
  written (the names' numbers when all are distinct numbers, else 1, 2, ...), the rule by which `tphyolo eval
  --save-gt` numbers the ground truth of a VisDrone folder: predictions of an image folder sorted by name
  score against it directly. With `image_ids` (`--coco-gt`: a COCO dataset's ids by file name), those ids.
- Crops (`crops/CLASS/NAME_K.jpg`): each detection's box cut from the image, K its rank in the image.
- CVAT (`annotations.xml`, CVAT for images 1.1) and Label Studio (`label-studio.json`, tasks with `predictions`
  of the model, `model`): every image's detections with their scores, images named by their output name and
  suffix (`a/x.jpg`), for a person to correct (`tphyolo.data.formats.cvat`, `.label_studio`); written when the
  run ends. Video frames are left out (the tools take a video as one task).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

import numpy as np

from tphyolo.data.categories import NONE, CategoryTable, table_for
from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.image_io import write_image
from tphyolo.data.files.json_files import load_json_file
from tphyolo.data.formats.base import LabeledImage
from tphyolo.data.formats.cvat import cvat_xml
from tphyolo.data.formats.label_studio import label_studio_tasks
from tphyolo.data.labels import ImageLabels
from tphyolo.errors import InputError
from tphyolo.metrics.coco import coco_image_ids
from tphyolo.ops.detections import Detections
from tphyolo.predict.draw import draw_detections
from tphyolo.predict.draw_style import DEFAULT_STYLE, DrawStyle
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.results import save_crops
from tphyolo.predict.sources import Frame
from tphyolo.predict.video_out import VideoOut


def output_name(frame: Frame) -> str:
    name = frame.name if frame.name is not None else frame.path.stem
    return f"{name}_{frame.index:06d}" if frame.is_video else name


def visdrone_categories(names: Sequence[str], table: CategoryTable | None = None) -> tuple[int, ...]:
    """The category each of the classes `names` is written under in files of `table` (default
    `tphyolo.data.categories.table_for(names)`), matched by name. Raises ValueError naming the classes the table
    lacks: their detections would have no category."""
    table = table_for(names) if table is None else table
    ids = table.ids_of(names)
    missing = [name for name, category in zip(names, ids, strict=True) if category == NONE]
    if missing:
        raise InputError(f"the model's classes {', '.join(missing[:5])} have no category in the table of "
                         f"{', '.join(table.names)}")  # fmt: skip
    return ids


def visdrone_lines(detections: Detections, categories: Sequence[int]) -> list[str]:
    """VisDrone submission lines, by descending score; `categories[class id]` is the class's category number."""
    order = detections.scores.argsort(descending=True, stable=True)
    lines = []
    for i in order.tolist():
        x1, y1, x2, y2 = detections.boxes[i].tolist()
        score, category = float(detections.scores[i]), categories[int(detections.labels[i])]
        lines.append(f"{x1:.2f},{y1:.2f},{x2 - x1:.2f},{y2 - y1:.2f},{score:.5f},{category},-1,-1")
    return lines


def yolo_lines(detections: Detections, *, width: int, height: int, with_score: bool) -> list[str]:
    """YOLO label lines `class cx cy w h [score]`, normalised by the image's width and height."""
    lines = []
    rows = zip(detections.boxes.tolist(), detections.scores.tolist(), detections.labels.tolist(), strict=True)
    for (x1, y1, x2, y2), score, label in rows:
        cx, cy, w, h = (x1 + x2) / 2 / width, (y1 + y2) / 2 / height, (x2 - x1) / width, (y2 - y1) / height
        line = f"{label} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}"
        lines.append(f"{line} {score:.5f}" if with_score else line)
    return lines


def coco_records(detections: Detections, image_id: int | str) -> list[dict]:
    """COCO results entries (bbox = left, top, width, height in pixels)."""
    records = []
    rows = zip(detections.boxes.tolist(), detections.scores.tolist(), detections.labels.tolist(), strict=True)
    for (x1, y1, x2, y2), score, label in rows:
        bbox = [round(x1, 3), round(y1, 3), round(x2 - x1, 3), round(y2 - y1, 3)]
        records.append({"image_id": image_id, "category_id": label, "bbox": bbox, "score": round(score, 5)})
    return records


def coco_predictions(named: Sequence[tuple[str, Detections]], image_ids: Mapping[str, int] | None = None) -> list[dict]:
    """The predictions.json records of images given as (output name, detections), in order: image ids from
    `image_ids` by name when given, else by `coco_image_ids` over the names (see the module docstring)."""
    names = [name for name, _ in named]
    ids = [image_ids[n] for n in names] if image_ids is not None else coco_image_ids(names)
    records = []
    for image_id, (_, detections) in zip(ids, named, strict=True):
        records += coco_records(detections, image_id)
    return records


def coco_gt_image_ids(path: Path) -> dict[str, int]:
    """The image ids of the COCO dataset json `path` by file name without its suffix, posix-style (`x`,
    `sub/x`): the output names of the images they match. Raises ValueError naming the file when it is not a
    COCO dataset with integer image ids, or when two of its images share a name."""
    data = load_json_file(path, what="COCO dataset")
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, list):
        raise InputError(f"{path}: a COCO dataset needs an 'images' list")
    ids: dict[str, int] = {}
    for i, image in enumerate(images):
        named = isinstance(image, dict) and isinstance(image.get("file_name"), str)
        if not named or type(image.get("id")) is not int:
            raise InputError(f"{path}: image {i} needs an integer 'id' and a 'file_name'")
        name = PurePosixPath(image["file_name"].replace("\\", "/")).with_suffix("").as_posix()
        if name in ids:
            raise InputError(f"{path}: images {ids[name]} and {image['id']} are both named {name!r}")
        ids[name] = image["id"]
    return ids


class PredictionWriter:
    """Writes the `outputs` chosen by the flags into `save_dir` (all of OutputSettings' save_* fields; its `coco_gt`
    is for the caller, who passes `image_ids`); call `close()` at the end (writes the json,
    finishes videos). Returns nothing; `saved` lists the files and folders written. `image_ids`: the COCO image
    id of each output name (`coco_gt_image_ids`); `write` raises ValueError for an image it does not name.
    `categories`: the category table of the VisDrone files (`visdrone_categories`). `model`: the model's name in
    the labelling tools' files."""

    def __init__(
        self,
        save_dir: Path,
        *,
        names: list[str],
        outputs: OutputSettings | None = None,
        style: DrawStyle = DEFAULT_STYLE,
        image_ids: Mapping[str, int] | None = None,
        categories: CategoryTable | None = None,
        model: str = "tphyolo",
    ) -> None:
        outputs = outputs or OutputSettings()  # None: the defaults of `tphyolo predict`
        save_img, save_txt, save_conf = outputs.save_img, outputs.save_txt, outputs.save_conf
        save_visdrone, save_json, save_crop = outputs.save_visdrone, outputs.save_json, outputs.save_crop
        # refused before anything is written
        self.categories = visdrone_categories(names, categories) if save_visdrone else ()
        self.save_dir = Path(save_dir)
        self.names = names
        self.save_img, self.save_txt, self.save_conf = save_img, save_txt, save_conf
        self.save_visdrone, self.save_json, self.save_crop = save_visdrone, save_json, save_crop
        self.style, self.image_ids = style, image_ids
        self.json_images: list[tuple[str, Detections]] = []
        self.save_cvat, self.save_label_studio, self.model = outputs.save_cvat, outputs.save_label_studio, model
        self.tool_images: list[LabeledImage] = []  # the labelling tools' files, written by `close`
        self.videos: dict[str, VideoOut] = {}  # by output name
        self.saved: list[Path] = []
        self.save_dir.mkdir(parents=True, exist_ok=True)

    def write(self, frame: Frame, detections: Detections) -> None:
        name = output_name(frame)
        if self.save_json and self.image_ids is not None and name not in self.image_ids:
            raise InputError(f"{frame.path}: the COCO ground truth has no image named {name!r}")
        height, width = frame.image.shape[:2]
        if self.save_img:
            canvas = draw_detections(frame.image, detections, self.names, style=self.style)
            if frame.is_video:
                self._video_frame(frame, canvas)
            else:
                path = self.save_dir / f"{name}{frame.path.suffix}"
                path.parent.mkdir(parents=True, exist_ok=True)
                self.saved.append(write_image(path, canvas))
        if self.save_visdrone:
            self._text(self.save_dir / "visdrone" / f"{name}.txt", visdrone_lines(detections, self.categories))
        if self.save_txt:
            lines = yolo_lines(detections, width=width, height=height, with_score=self.save_conf)
            self._text(self.save_dir / "labels" / f"{name}.txt", lines)
        if self.save_json:
            self.json_images.append((name, detections))
        if self.save_crop:
            self.saved += save_crops(frame.image, detections, self.names, self.save_dir / "crops", name)
        if (self.save_cvat or self.save_label_studio) and not frame.is_video:
            labels = ImageLabels(detections.labels.numpy(), detections.boxes.numpy())
            image = Path(f"{name}{frame.path.suffix}")
            self.tool_images.append(LabeledImage(image, height, width, labels, detections.scores.numpy()))

    def _text(self, path: Path, lines: list[str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        self.saved.append(path)

    def _video_frame(self, frame: Frame, canvas: np.ndarray) -> None:
        name = frame.name if frame.name is not None else frame.path.stem
        writer = self.videos.get(name)
        if writer is None:
            height, width = canvas.shape[:2]
            writer = VideoOut(self.save_dir / f"{name}.mp4", frame.fps, width, height)
            self.videos[name] = writer
            self.saved.append(writer.path)
        writer.write(canvas)

    def end_file(self, name: str) -> None:
        """Finish the outputs of the file whose output name is `name` (its annotated video): call after its last
        frame, so that its files are complete before the run ends."""
        writer = self.videos.pop(name, None)
        if writer is not None:
            writer.close()

    def close(self) -> None:
        videos, self.videos = list(self.videos.values()), {}
        for writer in videos:
            writer.close()
        if self.save_json:
            records = coco_predictions(self.json_images, self.image_ids)
            self._whole(self.save_dir / "predictions.json", json.dumps(records))
        here = Path()  # the images are named by their output names
        if self.save_cvat:
            self._whole(self.save_dir / "annotations.xml", cvat_xml(self.tool_images, self.names, base=here,
                                                                      task=self.model))  # fmt: skip
        if self.save_label_studio:
            tasks = label_studio_tasks(self.tool_images, self.names, base=here, model=self.model)
            self._whole(self.save_dir / "label-studio.json", json.dumps(tasks))

    def _whole(self, path: Path, text: str) -> None:
        write_text_atomic(path, text)
        self.saved.append(path)
