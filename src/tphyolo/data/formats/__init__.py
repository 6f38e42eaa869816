"""On-disk label formats and their registry.

`FORMATS` maps a format's name to its `LabelFormat` (see `base.py` for the interface). The scan tries them in
this order: first the whole-split formats on each split source, then, per image, the first format whose label
folder exists (so VisDrone `annotations/` win over YOLO `labels/`, as they keep ignore regions). The exports of
labelling tools (CVAT for images 1.1, Label Studio tasks) name their labels: the scan maps them by the data set's
names (`tool_files`).
Adding a format is one module implementing `LabelFormat` plus one line here.
"""

from __future__ import annotations

from tphyolo.data.formats.base import LabelFormat
from tphyolo.data.formats.coco import CocoFormat
from tphyolo.data.formats.cvat import CvatFormat
from tphyolo.data.formats.label_studio import LabelStudioFormat
from tphyolo.data.formats.visdrone import VisDroneFormat
from tphyolo.data.formats.yolo import YoloFormat
from tphyolo.errors import InputError

FORMATS: dict[str, LabelFormat] = {
    "visdrone": VisDroneFormat(),
    "yolo": YoloFormat(),
    "cvat": CvatFormat(),
    "label-studio": LabelStudioFormat(),  # before COCO: both read a split's .json (tasks are a list, COCO a mapping)
    "coco": CocoFormat(),
}


def get_format(name: str) -> LabelFormat:
    """The registered format called `name`; raises ValueError listing the known ones."""
    if name not in FORMATS:
        raise InputError(f"unknown label format {name!r}; known: {sorted(FORMATS)}")
    return FORMATS[name]
