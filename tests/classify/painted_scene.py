"""Painted datasets for the crop-classifier tests: flat-colour rectangles at known pixels, in each label format.

Imported by the test modules of this folder (pytest puts it on sys.path); `conftest.py` holds the fixture."""

import json
from pathlib import Path

import cv2
import numpy as np

from tphyolo.data.formats.coco import CocoImage, coco_dict
from tphyolo.data.formats.visdrone import format_visdrone
from tphyolo.data.formats.yolo import format_yolo
from tphyolo.data.labels import ImageLabels

WIDTH, HEIGHT = 200, 150
BACKGROUND = (90, 90, 90)  # BGR
NAMES = ["tiny", "red", "green", "blue"]
RED, GREEN, BLUE = (0, 0, 255), (0, 255, 0), (255, 0, 0)
# class id, xyxy box, BGR colour: red inside the image, green touching its right and bottom border, a 3 px
# blue object (below the minimum size), and an ignore region painted blue
OBJECTS = [(1, (40, 30, 80, 70), RED), (2, (170, 110, 200, 150), GREEN), (3, (120, 20, 123, 23), BLUE)]
IGNORE = ((100, 80, 140, 120), BLUE)
FORMATS = ("visdrone", "yolo", "coco")


def painted_image() -> tuple[np.ndarray, ImageLabels]:
    image = np.full((HEIGHT, WIDTH, 3), BACKGROUND, np.uint8)
    (x1, y1, x2, y2), colour = IGNORE
    image[y1:y2, x1:x2] = colour
    for _, (x1, y1, x2, y2), colour in OBJECTS:
        image[y1:y2, x1:x2] = colour
    labels = ImageLabels([c for c, _, _ in OBJECTS], np.array([b for _, b, _ in OBJECTS]), np.array([IGNORE[0]]))
    return image, labels


def write_painted(root: Path, fmt: str) -> Path:
    """`root/images/scene.png` with its labels in format `fmt`; returns a data yaml (train = val = the folder)."""
    image, labels = painted_image()
    (root / "images").mkdir(parents=True)
    cv2.imwrite(str(root / "images" / "scene.png"), image)
    if fmt == "visdrone":
        (root / "annotations").mkdir()
        (root / "annotations" / "scene.txt").write_text(format_visdrone(labels))
    elif fmt == "yolo":
        (root / "labels").mkdir()
        (root / "ignore").mkdir()
        label_text, ignore_text = format_yolo(labels, width=WIDTH, height=HEIGHT)
        (root / "labels" / "scene.txt").write_text(label_text)
        (root / "ignore" / "scene.txt").write_text(ignore_text)
    else:
        coco = coco_dict([CocoImage("scene.png", WIDTH, HEIGHT, labels)], NAMES)
        (root / "annotations.json").write_text(json.dumps(coco))
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {NAMES}\n")
    return path
