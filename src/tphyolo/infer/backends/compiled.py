"""A checkpoint compiled once to a CPU runtime (OpenVINO, ONNX Runtime), checked against PyTorch and cached.

`load_compiled(weights, runtime="openvino")` returns the backend of a `.pt` checkpoint on that runtime: on the
first call the fused model is traced to ONNX with free batch, height and width (`onnx_trace`), converted
(OpenVINO: `openvino.ir_from_onnx`), run on the parity check's images at two shapes, (1, 3, S, S) and
(2, 3, S, S + stride) with S = CHECK_STRIDES strides, and compared with PyTorch fp32 as `tphyolo export` compares
(`parity.relative_error`, within FP32_TOLERANCE); the file and the verdict are then kept in the cache and
the next call only loads them (a warm start). One line says which happened. A model outside the tolerance is
not used: the verdict is cached too, and `load_compiled` returns None (the caller runs PyTorch).

Why dynamic shapes rather than one compile per input shape: predict letterboxes each image to its own
rectangle (640x384, 640x512, ...), and a dynamic IR compiles once. Measured on tph-yolov5l at 384x640, 2 threads,
OpenVINO f32: the dynamic IR ran within a few percent of a static one (docs/performance.md), while a static
compile costs seconds per new shape.

Where: `<user cache>/compiled/<weights stem>-<key>/` (`$TPHYOLO_MODEL_CACHE` instead of `<user cache>/compiled`),
holding the model (`model_openvino_model/` or `model.onnx`), `check.json` (the verdict, with the SHA-256 of
each file and a reference input, `compiled_verdict`), `reference.npy` (PyTorch's output on it) and tphyolo's
marker. The key is a sha256 over the weights' bytes and what changes the graph or its numbers: the runtime and
its version, fusing, the dynamic shapes, the opset, and the tphyolo and torch versions. Image size and batch are
free in the graph and not part of the key; nor is the precision, a setting of OpenVINO's compile
(`INFERENCE_PRECISION_HINT`) and not of the file. Each reuse checks the hashes, and the first in a process the
reference output; an entry that fails either, does not load or whose verdict is unreadable is compiled again,
said in one line. Entries are safe to delete; past `$TPHYOLO_MODEL_CACHE_MB` (2 GB by default) the least
recently used of those tphyolo made go (`tphyolo.runtime.compiled_cache`). A cache that cannot be written
(read-only, full) is run without: the model is compiled into a temporary folder, said in one line naming the
cache; where that fails too, `load_compiled` returns None (PyTorch runs).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tphyolo._version import __version__
from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.cores import available_cores
from tphyolo.data.files.atomic import atomic_path
from tphyolo.data.files.bounded_json import CacheFileError, read_kept_json
from tphyolo.data.files.digest import update_with_file
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import InputError, describe_error
from tphyolo.imports import require
from tphyolo.infer.backends.base import Backend, ExportedBackend
from tphyolo.infer.backends.compiled_verdict import SCHEMA, check_reference, read_verdict, write_verdict
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.backends.onnx_trace import embed_metadata, trace_onnx
from tphyolo.infer.backends.onnxruntime import OnnxRuntimeBackend
from tphyolo.infer.backends.openvino import OpenVINOBackend, ir_from_onnx
from tphyolo.infer.backends.parity import FP32_TOLERANCE, relative_error, sample_images
from tphyolo.infer.config import DEFAULT_OPSET
from tphyolo.runtime.compiled_cache import (
    CACHE_ENV,
    cache_limit_bytes,
    claim_root,
    clear_stale_staging,
    evict,
    model_cache_dir,
    touch,
    write_marker,
)
from tphyolo.runtime.config import strict_fp32
from tphyolo.runtime.cpu_isa import CpuInfo, cpu_info
from tphyolo.runtime.decisions import Decision, compiled_precision_rule

LOGGER = logging.getLogger("tphyolo")
PRECISION_FILE = "precision.json"  # the precision `tphyolo doctor --tune --weights` kept for an entry
CHECK_STRIDES = 4  # the parity check's square side in strides: 128 px at stride 32, cheap on any model


@dataclass(frozen=True)
class CompiledRuntime:
    """A runtime a checkpoint can be compiled to: its package, the file written in the cache entry, the
    `format` of that file's metadata and the backend class that runs it."""

    name: str
    package: str
    title: str
    file: str
    format: str
    backend: type[ExportedBackend]


