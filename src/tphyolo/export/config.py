"""What `tphyolo export` writes, as plain data: `ExportConfig`, the ONNX opsets and `ExportJob`, one run of the
command (no torch); the formats are the rows of `tphyolo.export.formats`."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import InputError
from tphyolo.export.formats import EXPORT_FORMATS, FORMAT_BY_NAME, INT8_FORMATS
from tphyolo.flags import AT_LEAST_ONE, Bounds, check_field_types, flag, imgsz_flag
from tphyolo.infer.config import DEFAULT_OPSET
from tphyolo.metrics.registry import PROTOCOLS

# The image size of an export of a model that does not say its training size (YOLOv5's export default).
DEFAULT_EXPORT_IMGSZ = 640

MIN_OPSET = 14  # scaled_dot_product_attention needs 14
MAX_OPSET = 20  # the newest the TorchScript-based ONNX exporter writes (torch.onnx ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET)
DEFAULT_CALIBRATION_IMAGES = 300  # NNCF's default subset size; fewer when the train split is smaller
DEFAULT_MAX_DROP = 0.01  # mAP50, absolute: what an INT8 file may lose against its float model
# NNCF's activation ranges: which loses less varies by model (docs/int8.md), so the accuracy check decides
CALIBRATION_RANGES = ("mean", "global")


@dataclass(frozen=True)
class ExportSource:
    """The model `tphyolo export` writes out; its field is also the command's flag."""

    weights: str | None = flag(
        None, "--weights", required=True, help="checkpoint to export (ours, TPH-YOLOv5 or YOLOv5 .pt)"
    )


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
    imgsz: int | None = imgsz_flag(
        None,
        help=f"image size, pixels (rounded up to a multiple of the stride; default: the checkpoint's training "
        f"size, else {DEFAULT_EXPORT_IMGSZ})",
        bounds=IMGSZ_BOUNDS,
    )
    batch: int = flag(1, "--batch", "--batch-size", help="batch size", bounds=AT_LEAST_ONE)
    dynamic: bool = flag(False, "--dynamic", help="batch, height and width free (multiples of the stride)")
    half: bool = flag(
        False, "--half", help="fp16 weights (ONNX, TorchScript, engine: with a CUDA --device; OpenVINO: fp16 IR)"
    )
    simplify: bool = flag(False, "--simplify", help="simplify the ONNX graph with onnxslim")
    opset: int = flag(
        DEFAULT_OPSET,
        "--opset",
        help=f"ONNX opset, {MIN_OPSET} (attention) to {MAX_OPSET} (the exporter's newest)",
        bounds=Bounds(MIN_OPSET, MAX_OPSET),
    )
    out: str | None = flag(
        None,
        "--out",
        help="output file (one format) or folder (several); default: beside the weights W.pt, as "
        "W.onnx, W_openvino_model/, W.torchscript, W.pt2, W.engine",
    )
    exist_ok: bool = flag(
        False,
        "--exist-ok",
        help="replace what is at an output path even when it is not an export of that format (never the weights)",
    )
    device: str = flag("cpu", "--device", help="device to export on: cpu, cuda, cuda:N or N")
    int8: bool = flag(
        False,
        "--int8",
        help=f"quantize to INT8 ({', '.join(INT8_FORMATS)}), calibrated on --data's train split, then scored against "
        "the float model on its val split; written as W_int8.onnx, W_int8_openvino_model/, W_int8.engine",
    )
    data: str | None = flag(
        None, "--data", help="--int8: the dataset (built-in name, yaml or folder) to calibrate and check on"
    )
    calib_images: int = flag(
        DEFAULT_CALIBRATION_IMAGES, "--calib-images", help="--int8: calibration images from the train split"
    )
    calib_ranges: str = flag(
        "mean",
        "--calib-ranges",
        choices=CALIBRATION_RANGES,
        help="--int8, OpenVINO: activation ranges from the mean over calibration images of each image's min and max "
        "(NNCF's default) or from the global min and max (ONNX Runtime's files always take the global ones)",
    )
    calib_val: int | None = flag(
        None, "--calib-val", help="--int8: score the accuracy check on this many val images (default: all of them)"
    )
    max_drop: float = flag(
        DEFAULT_MAX_DROP,
        "--max-drop",
        help="--int8: largest mAP50 drop (absolute) from the float model; above it the command exits with 1",
    )
    protocol: str = flag("yolo", "--protocol", choices=tuple(PROTOCOLS), help="--int8: scoring rules of the check")
    accuracy_check: bool = flag(
        True,
        "--no-accuracy-check",
        help="--int8: do not score the INT8 file against the float model; its metadata then marks it unchecked",
    )

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds
        if not self.formats:
            raise InputError(f"no export format given; known: {list(EXPORT_FORMATS)}")
        if len(set(self.formats)) != len(self.formats):
            raise InputError(f"export format listed twice: {list(self.formats)}")
        if self.int8:
            self._check_int8()
        else:
            given = [f"--{name.replace('_', '-')}" for name in INT8_ONLY if getattr(self, name) != _DEFAULTS[name]]
            if given:
                raise InputError(f"{' and '.join(given)} set(s) up INT8 quantization, which runs only with --int8; "
                                 "add --int8 or drop it")  # fmt: skip

    def _check_int8(self) -> None:
        without = [f for f in self.formats if FORMAT_BY_NAME[f].int8_writer is None]
        if without:
            raise InputError(
                f"--int8: {', '.join(without)} has no INT8 form; formats with one: {', '.join(INT8_FORMATS)}"
            )
        if self.half:
            raise InputError("--int8 and --half exclude each other: INT8 files keep fp32 where they keep float")
        if not self.data:
            raise InputError("--int8 needs --data: the dataset whose train images calibrate the quantizer and whose "
                             "val images check its accuracy")  # fmt: skip
        if self.calib_images < 1 or (self.calib_val is not None and self.calib_val < 1):
            raise InputError(
                f"--calib-images and --calib-val must be positive, got {self.calib_images} and {self.calib_val}"
            )
        if not 0 <= self.max_drop <= 1:
            raise InputError(f"--max-drop is an mAP50 difference in [0, 1], got {self.max_drop}")


@dataclass(frozen=True)
class ExportJob:
    """One run of `tphyolo export`: the checkpoint `weights` written out as `config` says
    (`tphyolo.export.exporter.run_export`)."""

    weights: str
    config: ExportConfig = field(default_factory=ExportConfig)


INT8_ONLY = ("data", "calib_images", "calib_ranges", "calib_val", "max_drop", "protocol")  # fields --int8 reads
_DEFAULTS = {f.name: f.default for f in fields(ExportConfig)}
