"""CVAT for images 1.1 (XML), the format CVAT exports a task's or project's annotations in and imports them from.

    <annotations>
      <version>1.1</version>
      <meta><task><name>...</name><labels><label><name>car</name>...</label>...</labels></task></meta>
      <image id="0" name="a/b.jpg" width="1920" height="1080">
        <box label="car" source="manual" occluded="0" xtl="10.5" ytl="20" xbr="40" ybr="52.25" z_order="0">
          <attribute name="score">0.91</attribute>
        </box>
      </image>
    </annotations>

Boxes are pixel corners (xtl, ytl) - (xbr, ybr); a `rotation` (degrees) gives the enclosing box of the turned
one, a polygon its enclosing box; other shapes (points, polylines, ellipses, masks) are not boxes and are left
out. Image `name`s are relative to the split's images (`tool_files`): CVAT's export zip holds `annotations.xml`
beside `images/`, the layout read as `images/` with `../annotations.xml`. Labels map to classes by name, and a
label named as ignored regions ("ignored regions", "ignore") marks ignore regions (`tool_files`).

The file is parsed only after its size is checked (`MAX_EXPORT_BYTES`) and when it declares no document type
and no entity (`<!DOCTYPE`, `<!ENTITY`): CVAT writes neither, and entities are how an XML file expands to
gigabytes.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

import numpy as np

from tphyolo.data.formats.base import LabeledImage
from tphyolo.data.formats.tool_files import IGNORE_LABEL, ExportFormat, NamedBoxes, read_export, relative_ref, tool_rows
from tphyolo.data.labels import LabelError

BESIDE = "annotations.xml"
SCORE_ATTRIBUTE = "score"  # the predictions' scores, an attribute of each label in the files predict writes


def _number(element: ET.Element, key: str, where: str) -> float:
    value = element.get(key)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise LabelError(f"{where}: '{key}' must be a number, got {value!r:.40}") from None
    if not math.isfinite(number):
        raise LabelError(f"{where}: '{key}' must be finite, got {value!r:.40}")
    return number


def _turned(x1: float, y1: float, x2: float, y2: float, degrees: float) -> tuple[float, float, float, float]:
    """The enclosing box of the box turned by `degrees` (clockwise, about its centre, as CVAT turns it)."""
    cx, cy, a = (x1 + x2) / 2, (y1 + y2) / 2, math.radians(degrees)
    half_w = abs((x2 - x1) / 2 * math.cos(a)) + abs((y2 - y1) / 2 * math.sin(a))
    half_h = abs((x2 - x1) / 2 * math.sin(a)) + abs((y2 - y1) / 2 * math.cos(a))
    return cx - half_w, cy - half_h, cx + half_w, cy + half_h


def _shape_box(shape: ET.Element, where: str) -> tuple[float, ...]:
    if shape.tag == "box":
        box = tuple(_number(shape, key, where) for key in ("xtl", "ytl", "xbr", "ybr"))
        if box[2] < box[0] or box[3] < box[1]:
            raise LabelError(f"{where}: corners (xbr, ybr) above (xtl, ytl): {box}")
        rotation = _number(shape, "rotation", where) if "rotation" in shape.attrib else 0.0
        return _turned(*box, rotation) if rotation % 360 else box
    try:  # a polygon: "x1,y1;x2,y2;..."
        points = np.array([[float(v) for v in p.split(",")] for p in shape.get("points", "").split(";")])
    except ValueError:
        raise LabelError(f"{where}: 'points' must be x,y pairs separated by ';'") from None
    if points.ndim != 2 or points.shape[1] != 2 or not np.isfinite(points).all():
        raise LabelError(f"{where}: 'points' must be finite x,y pairs separated by ';'")
    return (*points.min(0).tolist(), *points.max(0).tolist())


def _image(element: ET.Element, path: Path, index: int) -> NamedBoxes:
    name = element.get("name")
    if not name:
        raise LabelError(f"{path}: <image> {index} has no 'name'")
    where = f"{path}: image {name!r}"
    size = None
    if "width" in element.attrib or "height" in element.attrib:
        size = tuple(int(_number(element, key, where)) for key in ("width", "height"))
    labels, boxes = [], []
    for k, shape in enumerate(s for s in element if s.tag in ("box", "polygon")):
        label = shape.get("label")
        if not label:
            raise LabelError(f"{where}: {shape.tag} {k} has no 'label'")
        labels.append(label)
        boxes.append(_shape_box(shape, f"{where}: {shape.tag} {k}"))
    return NamedBoxes(name, size, tuple(labels), np.array(boxes, dtype=np.float64).reshape(-1, 4))


def load_cvat(path: Path) -> tuple[tuple[str, ...], list[NamedBoxes]]:
    """The labels `<meta>` lists and the images of CVAT for images 1.1 file `path`. Raises LabelError naming
    the file for one above MAX_EXPORT_BYTES, not UTF-8, declaring a DTD or entities, not well-formed XML, not a
    CVAT `<annotations>` document, or with a malformed image or shape (naming the image)."""
    data = read_export(path, "CVAT file")
    head = data.lstrip(b"\xef\xbb\xbf")
    if b"<!DOCTYPE" in head.upper() or b"<!ENTITY" in head.upper():
        raise LabelError(f"{path}: declares a DTD or entities (<!DOCTYPE, <!ENTITY>); CVAT files have none, and "
                         "they are refused")  # fmt: skip
    try:
        root = ET.fromstring(head)
    except ET.ParseError as error:
        raise LabelError(f"{path}: not well-formed XML ({error})") from None
    if root.tag != "annotations":
        raise LabelError(f"{path}: a CVAT for images file has an <annotations> root, got <{root.tag}>")
    listed = tuple(n.text.strip() for n in root.iterfind("meta/*/labels/label/name") if n.text and n.text.strip())
    images = [_image(element, path, i) for i, element in enumerate(root.iterfind("image"))]
    seen: set[str] = set()
    for image in images:
        if image.ref in seen:
            raise LabelError(f"{path}: image {image.ref!r} is listed twice")
        seen.add(image.ref)
    return listed, images


def cvat_xml(images: Sequence[LabeledImage], names: Sequence[str], *, base: Path | None = None,
             task: str = "tphyolo") -> str:  # fmt: skip
    """A CVAT for images 1.1 document of `images` (named relative to `base`, default their `images/` folder):
    every class a label, ignore regions as IGNORE_LABEL boxes, a prediction's score as the `score` attribute
    (declared on every label, so CVAT imports it); `task` names the task in `<meta>`."""
    score = (f"<attributes><attribute><name>{SCORE_ATTRIBUTE}</name><mutable>False</mutable><input_type>text"
             "</input_type><default_value></default_value><values></values></attribute></attributes>")  # fmt: skip
    with_scores = any(im.scores is not None for im in images)
    labels = "".join(f"<label><name>{_text(n)}</name>{score if with_scores else ''}</label>"
                     for n in (*names, IGNORE_LABEL))  # fmt: skip
    lines = ["<?xml version='1.0' encoding='utf-8'?>", "<annotations>", "  <version>1.1</version>",
             f"  <meta><task><name>{_text(task)}</name><size>{len(images)}</size><mode>annotation</mode>"
             f"<labels>{labels}</labels></task></meta>"]  # fmt: skip
    for i, im in enumerate(images):
        ref = quoteattr(relative_ref(im, base))
        lines.append(f'  <image id="{i}" name={ref} width="{im.width}" height="{im.height}">')
        for label, (x1, y1, x2, y2), value in tool_rows(im, names):
            source = "manual" if value is None else "auto"
            attribute = "" if value is None else f'<attribute name="{SCORE_ATTRIBUTE}">{value:.5f}</attribute>'
            lines.append(f'    <box label={quoteattr(label)} source="{source}" occluded="0" xtl="{x1:.2f}" '
                         f'ytl="{y1:.2f}" xbr="{x2:.2f}" ybr="{y2:.2f}" z_order="0">{attribute}</box>')  # fmt: skip
        lines.append("  </image>")
    lines.append("</annotations>")
    return "\n".join(lines) + "\n"


def _text(value: str) -> str:
    return quoteattr(value)[1:-1]


class CvatFormat(ExportFormat):
    """One CVAT for images 1.1 file per split (module docstring)."""

    name, suffix, beside, what = "cvat", ".xml", BESIDE, "CVAT labels"

    def load(self, path: Path) -> tuple[tuple[str, ...], list[NamedBoxes]]:
        return load_cvat(path)

    def serialize(self, images: Sequence[LabeledImage], names: Sequence[str]) -> str:
        return cvat_xml(images, names)
