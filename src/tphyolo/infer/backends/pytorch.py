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
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.checkpoint.release import is_release_name, missing_weights_message
from tphyolo.errors import InputError
from tphyolo.infer.backends import exported_format, load_backend
from tphyolo.infer.backends.base import Backend, ExportedBackend
from tphyolo.infer.backends.compiled import CompiledCheckpoint, load_compiled, resolve_runtime, trained_imgsz
from tphyolo.infer.backends.metadata import LimitError
from tphyolo.runtime.config import RuntimeConfig, autocast, sdpa_context
from tphyolo.runtime.decisions import Decision, decide_runtime, describe
from tphyolo.runtime.distributed import DistContext

Weights = str | Path | nn.Module
LOGGER = logging.getLogger("tphyolo")


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


def largest_own_imgsz(models: Sequence[Backend | UnpreparedModel]) -> tuple[int, Backend | UnpreparedModel] | None:
    """The largest `own_imgsz` among `models` (backends, or models not yet prepared) and the one that has it;
    None when none knows its size: the image size a set of models left to choose it runs at
    (`tphyolo.infer.input_shape.settled_config`)."""
    sizes = [(size, m) for m in models if (size := m.own_imgsz) is not None]
    return max(sizes, key=lambda pair: pair[0]) if sizes else None


