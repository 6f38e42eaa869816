"""What every exported model carries, so that running it needs nothing else, and how it is read back.

Fields (`ExportMetadata`): the export format, the model's name, class names, the largest stride, the image
size (h, w) and batch it was exported for, whether batch and image size are free (`dynamic`), the dtype of
its input, whether its weights are fp16, the tphyolo version that wrote it and the weights file it came from.
An INT8 file (`tphyolo export --int8`) also says how it was quantized and what its accuracy check measured:
`int8`, `int8_method`, `int8_float_parts` (what was kept in floating point), `int8_calibration` (which images),
`int8_check` (which images were scored, by which protocol) and `int8_map50`, `int8_map`: (float model, INT8
model) mAP50 and mAP50-95 on them, empty when the check did not run; `int8_unchecked` says why the file's
accuracy is not vouched for (the check was skipped, or its float side scores near zero), empty when it is.

Where it is stored:

| format | where |
| --- | --- |
| ONNX | `metadata_props` of the model: one entry per field, the value JSON |
| OpenVINO | `rt_info` of the IR (`<rt_info><tphyolo>` in the .xml): one entry per field, the value JSON |
| TorchScript | the archive's extra file `extra/tphyolo.json`: the fields as one JSON object |
| torch.export (pt2) | the archive's extra file `tphyolo.json` (`torch.export.save(extra_files=...)`), likewise |
| TensorRT | a prefix of the .engine file: 4-byte little-endian length, then the fields as one JSON object |

Reading never runs code: values are parsed by the bounded JSON reader (`tphyolo.data.files.json_files`) and checked
field by field, each within bounds before it sizes anything: batch at most `MAX_BATCH`, each side of imgsz within
the image-size policy (`MAX_IMGSZ`) and a multiple of the stride, stride a power of two up to `MAX_STRIDE`, at most
`MAX_CLASSES` names of at most `MAX_NAME_CHARS` characters, other strings at most `MAX_TEXT_CHARS`, each stored
value at most `MAX_ENTRY_CHARS` before it is parsed. A backend then checks the fields against its graph
(`check_graph`: fixed batch and size, the output's classes). Every refusal names the file and the key.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any

from tphyolo._version import __version__
from tphyolo.data.files.image_limits import MAX_IMGSZ
from tphyolo.data.files.json_files import load_json_text
from tphyolo.errors import InputError
from tphyolo.models.parse import MAX_CLASSES

SCHEMA = 1  # bump when a field changes meaning
FORMATS = ("onnx", "openvino", "torchscript", "pt2", "engine")  # the rows of `tphyolo.export.formats` (tested)
DTYPES = ("float32", "float16")
MAX_BATCH = 1024  # images per forward pass of a fixed-batch export
MAX_STRIDE = 128  # the largest stride of any model (P6 models: 64)
MAX_NAME_CHARS = 256  # a class name
MAX_TEXT_CHARS = 4096  # any other string (model, source, int8 descriptions)
MAX_ENTRY_CHARS = MAX_CLASSES * (MAX_NAME_CHARS + 4)  # one stored value, before parsing


class LimitError(InputError):
    """A field of `ExportMetadata` outside its bounds (module docstring): the message names the key."""


@dataclass(frozen=True)
class ExportMetadata:
    """What an exported detection model needs to run: see the module docstring.

    imgsz: (h, w) pixels the model was exported (and, when not `dynamic`, fixed) for; batch likewise.
    stride: the largest stride; with `dynamic`, input sides must be multiples of it.
    dtype: "float32" or "float16", the dtype of the model's input (the output is always float32).
    half: the weights are fp16 (an OpenVINO fp16 IR still takes float32 input).
    int8: convolutions and matrix products run in int8 (the input and output stay float32); the `int8_*`
    fields say how it was made and checked (see the module docstring).
    """

    format: str
    model: str
    names: tuple[str, ...]
    stride: int
    imgsz: tuple[int, int]
    batch: int
    dynamic: bool
    dtype: str = "float32"
    half: bool = False
    source: str = ""
    int8: bool = False
    int8_method: str = ""
    int8_float_parts: tuple[str, ...] = ()
    int8_calibration: str = ""
    int8_check: str = ""
    int8_map50: tuple[float, ...] = ()  # (float model, INT8 model) on the `int8_check` images
    int8_map: tuple[float, ...] = ()  # mAP50-95, likewise
    int8_unchecked: str = ""  # why the accuracy check does not vouch for the file; "" when it does
    tphyolo_version: str = __version__
    schema: int = SCHEMA

    def __post_init__(self) -> None:
        """LimitError naming the key of the first field out of its bounds (see the module docstring)."""
        if self.format not in FORMATS:
            raise LimitError(f"metadata 'format' must be one of {FORMATS}, got {self.format!r}")
        if self.dtype not in DTYPES:
            raise LimitError(f"metadata 'dtype' must be one of {DTYPES}, got {self.dtype!r}")
        if not 1 <= self.batch <= MAX_BATCH:
            raise LimitError(f"metadata 'batch' must be in [1, {MAX_BATCH}], got {self.batch}")
        if not 1 <= self.stride <= MAX_STRIDE or self.stride & (self.stride - 1):
            raise LimitError(f"metadata 'stride' must be a power of two in [1, {MAX_STRIDE}], got {self.stride}")
        if len(self.imgsz) != 2 or not all(1 <= side <= MAX_IMGSZ and side % self.stride == 0 for side in self.imgsz):
            raise LimitError(
                f"metadata 'imgsz' must be (h, w), each in [1, {MAX_IMGSZ}] and a multiple of the stride "
                f"{self.stride}; got {list(self.imgsz)}"
            )
        if not self.names or len(self.names) > MAX_CLASSES:
            raise LimitError(f"metadata 'names' must hold 1 to {MAX_CLASSES} class names, got {len(self.names)}")
        long = next((i for i, name in enumerate(self.names) if len(name) > MAX_NAME_CHARS), None)
        if long is not None:
            raise LimitError(
                f"metadata 'names': name {long} has {len(self.names[long])} characters, at most {MAX_NAME_CHARS}"
            )
        for key in ("model", "source", "int8_method", "int8_calibration", "int8_check", "tphyolo_version"):
            if len(getattr(self, key)) > MAX_TEXT_CHARS:
                raise LimitError(f"metadata {key!r} has {len(getattr(self, key))} characters, at most {MAX_TEXT_CHARS}")
        if len(self.int8_map50) not in (0, 2) or len(self.int8_map) != len(self.int8_map50):
            raise LimitError(
                "metadata 'int8_map50' and 'int8_map' hold (float, int8) or nothing; "
                f"got {self.int8_map50}, {self.int8_map}"
            )

    def check_graph(
        self, source: str, *, input_shape: Sequence[int | None], output_shape: Sequence[int | None]
    ) -> None:
        """ValueError naming `source` and the key when the fields disagree with the model's graph: its input
        (B, 3, H, W) and output (B, N, 5 + nc) shapes, a dimension None where the graph leaves it free."""
        if len(input_shape) != 4 or input_shape[1] not in (3, None):
            raise InputError(f"{source}: the graph's input is {list(input_shape)}, not (batch, 3, height, width)")
        if len(output_shape) != 3:
            raise InputError(f"{source}: the graph's output is {list(output_shape)}, not (batch, boxes, 5 + classes)")
        fixed = [dim for dim in (input_shape[0], *input_shape[2:]) if dim is not None]
        if self.dynamic and fixed:
            raise InputError(
                f"{source}: metadata 'dynamic' is true, but the graph's input is fixed at {list(input_shape)}"
            )
        if not self.dynamic:
            if input_shape[0] is not None and input_shape[0] != self.batch:
                raise InputError(
                    f"{source}: metadata 'batch' is {self.batch}, the graph's input batch {input_shape[0]}"
                )
            graph_size = tuple(input_shape[2:])
            if None not in graph_size and graph_size != self.imgsz:
                raise InputError(
                    f"{source}: metadata 'imgsz' is {list(self.imgsz)}, the graph's input {list(graph_size)}"
                )
        classes = output_shape[2]
        if classes is not None and classes != 5 + self.nc:
            raise InputError(
                f"{source}: metadata 'names' holds {self.nc} class names, the graph's output {classes - 5} classes"
            )

    @property
    def nc(self) -> int:
        return len(self.names)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data: tuples become lists."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    def to_strings(self) -> dict[str, str]:
        """One JSON string per field, for key-value stores (ONNX metadata_props, OpenVINO rt_info)."""
        return {key: json.dumps(value) for key, value in self.to_dict().items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, source: str) -> ExportMetadata:
        """Checks types and builds the metadata; ValueError naming `source` (a file) for anything missing,
        mistyped or newer than this tphyolo reads. Unknown keys (from other tools) are ignored."""
        missing = [f.name for f in fields(cls) if f.name not in data and f.default is MISSING]
        if missing:
            raise InputError(f"{source}: no tphyolo metadata {missing}; export the model with `tphyolo export`")
        if data.get("schema", SCHEMA) != SCHEMA:
            raise InputError(
                f"{source}: metadata schema {data['schema']!r}; this tphyolo ({__version__}) reads schema {SCHEMA}"
            )
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            kind = _TYPES[f.name]
            if kind is tuple:
                item = _ITEM_TYPES[f.name]
                ok = isinstance(value, (list, tuple)) and all(type(v) is item for v in value)
                value = tuple(value) if ok else value
            else:
                ok = type(value) is kind
            if not ok:
                raise InputError(f"{source}: metadata {f.name!r} should be {kind.__name__}, got {value!r}")
            values[f.name] = value
        try:
            return cls(**values)
        except (TypeError, ValueError) as error:
            raise InputError(f"{source}: {error}") from error

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str) -> ExportMetadata:
        if len(text) > MAX_ENTRY_CHARS * 2:
            raise InputError(f"{source}: metadata holds {len(text)} characters, at most {MAX_ENTRY_CHARS * 2}")
        try:
            text = text.decode("utf-8") if isinstance(text, bytes) else text
        except UnicodeDecodeError as error:
            raise InputError(f"{source}: metadata is not UTF-8 text (byte {error.start})") from None
        data = load_json_text(text, source, what="metadata")
        if not isinstance(data, dict):
            raise InputError(f"{source}: metadata must be a JSON object, got {type(data).__name__}")
        return cls.from_dict(data, source=source)

    @classmethod
    def from_strings(cls, entries: Mapping[str, str], *, source: str) -> ExportMetadata:
        """The inverse of `to_strings`; entries that are not fields (other tools' metadata) are ignored."""
        data = {}
        for f in fields(cls):
            if f.name in entries:
                text = entries[f.name]
                if len(text) > MAX_ENTRY_CHARS:
                    raise InputError(
                        f"{source}: metadata {f.name!r} holds {len(text)} characters, at most {MAX_ENTRY_CHARS}"
                    )
                data[f.name] = load_json_text(text, source, what=f"metadata {f.name!r}")
        return cls.from_dict(data, source=source)


_TYPES: dict[str, type] = {
    "format": str,
    "model": str,
    "names": tuple,
    "stride": int,
    "imgsz": tuple,
    "batch": int,
    "dynamic": bool,
    "dtype": str,
    "half": bool,
    "source": str,
    "int8": bool,
    "int8_method": str,
    "int8_float_parts": tuple,
    "int8_calibration": str,
    "int8_check": str,
    "int8_map50": tuple,
    "int8_map": tuple,
    "int8_unchecked": str,
    "tphyolo_version": str,
    "schema": int,
}
_ITEM_TYPES: dict[str, type] = {
    "names": str,
    "imgsz": int,
    "int8_float_parts": str,
    "int8_map50": float,
    "int8_map": float,
}
