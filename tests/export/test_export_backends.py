"""Backends of exported files: choosing by name, refusing sizes a fixed export cannot run, and one-line
errors for files that are missing, truncated, corrupt or not tphyolo exports."""

import shutil

import pytest
import torch

from tphyolo.export import exported_format, load_backend
from tphyolo.export.parity import relative_error, sample_images

FORMATS = ["onnx", "openvino", "torchscript"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_backend_runs_the_exported_size(fixed_exports, fmt):
    backend = load_backend(fixed_exports[fmt], trust_code=True)
    x = sample_images(1, 64, 64, seed=1)
    with torch.no_grad():
        expected = fixed_exports["model"].fuse()(x)
    out = backend.run(x)
    assert out.dtype == torch.float32 and out.device == backend.device == torch.device("cpu")
    assert relative_error(out, expected) <= 1e-4
    assert backend.dtype == torch.float32


@pytest.mark.parametrize("fmt", FORMATS)
def test_prepare_turns_uint8_images_into_the_input_of_run(fixed_exports, fmt):
    backend = load_backend(fixed_exports[fmt], trust_code=True)
    images = torch.randint(0, 256, (1, 3, 64, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(4))
    x = backend.prepare(images)
    assert x.dtype == backend.dtype and x.device == backend.device
    assert torch.equal(x, images.float() / 255.0)
    with torch.no_grad():
        expected = fixed_exports["model"].fuse()(x)
    assert relative_error(backend.run(x), expected) <= 1e-4


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(1, 3, 128, 128), (2, 3, 64, 64), (1, 3, 64, 96)])
def test_fixed_size_export_refuses_other_sizes(fixed_exports, fmt, shape):
    backend = load_backend(fixed_exports[fmt], trust_code=True)
    with pytest.raises(ValueError, match=r"fixed input \(1, 3, 64, 64\).*--dynamic") as error:
        backend.run(torch.zeros(shape))
    assert str(fixed_exports[fmt]) in str(error.value)


def test_a_batch_smaller_than_a_fixed_export_s_is_padded_to_it(fixed_exports, tmp_path):
    from tphyolo.export import ExportConfig, export_model

    model = fixed_exports["model"]
    (result,) = export_model(model, ExportConfig(formats=("onnx",), imgsz=64, batch=3), stem=tmp_path / "b3",
                             model_name="yolov5n", source="b3.pt")  # fmt: skip
    backend = load_backend(result.path, trust_code=True)
    assert (backend.fixed_shape, backend.max_batch) == ((64, 64), 3)
    x = sample_images(2, 64, 64, seed=2)
    with torch.no_grad():
        expected = model.fuse()(x)
    out = backend.run(x)
    assert out.shape[0] == 2 and relative_error(out, expected) <= 1e-4
    with pytest.raises(ValueError, match=r"fixed input \(3, 3, 64, 64\), got \(4, 3, 64, 64\)"):
        backend.run(sample_images(4, 64, 64, seed=2))


def test_backend_refuses_non_image_input(fixed_exports):
    backend = load_backend(fixed_exports["onnx"])
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        backend.run(torch.zeros(1, 1, 64, 64))


def test_format_is_chosen_by_name(fixed_exports, tmp_path):
    assert exported_format(fixed_exports["onnx"]) == "onnx"
    assert exported_format(fixed_exports["openvino"]) == "openvino"
    assert exported_format(next(fixed_exports["openvino"].glob("*.xml"))) == "openvino"
    assert exported_format(fixed_exports["torchscript"]) == "torchscript"
    assert exported_format(tmp_path / "best.pt") is None
    xml_backend = load_backend(next(fixed_exports["openvino"].glob("*.xml")))
    assert xml_backend.metadata.format == "openvino"


def test_not_an_exported_model(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.onnx"):
        load_backend(tmp_path / "missing.onnx")
    (tmp_path / "best.pt").write_bytes(b"weights")
    with pytest.raises(ValueError, match="best.pt: not an exported model"):
        load_backend(tmp_path / "best.pt")
    with pytest.raises(ValueError, match="not an exported model"):
        load_backend(tmp_path)  # a folder without an IR
    for name in ("a.xml", "b.xml"):
        (tmp_path / name).write_text("<net/>")
    with pytest.raises(ValueError, match=r"holds one .xml file, found \['a.xml', 'b.xml'\]"):
        load_backend(tmp_path)


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_damaged_file_is_a_one_line_error_naming_it(fixed_exports, tmp_path, fmt, damage):
    path = tmp_path / fixed_exports[fmt].name
    shutil.copy(fixed_exports[fmt], path)
    if damage == "truncated":
        _truncate(path)
    else:
        path.write_bytes(b"not a model " * 64)
    with pytest.raises(ValueError, match="truncated or corrupt") as error:
        load_backend(path, trust_code=True)
    message = str(error.value)
    assert str(path) in message and "\n" not in message


@pytest.mark.parametrize("part", [".bin", ".xml"])
def test_damaged_openvino_ir_is_a_one_line_error_naming_it(fixed_exports, tmp_path, part):
    folder = tmp_path / fixed_exports["openvino"].name
    shutil.copytree(fixed_exports["openvino"], folder)
    _truncate(next(folder.glob(f"*{part}")))
    with pytest.raises(ValueError, match="truncated or corrupt") as error:
        load_backend(folder)
    assert str(folder) in str(error.value) and "\n" not in str(error.value)


def test_onnx_without_tphyolo_metadata_is_refused(tmp_path):
    from tphyolo.export.onnx_file import trace_onnx

    path = trace_onnx(torch.nn.Conv2d(3, 4, 1).eval(), torch.zeros(1, 3, 8, 8), tmp_path / "plain.onnx",
                      dynamic=False, opset=17)  # fmt: skip
    with pytest.raises(ValueError, match="plain.onnx: no tphyolo metadata"):
        load_backend(path, trust_code=True)


def test_fp16_exports_need_cuda(fixed_exports, tmp_path):
    """An fp16 ONNX file (metadata dtype float16) is refused on the CPU before anything runs."""
    import onnx

    from tphyolo.export import ExportMetadata

    proto = onnx.load(str(fixed_exports["onnx"]))
    meta = ExportMetadata.from_strings({p.key: p.value for p in proto.metadata_props}, source="x")
    del proto.metadata_props[:]
    for key, value in {**meta.to_strings(), "dtype": '"float16"', "half": "true"}.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(tmp_path / "half.onnx"))
    with pytest.raises(ValueError, match="fp16 export runs on CUDA only"):
        load_backend(tmp_path / "half.onnx")


@pytest.mark.parametrize("shape", [(2, 3, 128, 128), (3, 3, 96, 160)])
def test_dynamic_openvino_ir_runs_a_whole_batch_in_one_request(dynamic_exports, shape):
    """A --dynamic IR keeps its batch free (no image-by-image loop): one request per batch, each image's output
    the same as PyTorch's and as its own run alone."""
    import openvino as ov

    xml = next(dynamic_exports["openvino"].glob("*.xml"))
    assert ov.Core().read_model(str(xml)).input(0).get_partial_shape().to_string() == "[?,3,?,?]"
    backend = load_backend(dynamic_exports["openvino"])
    batch, _, height, width = shape
    x = sample_images(batch, height, width, seed=3)
    with torch.no_grad():
        expected = dynamic_exports["model"].fuse()(x)
    out = backend.run(x)
    assert relative_error(out, expected) <= 1e-4
    assert relative_error(backend.run(x[1:2]), out[1:2]) <= 1e-5
