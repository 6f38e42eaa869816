"""The validation loop against detectors that know the answer (the ground truth itself, or the rectangles
painted into synthetic images): boxes mapped back to original pixels, TTA merged, every protocol end to end."""

import dataclasses
import json
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from torch import nn

from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.formats.visdrone import NAMES, parse_visdrone
from tphyolo.data.loader import DatasetSettings, LoaderSettings, build_dataloader, build_dataset
from tphyolo.evaluation.loop import collect_results, evaluate
from tphyolo.evaluation.results import PER_CLASS_ROWS_BELOW, format_results, yolo_table
from tphyolo.evaluation.settings import EvalSettings, ValConfig
from tphyolo.evaluation.writers import writers_for
from tphyolo.infer.config import VALIDATION, InferenceConfig, inference_config
from tphyolo.infer.tta_config import TTAConfig
from tphyolo.metrics.registry import PROTOCOLS
from tphyolo.models import build_model
from tphyolo.runtime.config import RuntimeConfig

VISDRONE_NAMES = list(NAMES)
CPU = RuntimeConfig(device="cpu", amp="off")


def _loader(data_yaml, imgsz: int, batch: int):
    data = load_data_config(data_yaml)
    dataset, _ = build_dataset(data, "val", DatasetSettings(imgsz=imgsz, rect=True, batch_size=batch, stride=32))
    return build_dataloader(dataset, LoaderSettings(batch_size=batch))


