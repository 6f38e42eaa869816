"""Scoring protocols by name: `tphyolo val --protocol` and `tphyolo eval --protocol` take their choices from here.

A new protocol is a class with `name`, `needs_image_size`, `saved_formats`, `yolo_metrics`, `ignore_rules` and
`score` (the `tphyolo.metrics.protocol.Protocol` interface) in its own module, and one line in `PROTOCOL_CLASSES`: the
validation loop and the report ask the protocol object, never its name. A protocol's module is imported when the
protocol is first used, so reading the names (a command-line parser) imports neither numpy nor torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.errors import InputError

if TYPE_CHECKING:
    from tphyolo.metrics.protocol import Protocol

# The files of saved detections and ground truth a protocol may score (`Protocol.saved_formats`).
VISDRONE_TXT = "visdrone-txt"  # folders of VisDrone annotation / result txt files: pixels, any protocol's rules
COCO_JSON = "coco-json"  # a COCO dataset json and a COCO results json
GEOJSON = "geojson"  # GeoJSON polygons in map units, matched by box IoU (AP50, AP50-95)


def saved_format(path: Path) -> str:
    """The saved format of the ground truth `path`, by its suffix: GEOJSON, COCO_JSON, or (a folder)
    VISDRONE_TXT."""
    return {".geojson": GEOJSON, ".json": COCO_JSON}.get(path.suffix, VISDRONE_TXT)


# name -> "module:Class" of the protocol; the order is the order of `--protocol` choices
PROTOCOL_CLASSES: dict[str, str] = {
    "yolo": "tphyolo.metrics.yolo:YoloProtocol",
    "coco": "tphyolo.metrics.coco:CocoProtocol",
    "visdrone": "tphyolo.metrics.visdrone:VisDroneProtocol",
}


@cache
def _instance(name: str) -> Protocol:
    module, cls = PROTOCOL_CLASSES[name].split(":")
    return getattr(importlib.import_module(module), cls)()


class _Registry(Mapping[str, "Protocol"]):
    """The protocols by name, each built once, when first looked up."""

    def __getitem__(self, name: str) -> Protocol:
        if name not in PROTOCOL_CLASSES:
            raise KeyError(name)
        return _instance(name)

    def __iter__(self) -> Iterator[str]:
        return iter(PROTOCOL_CLASSES)

    def __len__(self) -> int:
        return len(PROTOCOL_CLASSES)


PROTOCOLS: Mapping[str, Protocol] = _Registry()


def get_protocol(name: str) -> Protocol:
    """The protocol registered as `name`; raises ValueError listing the known ones."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise InputError(f"unknown protocol {name!r}; known: {list(PROTOCOLS)}") from None
