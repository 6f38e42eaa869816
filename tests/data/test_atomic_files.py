"""Files written in one step (`tphyolo.data.files.atomic`): a write that fails leaves the previous version whole,
no temporary behind, and an error naming the destination."""

from __future__ import annotations

import errno
import os

import pytest

from tphyolo.data.files.atomic import atomic_path, write_text_atomic


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


def test_text_naming_a_file_that_is_not_utf8_keeps_its_bytes(tmp_path):
    """A report names `caf\\xe9.jpg` (Latin-1), as Python decodes it: the file holds the name's own bytes."""
    name = os.fsdecode(b"caf\xe9.jpg")
    path = write_text_atomic(tmp_path / "report.html", f"<td>{name}</td>")
    assert path.read_bytes() == b"<td>caf\xe9.jpg</td>"