RUNTIMES: dict[str, CompiledRuntime] = {
    runtime.name: runtime
    for runtime in (
        CompiledRuntime("openvino", "openvino", "OpenVINO", "model_openvino_model", "openvino", OpenVINOBackend),
        CompiledRuntime("onnxruntime", "onnxruntime", "ONNX Runtime", "model.onnx", "onnx", OnnxRuntimeBackend),
    )
}


class CompiledCheckpoint(Backend):
    """A checkpoint's compiled backend as the inference core sees it: the compiled file computes (`prepare`,
    `run`, `names`, `stride`, `device`, `dtype`, `fixed_shape`, `max_batch`, `format`, `has_streams`,
    `use_streams`), while `path` and
    `own_imgsz` are the checkpoint's: the size it was trained at (None when it does not say), so that a model
    left to choose its image size runs at its training size, as its PyTorch twin does (`imgsz_origin`)."""

    def __init__(
        self, compiled: ExportedBackend, *, checkpoint: Path, own_imgsz: int | None, decisions: dict[str, Decision],
        scratch: tempfile.TemporaryDirectory | None = None,
    ) -> None:  # fmt: skip
        self.compiled, self.path, self.own_imgsz = compiled, Path(checkpoint), own_imgsz
        ran = compiled.precision
        if ran != decisions["precision"].value:  # asked for what the CPU cannot run (OpenVINOBackend said so)
            asked = decisions["precision"]
            why = f"{asked.describe()} asked for; this CPU has no {asked.value} instructions"
            decisions = {**decisions, "precision": Decision(ran, "fallback", why)}
        self.decisions = decisions
        self.scratch = scratch  # the temporary folder an uncached model lies in, removed with this object
        self.format, self.names, self.stride = compiled.format, compiled.names, compiled.stride
        self.device, self.dtype = compiled.device, compiled.dtype
        self.fixed_shape, self.max_batch = compiled.fixed_shape, compiled.max_batch
        self.has_streams = compiled.has_streams

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return self.compiled.prepare(images)

    def run(self, x: torch.Tensor) -> torch.Tensor:
        return self.compiled.run(x)

    def use_streams(self, alone_when: Callable[[], bool] = lambda: True) -> int:
        """The compiled model's `use_streams` (where it `has_streams`)."""
        return self.compiled.use_streams(alone_when)

    @property
    def alone_on_latency(self) -> bool:
        return self.compiled.alone_on_latency


def trained_imgsz(train_args: object, *, source: str) -> int | None:
    """The image size of a checkpoint's saved training settings (`train_args`, a mapping with 'imgsz'), None
    when it has none. Raises ValueError naming `source` for an 'imgsz' that is not an image size."""
    if not isinstance(train_args, dict) or "imgsz" not in train_args:
        return None
    imgsz = train_args["imgsz"]
    if type(imgsz) is not int or imgsz not in IMGSZ_BOUNDS:
        raise InputError(f"{source}: train_args 'imgsz' must be an image size {IMGSZ_BOUNDS}, got {imgsz!r:.40}")
    return imgsz


def missing_package(runtime: str) -> str | None:
    """The first package that compiling to `runtime` needs and this environment cannot import (the runtime's, or
    onnx, which the trace needs), or None."""
    for package in (RUNTIMES[runtime].package, "onnx"):
        try:
            require(package, purpose="compiling checkpoints")
        except ImportError:
            return package
    return None


