"""benchmarks/wbf_vs_ensemble_boxes.py, eval_vs_pycocotools.py and model_vs_original.py in their tiny
configuration: their rows, the same answer as the baseline where it is installed, and the JSON of `tphyolo bench`."""

import json

import pytest
from tests.helpers import benchmark_script


def _run(tmp_path, name, *argv):
    out = tmp_path / f"{name}.json"
    assert benchmark_script(name).main(["--quick", *argv, "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"cpu", "torch_threads", "torch", "device", "memory_method"} <= set(data["machine"])
    return data["rows"]


@pytest.mark.slow
def test_wbf_against_ensemble_boxes(tmp_path):
    (row,) = _run(tmp_path, "wbf_vs_ensemble_boxes", "--clock", "cpu")
    assert row["name"] == "wbf" and row["ours_ms"] > 0 and row["extra"]["clock"] == "cpu"
    if row["baseline_ms"] is not None:  # ensemble_boxes installed
        assert row["extra"]["same_boxes"] is True and row["speedup"] > 0


@pytest.mark.slow
def test_eval_against_pycocotools(tmp_path):
    (row,) = _run(tmp_path, "eval_vs_pycocotools", "--images", "3")
    assert row["name"] == "eval/coco" and row["ours_ms"] > 0
    if row["baseline_ms"] is not None:  # pycocotools installed
        assert row["extra"]["same_ap"] is True


@pytest.mark.slow
def test_model_against_the_original_computation(tmp_path, capsys):
    rows = _run(tmp_path, "model_vs_original", "--device", "cpu", "--variants", "eager", "--model-modes", "train,infer")
    baseline = benchmark_script("model_vs_original").BASELINE
    assert [(r["name"], r["config"]) for r in rows] == [
        ("model/train", f"tph-yolov5n img128 b1 eager, vs {baseline}"),
        ("model/infer", f"tph-yolov5n img128 b1 eager, vs {baseline}"),
    ]
    assert all(r["ours_ms"] > 0 and r["baseline_ms"] > 0 and r["extra"]["paired_speedup"] > 0 for r in rows)
    assert "attention blocks swapped for the original computation; same outputs" in capsys.readouterr().out
