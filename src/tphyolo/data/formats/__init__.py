"""On-disk label formats and their registry.

`FORMATS` maps a format's name to its `LabelFormat` (see `base.py` for the interface). The scan tries them in
this order: first the whole-split formats on each split source, then, per image, the first format whose label
folder exists (so VisDrone `annotations/` win over YOLO `labels/`, as they keep ignore regions).
Adding a format is one module implementing `LabelFormat` plus one line here.
"""

from __future__ import annotations

from tphyolo.data.formats.base import LabelFormat
from tphyolo.data.formats.coco import CocoFormat
from tphyolo.data.formats.visdrone import VisDroneFormat
from tphyolo.data.formats.yolo import YoloFormat
from tphyolo.errors import InputError

FORMATS: dict[str, LabelFormat] = {
    "visdrone": VisDroneFormat(),
    "yolo": YoloFormat(),
    "coco": CocoFormat(),
}


def get_format(name: str) -> LabelFormat:
    """The registered format called `name`; raises ValueError listing the known ones."""
    if name not in FORMATS:
        raise InputError(f"unknown label format {name!r}; known: {sorted(FORMATS)}")
    return FORMATS[name]
