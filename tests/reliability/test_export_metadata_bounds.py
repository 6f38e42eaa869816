"""Metadata in an exported file is validated against bounds and against the file's graph before it sizes
anything: a forged batch, image size, stride, class-name count or string size is one line naming the file and
the metadata key (never a flag the user did not type), and an empty .onnx is one line, not ONNX Runtime's
exception. The ONNX files are built here: a graph that reshapes (1, 3, 64, 64) into (1, 1536, 8), the output
of a 3-class detector, carrying metadata changed one key at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.helpers import exit_code, one_error_line
from tests.reliability.corpus import jpeg_bytes

from tphyolo.infer.backends.metadata import ExportMetadata

onnx = pytest.importorskip("onnx")

GOOD = ExportMetadata(format="onnx", model="yolov5n", names=("a", "b", "c"), stride=32, imgsz=(64, 64), batch=1,
                      dynamic=False)  # fmt: skip


def forged_onnx(path: Path, **changes) -> Path:
    """A 3-class detector's graph (fixed input 1x3x64x64) whose metadata is GOOD's with `changes` (raw JSON
    values)."""
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [3], [1, 1536, 8])
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["images", "shape"], ["output"])],
        "forged",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 64, 64])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1536, 8])],
        initializer=[shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    entries = GOOD.to_strings() | {key: json.dumps(value) for key, value in changes.items()}
    helper.set_model_props(model, entries)
    onnx.save(model, str(path))
    return path


def _predict(weights: Path, tmp_path: Path) -> list[str]:
    (tmp_path / "a.jpg").write_bytes(jpeg_bytes(0))
    return ["predict", "--weights", str(weights), "--source", str(tmp_path / "a.jpg"), "--device", "cpu",
            "--project", str(tmp_path), "--img", "64"]  # fmt: skip


def test_the_forged_graph_runs_with_true_metadata(tmp_path, capsys):
    """The oracle: the same file with metadata that tells the truth is predicted."""
    assert exit_code(_predict(forged_onnx(tmp_path / "m.onnx"), tmp_path)) == 0
    assert "in 1 file(s), 0 skipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"batch": 10**9}, "'batch'"),
        ({"batch": 4}, "'batch'"),  # within bounds, but the graph's batch is 1
        ({"names": [str(i) for i in range(10**6)]}, "'names'"),
        ({"names": ["a", "b"]}, "'names'"),  # the graph's output has 3 classes
        ({"names": ["a", "b", "x" * 10**6]}, "'names'"),
        ({"imgsz": [10**6, 64]}, "'imgsz'"),
        ({"imgsz": [128, 128]}, "'imgsz'"),  # the graph's input is 64x64
        ({"stride": 7}, "'stride'"),
        ({"stride": 10**9}, "'stride'"),
        ({"dynamic": True}, "'dynamic'"),
        ({"model": "m" * 100_000}, "'model'"),
    ],
)
def test_forged_metadata_is_one_line_naming_the_file_and_key(changes, key, tmp_path, capsys):
    weights = forged_onnx(tmp_path / "m.onnx", **changes)
    assert exit_code(_predict(weights, tmp_path)) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert str(weights) in line and f"metadata {key}" in line and "--" not in line.split(str(weights))[1], line


def test_an_empty_onnx_file_is_one_line(tmp_path, capsys):
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert exit_code(_predict(tmp_path / "empty.onnx", tmp_path)) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert f"{tmp_path / 'empty.onnx'}: an empty file" in line and "ONNXRuntimeError" not in line


def test_a_dynamic_export_whose_stride_is_too_small_is_one_line_at_load(weights, tmp_path, capfd):
    """A dynamic export of a stride-32 model whose metadata says stride 16: a side of 48 (a multiple of 16) broke
    the graph's feature pyramid inside ONNX Runtime (a traceback: "Concat node ... mismatched dimensions");
    loading it now runs it once at 3 x stride and refuses it in one line naming the file and the key. The same
    file with its true stride is predicted."""
    good = tmp_path / "dyn.onnx"
    argv = ["export", "--weights", str(weights), "--include", "onnx", "--img", "64", "--dynamic", "--out", str(good)]
    assert exit_code(argv) == 0
    proto = onnx.load(str(good))
    for entry in proto.metadata_props:
        if entry.key == "stride":
            entry.value = json.dumps(16)
    forged = tmp_path / "s16.onnx"
    onnx.save(proto, str(forged))
    capfd.readouterr()
    assert exit_code([*_predict(forged, tmp_path), "--img", "48"]) == 2
    err = capfd.readouterr().err
    line = one_error_line(err, "predict")
    assert str(forged) in line and "metadata 'stride' is 16" in line and len(err.strip().splitlines()) == 1, err
    assert exit_code([*_predict(good, tmp_path), "--img", "64"]) == 0
