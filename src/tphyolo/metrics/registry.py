"""Scoring protocols by name: `tphyolo val --protocol` and `tphyolo eval --protocol` take their choices from here.

A new protocol is a class with `name`, `needs_image_size` and `score` (the `tphyolo.metrics.protocol.Protocol`
interface) in its own module, and one line in `PROTOCOLS`.
"""

from __future__ import annotations

from tphyolo.metrics.coco import CocoProtocol
from tphyolo.metrics.protocol import Protocol
from tphyolo.metrics.visdrone import VisDroneProtocol
from tphyolo.metrics.yolo import YoloProtocol

PROTOCOLS: dict[str, Protocol] = {
    "yolo": YoloProtocol(),
    "coco": CocoProtocol(),
    "visdrone": VisDroneProtocol(),
}


def get_protocol(name: str) -> Protocol:
    """The protocol registered as `name`; raises ValueError listing the known ones."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}; known: {list(PROTOCOLS)}") from None
