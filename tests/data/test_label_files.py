"""Label files as editors write them: a UTF-8 byte-order mark is accepted; malformed values name file:line."""

import re

import pytest

from tphyolo.data.formats.visdrone import parse_visdrone
from tphyolo.data.formats.yolo import parse_yolo
from tphyolo.data.labels import LabelError

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
