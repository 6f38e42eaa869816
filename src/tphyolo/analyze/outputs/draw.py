"""Drawing the analytics on a frame: lines and zones where the ground puts them now, the counts so far, and each
track's box with its id, class and speed."""

from __future__ import annotations

import cv2
import numpy as np

from tphyolo.analyze.counter import Counter
from tphyolo.analyze.motion import GroundMotion
from tphyolo.analyze.zones import Zones
from tphyolo.predict.draw import class_colour

LINE_BGR = (0, 255, 255)
ZONE_BGR = (255, 200, 0)


def draw_analytics(image: np.ndarray, *, ground: GroundMotion, counter: Counter, zones: Zones, boxes: np.ndarray,
                   ids: np.ndarray, labels: list[str], speeds: np.ndarray) -> np.ndarray:  # fmt: skip
    """A copy of uint8 BGR `image` with the regions (mapped from the ground into this frame), the line counts
    and zone occupancy in a panel, and the tracks' `boxes` (M, 4) xyxy labelled `id class km/h`."""
    canvas = image.copy()
    thickness = max(1, round(sum(image.shape[:2]) / 1000))
    for line in counter.lines:
        points = np.round(ground.to_image(line.points)).astype(np.int32)
        cv2.polylines(canvas, [points], False, LINE_BGR, thickness + 1, cv2.LINE_AA)
        cv2.arrowedLine(canvas, tuple(points[-2].tolist()), tuple(points[-1].tolist()), LINE_BGR, thickness + 1,
                        cv2.LINE_AA, tipLength=12 / max(1.0, float(np.hypot(*(points[-1] - points[-2])))))  # fmt: skip
    for zone in zones.zones:
        points = np.round(ground.to_image(zone.points)).astype(np.int32)
        cv2.polylines(canvas, [points], True, ZONE_BGR, thickness + 1, cv2.LINE_AA)
    for (x1, y1, x2, y2), track, label, speed in zip(boxes.tolist(), ids.tolist(), labels, speeds.tolist(),
                                                     strict=True):  # fmt: skip
        colour = class_colour(track)
        cv2.rectangle(canvas, (round(x1), round(y1)), (round(x2), round(y2)), colour, thickness, cv2.LINE_AA)
        text = f"{track} {label}" + ("" if np.isnan(speed) else f" {speed:.0f} km/h")
        cv2.putText(canvas, text, (round(x1), max(10, round(y1) - 3)), cv2.FONT_HERSHEY_SIMPLEX, 0.35, colour, 1,
                    cv2.LINE_AA)  # fmt: skip
    _panel(canvas, _panel_lines(counter, zones))
    return canvas


def _panel_lines(counter: Counter, zones: Zones) -> list[str]:
    lines = []
    for name, per_direction in counter.counts.items():
        forward, backward = (sum(per_direction[d].values()) for d in ("forward", "backward"))
        lines.append(f"{name}: {forward} forward, {backward} backward")
    for name in zones.live:
        lines.append(f"{name}: {sum(zones.live[name].values())} inside, {sum(zones.entries[name].values())} entered")
    return lines


def _panel(canvas: np.ndarray, lines: list[str]) -> None:
    if not lines:
        return
    height = 16 * len(lines) + 8
    width = 8 + 7 * max(len(line) for line in lines)
    region = canvas[:height, :width]
    region[:] = (region * 0.4).astype(np.uint8)
    for i, line in enumerate(lines):
        cv2.putText(canvas, line, (6, 16 * (i + 1)), cv2.FONT_HERSHEY_SIMPLEX, 0.42, (255, 255, 255), 1, cv2.LINE_AA)
