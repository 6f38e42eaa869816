"""Label Studio JSON tasks: the list of tasks Label Studio imports (with `predictions`: pre-annotations) and its
"JSON" export writes (with `annotations`: the labels people made).

    [{"data": {"image": "/data/local-files/?d=flight/a.jpg"},
      "annotations": [{"result": [RESULT, ...]}],             # the export's labels
      "predictions": [{"model_version": "best.pt", "score": 0.61, "result": [RESULT, ...]}]}]
    RESULT = {"type": "rectanglelabels", "from_name": "label", "to_name": "image", "original_width": 1920,
              "original_height": 1080, "value": {"x": 12.5, "y": 40.0, "width": 2.1, "height": 3.3,
              "rotation": 0, "rectanglelabels": ["car"]}, "score": 0.91}

`x`, `y`, `width`, `height` are percent of the image's sides (top-left corner and size); a `rotation` (degrees,
clockwise about the top-left corner, as Label Studio turns boxes, in the pixels of `original_width` x
`original_height`) gives the enclosing box of the turned one.
Results of other types (keypoints, polygons, choices) are left out. Reading takes a task's last annotation that
was not cancelled (a task nobody annotated, or whose annotations were all cancelled, is left out of the split:
its predictions were not checked); its boxes become labels, mapped to classes by name (`tool_files`, ignore
regions included). `data.image` names the image: Label Studio's local-files URL (`?d=`), an uploaded file
(`/data/upload/3/1a2b3c4d-a.jpg`), or any URL or path, matched by path and then by file name under the
split's images (`tool_files.ImageFinder`).

A split is such a `.json` given as the split source (a list of tasks; a COCO file is a mapping), or an `images/`
folder with `../tasks.json`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlparse

import numpy as np

from tphyolo.data.files.json_files import load_json_text
from tphyolo.data.formats.base import LabeledImage
from tphyolo.data.formats.tool_files import ExportFormat, NamedBoxes, read_export, relative_ref, tool_rows
from tphyolo.data.labels import LabelError
from tphyolo.errors import InputError

BESIDE = "tasks.json"
LOCAL_FILES = "/data/local-files/?d="  # Label Studio's URL of a file under LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT


def image_ref(url: str) -> str:
    """The path a task's `data.image` names: the `d` of a local-files URL, else the URL's path, unquoted."""
    parsed = urlparse(url)
    if "d" in (query := parse_qs(parsed.query)):
        return query["d"][0]
    return unquote(parsed.path if parsed.scheme or parsed.path else url)


def _turned(x: float, y: float, w: float, h: float, degrees: float) -> tuple[float, float, float, float]:
    """The enclosing box of the box (x, y, w, h) turned by `degrees` clockwise about (x, y)."""
    a = math.radians(degrees)
    corners = [(x + dx * math.cos(a) - dy * math.sin(a), y + dx * math.sin(a) + dy * math.cos(a))
               for dx, dy in ((0, 0), (w, 0), (w, h), (0, h))]  # fmt: skip
    xs, ys = [c[0] for c in corners], [c[1] for c in corners]
    return min(xs), min(ys), max(xs), max(ys)


def _box(result: dict, where: str) -> tuple[str, tuple[float, ...], tuple[int, int] | None]:
    """(label, xyxy in fractions of the image's sides, the original size it gives) of a rectanglelabels result."""
    value = result.get("value")
    if not isinstance(value, dict):
        raise LabelError(f"{where}: 'value' must be a mapping")
    numbers = []
    for key in ("x", "y", "width", "height", "rotation"):
        v = value.get(key, 0 if key == "rotation" else None)
        if type(v) not in (int, float) or not math.isfinite(v):
            raise LabelError(f"{where}: value '{key}' must be a finite number, got {v!r:.40}")
        numbers.append(float(v))
    x, y, w, h, rotation = numbers
    if w < 0 or h < 0:
        raise LabelError(f"{where}: negative box size {w:g}x{h:g}")
    labels = value.get("rectanglelabels")
    if not isinstance(labels, list) or len(labels) != 1 or not isinstance(labels[0], str):
        raise LabelError(f"{where}: 'rectanglelabels' must be a list of one label name, got {labels!r:.60}")
    size = tuple(result.get(k) for k in ("original_width", "original_height"))
    size = size if all(type(v) is int and v > 0 for v in size) else None
    box = (x / 100, y / 100, (x + w) / 100, (y + h) / 100)
    if rotation % 360:  # turned in pixels: percent of two sides are not one unit
        if size is None:
            raise LabelError(f"{where}: a turned box needs 'original_width' and 'original_height'")
        sw, sh = size[0] / 100, size[1] / 100
        x1, y1, x2, y2 = _turned(x * sw, y * sh, w * sw, h * sh, rotation)
        box = (x1 / size[0], y1 / size[1], x2 / size[0], y2 / size[1])
    return labels[0], box, size


def _task(task: object, path: Path, index: int) -> NamedBoxes | None:
    """The image of a task with its last annotation that was not cancelled, None when it has none."""
    where = f"{path}: task {index}"
    if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
        raise LabelError(f"{where}: a task is a mapping with a 'data' mapping")
    url = task["data"].get("image")
    if not isinstance(url, str) or not url:
        raise LabelError(f"{where}: 'data' has no 'image' (the image's URL or path)")
    annotations = task.get("annotations", [])
    if not isinstance(annotations, list) or not all(isinstance(a, dict) for a in annotations):
        raise LabelError(f"{where}: 'annotations' must be a list of mappings")
    kept = [a for a in annotations if not a.get("was_cancelled")]
    if not kept:
        return None
    results = kept[-1].get("result", [])
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise LabelError(f"{where}: an annotation's 'result' must be a list of mappings")
    labels, boxes, sizes = [], [], set()
    for k, result in enumerate(r for r in results if r.get("type") == "rectanglelabels"):
        label, box, size = _box(result, f"{where} ({image_ref(url)}): result {k}")
        labels.append(label)
        boxes.append(box)
        sizes.add(size)
    size = next(iter(sizes)) if len(sizes) == 1 else None
    return NamedBoxes(image_ref(url), size, tuple(labels), np.array(boxes, dtype=np.float64).reshape(-1, 4), True)


def load_label_studio(path: Path) -> list[NamedBoxes]:
    """The annotated images of Label Studio tasks file `path` (module docstring). Raises LabelError naming the
    file (and the task) when it is above MAX_EXPORT_BYTES, not UTF-8 JSON, not a list of tasks, or has a
    malformed task or box, or names one image twice."""
    try:
        tasks = load_json_text(read_export(path, "Label Studio file").decode("utf-8"), str(path),
                               what="Label Studio tasks")  # fmt: skip
    except UnicodeDecodeError as error:
        raise LabelError(f"{path}: not UTF-8 text (byte {error.start})") from None
    except InputError as error:
        raise LabelError(str(error)) from None
    if not isinstance(tasks, list):
        raise LabelError(f"{path}: Label Studio tasks are a list, got {type(tasks).__name__}")
    images = [image for i, task in enumerate(tasks) if (image := _task(task, path, i)) is not None]
    seen: set[str] = set()
    for image in images:
        if image.ref in seen:
            raise LabelError(f"{path}: image {image.ref!r} is annotated in two tasks")
        seen.add(image.ref)
    return images


def _result(label: str, box: tuple[float, ...], score: float | None, width: int, height: int) -> dict:
    x1, y1, x2, y2 = box
    value = {"x": 100 * x1 / width, "y": 100 * y1 / height, "width": 100 * (x2 - x1) / width,
             "height": 100 * (y2 - y1) / height, "rotation": 0, "rectanglelabels": [label]}  # fmt: skip
    result = {"type": "rectanglelabels", "from_name": "label", "to_name": "image", "original_width": width,
              "original_height": height, "image_rotation": 0, "value": value}  # fmt: skip
    return result if score is None else result | {"score": round(score, 5)}


def label_studio_tasks(images: Sequence[LabeledImage], names: Sequence[str], *, base: Path | None = None,
                       model: str = "tphyolo") -> list[dict]:  # fmt: skip
    """One task per image (named relative to `base`, default their `images/` folder, as a local-files URL):
    labels with scores (predictions) as `predictions` of `model` (score: their mean), others as `annotations`;
    ignore regions as IGNORE_LABEL boxes. Results name the tag `label` of the image `image`."""
    tasks = []
    for im in images:
        result = [_result(label, box, score, im.width, im.height) for label, box, score in tool_rows(im, names)]
        data = {"image": LOCAL_FILES + quote(relative_ref(im, base))}
        if im.scores is None:
            tasks.append({"data": data, "annotations": [{"result": result}]})
            continue
        score = float(np.mean(im.scores)) if len(im.scores) else 0.0
        tasks.append({"data": data, "predictions": [{"model_version": model, "score": round(score, 5),
                                                     "result": result}]})  # fmt: skip
    return tasks


def is_task_list(path: Path) -> bool:
    """Whether the JSON file `path` holds a list (tasks), not a mapping (a COCO dataset): its first character."""
    with open(path, "rb") as file:
        head = file.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


class LabelStudioFormat(ExportFormat):
    """One tasks file per split (module docstring)."""

    name, suffix, beside, what = "label-studio", ".json", BESIDE, "Label Studio tasks"

    def claims(self, path: Path) -> bool:
        return is_task_list(path)

    def load(self, path: Path) -> tuple[tuple[str, ...], list[NamedBoxes]]:
        return (), load_label_studio(path)

    def serialize(self, images: Sequence[LabeledImage], names: Sequence[str]) -> str:
        return json.dumps(label_studio_tasks(images, names))