class TorchBackend(Backend):
    """A PyTorch detection model that is already prepared: on `device`, in eval mode, in the runtime's weights
    dtype and memory format. `run` applies the runtime's autocast and attention-kernel choice."""

    format = "pytorch"

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
        layout = "NHWC" if runtime.memory_format(self.device) == torch.channels_last else "NCHW"
        precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[runtime.amp_dtype(self.device)]
        precision = "fp16" if runtime.half else precision
        self.decisions: dict[str, Decision] = {"layout": Decision(layout, "flag", "as prepared by the caller"),
                                               "precision": Decision(precision, "flag", "as prepared by the caller")}

    @classmethod
    def load(cls, weights: Weights, *, runtime: RuntimeConfig, device: torch.device, fuse: bool = True) -> TorchBackend:
        """A model, or a checkpoint file (tphyolo or original TPH-YOLOv5/YOLOv5 format), fused (when `fuse`)
        and prepared by `runtime` for `device`, the layout and precision left automatic decided for inference
        (`tphyolo.runtime.decisions`). Raises FileNotFoundError for a missing file."""
        return cls.prepared(UnpreparedModel.read(weights, fuse=fuse), runtime=runtime, device=device)

    @classmethod
    def prepared(cls, unprepared: UnpreparedModel, *, runtime: RuntimeConfig, device: torch.device) -> TorchBackend:
        """`unprepared` prepared by `runtime` for `device`, its automatic layout and precision first decided for
        inference (`tphyolo.runtime.decisions.decide_runtime`); `decisions` say what ran and why."""
        model = unprepared.model.eval()
        runtime, decisions = decide_runtime(runtime, device, mode="infer")
        model = runtime.prepare_model(model, device)
        backend = cls(model, runtime=runtime, device=device, names=unprepared.names, own_imgsz=unprepared.own_imgsz,
                      path=unprepared.path)  # fmt: skip
        backend.decisions = {**decisions, "threads": Decision(str(torch.get_num_threads()), "rule",
                                                              "PyTorch's intra-op threads")}  # fmt: skip
        return backend

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
) -> list[Backend]:
    """One backend per entry of `weights` (a model, a checkpoint path, an exported model — `.onnx`,
    `*_openvino_model/` or its `.xml`, `.torchscript` — or a sequence of them: an ensemble; formats may mix).

    A checkpoint file runs on `backend` (`InferenceConfig.backend`, `--runtime`: "auto" is OpenVINO on the CPU
    when installed, `compiled.resolve_runtime`; PyTorch under `runtime.deterministic`), compiled once, checked
    and cached (`compiled.load_compiled`) in `precision`; PyTorch when the compiled model is not within tolerance
    of PyTorch. Models given as modules and exported files run as they are. Every backend's `decisions` say what
    runs it and why (`runtime`, `precision`, `layout`, `threads`: `tphyolo.runtime.decisions.Decision`), and one
    INFO line (rank 0's, under torchrun) says them for the first.

    Raises ValueError when `runtime` cannot run on `device` (checked before anything is loaded), when the
    models disagree on the number of classes, or for a file that runs its own code (TorchScript) unless
    `runtime.trust_code`.
    """
    runtime.check_device(device)
    entries = list(weights) if isinstance(weights, (list, tuple)) else [weights]
    if not entries:
        raise InputError("no weights given")
    files = [e for e in entries if not isinstance(e, nn.Module) and exported_format(e) is None and Path(e).is_file()]
    compiled, chosen = "pytorch", Decision("pytorch", "rule", "a model given in memory")
    if files and runtime.deterministic:
        chosen = Decision("pytorch", "deterministic", "--deterministic")
    elif files:
        compiled = resolve_runtime(backend, device=device, torch_compile=runtime.compile != "off")
        chosen = runtime_decision(backend, compiled, device)
    if runtime.deterministic and precision not in ("auto", "fp32"):
        raise InputError(f"--deterministic runs fp32; it cannot be combined with --precision {precision}")
    backends: list[Backend] = []
    for entry in entries:
        if not isinstance(entry, nn.Module) and exported_format(entry) is not None:
            model: Backend = load_backend(entry, device=device, trust_code=runtime.trust_code)
            model.decisions = exported_decisions(model, entry)
        else:
            model = None
            if compiled != "pytorch" and any(entry is f for f in files):
                model = compiled_within_limits(entry, runtime=compiled, requested=backend, precision=precision,
                                               fuse=fuse)  # fmt: skip
            if model is not None:
                model.decisions = {"runtime": chosen, **model.decisions}
            else:
                ran = chosen if compiled == "pytorch" or isinstance(entry, nn.Module) else Decision(
                    "pytorch", "fallback", f"the {compiled} model could not run it (said above)")  # fmt: skip
                model = TorchBackend.prepared(UnpreparedModel.read(entry, fuse=fuse), runtime=runtime, device=device)
                model.decisions = {"runtime": ran, **model.decisions}
        if backends and len(model.names) != len(backends[0].names):
            raise InputError(f"{entry}: {len(model.names)} classes, but the first model has {len(backends[0].names)}")
        backends.append(model)
    if DistContext.from_env().is_main:  # once for a distributed run, by rank 0
        LOGGER.info("what runs: %s", describe(backends[0].decisions))
    return backends


def what_ran(backends: Sequence[Backend]) -> dict:
    """The decisions of `backends` (`load_backends`'s), for a run folder's decisions.yaml: the one model's, or
    {"models": [each model's]} for an ensemble; {} for backends loaded without decisions."""
    found = [dict(b.decisions) for b in backends]
    return found[0] if len(found) == 1 else {"models": found}


def runtime_decision(requested: str, resolved: str, device: torch.device) -> Decision:
    """Why checkpoints run on `resolved` given `--runtime requested` on `device`."""
    if requested != "auto":
        return Decision(resolved, "flag", f"--runtime {requested}")
    if resolved != "pytorch":
        return Decision(resolved, "rule", "a checkpoint on the CPU runs compiled (--runtime pytorch keeps PyTorch)")
    return Decision(resolved, "rule", f"a checkpoint on {device.type} (or torch.compile, or no OpenVINO) runs PyTorch")


def exported_decisions(model: ExportedBackend, path: object) -> dict[str, Decision]:
    """What an exported model runs as: its file decides the runtime, precision and layout."""
    return {"runtime": Decision(model.format, "file", str(path)),
            "precision": Decision(model.precision, "file", "the exported model"),
            "layout": Decision("NCHW", "file", "the exported graph")}  # fmt: skip


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
