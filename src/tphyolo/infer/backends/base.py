"""The `Backend` interface of every model the inference core runs, and what every backend of an exported model
shares: metadata, input checks, dtype and device handling.

The interface (`Backend`): `prepare(images)` turns (B, 3, H, W) uint8 RGB images into the input of `run`, floats
in [0, 1] in `dtype` on `device`; `run(x)` returns the decoded output (B, N, 5 + nc) float32 on `device` (boxes
cx, cy, w, h in input pixels, then objectness and class scores). For an exported model `stride`, `names`,
`imgsz`, `dynamic` and `batch` come from the file, so that predicting needs nothing else. The engine never asks
which backend it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

import torch

from tphyolo.errors import InputError
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.runtime.decisions import Decision


class Backend(Protocol):
    """A loaded detection model. A backend may subclass it to take the defaults of the members after `format`
    (a model in memory, of any input size and batch, without decisions or streams).

    names: class names (index = class id); stride: the largest stride (input sides must be multiples of it);
    device: where its inputs live; dtype: the dtype of its inputs; format: what computes it ("pytorch", or the
    export format: "onnx", "openvino", ...); path: the file it was read from, None for a model given in memory.
    fixed_shape: the (h, w) every input must have (a fixed-size export), None for any stride multiple;
    max_batch: the most images one `run` takes (a fixed-size export's batch), None for any number; own_imgsz:
    the image size the model was made for, None when unknown, and `imgsz_origin` how ("trained" for a
    checkpoint's training size, "exported" for an export's own). decisions: what runs it and why
    (`tphyolo.runtime.decisions.Decision` by "runtime", "precision", ...; `load_backends` fills them), {} when
    none were made. has_streams: whether `use_streams()` can switch it to running several forwards at once
    (OpenVINO's throughput path, `tphyolo.serve.engine.inference_streams`); only such a backend has it.
    alone_on_latency: once `use_streams()`, whether a forward that finds no other running runs on every thread.
    """

    names: list[str]
    stride: int
    device: torch.device
    dtype: torch.dtype
    format: str
    path: Path | None = None
    fixed_shape: tuple[int, int] | None = None
    max_batch: int | None = None
    own_imgsz: int | None = None
    imgsz_origin: str = "trained"
    decisions: Mapping[str, Decision] = MappingProxyType({})
    has_streams: bool = False
    alone_on_latency: bool = False

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 RGB images -> the input `run` takes: values in [0, 1], on `device`, in `dtype`."""
        ...

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) input -> (B, N, 5 + nc) decoded: xywh in input pixels, sigmoid objectness, class scores."""
        ...


class ExportedBackend(Backend):
    """A model read from an exported file: metadata, input checks, dtype and device handling.

    Subclasses implement `_forward(x)` for inputs already checked and converted to `dtype` on `device`.
    A fixed-size export runs its own image size (`fixed_shape`; callers letterbox to it) and at most its own
    batch (`max_batch`; a smaller batch is padded to it and the padding's outputs dropped); a dynamic one
    refuses sides that are not multiples of the stride.
    """

    format: str  # the export format it runs (the `format` of the file's metadata)
    suffix: str  # what the format's files are called: W + suffix
    cpu_only: bool = False  # runs on the CPU only, whatever device is asked for
    runs_code: bool = False  # its files are programs: loaded only when the user trusts them (`load_backend`)
    imgsz_origin = "exported"  # what its `own_imgsz` is: the size it was exported at (`input_shape.settled_config`)

    @classmethod
    def recognises(cls, path: Path) -> bool:
        """Whether `path` is named as a file of this backend's format."""
        return path.suffix.lower() == cls.suffix

    def __init__(self, path: Path, metadata: ExportMetadata, device: torch.device) -> None:
        self.path = path
        self.metadata = metadata
        self.device = device
        self.dtype = torch.float16 if metadata.dtype == "float16" else torch.float32
        self.precision = "fp16" if metadata.dtype == "float16" else "fp32"  # what it computes in
        self.decisions: dict[str, Decision] = {}  # `load_backends` says what runs it

    @property
    def names(self) -> list[str]:
        return list(self.metadata.names)

    @property
    def stride(self) -> int:
        return self.metadata.stride

    @property
    def imgsz(self) -> tuple[int, int]:
        return self.metadata.imgsz

    @property
    def dynamic(self) -> bool:
        return self.metadata.dynamic

    @property
    def batch(self) -> int:
        return self.metadata.batch

    @property
    def own_imgsz(self) -> int:
        return max(self.imgsz)

    @property
    def fixed_shape(self) -> tuple[int, int] | None:
        return None if self.dynamic else self.imgsz

    @property
    def max_batch(self) -> int | None:
        return None if self.dynamic else self.batch

    def check_input(self, x: torch.Tensor) -> None:
        """ValueError, naming the file, when this model cannot run on a batch shaped like `x`."""
        if x.ndim != 4 or x.shape[1] != 3:
            raise InputError(f"{self.path}: input must be (B, 3, H, W) images, got shape {tuple(x.shape)}")
        b, _, h, w = x.shape
        if not self.dynamic and (b > self.batch or (h, w) != self.imgsz):
            raise InputError(
                f"{self.path}: exported for a fixed input ({self.batch}, 3, {self.imgsz[0]}, {self.imgsz[1]}), "
                f"got ({b}, 3, {h}, {w}); export with --dynamic to run other batch or image sizes "
                "(TTA scales need it)"
            )
        if h % self.stride or w % self.stride:
            raise InputError(f"{self.path}: image sides must be multiples of the stride {self.stride}, got {h}x{w}")

    def check_stride(self) -> None:
        """InputError naming the file when a dynamic model does not run on a (1, 3, 3s, 3s) input, s its metadata
        'stride': every multiple of s is a side it promises to run. An odd multiple, so that a graph whose stride
        is larger (2s, 4s: a side that is not its multiple breaks its feature pyramid) fails here, at load, and not
        inside the runtime on the first image. A fixed-size model runs its own size only: nothing to check."""
        if not self.dynamic:
            return
        side = 3 * self.stride
        try:
            self._forward(torch.zeros(1, 3, side, side, dtype=self.dtype, device=self.device))
        except Exception as error:  # each runtime raises its own kinds: any is a graph that does not run there
            raise InputError(
                f"{self.path}: metadata 'stride' is {self.stride}, but the graph does not run at {side}x{side} "
                f"({error_reason(error)}); its stride is larger: export the model again"
            ) from error

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 RGB images (0..255) -> the input `run` takes: [0, 1] in `dtype` on `device`."""
        return images.to(self.device).to(self.dtype) / 255.0

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """Images (B, 3, H, W) in [0, 1] -> (B, N, 5 + nc) float32 on `device`; any float dtype and device is
        accepted and converted."""
        self.check_input(x)
        x = x.to(self.device, self.dtype)
        count = x.shape[0]
        if not self.dynamic and count < self.batch:  # the file's batch, the padding's outputs dropped
            x = torch.cat([x, x.new_zeros((self.batch - count, *x.shape[1:]))])
        out = self._forward(x.contiguous())[:count]
        return out.to(self.device, torch.float32)

    def _forward(self, x: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must implement _forward")

    def __repr__(self) -> str:
        size = "dynamic" if self.dynamic else f"{self.batch}x{self.imgsz[0]}x{self.imgsz[1]}"
        return f"{type(self).__name__}({self.path}, {self.metadata.model}, {size}, {self.metadata.dtype})"


def check_format(metadata: ExportMetadata, expected: str, path: Path) -> None:
    """ValueError when a file's metadata says it is another format than its name suggests."""
    if metadata.format != expected:
        raise InputError(f"{path}: metadata says format {metadata.format!r}, expected {expected!r}")


def archive_metadata(text: str, expected: str, path: Path, device: torch.device) -> ExportMetadata:
    """The metadata of a PyTorch archive (TorchScript, pt2) from the JSON `text` of its extra file; ValueError
    naming `path` when there is none, it is not `expected`'s, or it is an fp16 file asked to run off CUDA."""
    if not text:
        raise InputError(f"{path}: no tphyolo metadata; export the model with `tphyolo export`")
    metadata = ExportMetadata.from_json(text, source=str(path))
    check_format(metadata, expected, path)
    if metadata.dtype == "float16" and device.type != "cuda":
        raise InputError(f"{path}: an fp16 export runs on CUDA only")
    return metadata


def error_reason(error: BaseException) -> str:
    """The first sentence of the last non-empty line of a runtime's error message (where runtimes say what
    went wrong; what follows is advice about other situations)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1].split(". ")[0] if lines else type(error).__name__
