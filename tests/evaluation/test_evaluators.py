"""Evaluators compute, writers write: the loop (`evaluate`) or `val` resets every evaluator, feeds it every
batch's per-image results and combines what they give by name; writers, fed alike, write from those results."""

from collections.abc import Sequence

import numpy as np
import pytest
import torch
from tests.evaluation.test_evaluate import CPU, VISDRONE_NAMES, Oracle, _loader
from tests.evaluation.test_validate import NamedOracle

import tphyolo
from tphyolo.evaluation import scoring
from tphyolo.evaluation.evaluator import Evaluator, combine_results
from tphyolo.evaluation.loop import evaluate
from tphyolo.evaluation.scoring import CONFUSION, METRICS, SUMMARY, MetricsEvaluator
from tphyolo.evaluation.settings import ValConfig
from tphyolo.evaluation.writers import BatchPlots, MetricPlots, PredictionJson, PredictionTxt, Writer, writers_for
from tphyolo.infer.config import VALIDATION, inference_config
from tphyolo.metrics import ap, yolo
from tphyolo.metrics.protocol import ImageResult


class ObjectCounter(Evaluator):
    """Counts, per batch, the images and the ground-truth objects, and the detections scoring 1 (the oracle's)."""

    def __init__(self, name: str = "object_counts") -> None:
        self.name, self.resets = name, 0
        self.batches: list[tuple[int, int, int]] = []

    def reset(self) -> None:
        self.resets += 1
        self.batches = []

    def process(self, images: Sequence[ImageResult]) -> None:
        sure = sum(int((r.detections[:, 4] == 1.0).sum()) for r in images)
        self.batches.append((len(images), sum(len(r.classes) for r in images), sure))

    def evaluate(self) -> dict:
        return {self.name: list(self.batches)}


class MetricsEcho(Writer):
    """Writes nothing; returns the numbers it was given, to show what writers read."""

    name = "echo"

    def write(self, results) -> tuple:
        return results[METRICS].map50, results["object_counts"]


def _truth_per_batch(loader) -> list[tuple[int, int]]:
    return [(len(batch), len(batch.targets)) for batch in loader]


def test_an_evaluator_that_computes_a_result_appears_in_the_combined_results(data_yaml):
    loader = _loader(data_yaml, imgsz=320, batch=3)  # 4 images: batches of 3 and 1
    truth = _truth_per_batch(loader)
    counter = ObjectCounter()
    results = evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                       config=inference_config(VALIDATION, iou=0.99), evaluators=[counter],
                       writers=[MetricsEcho()])  # fmt: skip
    assert set(results.outputs) == {SUMMARY, "object_counts", "echo"}  # the metrics' curves, the counts, the writer
    out = results.outputs["object_counts"]
    assert [(images, objects) for images, objects, _ in out] == truth == [(3, truth[0][1]), (1, truth[1][1])]
    assert sum(objects for _, objects, _ in out) == results.instances > 100
    assert [sure for _, _, sure in out] == [objects for _, objects in truth]  # every object found once
    assert results.outputs["echo"] == (results.map50, out) and results.map50 == pytest.approx(0.995)
    assert results.outputs[SUMMARY].map50 == results.map50 and set(results.speed) == {"preprocess", "inference",
                                                                                       "mapping"}  # fmt: skip
    again = evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                     config=inference_config(VALIDATION, iou=0.99), evaluators=[counter])  # fmt: skip
    assert counter.resets == 2 and again.outputs["object_counts"] == out  # reset: not counted twice


def test_two_evaluators_with_one_result_name_fail_with_both_named():
    with pytest.raises(ValueError, match="ObjectCounter and ObjectCounter both give a result named 'object_counts'"):
        combine_results([ObjectCounter(), ObjectCounter()])
    with pytest.raises(ValueError, match="MetricsEvaluator and ObjectCounter both give a result named 'metrics'"):
        combine_results([MetricsEvaluator(names=VISDRONE_NAMES), ObjectCounter(METRICS)])
    assert combine_results([ObjectCounter("a"), ObjectCounter("b")]) == {"a": [], "b": []}


def test_a_clash_fails_the_run_before_any_writer_writes(data_yaml, tmp_path):
    loader = _loader(data_yaml, imgsz=320, batch=2)
    with pytest.raises(ValueError, match="both give a result named 'object_counts'"):
        evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                 evaluators=[ObjectCounter(), ObjectCounter()], writers=[PredictionJson(tmp_path)])  # fmt: skip
    assert not (tmp_path / "predictions.json").exists()
    named_as_a_result = MetricsEcho()
    named_as_a_result.name = SUMMARY
    with pytest.raises(ValueError, match="writer MetricsEcho is named 'summary', as a result of the run is"):
        evaluate(Oracle(loader, nc=10), loader, names=VISDRONE_NAMES, runtime=CPU, device=torch.device("cpu"),
                 writers=[named_as_a_result])  # fmt: skip


def _image(path: str, classes: list[int], boxes: list[list[float]], found: int) -> ImageResult:
    """An image whose first `found` objects are detected exactly (score 0.9), plus one false detection of class 0."""
    boxes_t = torch.tensor(boxes)
    detections = torch.cat([boxes_t[:found], torch.full((found, 1), 0.9), torch.tensor(classes[:found])[:, None]], 1)
    false = torch.tensor([[300.0, 300.0, 340.0, 340.0, 0.5, 0.0]])
    return ImageResult(path, (480, 640), torch.cat([detections, false]), torch.tensor(classes), boxes_t,
                       torch.zeros(0, 4))  # fmt: skip