def cache_entry(weights: Path, *, runtime: str, fuse: bool) -> Path:
    """The cache folder of `weights` compiled to `runtime` (see the module docstring for the key)."""
    package = require(RUNTIMES[runtime].package, purpose=f"--runtime {runtime}")
    digest = hashlib.sha256()
    update_with_file(digest, weights)
    settings = {"runtime": runtime, "version": getattr(package, "__version__", "?"), "fuse": fuse, "dynamic": True,
                "opset": DEFAULT_OPSET, "tphyolo": __version__, "torch": torch.__version__,
                "schema": SCHEMA}  # fmt: skip
    digest.update(json.dumps(settings, sort_keys=True).encode())
    return model_cache_dir() / f"{weights.stem}-{digest.hexdigest()[:16]}"


def load_compiled(
    weights: str | Path, *, runtime: str = "openvino", precision: str = "fp32", fuse: bool = True,
    threads: int | None = None, cpu: CpuInfo | None = None,
) -> CompiledCheckpoint | None:  # fmt: skip
    """The backend of checkpoint `weights` compiled to `runtime` ("openvino" or "onnxruntime"), computing in
    `precision` ("fp32"; "bf16" on OpenVINO; "auto": what `tphyolo doctor --tune --weights` kept for this model on
    this `cpu` (default: this machine's), else the rule, `decisions.compiled_precision_rule`; measures nothing)
    with `threads` CPU threads (default: the cores this process may use, as for exported models,
    `available_cores`, not PyTorch's threads); compiled and checked on the first call, loaded from the cache
    afterwards (module docstring). The backend's `decisions` say what ran and why. None when the compiled model
    is not within FP32_TOLERANCE of PyTorch, or when neither the cache nor a temporary folder can be written (said
    in one line). MissingExtraError when the runtime is not installed; the checkpoint's own errors
    (FileNotFoundError, CheckpointError) as loading it raises them."""
    weights = Path(weights)
    spec = RUNTIMES[runtime]
    entry = cache_entry(weights, runtime=runtime, fuse=fuse)
    limit = cache_limit_bytes()  # a malformed limit is said before anything is compiled
    threads = threads or available_cores()
    cpu = cpu if cpu is not None else cpu_info()
    decided = decided_precision(entry, precision, spec=spec, cpu=cpu, threads=threads)
    precision = decided.value
    decisions = {"precision": decided, "layout": Decision("NCHW", "file", f"the compiled {spec.title} graph"),
                 "threads": Decision(str(threads), "rule", "the cores this process may use")}  # fmt: skip

    def open_at(folder: Path, at: str) -> ExportedBackend:
        return _open(folder / spec.file, spec, precision=at, threads=threads)

    what = f"{weights} on {spec.title} ({precision})"
    if entry.exists():
        touch(entry)  # the cache evicts the entries used longest ago (`compiled_cache`)
        try:
            verdict = read_verdict(entry, model=spec.file)
            if not verdict["ok"]:
                LOGGER.warning("%s: compiled before, %.1e from PyTorch (tolerance %.0e): running PyTorch",
                               what, verdict["relative_error"], FP32_TOLERANCE)  # fmt: skip
                return None
            fp32 = check_reference(functools.partial(open_at, entry, "fp32"), entry, verdict)
            backend = fp32 if fp32 is not None and precision == "fp32" else open_at(entry, precision)
            LOGGER.info("%s: reusing the compiled model cached in %s", what, entry)
            return CompiledCheckpoint(backend, checkpoint=weights, own_imgsz=verdict["own_imgsz"], decisions=decisions)
        except (OSError, ValueError, KeyError, TypeError) as error:
            LOGGER.warning("%s: the cached model in %s is unreadable (%s); compiling it again", what, entry, error)
    start = time.perf_counter()
    model, metadata, own_imgsz = _fused_model(weights, fuse=fuse, runtime=spec)
    traced = copy.deepcopy(model)  # before the reference runs: no size-keyed caches (grids) in the trace
    references = _references(model, metadata.stride)

    def compile_into(folder: Path) -> tuple[ExportedBackend, dict]:
        write_marker(folder, "entry")
        _write(traced, folder / spec.file, spec, metadata=metadata, example=references[0][0][:1])
        backend = open_at(folder, "fp32")
        error = max(relative_error(backend.run(images), reference) for images, reference in references)
        verdict = write_verdict(folder, reference=references[0], ok=error <= FP32_TOLERANCE, relative_error=error,
                                tolerance=FP32_TOLERANCE, seconds=round(time.perf_counter() - start, 2),
                                weights=str(weights), own_imgsz=own_imgsz)  # fmt: skip
        return backend, verdict

    folder, scratch = entry, None
    try:
        claim_root(entry.parent, default=not os.environ.get(CACHE_ENV))
        clear_stale_staging(entry.parent)
        with atomic_path(entry) as staging:  # a reader finds a whole entry or none
            staging.mkdir(parents=True)
            backend, verdict = compile_into(staging)
    except OSError as cache_error:  # the cache cannot be written: this run goes on without it
        LOGGER.warning("%s: cannot write the compiled-model cache %s (%s); compiling into a temporary folder, "
                       "not cached", what, entry.parent, _cause(cache_error))  # fmt: skip
        try:
            scratch = tempfile.TemporaryDirectory(prefix="tphyolo-compiled-")
            folder = Path(scratch.name) / entry.name
            folder.mkdir()
            backend, verdict = compile_into(folder)
        except OSError as error:
            LOGGER.warning("%s: cannot compile into a temporary folder either (%s): running PyTorch", what,
                           _cause(error))  # fmt: skip
            return None
    else:
        evict(entry.parent, keep=entry, limit=limit)
    error, kept = verdict["relative_error"], f"cached in {entry}" if scratch is None else "not cached"
    if not verdict["ok"]:
        LOGGER.warning("%s: compiled, but %.1e from PyTorch (tolerance %.0e): running PyTorch", what, error,
                       FP32_TOLERANCE)  # fmt: skip
        return None
    LOGGER.info("%s: compiled in %.1f s, %.1e from PyTorch (tolerance %.0e); %s", what, verdict["seconds"], error,
                FP32_TOLERANCE, kept)  # fmt: skip
    if precision != "fp32":
        backend = open_at(folder, precision)
    else:
        backend.path = folder / spec.file  # where it now lies (the compiled model holds the weights it read)
    return CompiledCheckpoint(backend, checkpoint=weights, own_imgsz=own_imgsz, decisions=decisions, scratch=scratch)


