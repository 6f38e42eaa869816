"""ExportMetadata: what every exported file carries, written and read back without running code."""

import json

import pytest

from tphyolo import __version__
from tphyolo.export import ExportMetadata, load_backend

META = ExportMetadata(
    format="onnx",
    model="tph-yolov5l",
    names=("pedestrian", "people", "car"),
    stride=32,
    imgsz=(640, 640),
    batch=1,
    dynamic=True,
    source="best.pt",
)


def test_round_trip_through_strings_and_json():
    strings = META.to_strings()
    assert json.loads(strings["names"]) == ["pedestrian", "people", "car"]
    assert ExportMetadata.from_strings(strings, source="x") == META
    assert ExportMetadata.from_json(META.to_json(), source="x") == META
    assert META.tphyolo_version == __version__ and META.nc == 3


def test_other_tools_entries_are_ignored():
    strings = {**META.to_strings(), "producer": "something else", "author": '"me"'}
    assert ExportMetadata.from_strings(strings, source="x") == META


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"names": None}, "no tphyolo metadata"),
        ({"stride": "32"}, "'stride' should be int"),
        ({"dynamic": 1}, "'dynamic' should be bool"),
        ({"imgsz": [640]}, "imgsz"),
        ({"names": [1, 2]}, "'names' should be tuple"),
        ({"format": "pickle"}, "'format' must be one of"),
        ({"schema": 99}, "schema 99"),
    ],
)
def test_bad_metadata_names_the_file(change, message):
    data = META.to_dict()
    for key, value in change.items():
        if value is None:
            del data[key]
        else:
            data[key] = value
    with pytest.raises(ValueError, match=message) as error:
        ExportMetadata.from_dict(data, source="model.onnx")
    assert "model.onnx" in str(error.value)


def test_values_are_parsed_as_json_only():
    """A value that would run code under eval or an unsafe loader is only a string that fails to parse."""
    strings = {**META.to_strings(), "names": "__import__('os').system('false')"}
    with pytest.raises(ValueError, match="^m.onnx: not valid JSON \\(metadata 'names'\\)"):
        ExportMetadata.from_strings(strings, source="m.onnx")
    deep = {**META.to_strings(), "names": "[" * 100_000 + "]" * 100_000}
    with pytest.raises(ValueError, match="^m.onnx: metadata 'names' nested deeper than the JSON reader allows"):
        ExportMetadata.from_strings(deep, source="m.onnx")


@pytest.mark.parametrize("fmt", ["onnx", "openvino", "torchscript"])
def test_exported_files_carry_the_metadata(fixed_exports, fmt):
    backend = load_backend(fixed_exports[fmt], trust_code=True)
    meta = backend.metadata
    assert meta.format == fmt and meta.model == "yolov5n" and meta.source == "y5n.pt"
    assert backend.names == [f"class{i}" for i in range(80)]
    assert backend.stride == 32 and backend.imgsz == (64, 64) and backend.batch == 1
    assert backend.dynamic is False and meta.dtype == "float32" and meta.half is False
    assert meta.tphyolo_version == __version__
