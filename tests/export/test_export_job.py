"""`run_export` from Python, without argparse: a job writes its files and says, one line per file naming it,
why one is not right."""

from pathlib import Path

import torch

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.export import ExportConfig, ExportJob, load_backend, run_export
from tphyolo.export.exporter import ExportResult
from tphyolo.export.int8_check import Int8Accuracy
from tphyolo.models import build_model
from tphyolo.runtime.console import RunEvents


def test_a_job_writes_torchscript_checked_against_pytorch(tmp_path):
    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=2)
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": ["car", "van"], "nc": 2}
    weights = save_checkpoint(tmp_path / "tiny.pt", payload)
    logged: list[str] = []
    job = ExportJob(str(weights), ExportConfig(formats=("torchscript",), imgsz=64))
    run = run_export(job, events=RunEvents(note=logged.append))
    assert run.ok and run.problems() == [] and run.job == job
    [result] = run.results
    assert result.path == tmp_path / "tiny.torchscript" and result.max_error < result.tolerance
    assert logged[-1] == result.summary() and "relative error vs PyTorch" in logged[-1]
    assert logged[0] == "torchscript: PyTorch deprecates TorchScript; --format pt2 writes its successor, a " \
        "torch.export program"  # fmt: skip
    assert load_backend(result.path, trust_code=True).names == ["car", "van"]


def _result(fmt: str, error: float, accuracy: Int8Accuracy | None = None) -> ExportResult:
    return ExportResult(fmt, Path(f"w.{fmt}"), 1.0, (((1, 3, 64, 64), error),), 1e-3, accuracy)


def test_each_kind_of_failure_is_one_line_naming_the_file():
    dropped = Int8Accuracy("val", 0.35, 0.15, 0.3, 0.1, max_drop=0.01)
    silent = Int8Accuracy("val", 0.0, 0.0, 0.0, 0.0, max_drop=0.01)
    assert _result("onnx", 1e-4).problem(calib_ranges="mean") is None
    assert _result("onnx", 0.5).problem(calib_ranges="mean") == (
        "w.onnx differs from PyTorch by 5.0e-01 relative, above the tolerance 1e-03"
    )
    assert _result("openvino", 1e-4, dropped).problem(calib_ranges="mean") == (
        "w.openvino loses 0.2000 mAP50 against the float model (0.3500 -> 0.1500), above --max-drop 0.01; the file "
        "is kept (--calib-ranges global may lose less)"
    )
    assert _result("onnx", 1e-4, dropped).problem(calib_ranges="global").endswith("the file is kept")
    unchecked = _result("onnx", 1e-4, silent).problem(calib_ranges="mean")
    assert unchecked.startswith("w.onnx: the accuracy check says nothing: the float model scores mAP50 0.0000")
