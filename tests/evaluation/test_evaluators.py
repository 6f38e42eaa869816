"""Outputs as evaluators: one class given to the loop (`evaluate`) or to `val` is reset, fed every batch's
per-image results and handed the scores; what it returns comes back in `outputs`."""

from collections.abc import Sequence

import pytest
import torch
from tests.evaluation.test_evaluate import CPU, VISDRONE_NAMES, Oracle, _loader
from tests.evaluation.test_validate import NamedOracle

import tphyolo
from tphyolo.evaluation.loop import EvalResults, evaluate
from tphyolo.evaluation.settings import ValConfig
from tphyolo.evaluation.writers import BatchPlots, Evaluator, MetricPlots, PredictionJson, PredictionTxt, writers_for
from tphyolo.infer.config import VALIDATION, inference_config
from tphyolo.metrics.protocol import ImageResult


class ObjectCounter(Evaluator):
    """Counts, per batch, the images and the ground-truth objects, and the detections scoring 1 (the oracle's)."""

    def __init__(self) -> None:
        self.resets = 0
        self.batches: list[tuple[int, int, int]] = []

    def reset(self) -> None:
        self.resets += 1
        self.batches = []

    def process(self, images: Sequence[ImageResult]) -> None:
        sure = sum(int((r.detections[:, 4] == 1.0).sum()) for r in images)
        self.batches.append((len(images), sum(len(r.classes) for r in images), sure))

    def evaluate(self, results: EvalResults) -> dict:
        return {"batches": list(self.batches), "map50": results.map50, "names": results.names}


def _truth_per_batch(loader) -> list[tuple[int, int]]:
    return [(len(batch), len(batch.targets)) for batch in loader]


def test_a_custom_evaluator_sees_every_batch_and_its_result_is_returned(data_yaml):
    loader = _loader(data_yaml, imgsz=320, batch=3)  # 4 images: batches of 3 and 1
    truth = _truth_per_batch(loader)
    counter = ObjectCounter()
    results = evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                       config=inference_config(VALIDATION, iou=0.99), evaluators=[counter])  # fmt: skip
    (out,) = results.outputs
    assert [(images, objects) for images, objects, _ in out["batches"]] == truth == [(3, truth[0][1]), (1, truth[1][1])]
    assert sum(objects for _, objects, _ in out["batches"]) == results.instances > 100
    assert [sure for _, _, sure in out["batches"]] == [objects for _, objects in truth]  # every object found once
    assert out["map50"] == results.map50 == pytest.approx(0.995) and out["names"] == tuple(VISDRONE_NAMES)
    again = evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                     config=inference_config(VALIDATION, iou=0.99), evaluators=[counter])  # fmt: skip
    assert counter.resets == 2 and again.outputs[0]["batches"] == out["batches"]  # reset: not counted twice


def test_val_feeds_its_writers_and_then_the_callers_evaluators(data_yaml, tmp_path):
    oracle = NamedOracle(_loader(data_yaml, imgsz=320, batch=2), VISDRONE_NAMES)  # the loader val builds
    counter = ObjectCounter()
    metrics = tphyolo.val(oracle, data_yaml, ValConfig(workers=0, save_dir=tmp_path, save_txt=True), imgsz=320,
                          batch=2, iou=0.99, runtime=CPU, evaluators=[counter])  # fmt: skip
    (out,) = metrics.outputs  # the writers' results are not the caller's
    assert [images for images, _, _ in out["batches"]] == [2, 2]
    assert sum(objects for _, objects, _ in out["batches"]) == metrics.instances > 100
    lines = [line.split() for p in (tmp_path / "labels").iterdir() for line in p.read_text().splitlines()]
    assert len(list((tmp_path / "labels").iterdir())) == metrics.images == 4 and metrics.save_dir == tmp_path
    assert sum(float(line[5]) == pytest.approx(1.0) for line in lines) == metrics.instances  # the oracle's boxes


def test_the_flags_choose_the_writers(tmp_path):
    assert writers_for(ValConfig(), tmp_path) == []
    kinds = [type(w) for w in writers_for(ValConfig(save_json=True, save_txt=True, plots=True), tmp_path)]
    assert kinds == [PredictionTxt, PredictionJson, BatchPlots, MetricPlots]
    with pytest.raises(ValueError, match="need a save_dir"):
        tphyolo.val("unused.pt", "unused", save_json=True)
