"""Every family exports to every CPU format and matches PyTorch (fp32, <= 1e-4 relative), with free batch and
image size; Swin's padding to window multiples and shift masks follow the runtime size."""

import pytest
import torch

from tphyolo.export import ExportConfig, export_model, load_backend
from tphyolo.export.parity import FP32_TOLERANCE, relative_error, sample_images
from tphyolo.models import build_model

CPU_FORMATS = ("onnx", "openvino", "torchscript")


def _export(name, size, folder):
    torch.manual_seed(0)
    model = build_model(name)
    results = export_model(model, ExportConfig(formats=CPU_FORMATS, imgsz=size, dynamic=True), stem=folder / name,
                           model_name=name)  # fmt: skip
    return model, results


@pytest.mark.slow
@pytest.mark.parametrize("name", ["yolov5n", "tph-yolov5n", "tph-yolov5ppn"])
def test_family_matches_pytorch_in_every_format(name, tmp_path):
    _, results = _export(name, 128, tmp_path)
    assert [r.format for r in results] == list(CPU_FORMATS)
    for result in results:
        # the export check ran the file at the export size and at another batch and width
        assert [shape for shape, _ in result.checks] == [(1, 3, 128, 128), (2, 3, 128, 160)]
        assert result.max_error <= FP32_TOLERANCE, result.summary()
        backend = load_backend(result.path, trust_code=True)
        assert backend.dynamic
        with pytest.raises(ValueError, match="multiples of the stride 32, got 100x128"):
            backend.run(torch.zeros(1, 3, 100, 128))


@pytest.mark.slow
def test_swin_padding_and_masks_follow_the_runtime_size(tmp_path):
    """Traced at 128, where the C3STR maps (32, 16, 8, 4 cells) need padding only at P5; run at 128x160 by
    the export check (P4: 10 cells padded to 16) and here at 192x96 (P3 24x12, P4 12x6 -> 16x8, P5 6x3 -> 8x8):
    other window counts, padding and shift masks than the trace saw, in every format."""
    model, results = _export("tph-yolov5-swins", 128, tmp_path)
    for result in results:
        assert [shape for shape, _ in result.checks] == [(1, 3, 128, 128), (2, 3, 128, 160)]
        assert result.max_error <= FP32_TOLERANCE, result.summary()
    x = sample_images(1, 192, 96, seed=2)
    with torch.no_grad():
        expected = model.fuse()(x)
    for result in results:
        error = relative_error(load_backend(result.path, trust_code=True).run(x), expected)
        assert error <= FP32_TOLERANCE, f"{result.format} at 192x96: {error:.2e}"
