"""Model backends: what the inference core (`tphyolo.infer.detector.Detector`) runs.

A backend is a loaded detection model behind one small interface (`Backend`): `prepare` turns uint8 images
into its input, `run` returns the decoded eval output, and `names`, `stride`, `device`, `dtype` describe it.
The core never asks which kind of backend it holds. `TorchBackend` wraps a PyTorch model prepared by the
runtime (fused, placed, fp16 with `half`, channels_last, compiled); exported runtimes (ONNX Runtime,
OpenVINO, TorchScript) plug in as further classes with the same attributes, loaded by `load_backends`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import torch
from torch import nn

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.checkpoint.release import is_release_name, missing_weights_message
from tphyolo.errors import InputError
from tphyolo.infer.backends import exported_format, load_backend
from tphyolo.infer.backends.compiled import CompiledCheckpoint, load_compiled, resolve_runtime, trained_imgsz
from tphyolo.infer.backends.metadata import LimitError
from tphyolo.runtime.config import RuntimeConfig, autocast, sdpa_context
from tphyolo.runtime.probe import ProbeJob, tuned_runtime

LOGGER = logging.getLogger("tphyolo")
Weights = str | Path | nn.Module


class Backend(Protocol):
    """A loaded detection model.

    names: class names (index = class id); stride: the largest stride (input sides must be multiples of it);
    device: where its inputs live; dtype: the dtype of its inputs. Optional (a backend without them takes any
    input): fixed_shape, the (h, w) every input must have (a fixed-size export), None for any stride multiple;
    max_batch, the most images one `run` takes (a fixed-size export's batch), None for any number; own_imgsz,
    the image size the model was made for (a checkpoint's training size, an export's), None when unknown.
    """

    names: list[str]
    stride: int
    device: torch.device
    dtype: torch.dtype
    fixed_shape: tuple[int, int] | None
    max_batch: int | None

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) uint8 RGB images -> the input `run` takes: values in [0, 1], on `device`, in `dtype`."""
        ...

    def run(self, x: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) input -> (B, N, 5 + nc) decoded: xywh in input pixels, sigmoid objectness, class scores."""
        ...


def model_stride(model: nn.Module) -> int:
    """The largest stride of a detection model; raises ValueError for a module without `stride`."""
    stride = getattr(model, "stride", None)
    if stride is None:
        raise InputError(f"{type(model).__name__} has no `stride`: not a detection model")
    return int(torch.as_tensor(stride).max())


@dataclass(frozen=True)
class UnpreparedModel:
    """A PyTorch detection model read but not yet prepared by a runtime: the (fused) `model`, its class `names`,
    `own_imgsz` (its training size, None when unknown) and `path` (the checkpoint it was read from, None for a
    model given in memory)."""

    model: nn.Module
    names: list[str]
    own_imgsz: int | None = None
    path: Path | None = None

    @classmethod
    def read(cls, weights: Weights, *, fuse: bool = True) -> UnpreparedModel:
        """A model, or a checkpoint file (tphyolo or original TPH-YOLOv5/YOLOv5 format), fused when `fuse`.
        Raises FileNotFoundError for a missing file."""
        own_imgsz, path = None, None
        if isinstance(weights, nn.Module):
            model, names = weights, list(getattr(weights, "names", []))
        else:
            if not Path(weights).exists() and not is_release_name(weights):
                raise FileNotFoundError(missing_weights_message(weights))
            checkpoint = load_checkpoint(weights)
            model, names = checkpoint.build_model(), list(checkpoint.names)
            own_imgsz = trained_imgsz(checkpoint.state.get("train_args"), source=str(weights))
            path = Path(weights)
        if fuse and hasattr(model, "fuse"):
            model = model.fuse()  # a new module
        return cls(model=model, names=names, own_imgsz=own_imgsz, path=path)


def largest_own_imgsz(models: Sequence[object]) -> tuple[int, object] | None:
    """The largest `own_imgsz` among `models` (backends, or models not yet prepared) and the one that has it;
    None when none knows its size. The image size a set of models left to choose it runs at
    (`tphyolo.infer.input_shape.settled_config`), and so the size the runtime probe times (`settled_job`)."""
    sizes = [(size, m) for m in models if (size := getattr(m, "own_imgsz", None)) is not None]  # optional
    return max(sizes, key=lambda pair: pair[0]) if sizes else None


def settled_job(job: ProbeJob, models: Sequence[object]) -> ProbeJob:
    """`job` at the size `models` will run: when `job.imgsz_from_model`, the largest `own_imgsz` among them
    (`largest_own_imgsz`), else, or when none knows its size, `job.imgsz`; `imgsz_from_model` then cleared."""
    found = largest_own_imgsz(models) if job.imgsz_from_model else None
    return replace(job, imgsz=found[0] if found is not None else job.imgsz, imgsz_from_model=False)


class TorchBackend:
    """A PyTorch detection model that is already prepared: on `device`, in eval mode, in the runtime's weights
    dtype and memory format. `run` applies the runtime's autocast and attention-kernel choice."""

    fixed_shape = None  # any input size
    max_batch = None  # any batch

    def __init__(
        self,
        model: nn.Module,
        *,
        runtime: RuntimeConfig,
        device: torch.device,
        names: Sequence[str] | None = None,
        own_imgsz: int | None = None,
        path: Path | None = None,
    ) -> None:
        """own_imgsz: the size the model was trained at, when known; path: the checkpoint it was read from."""
        self.model, self.runtime, self.device = model, runtime, torch.device(device)
        self.own_imgsz, self.path = own_imgsz, path
        self.names = list(names if names is not None else getattr(model, "names", []))
        self.stride = model_stride(model)
        self.dtype = torch.float16 if runtime.half else torch.float32

    @classmethod
    def load(
        cls, weights: Weights, *, runtime: RuntimeConfig, device: torch.device, fuse: bool = True,
        job: ProbeJob | None = None,
    ) -> TorchBackend:  # fmt: skip
        """A model, or a checkpoint file (tphyolo or original TPH-YOLOv5/YOLOv5 format), fused (when `fuse`)
        and prepared by `runtime` for `device`; with `job` (the inference it will run), the layout and precision
        left automatic in `runtime` are first decided by the runtime probe (`tphyolo.runtime.probe`), at the
        model's training size when `job.imgsz_from_model`. Raises FileNotFoundError for a missing file."""
        unprepared = UnpreparedModel.read(weights, fuse=fuse)
        if job is not None:
            job = settled_job(job, [unprepared])
        return cls.prepared(unprepared, runtime=runtime, device=device, job=job)

    @classmethod
    def prepared(
        cls, unprepared: UnpreparedModel, *, runtime: RuntimeConfig, device: torch.device, job: ProbeJob | None
    ) -> TorchBackend:
        """`unprepared` prepared by `runtime` for `device`, its automatic settings first decided by the runtime
        probe for `job` (when given, and already settled: `settled_job`)."""
        model = unprepared.model.eval()
        if job is not None:
            runtime = tuned_runtime(runtime, model, device, job)
        model = runtime.prepare_model(model, device)
        return cls(model, runtime=runtime, device=device, names=unprepared.names, own_imgsz=unprepared.own_imgsz,
                   path=unprepared.path)  # fmt: skip

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return self.runtime.prepare_images(images, self.device)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        with autocast(self.runtime, self.device), sdpa_context(self.runtime):
            return self.model(x)


def load_backends(
    weights: Weights | Sequence[Weights],
    *,
    runtime: RuntimeConfig,
    device: torch.device,
    fuse: bool = True,
    backend: str = "auto",
    precision: str = "auto",
    job: ProbeJob | None = None,
) -> list[Backend]:
    """One backend per entry of `weights` (a model, a checkpoint path, an exported model — `.onnx`,
    `*_openvino_model/` or its `.xml`, `.torchscript` — or a sequence of them: an ensemble; formats may mix).

    A checkpoint file runs on `backend` (`InferenceConfig.backend`, `--runtime`: "auto" is OpenVINO on the CPU
    when installed, `compiled.resolve_runtime`), compiled once, checked and cached (`compiled.load_compiled`) in
    `precision`; PyTorch when the compiled model is not within tolerance of PyTorch. Models given as modules and
    exported files run as they are.

    Raises ValueError when `runtime` cannot run on `device` (checked before anything is loaded), when the
    models disagree on the number of classes, or for a file that runs its own code (TorchScript) unless
    `runtime.trust_code`. `job`: the inference the PyTorch models will run, for the runtime probe
    (`TorchBackend.prepared`); when it leaves its size to the models (`imgsz_from_model`), every model is read
    first and the probe times the size they will run at (`settled_job`), as `input_shape.settled_config` settles
    the inference's.
    """
    runtime.check_device(device)
    entries = list(weights) if isinstance(weights, (list, tuple)) else [weights]
    if not entries:
        raise InputError("no weights given")
    files = [e for e in entries if not isinstance(e, nn.Module) and exported_format(e) is None and Path(e).is_file()]
    compiled = resolve_runtime(backend, device=device, torch_compile=runtime.compile != "off") if files else "pytorch"
    loaded: list[Backend | UnpreparedModel] = []  # first every model is read, so that the probe's size is settled
    for entry in entries:
        backend_of_entry = None
        if not isinstance(entry, nn.Module) and exported_format(entry) is not None:
            backend_of_entry = load_backend(entry, device=device, trust_code=runtime.trust_code)
        elif compiled != "pytorch" and any(entry is f for f in files):
            backend_of_entry = compiled_within_limits(entry, runtime=compiled, requested=backend,
                                                      precision=precision, fuse=fuse)  # fmt: skip
        model = backend_of_entry if backend_of_entry is not None else UnpreparedModel.read(entry, fuse=fuse)
        if loaded and len(model.names) != len(loaded[0].names):
            raise InputError(f"{entry}: {len(model.names)} classes, but the first model has {len(loaded[0].names)}")
        loaded.append(model)
    job = settled_job(job, loaded) if job is not None else None
    backends: list[Backend] = [
        TorchBackend.prepared(m, runtime=runtime, device=device, job=job) if isinstance(m, UnpreparedModel) else m
        for m in loaded
    ]
    return backends


def compiled_within_limits(
    weights: str | Path, *, runtime: str, requested: str, precision: str, fuse: bool
) -> CompiledCheckpoint | None:
    """`load_compiled(weights, ...)`, or None (PyTorch runs it) when the checkpoint does not fit the compiled
    model's metadata (`metadata.LimitError`: class names longer than it holds, ...) and `requested` is "auto"
    (said in one line naming the checkpoint); InputError naming it when `requested` named the runtime."""
    try:
        return load_compiled(weights, runtime=runtime, precision=precision, fuse=fuse)
    except LimitError as error:
        reason = f"{weights}: {error} (a limit of the compiled {runtime} model's metadata)"
        if requested != "auto":
            raise InputError(f"{reason}; --runtime pytorch runs it") from None
        LOGGER.warning("%s: running PyTorch", reason)
        return None


@contextlib.contextmanager
def as_backend(
    model: nn.Module | Backend, *, runtime: RuntimeConfig | None = None, device: torch.device | None = None
) -> Iterator[Backend]:
    """`model` itself when it is a backend; a module (already prepared, on `device`, default the runtime's)
    wrapped in a TorchBackend and put in eval mode for the block, then given back in its previous mode."""
    if not isinstance(model, nn.Module):
        yield model
        return
    runtime = runtime or RuntimeConfig()
    device = torch.device(device) if device is not None else runtime.torch_device()
    was_training = model.training
    model.eval()
    try:
        yield TorchBackend(model, runtime=runtime, device=device)
    finally:
        model.train(was_training)
