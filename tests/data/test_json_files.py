"""The one JSON reader: nesting that would exhaust the parser's stack, bytes that are not UTF-8 and invalid JSON
are one ValueError naming the file; a byte-order mark is read; the readers built on it (COCO labels, the scan
cache) answer the same way."""

import json

import pytest
from tests.reliability.corpus import deep_json, jpeg_bytes

from tphyolo.data.files.json_files import load_json_file, load_json_text
from tphyolo.data.formats.coco import load_coco
from tphyolo.data.labels import LabelError
from tphyolo.data.scan import scan_split


def test_deep_nesting_is_refused_in_one_line_naming_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(deep_json())
    with pytest.raises(ValueError, match=f"^{path}: COCO dataset nested deeper than the JSON reader allows"):
        load_json_file(path, what="COCO dataset")
    with pytest.raises(LabelError, match=f"^{path}: COCO dataset nested deeper"):
        load_coco(path)
    path.write_text('{"images": ' + deep_json() + "}")
    with pytest.raises(LabelError, match=f"^{path}: COCO dataset nested deeper"):
        load_coco(path)
    assert load_json_text("[" * 50 + "]" * 50, "shallow") == json.loads("[" * 50 + "]" * 50)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a": 1', "not valid JSON \\(results\\): Expecting ',' delimiter: line 1 column 8"),
        (b'{"a": "caf\xe9"}', "not UTF-8 text \\(results; byte 10\\)"),
    ],
)
def test_bad_text_is_named(tmp_path, data, message):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=f"^{path}: {message}"):
        load_json_file(path, what="results")


def test_a_byte_order_mark_is_read(tmp_path):
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a": [1, 2]}).encode())
    assert load_json_file(path) == {"a": [1, 2]}


def test_a_scan_cache_nested_too_deeply_is_rebuilt(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    (tmp_path / "images" / "a.jpg").write_bytes(jpeg_bytes(0))
    (tmp_path / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    cache = tmp_path / "labels.cache.json"
    cache.write_text(deep_json())
    scan = scan_split(tmp_path / "images", names=("a",))
    assert len(scan.records) == 1 and not scan.report.from_cache
    assert json.loads(cache.read_text())["version"] >= 1  # rewritten
