"""bench_backends and bench_tta: rows in the bench schema, labelled by their baseline, every backend checked
against our PyTorch model before timing."""

import pytest

from tphyolo.bench.export import BASELINE, BackendBenchSettings, bench_backends, bench_tta


def test_settings_are_checked():
    with pytest.raises(ValueError, match="unknown backend"):
        BackendBenchSettings(backends=("tensorflow",))
    with pytest.raises(ValueError, match="unknown backend.*torch"):  # PyTorch eager is the baseline of every row
        BackendBenchSettings(backends=("torch",))
    with pytest.raises(ValueError, match="unknown backend"):
        BackendBenchSettings(backends=())


@pytest.mark.slow
def test_rows_for_each_backend_against_the_baseline(tmp_path):
    settings = BackendBenchSettings(model="tph-yolov5n", imgsz=64, backends=("onnxruntime", "openvino"), warmup=0,
                                    repeats=2)  # fmt: skip
    lines = []
    rows = bench_backends(settings, workdir=tmp_path, log=lines.append)
    assert [(r.name, r.config.split(", vs ")[1]) for r in rows] == [
        ("predict/onnxruntime", BASELINE),
        ("predict/openvino", BASELINE),
    ]
    assert any("outputs equal to our PyTorch model's" in line for line in lines)
    for row in rows:
        data = row.to_json()
        assert data["baseline_ms"] > 0 and data["ours_ms"] > 0 and data["speedup"] > 0
        assert 0 < data["extra"]["rel_error"] <= 1e-4
        assert data["config"].startswith("tph-yolov5n img64 b1 fp32")
        assert data["extra"]["export_s"] > 0


@pytest.mark.slow
def test_tta_rows_time_predict_end_to_end_with_the_same_detections(tmp_path):
    settings = BackendBenchSettings(model="yolov5n", backends=("onnxruntime",), warmup=0, repeats=1, tta_imgsz=128)
    lines = []
    (row,) = bench_tta(settings, workdir=tmp_path, log=lines.append)
    assert row.name == "predict/tta/onnxruntime"
    assert row.config == f"yolov5n 128x72 img128 TTA 8 passes + WBF fp32, vs {BASELINE}"
    assert row.ours_ms > 0 and row.baseline_ms > 0
    detections, expected = row.extra["detections"], row.extra["baseline_detections"]
    assert expected > 10 and abs(detections - expected) <= 0.05 * expected
    assert any(line.startswith("TTA (8 passes + WBF) detections") for line in lines)