def kept_precision(entry: Path, machine: str) -> str | None:
    """The precision `tphyolo doctor --tune --weights` kept for the compiled model in `entry` on `machine`
    (PRECISION_FILE), None when none was kept for it; an unreadable or foreign file is a miss, said in one
    line (`read_kept_json`)."""
    try:
        verdict = read_kept_json(entry / PRECISION_FILE, instead="the rule decides the precision")
    except CacheFileError:
        return None
    if not isinstance(verdict, dict) or verdict.get("precision") not in ("fp32", "bf16"):
        return None
    return verdict["precision"] if verdict.get("machine") == machine else None


def precision_machine(cpu: CpuInfo, threads: int) -> str:
    """What a kept precision check is valid for: the CPU and the threads it ran with."""
    return f"{cpu.fingerprint} | {threads} threads"


def decided_precision(entry: Path, requested: str, *, spec: CompiledRuntime, cpu: CpuInfo, threads: int) -> Decision:
    """What the compiled model computes in for `--precision requested`: the flag; for "auto", fp32 off OpenVINO,
    else the check kept for this machine (`kept_precision`), else the rule."""
    if requested != "auto":
        return Decision(requested, "flag", f"--precision {requested}")
    if spec.backend is not OpenVINOBackend:
        return Decision("fp32", "rule", f"{spec.title} computes in fp32")
    kept = kept_precision(entry, precision_machine(cpu, threads))
    if kept is not None:
        return Decision(kept, "tuned", f"tphyolo doctor --tune --weights, kept in {entry / PRECISION_FILE}")
    value, why = compiled_precision_rule(cpu)
    return Decision(value, "rule", why)


