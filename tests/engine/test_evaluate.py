"""The validation loop on real VisDrone images: boxes mapped back to original pixels, every protocol end to end."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.formats.visdrone import NAMES, parse_visdrone
from tphyolo.data.loader import build_dataloader, build_dataset
from tphyolo.engine.evaluate import collect_results, evaluate, format_results
from tphyolo.engine.inference import VALIDATION, InferenceConfig, inference_config
from tphyolo.engine.tta import TTAConfig
from tphyolo.metrics.registry import PROTOCOLS
from tphyolo.models import build_model
from tphyolo.runtime import RuntimeConfig

VISDRONE_NAMES = list(NAMES)
CPU = RuntimeConfig(device="cpu", amp="off")


@pytest.fixture(scope="module")
def data_yaml(visdrone_mini, tmp_path_factory):
    """Four VisDrone images with their annotations, copied so that the scan cache is written here."""
    root = tmp_path_factory.mktemp("visdrone")
    for folder in ("images", "annotations"):
        (root / folder).mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:4]:
        shutil.copy(image, root / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", root / "annotations" / f"{image.stem}.txt")
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {VISDRONE_NAMES}\n")
    return path


def _loader(data_yaml, imgsz: int, batch: int):
    data = load_data_config(data_yaml)
    dataset, _ = build_dataset(data, "val", imgsz=imgsz, rect=True, batch_size=batch, stride=32)
    return build_dataloader(dataset, batch_size=batch)


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
        protocol=protocol,
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
        save_dir=tmp_path,
        plots=True,
        save_json=True,
    )
    assert results.save_dir == tmp_path
    for name in ("PR_curve", "F1_curve", "P_curve", "R_curve", "confusion_matrix"):
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
            protocol=protocol,
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
    assert len(results) == 4 and set(speed) == {"preprocess", "inference", "nms"}
    for r in results:
        truth = parse_visdrone(data_yaml.parent / "annotations" / f"{Path(r.path).stem}.txt")
        assert r.shape == (1080, 1920)
        torch.testing.assert_close(r.boxes, torch.from_numpy(truth.boxes), atol=0.01, rtol=0)
        torch.testing.assert_close(r.ignore, torch.from_numpy(truth.ignore), atol=0.01, rtol=0)
        assert torch.equal(r.classes, torch.from_numpy(truth.classes))
        order = np.lexsort(r.detections[:, :4].numpy().round(1).T[::-1])
        expected = np.lexsort(truth.boxes.T[::-1])
        np.testing.assert_allclose(r.detections[order, :4].numpy(), truth.boxes[expected], atol=0.01)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_small_model_runs_end_to_end(data_yaml, protocol, tmp_path):
    torch.manual_seed(0)
    model = build_model("tph-yolov5n", names=VISDRONE_NAMES).eval()
    results = evaluate(
        model,
        _loader(data_yaml, imgsz=160, batch=4),
        names=VISDRONE_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        protocol=protocol,
        save_dir=tmp_path,
        save_json=True,
        save_txt=True,
    )
    assert 0.0 <= results.map <= results.map50 <= 1.0
    assert set(results.speed) == {"preprocess", "inference", "nms"}
    assert (tmp_path / "predictions.json").is_file() and len(list((tmp_path / "labels").iterdir())) == 4
    table = format_results(results, verbose=True)
    assert "all" in table and "mAP@.5:.95" in table


@pytest.mark.parametrize("merge", ["wbf", "nms"])
def test_tta_runs_are_merged_into_original_pixels(data_yaml, merge):
    torch.manual_seed(0)
    model = build_model("yolov5n", names=VISDRONE_NAMES).eval()
    loader = _loader(data_yaml, imgsz=160, batch=4)
    tta = TTAConfig(scales=(1.0, 0.83), flips=("none", "lr"))
    results, _ = collect_results(
        model, loader, device=torch.device("cpu"), runtime=CPU,
        config=inference_config(VALIDATION, conf=0.001, iou=0.6, max_det=300, tta=tta, merge=merge, merge_iou=0.55),
    )  # fmt: skip
    for r in results:
        d = r.detections
        assert 0 < len(d) <= 300 and (d[:-1, 4] >= d[1:, 4]).all()
        assert (d[:, [0, 2]] >= 0).all() and (d[:, [0, 2]] <= 1920).all() and (d[:, [1, 3]] <= 1080).all()
    plain = evaluate(model, loader, names=VISDRONE_NAMES, device=torch.device("cpu"), runtime=CPU)
    identity = evaluate(
        model,
        loader,
        names=VISDRONE_NAMES,
        device=torch.device("cpu"),
        runtime=CPU,
        config=inference_config(VALIDATION, tta=TTAConfig((1.0,), ("none",))),
    )
    assert (plain.mp, plain.mr, plain.map50, plain.map) == (identity.mp, identity.mr, identity.map50, identity.map)
