"""The detections container: rows round trip and the class-name rule every writer uses."""

from __future__ import annotations

import torch

from tphyolo.ops.detections import Detections, class_name


def test_rows_round_trip_through_detections():
    rows = torch.tensor([[1.0, 2.0, 30.0, 40.0, 0.9, 3.0], [5.0, 6.0, 7.0, 8.0, 0.4, 0.0]])
    detections = Detections.from_rows(rows)
    assert detections.labels.tolist() == [3, 0] and detections.labels.dtype == torch.int64
    assert torch.equal(detections.rows(), rows)


def test_class_name_falls_back_to_the_id_for_classes_without_a_name():
    names = ("car", "van")
    assert [class_name(names, label) for label in (0, 1, 2, 17)] == ["car", "van", "2", "17"]
    assert class_name((), 0) == "0"
    assert class_name(["a"], -1) == "-1"  # never Python's negative indexing
