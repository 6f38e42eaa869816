"""A checkpoint whose class name is longer than a compiled model's metadata holds (256 characters) runs: under
`--runtime auto` on PyTorch, with one line naming the checkpoint and saying the limit is the compiled model's; with
the compiled runtime asked for by name, the command ends with that line. PyTorch itself has no such limit."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.helpers import exit_code, model_cache_at, one_error_line, save_model_checkpoint
from tests.reliability.corpus import jpeg_bytes

from tphyolo.infer.backends.metadata import MAX_NAME_CHARS
from tphyolo.models import build_model

pytest.importorskip("openvino")

LONG = "x" * 300


@pytest.fixture(scope="module")
def long_named(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = build_model("yolov5n", num_classes=3)
    return save_model_checkpoint(tmp_path_factory.mktemp("weights") / "long.pt", model, ["a", "b", LONG])


def _predict(weights: Path, tmp_path: Path, *runtime: str) -> list[str]:
    (tmp_path / "a.jpg").write_bytes(jpeg_bytes(0))
    return ["predict", "--weights", str(weights), "--source", str(tmp_path / "a.jpg"), "--device", "cpu",
            "--project", str(tmp_path / "runs"), "--img", "64", *runtime]  # fmt: skip


def test_auto_runs_pytorch_with_one_line_naming_the_checkpoint(long_named, tmp_path, capsys):
    """The old code ended the command with "metadata 'names': name 2 has 300 characters, at most 256"."""
    assert len(LONG) > MAX_NAME_CHARS
    with model_cache_at(tmp_path / "cache"):
        assert exit_code(_predict(long_named, tmp_path)) == 0
    captured = capsys.readouterr()
    said = [line for line in (captured.out + captured.err).splitlines() if str(long_named) in line]
    assert len(said) == 1 and "compiled openvino model's metadata" in said[0] and "running PyTorch" in said[0], said
    assert "Traceback" not in captured.err and "in 1 file(s), 0 skipped" in captured.out


def test_an_explicit_compiled_runtime_ends_with_one_line_naming_the_checkpoint(long_named, tmp_path, capsys):
    """The old line did not name the checkpoint nor say whose limit it is."""
    with model_cache_at(tmp_path / "cache"):
        assert exit_code(_predict(long_named, tmp_path, "--runtime", "openvino")) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert str(long_named) in line and f"has {len(LONG)} characters" in line and "compiled openvino model" in line
