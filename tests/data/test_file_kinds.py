"""Paths that are not regular files (a folder, a FIFO, a link to /dev/zero, a dangling link, a link loop), named
like an image or a label: each is a problem that names the path and what it is, and none is ever opened."""

import re

import pytest
from tests.reliability.corpus import finishes_within, jpeg_bytes, not_regular_files

from tphyolo.data.files.image_io import ImageError, read_image, read_image_size
from tphyolo.data.files.json_files import load_json_file
from tphyolo.data.files.paths import regular_file_problem
from tphyolo.data.formats.visdrone import NAMES, read_visdrone_rows
from tphyolo.data.labels import LabelError, read_label_text
from tphyolo.data.scan import scan_split

KINDS = {
    "directory": "a directory",
    "fifo": "a FIFO",
    "zero": "a character device",
    "dangling": "a symbolic link to a missing target",
    "loop": "a symbolic link loop",
}


def test_each_kind_is_told_without_opening_it(tmp_path):
    paths = not_regular_files(tmp_path, ".txt")
    (tmp_path / "plain.txt").write_text("")
    assert regular_file_problem(tmp_path / "plain.txt") is None
    assert regular_file_problem(tmp_path / "absent.txt") == "no such file"
    for kind, path in paths.items():
        assert finishes_within(10, lambda p=path: regular_file_problem(p)) == KINDS[kind]
        for read, error in ((read_label_text, LabelError), (read_visdrone_rows, LabelError), (read_image, ImageError),
                            (read_image_size, ImageError), (load_json_file, ValueError)):  # fmt: skip
            with pytest.raises(error, match=f"^{re.escape(str(path))}: not a regular file \\({KINDS[kind]}\\)$"):
                finishes_within(10, lambda p=path, read=read: read(p))


def test_images_that_are_not_files_are_counted_and_named_as_skipped(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    for i in range(2):
        (images / f"good{i}.jpg").write_bytes(jpeg_bytes(i))
    odd = not_regular_files(images, ".jpg")
    scan = finishes_within(60, lambda: scan_split(images, names=NAMES, cache=False))
    assert sorted(r.im_file for r in scan.records) == [str(images / "good0.jpg"), str(images / "good1.jpg")]
    assert scan.report.images == 7 and scan.report.counts["corrupt"] == 5
    for kind, path in odd.items():
        assert f"{path}: named like an image but not a regular file ({KINDS[kind]}); skipped" in scan.report.problems


@pytest.mark.parametrize("label_folder", ["labels", "annotations"])
def test_label_paths_that_are_not_files_are_problems_not_missing_labels(tmp_path, label_folder):
    images = tmp_path / "images"
    images.mkdir()
    odd = not_regular_files(tmp_path / label_folder, ".txt")
    for kind in odd:
        (images / f"{kind}.jpg").write_bytes(jpeg_bytes(len(kind)))
    (images / "background.jpg").write_bytes(jpeg_bytes(9))  # no label file at all: kept as background
    scan = finishes_within(60, lambda: scan_split(images, names=NAMES, cache=False))
    assert [r.im_file for r in scan.records] == [str(images / "background.jpg")]
    assert scan.report.counts == {"found": 0, "missing": 1, "empty": 0, "corrupt": 5}
    assert sorted(scan.report.problems) == sorted(f"{p}: not a regular file ({KINDS[k]})" for k, p in odd.items())


def test_an_ignore_side_file_that_is_not_a_file_is_named(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.jpg").write_bytes(jpeg_bytes(0))
    (tmp_path / "labels").mkdir()
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    (tmp_path / "ignore").mkdir()
    (tmp_path / "ignore" / "a.txt").mkdir()
    scan = scan_split(tmp_path / "images", names=("a",), cache=False)
    assert scan.report.problems == [f"{tmp_path / 'ignore' / 'a.txt'}: not a regular file (a directory)"]
    assert not scan.records and scan.report.counts["corrupt"] == 1
