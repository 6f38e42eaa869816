"""Label files as editors write them: a UTF-8 byte-order mark is accepted by every reader; malformed values,
out-of-range categories and files that are not UTF-8 text name file:line."""

import re
import warnings
from pathlib import Path

import pytest
from tests.reliability.corpus import NOT_TEXT_LABELS, jpeg_bytes

from tphyolo.data.formats.visdrone import parse_visdrone, read_visdrone_rows
from tphyolo.data.formats.yolo import parse_yolo
from tphyolo.data.labels import LabelError, read_label_text
from tphyolo.data.scan import scan_split

BOM = "\ufeff"


def test_a_yolo_label_file_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(f"{BOM}1 0.5 0.5 0.2 0.4\n0 0.25 0.25 0.1 0.1\n", encoding="utf-8")
    labels = parse_yolo(path, None, width=100, height=50)
    assert labels.classes.tolist() == [1, 0]
    assert labels.boxes.flatten().tolist() == pytest.approx([40, 15, 60, 35, 20, 10, 30, 15])


def test_a_visdrone_file_with_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(f"{BOM}10,20,30,40,1,4,0,0\n1,1,5,5,0,0,0,0\n", encoding="utf-8")
    labels = parse_visdrone(path)
    assert labels.classes.tolist() == [3] and labels.boxes.tolist() == [[10, 20, 40, 60]]
    assert labels.ignore.tolist() == [[1, 1, 6, 6]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("10,20,,40,1,4,0,0\n", "a.txt:1: field 3 is empty"),
        ("10,20,30,40,1,4.5,0,0\n", "a.txt:1: field 6 (category, truncation, occlusion) 4.5 is not whole"),
        ("10,20,30,40,nan,4,0,0\n", "a.txt:1: non-finite value"),
    ],
)
def test_a_malformed_visdrone_line_names_file_and_line(tmp_path, text, message):
    path = tmp_path / "a.txt"
    path.write_text(text)
    with pytest.raises(LabelError, match=re.escape(f"{path}:1: ") + re.escape(message.removeprefix("a.txt:1: "))):
        parse_visdrone(path)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("utf16", ": UTF-16 text \\(byte-order mark ff fe\\); label files are UTF-8"),
        ("utf16_no_bom", ":1: a NUL byte: binary data, not label text"),
        ("latin1", ":2: not UTF-8 text \\(byte 23 is 0xe9\\); label files are UTF-8"),
        ("binary", ":2: not UTF-8 text \\(byte 128 is 0x80\\)"),
    ],
)
def test_a_label_file_that_is_not_utf8_text_is_named_with_its_line(tmp_path, kind, message):
    path = tmp_path / "a.txt"
    path.write_bytes(NOT_TEXT_LABELS[kind])
    pattern = "^" + re.escape(str(path)) + message
    for read in (read_label_text, parse_visdrone, read_visdrone_rows, lambda p: parse_yolo(p, None, width=9, height=9)):
        with pytest.raises(LabelError, match=pattern):
            read(path)


def test_the_scan_names_a_label_file_that_is_not_text(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    for kind, data in NOT_TEXT_LABELS.items():
        (tmp_path / "images" / f"{kind}.jpg").write_bytes(jpeg_bytes(0))
        (tmp_path / "labels" / f"{kind}.txt").write_bytes(data)
    scan = scan_split(tmp_path / "images", names=("a",), cache=False)
    assert not scan.records and scan.report.counts["corrupt"] == len(NOT_TEXT_LABELS)
    for kind in NOT_TEXT_LABELS:
        assert sum(p.startswith(f"{tmp_path / 'labels' / kind}.txt:") for p in scan.report.problems) == 1, kind


def test_eval_rows_read_a_byte_order_mark_as_training_does(tmp_path):
    """One reader, one rule: the rows `tphyolo eval` scores and the labels training reads agree on a file with
    a byte-order mark."""
    path = tmp_path / "a.txt"
    path.write_text(f"{BOM}10,20,30,40,1,4,0,0\n1,1,5,5,0,0\n", encoding="utf-8")
    rows = read_visdrone_rows(path)
    assert rows.tolist() == [[10, 20, 30, 40, 1, 4, 0, 0], [1, 1, 5, 5, 0, 0, 0, 0]]
    assert parse_visdrone(path).classes.tolist() == [3]


@pytest.mark.parametrize("category", ["12", "-1", "99"])
def test_a_visdrone_category_outside_the_protocol_is_named_with_file_and_line(tmp_path, category):
    path = tmp_path / "a.txt"
    path.write_text(f"10,20,30,40,1,4,0,0\n10,20,30,40,1,{category},0,0\n")
    for read in (read_visdrone_rows, parse_visdrone):
        with pytest.raises(LabelError, match=re.escape(f"{path}:2: category {category} outside 0..11")):
            read(path)


@pytest.mark.parametrize(
    "line",
    [
        "99999999999999999999 0.5 0.5 0.2 0.2",  # a class id past int64: an OverflowError traceback
        "0 0.5 1e308 0.2 0.2",  # a coordinate that overflows once scaled: numpy's RuntimeWarning, then inf boxes
        "0 0.5 0.5 -1e300 0.2",  # likewise, once a box corner is computed
    ],
)
def test_a_yolo_number_too_large_is_a_bad_label_naming_file_and_line(tmp_path, line):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    for stem in ("good", "bad"):
        (tmp_path / "images" / f"{stem}.jpg").write_bytes(jpeg_bytes(0))
    (tmp_path / "labels" / "good.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    bad = tmp_path / "labels" / "bad.txt"
    bad.write_text(f"1 0.5 0.5 0.1 0.1\n{line}\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning on the way
        with pytest.raises(LabelError, match=re.escape(f"{bad}:2: ") + r"\S+ is out of range"):
            parse_yolo(bad, None, width=64, height=64)
        scan = scan_split(tmp_path / "images", names=("a", "b"), cache=False)
    assert [Path(r.im_file).name for r in scan.records] == ["good.jpg"]
    assert [p for p in scan.report.problems if p.startswith(f"{bad}:2: ")] == scan.report.problems