def test_metric_plots_draw_the_computed_results_without_summarizing_again(tmp_path, monkeypatch):
    names = ["car", "van"]
    images = [_image("a.jpg", [0, 1, 1], [[10, 10, 50, 50], [100, 100, 180, 160], [200, 20, 260, 90]], found=2),
              _image("b.jpg", [0], [[30, 40, 90, 100]], found=1)]  # fmt: skip
    metrics = MetricsEvaluator(names=names, confusion=True)
    metrics.reset()
    metrics.process(images)
    results = dict(metrics.evaluate())
    confusion = results[CONFUSION].matrix.copy()
    assert confusion.sum() > 0  # 3 objects found, one missed, one false detection

    def unavailable(*args, **kwargs):
        raise AssertionError("the writer scored the run again")

    for module, name in ((yolo, "summarize"), (scoring, "summarize"), (ap.DetectionStats, "summarize")):
        monkeypatch.setattr(module, name, unavailable)
    written = MetricPlots(tmp_path).write(results)
    curves = [tmp_path / f"{curve}_curve.png" for curve in ("PR", "F1", "P", "R")]
    expected = [*curves, tmp_path / "confusion_matrix.png", tmp_path / "confusion_matrix_normalized.png"]
    assert written == expected and all(path.stat().st_size > 1000 for path in written)
    assert np.array_equal(results[CONFUSION].matrix, confusion)  # read, not filled again


@pytest.mark.parametrize(("found", "false", "reason"), [
    (0, False, "no detections above conf 0.001 in the 2 images scored (4 labelled objects)"),
    (0, True, "none of the 2 detections above conf 0.001 found a labelled object of its class at IoU 0.5 (4 "
              "objects in 2 images)"),
])  # fmt: skip
def test_a_run_without_a_correct_detection_gets_every_figure_saying_why(tmp_path, caplog, found, false, reason):
    """Before, such a run wrote the confusion matrix alone, silently: no PR/F1/P/R curves."""
    images = [_image("a.jpg", [0, 1, 1], [[10, 10, 50, 50], [100, 100, 180, 160], [200, 20, 260, 90]], found=found),
              _image("b.jpg", [0], [[30, 40, 90, 100]], found=found)]  # fmt: skip
    if not false:
        images = [ImageResult(r.path, r.shape, r.detections[:0], r.classes, r.boxes, r.ignore) for r in images]
    metrics, plots = MetricsEvaluator(names=["car", "van"], confusion=True), MetricPlots(tmp_path, conf=0.001)
    for evaluator in (metrics, plots):
        evaluator.reset()
        evaluator.process(images)
    results = dict(metrics.evaluate())
    assert results[SUMMARY].result is None  # nothing to draw a curve of
    with caplog.at_level("WARNING", logger="tphyolo"):
        written = plots.write(results)
    names = [f"{curve}_curve.png" for curve in ("PR", "F1", "P", "R")]
    assert [p.name for p in written] == [*names, "confusion_matrix.png", "confusion_matrix_normalized.png"]
    assert all(path.stat().st_size > 1000 for path in written)
    assert caplog.messages == [f"PR/F1/P/R curves in {tmp_path} are flat: {reason}"]


def test_val_gives_the_callers_results_and_leaves_out_its_own_writers(data_yaml, tmp_path):
    oracle = NamedOracle(_loader(data_yaml, imgsz=320, batch=2), VISDRONE_NAMES)  # the loader val builds
    metrics = tphyolo.val(oracle, data_yaml, ValConfig(workers=0, save_dir=tmp_path, save_txt=True), imgsz=320,
                          batch=2, iou=0.99, runtime=CPU, evaluators=[ObjectCounter()],
                          writers=[MetricsEcho()])  # fmt: skip
    assert set(metrics.outputs) == {SUMMARY, "object_counts", "echo"}  # the txt writer's folder is not the caller's
    out = metrics.outputs["object_counts"]
    assert [images for images, _, _ in out] == [2, 2]
    assert sum(objects for _, objects, _ in out) == metrics.instances > 100
    lines = [line.split() for p in (tmp_path / "labels").iterdir() for line in p.read_text().splitlines()]
    assert len(list((tmp_path / "labels").iterdir())) == metrics.images == 4 and metrics.save_dir == tmp_path
    assert sum(float(line[5]) == pytest.approx(1.0) for line in lines) == metrics.instances  # the oracle's boxes


def test_the_flags_choose_the_writers(tmp_path):
    assert writers_for(ValConfig(), tmp_path) == []
    kinds = [type(w) for w in writers_for(ValConfig(save_json=True, save_txt=True, plots=True), tmp_path)]
    assert kinds == [PredictionTxt, PredictionJson, BatchPlots, MetricPlots]
    assert len({w.name for w in writers_for(ValConfig(save_json=True, save_txt=True, plots=True), tmp_path)}) == 4
    with pytest.raises(ValueError, match="need a save_dir"):
        tphyolo.val("unused.pt", "unused", save_json=True)
