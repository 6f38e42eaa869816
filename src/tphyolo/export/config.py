"""What `tphyolo export` writes, as plain data: `ExportConfig` and the ONNX opsets (no torch); the formats are
the rows of `tphyolo.export.formats`."""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.export.formats import EXPORT_FORMATS
from tphyolo.flags import flag

DEFAULT_OPSET = 17  # LayerNormalization is a single op from 17; every runtime here reads it
MIN_OPSET = 14  # scaled_dot_product_attention needs 14


@dataclass(frozen=True)
class ExportConfig:
    """What `tphyolo export` writes; each field is also its command-line flag."""

    formats: tuple[str, ...] = flag(
        ("onnx",),
        "--format",
        "--include",
        choices=EXPORT_FORMATS,
        metavar="FORMAT",
        help=f"one or more of {', '.join(EXPORT_FORMATS)}",
    )
    imgsz: int = flag(
        640, "--img", "--imgsz", "--img-size", help="image size, pixels (rounded up to a multiple of the stride)"
    )
    batch: int = flag(1, "--batch", "--batch-size", help="batch size")
    dynamic: bool = flag(False, "--dynamic", help="batch, height and width free (multiples of the stride)")
    half: bool = flag(
        False, "--half", help="fp16 weights (ONNX, TorchScript, engine: with a CUDA --device; OpenVINO: fp16 IR)"
    )
    simplify: bool = flag(False, "--simplify", help="simplify the ONNX graph with onnxslim")
    opset: int = flag(DEFAULT_OPSET, "--opset", help="ONNX opset")
    out: str | None = flag(
        None,
        "--out",
        help="output file (one format) or folder (several); default: beside the weights W.pt, as "
        "W.onnx, W_openvino_model/, W.torchscript, W.engine",
    )
    device: str = flag("cpu", "--device", help="device to export on: cpu, cuda, cuda:N or N")

    def __post_init__(self) -> None:
        unknown = [f for f in self.formats if f not in EXPORT_FORMATS]
        if unknown or not self.formats:
            raise ValueError(f"unknown export format(s) {unknown or '(none)'}; known: {list(EXPORT_FORMATS)}")
        if len(set(self.formats)) != len(self.formats):
            raise ValueError(f"export format listed twice: {list(self.formats)}")
        if self.batch < 1 or self.imgsz < 1:
            raise ValueError(f"--batch and --img must be positive, got {self.batch} and {self.imgsz}")
        if self.opset < MIN_OPSET:
            raise ValueError(f"--opset {self.opset}: attention exports from opset {MIN_OPSET} on")
