"""A TorchScript file is a program: given as --weights it is refused unless the user passes --trust-code, before
any of its code runs, in every command that loads weights. The files are generated here: scripted modules that
leave a mark when they run, with metadata forged to look like a tphyolo export."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tests.helpers import exit_code, one_error_line
from tests.reliability.corpus import jpeg_bytes

from tphyolo.infer.backends import load_backend
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.torchscript import METADATA_FILE


class _LeavesAMark(torch.nn.Module):
    """Raises on every call: a stand-in for code that writes files, loops for ever or reads secrets."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("the file's own code ran")


def forged_torchscript(path: Path) -> Path:
    """A scripted module whose code raises when run, carrying metadata that claims a tphyolo export."""
    metadata = ExportMetadata(format="torchscript", model="yolov5n", names=("a", "b"), stride=32,
                              imgsz=(64, 64), batch=1, dynamic=True)  # fmt: skip
    torch.jit.save(torch.jit.script(_LeavesAMark()), str(path), _extra_files={METADATA_FILE: metadata.to_json()})
    return path


@pytest.mark.parametrize("command", ["predict", "val", "track"])
def test_a_torchscript_weights_file_is_refused_without_trust_code(command, tmp_path, capsys):
    weights = forged_torchscript(tmp_path / "m.torchscript")
    (tmp_path / "a.jpg").write_bytes(jpeg_bytes(0))
    (tmp_path / "data.yaml").write_text(f"path: {tmp_path}\ntrain: .\nval: .\nnames: [a, b]\n")
    source = {"predict": ["--source", str(tmp_path / "a.jpg")], "val": ["--data", str(tmp_path / "data.yaml")],
              "track": ["--source", str(tmp_path / "a.jpg")]}[command]  # fmt: skip
    argv = [command, "--weights", str(weights), *source, "--device", "cpu", "--project", str(tmp_path)]
    assert exit_code(argv) == 2
    line = one_error_line(capsys.readouterr().err, command)
    assert str(weights) in line and "--trust-code" in line and "own code ran" not in line


def test_load_backend_runs_a_torchscript_file_only_when_trusted(tmp_path):
    weights = forged_torchscript(tmp_path / "m.torchscript")
    with pytest.raises(ValueError, match="--trust-code"):
        load_backend(weights)
    backend = load_backend(weights, trust_code=True)  # the user's explicit choice: its code runs
    with pytest.raises(Exception, match="own code ran"):  # torch.jit.Error
        backend.run(torch.zeros(1, 3, 64, 64))
