"""Validation under torchrun (2 CPU processes, gloo) against one process: the same numbers, table and files.

Five images in batches of two make three batches, dealt 2 + 1 over the two ranks (an uneven share)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.evaluation.distributed_val_worker import main as val_worker
from tests.helpers import visdrone_subset
from tests.torchrun import REPO, same_files, same_settings, torchrun

from tphyolo.data.formats.visdrone import NAMES

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def five_images(visdrone_mini, tmp_path_factory) -> Path:
    return visdrone_subset(visdrone_mini, tmp_path_factory.mktemp("visdrone5"), 5)


def noisy_visdrone_predictions(annotations: Path, out: Path) -> Path:
    """VisDrone result files for `annotations`: four objects in five found, with a jittered box, a random
    score and now and then the wrong category, plus a false alarm per file; the same every run."""
    rng = np.random.default_rng(0)
    out.mkdir()
    for path in sorted(annotations.glob("*.txt")):
        lines = []
        for line in path.read_text().splitlines():
            x, y, w, h, _, category, *_ = (float(v) for v in line.split(",")[:8])
            if category == 0 or rng.random() < 0.2:
                continue  # an ignored region, or a missed object
            x, y = x + rng.normal(0, 0.15) * w, y + rng.normal(0, 0.15) * h
            category = category if rng.random() < 0.85 else rng.integers(1, 11)
            lines.append(f"{x:.1f},{y:.1f},{w:.1f},{h:.1f},{rng.uniform(0.05, 1):.4f},{int(category)},-1,-1")
        lines.append(f"10,10,30,30,{rng.uniform(0.05, 0.5):.4f},4,-1,-1")
        (out / path.name).write_text("\n".join(lines) + "\n")
    return out


def without_speed(value):
    """`value` (parsed json) without the timings, which no two runs share."""
    if isinstance(value, dict):
        return {k: without_speed(v) for k, v in value.items() if "speed" not in k.lower()}
    if isinstance(value, list):
        return [without_speed(v) for v in value]
    return value


def test_two_processes_score_print_and_save_what_one_does(five_images, tmp_path):
    """The worker's three runs (the API with a noisy oracle, the eval and val commands, a random-weight model on
    real VisDrone images) in one process and under torchrun: the same numbers, tables, json and files."""
    import torch
    from tests.helpers import save_model_checkpoint

    from tphyolo.models import build_model

    torch.manual_seed(0)
    weights = save_model_checkpoint(tmp_path / "tiny.pt", build_model("yolov5n", names=list(NAMES)), list(NAMES))
    root = five_images.parent
    pred = noisy_visdrone_predictions(root / "annotations", tmp_path / "pred")
    inputs = [str(five_images), str(weights), str(root / "annotations"), str(pred)]
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    torch.set_num_threads(1)  # as each torchrun process (conftest restores the count)
    val_worker(inputs[0], str(one), *inputs[1:])
    run = torchrun(str(REPO / "tests" / "evaluation" / "distributed_val_worker.py"), inputs[0], str(two),
                   *inputs[1:])  # fmt: skip
    assert "/3 [" in run.stderr and "/2 [" not in run.stderr  # rank 0's bar alone, counting the 3 batches of all

    for protocol in ("yolo", "visdrone"):  # the API
        a, b = (json.loads((d / f"{protocol}.json").read_text()) for d in (one, two))
        assert a["images"] == b["images"] == 5 and a["table"] == b["table"]
        assert 0.1 < a["metrics"]["mAP50"] < 0.9  # the noisy oracle is neither useless nor perfect
        for key, value in a["metrics"].items():
            assert b["metrics"][key] == pytest.approx(value, abs=1e-9), key
        assert a["per_class"] == b["per_class"]
        files = same_files(one / protocol, two / protocol)
        assert {"predictions.json", "confusion_matrix.png", "PR_curve.png", "val_batch0_pred.jpg"} <= set(files)
        assert sum(f.startswith("labels/") for f in files) == 5

    def printed(folder: Path, command: str, rank: int = 0) -> list[str]:
        """What a rank printed, the exit code first, without the lines naming the run's folder or its speed."""
        lines = (folder / f"{command}.rank{rank}.out").read_text().splitlines()
        return [line for line in lines if not line.startswith(
            ("Speed:", "results in", "report in", "PR/F1/P/R curves in"))
                and " on OpenVINO (" not in line]  # the first run compiles the checkpoint, the next reuses it

    for command in ("eval", "val"):  # the command line
        assert printed(one, command)[0] == "0" and printed(one, command) == printed(two, command)
        assert printed(two, command, rank=1) == ["0"]  # printed once, by rank 0
        a, b = (json.loads((d / f"{command}.json").read_text()) for d in (one, two))
        assert without_speed(a) == without_speed(b)
    assert 10 < json.loads((one / "eval.json").read_text())["AP50"] < 90
    # the table's row for all classes: 5 images and the numbers val.json holds, as the table rounds them
    (row,) = [line.split() for line in printed(one, "val") if line.split()[:1] == ["all"]]
    metrics = json.loads((one / "val.json").read_text())["metrics"]
    expected = [f"{metrics[key]:.3g}" for key in ("P", "R", "mAP50", "mAP50-95")]
    assert row[1] == "5" and int(row[2]) > 0 and row[3:] == expected, (row, expected)
    files = same_files(one / "val", two / "val", ignore=("report.html", "evaluation.json", "args.yaml"))
    same_settings(one / "val", two / "val", aside=("output", "json"))  # each run its own folder and json
    assert {"predictions.json", "confusion_matrix.png"} <= set(files)
    assert len(json.loads((one / "val" / "predictions.json").read_text())) > 50  # 75 at NMS IoU 0.45