class Oracle(nn.Module):
    """Returns each batch's ground truth as eval output (xywh batch pixels, objectness 1, one-hot class)."""

    def __init__(self, loader, nc: int, *, ignore_as_class: int | None = None) -> None:
        """With `ignore_as_class`, every ignore region is also detected, as that class."""
        super().__init__()
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))
        self.outputs = []
        for batch in loader:
            n, _, h, w = batch.images.shape
            targets = [batch.targets[batch.targets[:, 0] == i, 1:] for i in range(n)]  # class, cx, cy, w, h
            if ignore_as_class is not None:
                for i, regions in enumerate(batch.ignore):
                    cxcywh = torch.cat([(regions[:, :2] + regions[:, 2:]) / 2, regions[:, 2:] - regions[:, :2]], 1)
                    extra = torch.cat(
                        [torch.full((len(regions), 1), ignore_as_class), cxcywh / torch.tensor([w, h, w, h])], 1
                    )
                    targets[i] = torch.cat([targets[i], extra])
            out = torch.zeros(n, max(max(len(t) for t in targets), 1), 5 + nc)
            for i, rows in enumerate(targets):
                out[i, : len(rows), :4] = rows[:, 1:5] * torch.tensor([w, h, w, h])
                out[i, : len(rows), 4] = 1.0
                out[i, torch.arange(len(rows)), 5 + rows[:, 0].long()] = 1.0
            self.outputs.append(out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.outputs.pop(0)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ground_truth_as_detections_scores_perfectly(data_yaml, protocol):
    loader = _loader(data_yaml, imgsz=320, batch=2)
    oracle = Oracle(loader, nc=10)
    results = evaluate(
        oracle,
        loader,
        names=VISDRONE_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        settings=EvalSettings(protocol=protocol),
        config=inference_config(VALIDATION, iou=0.99),
    )
    assert results.images == 4 and results.instances > 100
    perfect = 0.995 if protocol == "yolo" else 1.0  # YOLOv5's 101-point AP of a perfect detector is 0.995
    assert results.map50 == pytest.approx(perfect, abs=1e-6)
    assert results.map == pytest.approx(perfect, abs=1e-6)
    assert results.fitness == pytest.approx(perfect, abs=1e-6)
    assert results.mp == pytest.approx(1.0, abs=1e-3) and results.mr == pytest.approx(1.0, abs=1e-3)


@pytest.mark.slow
def test_plots_and_saved_predictions(data_yaml, tmp_path):
    loader = _loader(data_yaml, imgsz=320, batch=2)
    results = evaluate(
        Oracle(loader, nc=10),
        loader,
        names=VISDRONE_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        config=inference_config(VALIDATION, iou=0.99),
        writers=writers_for(ValConfig(plots=True, save_json=True), tmp_path),
    )
    assert results.outputs["predictions_json"] == tmp_path / "predictions.json"  # what the writers returned
    for name in ("PR_curve", "F1_curve", "P_curve", "R_curve", "confusion_matrix", "confusion_matrix_normalized"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert (tmp_path / "val_batch0_labels.jpg").is_file() and (tmp_path / "val_batch0_pred.jpg").is_file()
    records = json.loads((tmp_path / "predictions.json").read_text())
    assert len(records) == results.instances and {r["score"] for r in records} == {1.0}


def test_detections_in_ignore_regions_count_only_for_the_yolo_protocol(data_yaml):
    loader = _loader(data_yaml, imgsz=320, batch=2)
    maps = {}
    for protocol in PROTOCOLS:
        oracle = Oracle(loader, nc=10, ignore_as_class=3)  # a car on every ignore region
        results = evaluate(
            oracle,
            loader,
            names=VISDRONE_NAMES,
            device=torch.device("cpu"),
            runtime=CPU,
            settings=EvalSettings(protocol=protocol),
            config=inference_config(VALIDATION, iou=0.99),
        )
        maps[protocol] = results.map50
    assert maps["coco"] == pytest.approx(1.0) and maps["visdrone"] == pytest.approx(1.0)
    assert maps["yolo"] < 0.995 - 1e-3  # YOLO metrics have no ignore regions: those cars are false positives


def test_detections_and_ground_truth_come_back_in_original_pixels(data_yaml):
    """Against the annotation files themselves: boxes survive letterboxing to 320 px and back."""
    loader = _loader(data_yaml, imgsz=320, batch=2)
    results, speed = collect_results(
        Oracle(loader, nc=10),
        loader,
        device=torch.device("cpu"),
        runtime=CPU,
        config=InferenceConfig(conf=0.5, iou=1.0, max_det=1000),
    )
    assert len(results) == 4 and set(speed) == {"preprocess", "inference", "mapping"}
    for r in results:
        truth = parse_visdrone(data_yaml.parent / "annotations" / f"{Path(r.path).stem}.txt")
        assert r.shape == (1080, 1920)
        torch.testing.assert_close(r.boxes, torch.from_numpy(truth.boxes), atol=0.01, rtol=0)
        torch.testing.assert_close(r.ignore, torch.from_numpy(truth.ignore), atol=0.01, rtol=0)
        assert torch.equal(r.classes, torch.from_numpy(truth.classes))
        order = np.lexsort(r.detections[:, :4].numpy().round(1).T[::-1])
        expected = np.lexsort(truth.boxes.T[::-1])
        np.testing.assert_allclose(r.detections[order, :4].numpy(), truth.boxes[expected], atol=0.01)


class WithTruth(nn.Module):
    """A real network whose eval output is followed by an Oracle's (the ground truth, scores 1): the network's
    forward, decoding and NMS run as in any validation, and the scores are known."""

    def __init__(self, model: nn.Module, oracle: Oracle) -> None:
        super().__init__()
        self.model, self.oracle = model, oracle
        self.register_buffer("stride", model.stride.clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.model(x), self.oracle(x)], dim=1)  # (B, N + M, 5 + nc)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_small_model_runs_end_to_end(data_yaml, protocol, tmp_path):
    torch.manual_seed(0)
    loader = _loader(data_yaml, imgsz=160, batch=4)
    model = WithTruth(build_model("tph-yolov5n", names=VISDRONE_NAMES).eval(), Oracle(loader, nc=10))
    results = evaluate(
        model,
        loader,
        names=VISDRONE_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        settings=EvalSettings(protocol=protocol),
        config=inference_config(VALIDATION, iou=0.99),  # NMS must not merge neighbouring ground-truth boxes
        writers=writers_for(ValConfig(save_json=True, save_txt=True), tmp_path),
    )
    # Every ground-truth box comes first with score 1, whatever the untrained network adds below it: a perfect
    # ranking, so AP is YOLOv5's 101-point maximum 0.995 (COCO and VisDrone rules: 1.0) at every IoU threshold.
    perfect = 0.995 if protocol == "yolo" else 1.0
    assert results.images == 4 and results.instances > 100
    assert results.map50 == pytest.approx(perfect, abs=1e-6) and results.map == pytest.approx(perfect, abs=1e-6)
    assert set(results.speed) == {"preprocess", "inference", "mapping"}
    records = json.loads((tmp_path / "predictions.json").read_text())
    assert sum(r["score"] == pytest.approx(1.0) for r in records) == results.instances
    labels = {p.stem: p.read_text().splitlines() for p in (tmp_path / "labels").iterdir()}
    truth = {p.stem: len(parse_visdrone(p).classes) for p in (data_yaml.parent / "annotations").iterdir()}
    assert labels.keys() == truth.keys()
    for stem, lines in labels.items():  # class cx cy w h score, the ground truth's lines with score 1
        assert sum(float(line.split()[5]) == pytest.approx(1.0) for line in lines) == truth[stem], stem
    table = format_results(results, verbose=True)
    all_row = table.splitlines()[1].split()
    assert all_row[:3] == ["all", "4", str(results.instances)] and all_row[-2:] == ["0.995", "0.995"]
    # per-class rows by default with 2..49 classes, the "all" row alone when asked or with 50+
    class_rows = len(yolo_table(results).splitlines()) - 2
    assert class_rows == len(results.per_class) > 1  # the classes present in these 4 images
    assert format_results(results) == table
    assert len(format_results(results, verbose=False).splitlines()) == len(table.splitlines()) - class_rows
    many = dataclasses.replace(results, per_class=results.per_class * PER_CLASS_ROWS_BELOW)
    assert format_results(many) == format_results(results, verbose=False)


PAINTED_NAMES = ["red", "green", "blue"]
PAINTED = (  # per 640 x 480 image, by class: (class, x1, y1, x2, y2), multiples of 4 (see painted_yaml)
    ((0, 40, 60, 200, 180), (1, 300, 240, 560, 420), (2, 420, 40, 600, 160)),
    ((0, 100, 100, 300, 400),),
    ((1, 8, 8, 120, 96), (2, 500, 300, 636, 476)),
    ((0, 320, 200, 332, 212), (2, 0, 0, 640, 40)),
)


@pytest.fixture(scope="module")
def painted_yaml(tmp_path_factory):
    """Four 640 x 480 PNGs, black, with one rectangle per class painted at full intensity in that class's
    colour channel (RGB), and their YOLO labels. At 320 px the loader halves them and letterboxes them to
    (256, 352) with offsets (16, 8); corners on multiples of 4 stay on even pixels, so halving again in a
    TTA pass keeps every edge on a pixel boundary: the painted boxes come back exactly."""
    root = tmp_path_factory.mktemp("painted")
    for folder in ("images", "labels"):
        (root / folder).mkdir()
    for i, rectangles in enumerate(PAINTED):
        image = np.zeros((480, 640, 3), dtype=np.uint8)
        lines = []
        for c, x1, y1, x2, y2 in rectangles:
            image[y1:y2, x1:x2, 2 - c] = 255  # OpenCV writes BGR
            lines.append(f"{c} {(x1 + x2) / 1280} {(y1 + y2) / 960} {(x2 - x1) / 640} {(y2 - y1) / 480}\n")
        cv2.imwrite(str(root / "images" / f"{i}.png"), image)
        (root / "labels" / f"{i}.txt").write_text("".join(lines))
    path = root / "data.yaml"
    path.write_text(f"path: {root}\nval: images\nnames: {PAINTED_NAMES}\n")
    return path


class PaintedOracle(nn.Module):
    """A detector that knows the answer for painted images: for every image and class c, the tight box around
    the pixels where channel c alone is above half intensity, as eval output (B, 3, 5 + 3) — xywh in the
    pixels of its input, objectness 1, one-hot class; all-zero rows for absent classes. It sees whatever a
    TTA pass gives it (scaled, padded, flipped), so its boxes are right only if the pass is undone right."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("stride", torch.tensor([8.0, 16.0, 32.0]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bright = x > 0.5  # (B, 3, H, W); the letterbox grey is 114 / 255
        alone = bright & (bright.sum(dim=1, keepdim=True) == 1)
        out = torch.zeros(x.shape[0], 3, 5 + 3)
        for i, c in np.ndindex(x.shape[0], 3):
            rows, cols = alone[i, c].any(dim=1).nonzero(), alone[i, c].any(dim=0).nonzero()
            if len(rows):
                x1, y1, x2, y2 = cols.min(), rows.min(), cols.max() + 1, rows.max() + 1
                out[i, c, :4] = torch.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]).float()
                out[i, c, 4] = out[i, c, 5 + c] = 1.0
        return out


@pytest.mark.parametrize("merge", ["wbf", "nms"])
def test_tta_runs_are_merged_into_original_pixels(painted_yaml, merge):
    """Six passes (scales 1 and 0.5, no flip, left-right, up-down) of an oracle, each undone and merged: the
    painted boxes in the original 640 x 480 pixels, once each, with score 1."""
    loader = _loader(painted_yaml, imgsz=320, batch=4)
    tta = TTAConfig(scales=(1.0, 0.5), flips=("none", "lr", "ud"))
    results, _ = collect_results(
        PaintedOracle(), loader, device=torch.device("cpu"), runtime=CPU,
        config=inference_config(VALIDATION, conf=0.001, iou=0.6, max_det=300, tta=tta, merge=merge, merge_iou=0.55),
    )  # fmt: skip
    assert len(results) == len(PAINTED)
    for r in results:
        painted = torch.tensor(PAINTED[int(Path(r.path).stem)], dtype=torch.float32)
        d = r.detections[r.detections[:, 5].argsort()]
        assert r.shape == (480, 640) and len(d) == len(painted)
        assert torch.equal(d[:, 5], painted[:, 0]) and torch.equal(d[:, 4], torch.ones(len(d)))
        torch.testing.assert_close(d[:, :4], painted[:, 1:], atol=1e-3, rtol=0)
        torch.testing.assert_close(r.boxes[r.classes.argsort()], painted[:, 1:], atol=1e-3, rtol=0)
    plain = evaluate(PaintedOracle(), loader, names=PAINTED_NAMES, device=torch.device("cpu"), runtime=CPU)
    merged = evaluate(
        PaintedOracle(),
        loader,
        names=PAINTED_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        config=inference_config(VALIDATION, tta=tta, merge=merge),
    )
    assert plain.map50 == merged.map50 == pytest.approx(0.995) and plain.map == merged.map == pytest.approx(0.995)
