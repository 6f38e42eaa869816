"""Files written in one step (`tphyolo.data.files.atomic`): a write that fails leaves the previous version whole,
no temporary behind, and an error naming the destination."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tphyolo.data.files.atomic import atomic_path, clear_stale, write_text_atomic

SRC = str(Path(__file__).resolve().parents[2] / "src")


def test_a_write_replaces_the_file_in_one_step(tmp_path):
    path = write_text_atomic(tmp_path / "p.json", "old")
    write_text_atomic(path, "new")
    assert path.read_text() == "new" and os.listdir(tmp_path) == ["p.json"]


def test_a_failed_write_keeps_the_old_file_and_names_it(tmp_path):
    path = write_text_atomic(tmp_path / "m.onnx", "good")
    with pytest.raises(OSError) as error, atomic_path(path) as tmp:
        tmp.write_bytes(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp))  # the disk filled up
    assert error.value.errno == errno.ENOSPC and error.value.filename == str(path)
    assert path.read_text() == "good" and os.listdir(tmp_path) == ["m.onnx"]


def test_a_folder_is_replaced_whole(tmp_path):
    folder = tmp_path / "m_openvino_model"
    folder.mkdir()
    (folder / "old.xml").write_text("old")
    with atomic_path(folder) as tmp:
        tmp.mkdir()
        (tmp / "m.xml").write_text("new")
    assert os.listdir(folder) == ["m.xml"] and os.listdir(tmp_path) == ["m_openvino_model"]
    with pytest.raises(RuntimeError), atomic_path(folder) as tmp:
        tmp.mkdir()
        raise RuntimeError("killed while writing")
    assert os.listdir(folder) == ["m.xml"] and os.listdir(tmp_path) == ["m_openvino_model"]


def test_a_file_replaces_a_folder_and_a_folder_a_file(tmp_path):
    """A rename replaces a file by a file only: the old code's os.replace raised IsADirectoryError (a file onto a
    folder) and NotADirectoryError (a folder onto a file); what is there is now moved aside first."""
    path = tmp_path / "m.onnx"
    (path / "inner").mkdir(parents=True)
    with atomic_path(path) as tmp:
        tmp.write_text("file")
    assert path.read_text() == "file"
    with atomic_path(path) as tmp:
        tmp.mkdir()
        (tmp / "a.txt").write_text("folder")
    assert (path / "a.txt").read_text() == "folder" and sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_text_naming_a_file_that_is_not_utf8_keeps_its_bytes(tmp_path):
    """A report names `caf\\xe9.jpg` (Latin-1), as Python decodes it: the file holds the name's own bytes."""
    name = os.fsdecode(b"caf\xe9.jpg")
    path = write_text_atomic(tmp_path / "report.html", f"<td>{name}</td>")
    assert path.read_bytes() == b"<td>caf\xe9.jpg</td>"


def _killed_while_writing(path) -> int:
    """The PID of a process SIGKILLed inside `atomic_path(path)`, its temporary written."""
    code = (
        "import os, signal, sys\n"
        "from tphyolo.data.files.atomic import atomic_path\n"
        "with atomic_path(sys.argv[1]) as tmp:\n"
        "    tmp.write_bytes(b'half')\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], env=os.environ | {"PYTHONPATH": SRC})
    assert done.returncode == -signal.SIGKILL
    (stale,) = [p for p in path.parent.iterdir() if p.name.startswith(f".{path.stem}.")]
    return int(stale.name.split(".")[2])


def test_the_next_write_clears_the_temporaries_of_killed_writers(tmp_path):
    path = write_text_atomic(tmp_path / "m.onnx", "good")
    dead = _killed_while_writing(path)
    stale = tmp_path / f".m.{dead}.tmp.onnx"
    nested = tmp_path / f"..m.{dead}.tmp.{dead}.tmp.onnx"  # a writer that staged into a temporary of its own
    nested.write_bytes(b"half")
    alive = tmp_path / f".m.{os.getppid()}.tmp.onnx"  # a writer still at work
    alive.write_bytes(b"half")
    other = tmp_path / f".n.{dead}.tmp.onnx"  # another file's
    other.write_bytes(b"half")
    assert stale.read_bytes() == b"half" and path.read_text() == "good"
    write_text_atomic(path, "new")
    assert path.read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == sorted(["m.onnx", alive.name, other.name])


def test_a_folder_left_aside_by_a_killed_writer_goes_back(tmp_path):
    folder = tmp_path / "m_openvino_model"
    dead = _killed_while_writing(tmp_path / "m.onnx")
    (tmp_path / f".m.{dead}.tmp.onnx").unlink()
    aside = tmp_path / f".m_openvino_model.{dead}.old"  # killed between its two renames
    aside.mkdir()
    (aside / "m.xml").write_text("earlier")
    assert clear_stale(folder) == [aside]
    assert os.listdir(tmp_path) == ["m_openvino_model"] and (folder / "m.xml").read_text() == "earlier"
