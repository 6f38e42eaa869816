"""The export formats' table is the one description of a format: what the CLI, the file names, the exporter,
the backends and the benchmark use is derived from it."""

from dataclasses import fields
from pathlib import Path

import pytest

from tphyolo.bench.export import BACKENDS as BENCHED
from tphyolo.export.config import ExportConfig
from tphyolo.export.exporter import output_paths, selected_formats
from tphyolo.export.formats import EXPORT_FORMATS, FORMATS, INT8_FORMATS, RUNTIMES
from tphyolo.export.writer_api import FormatWriter, Int8Writer
from tphyolo.flags import flag_spec
from tphyolo.infer.backends import BACKENDS, exported_format
from tphyolo.infer.backends.metadata import ExportMetadata


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_is_carried_by_metadata_and_read_back(fmt):
    """What a file of each row stores, read back (the metadata's own list of formats may not miss a row)."""
    written = ExportMetadata(format=fmt.name, model="m", names=("a",), stride=32, imgsz=(64, 64), batch=1,
                             dynamic=False)  # fmt: skip
    for stored, read in ((written.to_json(), ExportMetadata.from_json), (written.to_strings(),
                                                                         ExportMetadata.from_strings)):  # fmt: skip
        assert read(stored, source=f"m{fmt.suffix}") == written


def test_metadata_refuses_a_format_that_is_no_row():
    for name in ("tflite", "ONNX", ""):
        assert name not in EXPORT_FORMATS
        with pytest.raises(ValueError, match="metadata 'format'"):
            ExportMetadata(format=name, model="m", names=("a",), stride=32, imgsz=(64, 64), batch=1, dynamic=False)


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_each_row_has_a_writer_and_its_backend_runs_its_files(fmt, tmp_path):
    assert isinstance(fmt.writer_module(), FormatWriter)
    if fmt.backend is None:
        assert fmt.runtime is None and fmt.suffix_written
        return
    backend = BACKENDS[fmt.backend]
    assert backend.format == fmt.name and fmt.suffix == backend.suffix
    written = tmp_path / f"best{fmt.suffix}"
    if fmt.name == "openvino":  # a folder, recognised by the .xml it holds
        written.mkdir()
        (written / "best.xml").touch()
    else:
        written.touch()
    assert exported_format(written) == fmt.name


def test_backends_are_the_rows_that_have_one():
    assert sorted(BACKENDS) == sorted(f.name for f in FORMATS if f.backend is not None)


def test_the_cli_the_file_names_and_the_benchmark_derive_from_the_table():
    assert flag_spec(fields(ExportConfig)[0]).choices == EXPORT_FORMATS
    cfg = ExportConfig(formats=tuple(reversed(EXPORT_FORMATS)))
    assert [f.name for f in selected_formats(cfg)] == list(EXPORT_FORMATS)  # written in table order
    paths = output_paths(cfg, Path("runs/best"))
    assert {name: path.name for name, path in paths.items()} == {f.name: f"best{f.suffix}" for f in FORMATS}
    assert tuple(RUNTIMES) == BENCHED and {fmt for fmt, _ in RUNTIMES.values()} == set(BACKENDS)
    with pytest.raises(ValueError, match="--format must be one of .*, got 'tflite'"):
        ExportConfig(formats=("tflite",))


def test_int8_forms_come_from_the_rows_that_have_an_int8_writer():
    """`--int8` files are named `W_int8...`, written by the row's INT8 writer, and benchmarked as `<runtime>-int8`."""
    int8_rows = [f for f in FORMATS if f.int8_writer is not None]
    assert [f.name for f in int8_rows] == list(INT8_FORMATS) and {"onnx", "openvino"} <= set(INT8_FORMATS)
    for fmt in int8_rows:
        assert isinstance(fmt.writer_module(int8=True), Int8Writer)
        if fmt.runtime is not None:
            assert RUNTIMES[f"{fmt.runtime}-int8"] == (fmt.name, True)
    cfg = ExportConfig(formats=("onnx", "openvino"), int8=True, data="synthetic")
    assert {k: p.name for k, p in output_paths(cfg, Path("runs/best")).items()} == {
        "onnx": "best_int8.onnx",
        "openvino": "best_int8_openvino_model",
    }
    assert exported_format(Path("best_int8.onnx")) == "onnx"
    with pytest.raises(ValueError, match="torchscript has no INT8 form"):
        ExportConfig(formats=("torchscript",), int8=True, data="synthetic")
    with pytest.raises(ValueError, match="--int8 needs --data"):
        ExportConfig(formats=("onnx",), int8=True)
