"""bench_backends: rows in the bench schema, backends checked against the baseline before timing."""

import pytest

from tphyolo.export.benchmark import BackendBenchSettings, bench_backends


def test_settings_are_checked():
    with pytest.raises(ValueError, match="unknown backend"):
        BackendBenchSettings(backends=("tensorflow",))
    with pytest.raises(ValueError, match="baseline must be one of"):
        BackendBenchSettings(baseline="yolov8")


@pytest.mark.slow
def test_rows_for_each_backend_against_the_original_computation(tmp_path):
    settings = BackendBenchSettings(
        model="tph-yolov5n", imgsz=64, backends=("onnxruntime", "openvino"), baseline="original", warmup=0, repeats=2
    )
    lines = []
    rows = bench_backends(settings, workdir=tmp_path, log=lines.append)
    assert [r.name for r in rows] == ["export/onnxruntime", "export/openvino"]
    assert any("outputs equal to the original baseline" in line for line in lines)
    for row in rows:
        data = row.to_json()
        assert data["baseline_ms"] > 0 and data["ours_ms"] > 0 and data["speedup"] > 0
        assert 0 < data["extra"]["rel_error"] <= 1e-4 and data["extra"]["export_s"] > 0
        assert "tph-yolov5n img64 b1" in data["config"]