def _cause(error: OSError) -> str:
    """Why `error` happened, without the path it names (a staging path, not one the user knows)."""
    return describe_error(OSError(error.errno, error.strerror)) if error.errno is not None else str(error)


def _open(path: Path, spec: CompiledRuntime, *, precision: str, threads: int) -> ExportedBackend:
    cpu = torch.device("cpu")
    if spec.backend is OpenVINOBackend:
        return OpenVINOBackend(path, device=cpu, threads=threads, precision=precision)
    return spec.backend(path, device=cpu, threads=threads)


def _fused_model(
    weights: Path, *, fuse: bool, runtime: CompiledRuntime
) -> tuple[nn.Module, ExportMetadata, int | None]:
    """The checkpoint's model (fused when `fuse`, eval, fp32 on the CPU), the metadata of its compiled file and
    the size it was trained at (`trained_imgsz`)."""
    checkpoint = load_checkpoint(weights)
    model = checkpoint.build_model().float().eval()
    if fuse and hasattr(model, "fuse"):
        model = model.fuse()
    stride = int(torch.as_tensor(model.stride).max())
    side = CHECK_STRIDES * stride
    metadata = ExportMetadata(format=runtime.format, model=weights.stem, names=tuple(checkpoint.names), stride=stride,
                              imgsz=(side, side), batch=1, dynamic=True, source=weights.name)  # fmt: skip
    return model, metadata, trained_imgsz(checkpoint.state.get("train_args"), source=str(weights))


@torch.no_grad()
def _references(model: nn.Module, stride: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(images, PyTorch fp32 output) at the parity check's two shapes."""
    side = CHECK_STRIDES * stride
    with strict_fp32():
        return [(images, model(images).float()) for images in (sample_images(1, side, side),
                                                                sample_images(2, side, side + stride))]  # fmt: skip


def _write(model: nn.Module, path: Path, spec: CompiledRuntime, *, metadata: ExportMetadata,
           example: torch.Tensor) -> None:  # fmt: skip
    """`model` traced with free batch and size and written at `path` as `spec`'s file, with `metadata`."""
    if spec.name == "onnxruntime":
        onnx = require("onnx", purpose="--runtime onnxruntime")
        trace_onnx(model, example, path, dynamic=True, opset=DEFAULT_OPSET)
        proto = onnx.load(str(path))
        embed_metadata(proto, metadata)
        onnx.save(proto, str(path))
        return
    trace = trace_onnx(model, example, path.parent / "trace.onnx", dynamic=True, opset=DEFAULT_OPSET)
    ir_from_onnx(trace, path, metadata=metadata)
    trace.unlink()


def resolve_runtime(requested: str, *, device: torch.device, torch_compile: bool = False) -> str:
    """What runs checkpoints given `--runtime requested` on `device`: "pytorch" or a key of RUNTIMES.

    "auto": OpenVINO on the CPU when it is installed; PyTorch on GPUs, when torch.compile is asked for
    (`torch_compile`), and when openvino is missing (said in one line). An explicit compiled runtime off the CPU
    is a ValueError, and without its package (or onnx) a MissingExtraError (one line each)."""
    if requested == "pytorch":
        return "pytorch"
    if requested in RUNTIMES:
        if device.type != "cpu":
            raise InputError(f"--runtime {requested} compiles checkpoints for the CPU; --device {device} runs "
                             "them with --runtime pytorch")  # fmt: skip
        for package in (RUNTIMES[requested].package, "onnx"):
            require(package, purpose=f"--runtime {requested}", install=f"pip install {package}")
        return requested
    if requested != "auto":
        raise InputError(f"unknown --runtime {requested!r}; known: auto, pytorch, {', '.join(RUNTIMES)}")
    if device.type != "cpu" or torch_compile:
        return "pytorch"
    missing = missing_package("openvino")
    if missing is not None:
        LOGGER.warning("%s is not installed: running PyTorch on the CPU (pip install openvino onnx for the faster "
                       "CPU runtime, or give --runtime pytorch to silence this)", missing)  # fmt: skip
        return "pytorch"
    return "openvino"

