"""One palette: predicted images, validation batches and training batches draw a class in the same colour."""

from collections import Counter

import cv2
import numpy as np
import torch

from tphyolo.predict.draw import PALETTE, class_colour, draw_boxes, draw_detections
from tphyolo.predict.predictor import Detections
from tphyolo.training.plots import plot_batch


def _box_colours(image: np.ndarray) -> Counter:
    """How many pixels of each exact palette colour (anti-aliased edges and label text are other colours)."""
    palette = set(map(tuple, PALETTE.tolist()))
    return Counter(c for c in map(tuple, image.reshape(-1, 3).tolist()) if c in palette)


def test_class_colours_come_from_the_one_palette():
    assert [class_colour(c) for c in range(len(PALETTE))] == [tuple(row) for row in PALETTE.tolist()]
    assert class_colour(len(PALETTE) + 3) == class_colour(3)
    assert len(set(map(tuple, PALETTE.tolist()))) == len(PALETTE)


def test_predictions_and_training_batches_draw_a_class_in_its_palette_colour(tmp_path):
    black = np.zeros((128, 128, 3), np.uint8)
    detections = Detections(torch.tensor([[20.0, 30.0, 90.0, 100.0]]), torch.tensor([0.9]), torch.tensor([3]))
    predicted = draw_detections(black, detections, ["a", "b", "c", "d"])
    targets = torch.tensor([[0, 3, 55 / 128, 65 / 128, 70 / 128, 70 / 128]])
    path = plot_batch(torch.zeros(1, 3, 128, 128, dtype=torch.uint8), targets, ["a", "b", "c", "d"], tmp_path / "b.png")
    trained = cv2.imread(str(path))
    for image in (predicted, trained):
        colours = _box_colours(image)
        assert set(colours) == {class_colour(3)} and colours[class_colour(3)] > 50  # outline and label background


def test_draw_boxes_labels_only_boxes_of_at_least_the_minimum_area():
    black = np.zeros((64, 64, 3), np.uint8)
    boxes = np.array([[10, 10, 50, 50], [2, 2, 6, 6]], np.float32)
    both = draw_boxes(black, boxes, [0, 1], ["x", "y"], label_min_area=0)
    big_only = draw_boxes(black, boxes, [0, 1], ["x", "y"], label_min_area=64)
    without_small = draw_boxes(black, boxes[:1], [0], ["x", "y"])
    drawn = [int(image.any(2).sum()) for image in (without_small, big_only, both)]
    assert drawn[0] < drawn[1] < drawn[2]  # the small box's outline, then its label too
    assert not black.any()  # drawing returns a copy
