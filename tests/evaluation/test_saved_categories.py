"""Detections saved by `tphyolo predict --save-visdrone` and scored by `tphyolo eval` against a set's own
annotation files score what `tphyolo val` scores: the writer and the reader number categories by the same
table, the set's (car 1, bus 2, ... for the built-in synthetic set, not VisDrone's car 4, bus 9).

The detector is an oracle that knows the ground truth and gets part of it wrong (jitter, wrong classes, misses,
false alarms), so that the numbers are far from 0 and 1 and a scrambled class shows."""

from pathlib import Path

import numpy as np
import pytest
import torch

from tphyolo.cli import main
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.data.dataset_config import parse_data_yaml
from tphyolo.data.scan import scan_split
from tphyolo.evaluation.saved_scores import score_saved_detections
from tphyolo.infer.config import MAX_DET
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import get_protocol
from tphyolo.ops.detections import Detections
from tphyolo.predict.outputs import OutputSettings
from tphyolo.predict.sources import Frame
from tphyolo.predict.writers import PredictionWriter


def oracle(labels, nc: int, rng: np.random.Generator) -> Detections:
    """The ground truth with jittered boxes, 15 % wrong classes, 20 % misses and some false alarms, by score."""
    boxes, classes = labels.boxes.astype(np.float64), labels.classes
    kept = rng.random(len(boxes)) < 0.8
    boxes, classes = boxes[kept], classes[kept]
    size = boxes[:, 2:] - boxes[:, :2]
    boxes = boxes + np.concatenate([rng.normal(0, 0.1, size.shape) * size] * 2, axis=1)
    classes = np.where(rng.random(len(classes)) < 0.85, classes, rng.integers(0, nc, len(classes)))
    corner = rng.uniform(0, 200, (4, 2))
    boxes = np.concatenate([boxes, np.concatenate([corner, corner + rng.uniform(8, 40, (4, 2))], 1)])
    classes = np.concatenate([classes, rng.integers(0, nc, 4)])
    scores = np.concatenate([rng.uniform(0.3, 1.0, kept.sum()), rng.uniform(0.01, 0.5, 4)])
    order = np.argsort(-scores, kind="stable")
    return Detections(torch.tensor(boxes[order], dtype=torch.float32), torch.tensor(scores[order], dtype=torch.float32),
                      torch.tensor(classes[order], dtype=torch.int64))  # fmt: skip


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(data yaml, its val records, the oracle's detections of each, the folder of the saved VisDrone files)."""
    root = tmp_path_factory.mktemp("categories")
    path = generate_synthetic(root / "set", n_train=1, n_val=6, imgsz=256, seed=3)
    data = parse_data_yaml(path)
    records = scan_split(data.val, names=data.names, cache=False).records
    rng = np.random.default_rng(0)
    detections = [oracle(r.labels, data.nc, rng) for r in records]
    outputs = OutputSettings(save_img=False, save_visdrone=True)
    writer = PredictionWriter(root / "pred", names=list(data.names), outputs=outputs)
    for record, found in zip(records, detections, strict=True):
        writer.write(Frame(np.zeros((record.height, record.width, 3), np.uint8), Path(record.im_file)), found)
    writer.close()
    return path, records, detections, root / "pred" / "visdrone"


def in_memory(records, detections) -> list[ImageResult]:
    """What `tphyolo val` scores: each image's detections and labels as the loop hands them to the protocol."""
    results = []
    for record, d in zip(records, detections, strict=True):
        rows = torch.cat([d.boxes, d.scores[:, None], d.labels[:, None].float()], dim=1)
        labels = record.labels
        results.append(ImageResult(record.im_file, (record.height, record.width), rows,
                                   torch.from_numpy(labels.classes), torch.from_numpy(labels.boxes).float(),
                                   torch.from_numpy(labels.ignore).float()))  # fmt: skip
    return results


@pytest.mark.parametrize("protocol", ["yolo", "coco", "visdrone"])
def test_saved_detections_scored_by_eval_equal_val(saved, protocol):
    path, records, detections, folder = saved
    names = parse_data_yaml(path).names
    val = get_protocol(protocol).score(in_memory(records, detections), names=names, max_det=MAX_DET).overall
    scored = score_saved_detections(path.parent / "val" / "annotations", folder, protocol=protocol).overall
    assert 30 < val["AP50"] < 95  # far from 0 and 1: a scrambled class would show
    assert scored["AP50"] == pytest.approx(val["AP50"], abs=0.5)  # percent: 0.005 mAP50


def test_eval_prints_the_sets_class_names_and_reads_data(saved, capsys):
    path, _, _, folder = saved
    gt = path.parent / "val" / "annotations"
    for extra in ([], ["--data", str(path)]):  # what the folder declares, or --data
        assert main(["eval", "--gt", str(gt), "--pred", str(folder), "--protocol", "yolo", *extra]) == 0
        table = capsys.readouterr().out
        assert all(f" {name} " in table for name in ("car", "bus", "pedestrian", "truck", "motor", "van"))
        assert "awning-tricycle" not in table and "people" not in table
