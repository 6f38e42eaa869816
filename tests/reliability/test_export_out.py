"""`export --out` is checked before anything is written: a name that is not the format's, the weights being
exported (by any name: itself, a symbolic or a hard link) and an existing file or folder that is not an export of
the format are refused in one line naming the path, leaving every file as it was and nothing beside it;
`--exist-ok` replaces what is there (never the weights), and an export of the same format is replaced as before."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from tests.helpers import exit_code, one_error_line

pytest.importorskip("onnxruntime")


@pytest.fixture
def folder(weights, tmp_path) -> Path:
    """A folder holding its own copy of the checkpoint, w.pt, and notes.txt."""
    shutil.copy(weights, tmp_path / "w.pt")
    (tmp_path / "notes.txt").write_text("my notes\n")
    return tmp_path


def _export(folder: Path, out: Path | str, *extra: str, fmt: str = "onnx") -> int:
    argv = ["export", "--weights", str(folder / "w.pt"), "--include", fmt, "--img", "64", "--out", str(out), *extra]
    return exit_code(argv)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


@pytest.mark.parametrize(
    ("out", "says"),
    [
        ("w.pt", "not named as onnx exports are, *.onnx"),  # the checkpoint itself: it was written over, then refused
        ("notes.txt", "not named as onnx exports are, *.onnx"),  # a text file replaced by ONNX bytes
        ("exp_dyn", "not named as onnx exports are, *.onnx"),  # an ONNX file without its suffix was left there
        ("alias.onnx", "is the weights being exported"),  # a symbolic link to w.pt: written through to it
        ("hard.onnx", "is the weights being exported"),  # a hard link to w.pt
        ("plain.onnx", "is not an export in format onnx"),  # a folder named as the file
    ],
)
def test_a_refused_out_leaves_every_file_as_it_was(folder, out, says, capsys):
    (folder / "alias.onnx").symlink_to(folder / "w.pt")
    os.link(folder / "w.pt", folder / "hard.onnx")
    (folder / "plain.onnx").mkdir()
    before, listing = _files(folder), sorted(os.listdir(folder))
    assert _export(folder, folder / out) == 2
    line = one_error_line(capsys.readouterr().err, "export")
    assert str(folder / out) in line and says in line, line
    assert _files(folder) == before and sorted(os.listdir(folder)) == listing and not os.listdir(folder / "plain.onnx")


def test_an_openvino_folder_that_is_not_an_export_is_replaced_only_with_exist_ok(folder, capsys):
    pytest.importorskip("openvino")
    out = folder / "m_openvino_model"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert _export(folder, out, fmt="openvino") == 2
    assert "give --exist-ok" in one_error_line(capsys.readouterr().err, "export")
    assert os.listdir(out) == ["keep.txt"]
    assert _export(folder, out, "--exist-ok", fmt="openvino") == 0
    assert sorted(p.suffix for p in out.iterdir()) == [".bin", ".xml"]
    assert _export(folder, out, fmt="openvino") == 0  # an export there is replaced by the next one


def test_exist_ok_never_writes_over_the_weights(folder, capsys):
    weights = (folder / "w.pt").read_bytes()
    (folder / "alias.onnx").symlink_to(folder / "w.pt")
    assert _export(folder, folder / "alias.onnx", "--exist-ok") == 2
    assert "is the weights being exported" in one_error_line(capsys.readouterr().err, "export")
    assert (folder / "w.pt").read_bytes() == weights


def test_an_earlier_export_is_replaced_and_nothing_is_left_beside_it(folder):
    out = folder / "m.onnx"
    assert _export(folder, out) == 0
    first = out.stat().st_mtime_ns
    assert _export(folder, out) == 0
    assert out.stat().st_mtime_ns >= first
    assert sorted(os.listdir(folder)) == ["m.onnx", "notes.txt", "w.pt"]


def test_a_folder_holding_the_weights_and_names_of_other_formats_are_refused(tmp_path):
    from tphyolo.errors import InputError
    from tphyolo.export.exporter import check_outputs

    folder = tmp_path / "w_openvino_model"
    folder.mkdir()
    (folder / "w.pt").write_bytes(b"weights")
    with pytest.raises(InputError, match="is the weights being exported"):
        check_outputs({"openvino": folder}, exist_ok=True, weights=folder / "w.pt")
    with pytest.raises(InputError, match=r"\*\.engine \(e\.g\. --out .*w\.engine\)"):
        check_outputs({"engine": tmp_path / "w.trt"}, exist_ok=True)
    with pytest.raises(InputError, match=r"\*_openvino_model \(e\.g\. --out .*ir_openvino_model\)"):
        check_outputs({"openvino": tmp_path / "ir"}, exist_ok=True)
