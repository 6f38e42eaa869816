"""The tables of a run are rendered from its numbers (`EvalResults` holds no text): the YOLO table as the
Summary prints it, the protocol's as its scorer prints it, for every protocol."""

import dataclasses

import pytest
import torch

from tphyolo.evaluation.results import EvalResults, format_results, protocol_table, yolo_table
from tphyolo.evaluation.scoring import score_images
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import PROTOCOLS, get_protocol
from tphyolo.metrics.yolo import summarize

NAMES = ("pedestrian", "car", "van", "bus")


def _images(n: int = 6) -> list[ImageResult]:
    """Images with jittered, partly missed detections of their objects plus false ones; some ignore regions."""
    g = torch.Generator().manual_seed(3)
    images = []
    for k in range(n):
        m = int(torch.randint(2, 12, (1,), generator=g))
        xy = torch.rand(m, 2, generator=g) * 400
        boxes = torch.cat([xy, xy + torch.rand(m, 2, generator=g) * 50 + 8], 1)
        classes = torch.randint(0, len(NAMES), (m,), generator=g)
        found = torch.rand(m, generator=g) > 0.3
        false = torch.rand(3, 2, generator=g) * 400
        det_boxes = torch.cat([boxes[found] + torch.randn(int(found.sum()), 4, generator=g) * 2,
                               torch.cat([false, false + 25], 1)])  # fmt: skip
        det_classes = torch.cat([classes[found], torch.randint(0, len(NAMES), (3,), generator=g)]).float()
        scores = torch.rand(len(det_boxes), generator=g)
        detections = torch.cat([det_boxes, scores[:, None], det_classes[:, None]], 1)[scores.argsort(descending=True)]
        ignore = torch.tensor([[450.0, 450.0, 480.0, 480.0]]) if k % 2 else torch.zeros(0, 4)
        images.append(ImageResult(f"{k}.jpg", (500, 500), detections, classes, boxes, ignore))
    return images


def test_the_results_hold_numbers_not_text():
    text = [f.name for f in dataclasses.fields(EvalResults) if f.type in ("str", "tuple[str, ...]")]
    assert text == ["protocol", "names", "classifier_classes"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_tables_are_those_the_scorers_print(protocol):
    images = _images()
    results, summary = score_images(images, names=NAMES, protocol=protocol, max_det=300, speed={"preprocess": 1.0,
                                    "inference": 2.0, "mapping": 3.0})  # fmt: skip
    assert yolo_table(results) == summary.table(NAMES) == summarize(images, nc=len(NAMES)).table(NAMES)
    scored = get_protocol(protocol).score(images, names=NAMES, max_det=300)
    assert protocol_table(results) == scored.table and len(scored.table.splitlines()) == 2 + len(scored.per_class)
    printed = format_results(results, verbose=True)
    assert printed.startswith(summary.table(NAMES)) and printed.endswith("3.0 ms mapping back and merging per image")
    own_table = f"\n\n{protocol} protocol (percent):\n{scored.table}\nSpeed:"
    assert (own_table in printed) == (not get_protocol(protocol).yolo_metrics)
    assert 0 < results.map50 < 1 and len(results.per_class) == len(NAMES)  # scores that are neither 0 nor 1
    rows = {line.split()[0]: int(line.split()[1]) for line in yolo_table(results).splitlines()[1:]}
    holding = {name: sum(int((image.classes == c).any()) for image in images) for c, name in enumerate(NAMES)}
    assert rows == {"all": len(images)} | holding and min(holding.values()) < len(images)
