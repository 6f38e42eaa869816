"""`tphyolo bench`: every sub-benchmark runs in a tiny configuration and its JSON parses."""

import json

import pytest

from tphyolo.cli import main

ROW_KEYS = {"name", "config", "baseline_ms", "ours_ms", "speedup", "baseline_peak_mb", "ours_peak_mb"}


def _run(tmp_path, *argv):
    out = tmp_path / "bench.json"
    assert main(["bench", *argv, "--quick", "--device", "cpu", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert {"cpu", "torch_threads", "torch", "device", "memory_method"} <= set(data["machine"])
    for row in data["rows"]:
        assert set(row) >= ROW_KEYS
    return data


@pytest.mark.slow
def test_bench_model_quick_times_each_variant_against_eager(tmp_path):
    data = _run(tmp_path, "model", "--variants", "eager,channels_last", "--model-modes", "train,infer")
    against_eager = "tph-yolov5n img128 b1 channels_last, vs eager, this package"
    assert [(r["name"], r["config"]) for r in data["rows"]] == [
        ("model/train", "tph-yolov5n img128 b1 eager"),
        ("model/train", against_eager),
        ("model/infer", "tph-yolov5n img128 b1 eager"),
        ("model/infer", against_eager),
    ]
    eager, channels_last = data["rows"][2:]
    assert eager["baseline_ms"] is None and eager["ours_ms"] > 0  # the baseline of the other rows
    assert channels_last["baseline_ms"] == eager["ours_ms"] and channels_last["ours_ms"] > 0  # timed together
    assert (eager["extra"]["memory_format"], channels_last["extra"]["memory_format"]) == ("contiguous", "channels_last")


@pytest.mark.slow
def test_bench_data_quick(tmp_path):
    from tphyolo.data.builtin.synthetic import generate_synthetic

    data_yaml = generate_synthetic(tmp_path / "syn", n_train=4, n_val=1, imgsz=256)
    data = _run(tmp_path, "data", "--data", str(data_yaml), "--workers", "0", "--batch", "2")
    (row,) = data["rows"]
    assert row["name"] == "data/loader" and row["extra"]["images_per_s"] > 0 and row["baseline_ms"] is None


@pytest.mark.slow
def test_bench_predict_quick(tmp_path):
    data = _run(tmp_path, "predict", "--backends", "onnxruntime,openvino")
    ours = "ours, PyTorch eager fp32 fused"
    assert [(r["name"], r["config"]) for r in data["rows"]] == [
        ("predict/onnxruntime", f"tph-yolov5n img64 b1 fp32, vs {ours}"),
        ("predict/openvino", f"tph-yolov5n img64 b1 fp32, vs {ours}"),
    ]
    assert all(r["ours_ms"] > 0 and r["baseline_ms"] > 0 and r["extra"]["rel_error"] <= 1e-4 for r in data["rows"])


def test_bench_rejects_unknown_choices(capsys):
    assert main(["bench", "model", "--quick", "--device", "cpu", "--variants", "turbo"]) == 2
    assert main(["bench", "predict", "--quick", "--device", "cpu", "--backends", "tensorflow"]) == 2
    assert "unknown backend" in capsys.readouterr().err
    for moved in ("everything", "attention", "wbf", "eval"):  # studies are scripts in benchmarks/
        with pytest.raises(SystemExit):
            main(["bench", moved])
    with pytest.raises(SystemExit):  # the original computation is benchmarks/model_vs_original.py's baseline
        main(["bench", "predict", "--baselines", "original"])


@pytest.mark.slow
def test_bench_startup_quick_times_a_cold_and_a_warm_start(tmp_path):
    from tphyolo.data.builtin.synthetic import generate_synthetic

    data_yaml = generate_synthetic(tmp_path / "syn", n_train=4, n_val=1, imgsz=256)
    data = _run(tmp_path, "startup", "--data", str(data_yaml), "--batch", "2")
    (row,) = data["rows"]
    assert row["name"] == "startup" and "baseline: cold start" in row["config"]
    for start in ("cold", "warm"):
        phases = row["extra"][f"{start}_phases_s"]
        assert {"setup", "data", "model", "first batch", "first step"} <= set(phases)
    assert row["baseline_ms"] == pytest.approx(1000 * sum(row["extra"]["cold_phases_s"].values()), abs=5)
    assert row["ours_ms"] == pytest.approx(1000 * sum(row["extra"]["warm_phases_s"].values()), abs=5)
