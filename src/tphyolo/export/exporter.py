"""`export_model`: a detection model to ONNX, OpenVINO, TorchScript, a torch.export program or TensorRT, each
export checked against PyTorch.

What is exported: the fused model (`DetectionModel.fuse()`, Conv+BN folded, eval mode) whose output is the
decoded (B, N, 5 + nc) tensor. Each file carries `ExportMetadata`. After writing a file, its backend runs it
on fixed random images (and, with `dynamic`, on a second batch size and a non-square size) and the relative
error against the fp32 PyTorch model is measured (`tphyolo.export.parity`); an `ExportResult` whose error is
above the tolerance is not `ok`.

Where files go (`output_paths`): beside the weights, `W.onnx`, `W_openvino_model/`, `W.torchscript`, `W.pt2`,
`W.engine` for weights `W.pt`; `out` names the file (one format) or the folder (several formats). Each path is
checked before anything is traced (`check_outputs`, one line naming it): its name must end as the format's files
do (else the file could not be read back as that format); it must not be the weights being exported under any
name (same resolved path, symbolic or hard link: `os.path.samefile`) nor a folder holding them; and what is there
already must be an export of that format, judged by name and kind (a file for `.onnx`, `.torchscript`, `.pt2`,
`.engine`; a folder holding an .xml for OpenVINO), unless `cfg.exist_ok`. An export of the same format there is
replaced. Each file is written under its own name in a hidden folder beside its path
(`tphyolo.data.files.atomic.staged_path`) and moved in place once written and run: an export that fails leaves
what was at the path as it was.

With `--int8` (`cfg.int8`) each format is written by its INT8 writer (`W_int8.onnx`, `W_int8_openvino_model/`),
calibrated on `cfg.calib_images` images of `cfg.data`'s train split (`tphyolo.export.calibration`); its
relative error against PyTorch is reported with a loose bound (`INT8_TOLERANCE`, a sanity check: rounding to
8 bits moves outputs by percents), and the accuracy check (`tphyolo.export.int8_check`) scores it against its
float twin on the val split; the numbers go into the file's metadata, and a drop above `cfg.max_drop` makes
the result not `ok` (the file stays), and so does a check whose float side scores near zero (it says nothing;
the metadata marks the file unchecked, as it does when `cfg.accuracy_check` is off). A file above `cfg.max_drop`
is quantized again with more of the model's layers kept in float, one per try, until it passes
(`int8_accuracy`); the check reports AP50 by object size and the INT8 file's speed against its float twin. An
INT8 file is given the check's numbers before it is moved in place: an export stopped before (killed during
calibration, quantization or the check) leaves an earlier file at the path as it was, never one whose metadata
lacks the check.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import torch
from tqdm import tqdm

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.data.dataset_config import load_data_config
from tphyolo.data.files.atomic import staged_path
from tphyolo.data.letterbox import check_imgsz
from tphyolo.errors import InputError
from tphyolo.export.calibration import Calibration, calibration_batches
from tphyolo.export.config import CALIBRATION_RANGES, DEFAULT_EXPORT_IMGSZ, ExportConfig, ExportJob
from tphyolo.export.formats import FORMAT_BY_NAME, FORMATS, ExportFormat
from tphyolo.export.int8_check import AccuracyCheck, Int8Accuracy, keep_layers_float
from tphyolo.export.int8_policy import layer_name, sensitive_layers
from tphyolo.export.onnx_file import trace_onnx
from tphyolo.export.parity import INT8_TOLERANCE, relative_error, sample_images, tolerance_for
from tphyolo.export.writer_api import WriterJob
from tphyolo.infer.backends import BACKENDS, load_backend
from tphyolo.infer.backends.compiled import trained_imgsz
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.models import DetectionModel
from tphyolo.runtime.config import resolve_device, strict_fp32
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.runtime.interleaved import time_interleaved

LOGGER = logging.getLogger("tphyolo")
INT8_TIMING_ROUNDS = 10  # interleaved float / INT8 runs behind the printed speed-up
SKIPPED = "the accuracy check was skipped (--no-accuracy-check)"  # an INT8 file's `int8_unchecked` without it


@dataclass(frozen=True)
class ExportResult:
    """One written export: its path, how long writing took, and the checks run on it: (input shape,
    relative error against PyTorch) pairs; none for formats tphyolo cannot run (TensorRT)."""

    format: str
    path: Path
    seconds: float
    checks: tuple[tuple[tuple[int, ...], float], ...]
    tolerance: float
    accuracy: Int8Accuracy | None = None  # the accuracy check of an INT8 file

    @property
    def max_error(self) -> float | None:
        return max((error for _, error in self.checks), default=None)

    @property
    def matches(self) -> bool:
        """Whether its output is within `tolerance` of PyTorch's (or it was not run)."""
        return self.max_error is None or self.max_error <= self.tolerance

    @property
    def ok(self) -> bool:
        return self.matches and (self.accuracy is None or self.accuracy.ok)

    def summary(self) -> str:
        head = f"{self.format}: {self.path} ({self.seconds:.1f} s)"
        if not self.checks:
            return f"{head}; not run after export (tphyolo has no {self.format} backend)"
        errors = ", ".join(f"{error:.1e} at {'x'.join(map(str, shape))}" for shape, error in self.checks)
        verdict = "ok" if self.matches else "ABOVE TOLERANCE"
        text = f"{head}; relative error vs PyTorch {errors} (tolerance {self.tolerance:.0e}): {verdict}"
        return text if self.accuracy is None else f"{text}\n{self.accuracy.summary()}"

    def problem(self, *, calib_ranges: str) -> str | None:
        """Why the file is not `ok`, in one line naming it (None when it is): an accuracy check that says
        nothing, an error above the tolerance, or an INT8 drop above `max_drop` (the OpenVINO hint names the
        activation ranges other than `calib_ranges`, those it was calibrated with)."""
        accuracy = self.accuracy
        if self.ok:
            return None
        if accuracy is not None and accuracy.says_nothing:
            return (f"{self.path}: the accuracy check says nothing: {accuracy.unchecked_reason}; the file is kept and "
                    "marked unchecked (check on data the model has learned, or give --no-accuracy-check)")  # fmt: skip
        if not self.matches:
            return (f"{self.path} differs from PyTorch by {self.max_error:.1e} relative, above the tolerance "
                    f"{self.tolerance:.0e}")  # fmt: skip
        other = next(r for r in CALIBRATION_RANGES if r != calib_ranges)
        hint = f" (--calib-ranges {other} may lose less)" if self.format == "openvino" else ""
        return (f"{self.path} loses {accuracy.drop:.4f} mAP50 against the float model "
                f"({accuracy.float_map50:.4f} -> {accuracy.int8_map50:.4f}), above --max-drop {accuracy.max_drop}; "
                f"the file is kept{hint}")  # fmt: skip


@dataclass(frozen=True)
class ExportRun:
    """What `run_export` wrote: one result per format of `job`, in its order."""

    job: ExportJob
    results: tuple[ExportResult, ...]

    @property
    def ok(self) -> bool:
        return all(result.ok for result in self.results)

    def problems(self) -> list[str]:
        """One line per file that is not `ok`, naming it and why (`ExportResult.problem`)."""
        found = (result.problem(calib_ranges=self.job.config.calib_ranges) for result in self.results)
        return [line for line in found if line is not None]


def output_paths(cfg: ExportConfig, stem: Path) -> dict[str, Path]:
    """Where each format goes, for weights `stem` + suffix (see the module docstring)."""
    if cfg.out is not None and len(cfg.formats) == 1:
        return {cfg.formats[0]: Path(cfg.out)}
    base = Path(cfg.out) / stem.name if cfg.out is not None else stem
    return {fmt: base.parent / f"{base.name}{FORMAT_BY_NAME[fmt].file_suffix(int8=cfg.int8)}" for fmt in cfg.formats}


def check_outputs(paths: dict[str, Path], *, exist_ok: bool, weights: Path | None = None) -> None:
    """InputError, in one line naming the path, for the first format -> path of `paths` that may not be written
    (see the module docstring: where files go); `weights` is the checkpoint being exported, when there is one."""
    for name, path in paths.items():
        fmt = FORMAT_BY_NAME[name]
        if not path.name.lower().endswith(fmt.suffix.lower()):
            raise InputError(
                f"{path}: not named as {name} exports are, *{fmt.suffix} (e.g. --out "
                f"{path.with_name(path.stem + fmt.suffix) if fmt.folder else path.with_suffix(fmt.suffix)})"
            )
        if weights is not None and _is_or_holds(path, weights):
            raise InputError(f"{path}: is the weights being exported ({weights}); give --out another name")
        if (path.exists() or path.is_symlink()) and not exist_ok and not _is_export(path, fmt):
            what = "folder" if path.is_dir() else "file"
            raise InputError(f"{path}: a {what} is there that is not an export in format {name}; give --exist-ok "
                             "to replace it, or another --out")  # fmt: skip


def _is_or_holds(path: Path, weights: Path) -> bool:
    """Whether `path` is the file `weights` (by any name) or a folder that holds it."""
    try:
        if os.path.samefile(path, weights):
            return True
    except OSError:  # one of them does not exist (yet): their resolved paths decide
        if path.resolve() == weights.resolve():
            return True
    return path.is_dir() and weights.resolve().is_relative_to(path.resolve())


def _is_export(path: Path, fmt: ExportFormat) -> bool:
    """Whether `path` (named as `fmt`'s files are) is of the kind `fmt` writes: a file, or a folder its backend
    recognises (an OpenVINO folder holds an .xml)."""
    if not fmt.folder:
        return path.is_file()
    return path.is_dir() and BACKENDS[fmt.backend].recognises(path)


def selected_formats(cfg: ExportConfig) -> list[ExportFormat]:
    """The rows of `cfg.formats`, in table order (the order in which they are written)."""
    return [fmt for fmt in FORMATS if fmt.name in cfg.formats]


def check_can_export(cfg: ExportConfig, device: torch.device) -> None:
    """Refuses, in one line, what cannot be done here, before anything is traced: fp16 graphs off CUDA, and
    what each format's writer refuses (TensorRT without CUDA and tensorrt, missing packages of the extra)."""
    for fmt in selected_formats(cfg):
        if cfg.half and fmt.fp16_graph and device.type != "cuda":
            raise InputError(
                f"--half {fmt.name} export needs a CUDA --device: fp16 {fmt.name} models run on CUDA only "
                "(CPU runtimes compute in fp32); export fp32 for the CPU, or --half openvino for an fp16 IR"
            )
    for fmt in selected_formats(cfg):
        fmt.writer_module(int8=cfg.int8).check(cfg, device)


@torch.no_grad()
def reference_outputs(model: DetectionModel, shapes: list[tuple[int, ...]], device: torch.device) -> dict:
    """{shape: (images, output)} of the fp32 model on `device`, without TF32, both on the CPU."""
    refs = {}
    with strict_fp32():
        for shape in shapes:
            images = sample_images(*shape[:1], *shape[2:])
            refs[shape] = (images, model(images.to(device)).float().cpu())
    return refs


def export_model(
    model: DetectionModel,
    cfg: ExportConfig,
    *,
    stem: Path,
    model_name: str,
    source: str = "",
    weights: Path | None = None,
    log: Callable[[str], None] = LOGGER.info,
) -> list[ExportResult]:
    """Writes `model` in each of `cfg.formats` (paths from `output_paths(cfg, stem)`), checks each against
    PyTorch, and returns the results in the order written. ValueError / MissingExtraError (one line) for what
    cannot be exported here and for paths that may not be written (`check_outputs`; `weights`, the checkpoint
    `model` came from, is never written over); the caller decides what an export above tolerance means
    (`ExportResult.ok`)."""
    device = resolve_device(cfg.device)
    check_can_export(cfg, device)
    paths = output_paths(cfg, stem)
    check_outputs(paths, exist_ok=cfg.exist_ok, weights=weights)
    stride = int(model.stride.max())
    size = check_imgsz(cfg.imgsz or DEFAULT_EXPORT_IMGSZ, stride)
    shapes = [(cfg.batch, 3, size, size)]
    if cfg.dynamic:
        shapes.append((cfg.batch + 1, 3, size, size + stride))
    refs = reference_outputs(model.fuse().to(device), shapes, device)
    fused = model.fuse().to(device)  # a fresh copy for tracing: no size-keyed caches from the reference runs
    fp16 = model.fuse().to(device).half() if cfg.half and device.type == "cuda" else None
    example = refs[shapes[0]][0].to(device)
    what = f"{model_name} at {size}x{size}, batch {cfg.batch}{', dynamic' if cfg.dynamic else ''}"
    results = []
    with tempfile.TemporaryDirectory(prefix="tphyolo-export-") as tmp:
        traces: dict[str, Path] = {}  # the fp32 ONNX trace that converters start from, made once when needed

        def fp32_onnx() -> Path:
            if "fp32" not in traces:
                traces["fp32"] = trace_onnx(
                    fused, example, Path(tmp) / "fp32.onnx", dynamic=cfg.dynamic, opset=cfg.opset
                )
            return traces["fp32"]

        calibrations = []  # read once, when the first INT8 writer asks

        def calibration() -> Calibration:
            if not calibrations:
                calibrations.append(read_calibration(cfg, size=size, stride=stride))
            return calibrations[0]

        for fmt in selected_formats(cfg):
            fp16_graph = cfg.half and fmt.fp16_graph
            metadata = ExportMetadata(
                format=fmt.name,
                model=model_name,
                names=tuple(model.names),
                stride=stride,
                imgsz=(size, size),
                batch=cfg.batch,
                dynamic=cfg.dynamic,
                dtype="float16" if fp16_graph else "float32",
                half=cfg.half,
                source=source,
                int8_unchecked=SKIPPED if cfg.int8 and not cfg.accuracy_check else "",
            )
            if fmt.note:
                log(f"{fmt.name}: {fmt.note}")
            log(f"{fmt.name}: exporting {what}{', fp16' if cfg.half else ''}{', INT8' if cfg.int8 else ''} ...")
            path = paths[fmt.name]
            path.parent.mkdir(parents=True, exist_ok=True)
            start = time.perf_counter()
            with staged_path(path) as written:
                job = WriterJob(fused, fp16, example, written, metadata, cfg, device, fp32_onnx, calibration)
                fmt.writer_module(int8=cfg.int8).write(job)
                seconds = time.perf_counter() - start
                checks = check_export(written, fmt, refs, device)
                accuracy = None
                if cfg.int8 and cfg.accuracy_check and fmt.backend is not None:
                    accuracy = int8_accuracy(job, fmt, Path(tmp) / f"float{fmt.suffix}", log=log)
            if fmt.onnx_trace and not fp16_graph and not cfg.int8:
                traces.setdefault("fp32", path)
            tolerance = INT8_TOLERANCE if cfg.int8 else tolerance_for(cfg.half)
            result = ExportResult(fmt.name, path, seconds, checks, tolerance, accuracy)
            log(result.summary())
            results.append(result)
    return results


def read_calibration(cfg: ExportConfig, *, size: int, stride: int) -> Calibration:
    """The calibration batches of `cfg` (its data's train split), with a progress bar."""
    return calibration_batches(load_data_config(cfg.data), count=cfg.calib_images, imgsz=size, stride=stride,
                               dynamic=cfg.dynamic, batch=cfg.batch,
                               progress=partial(tqdm, desc="calibration images"))  # fmt: skip


def int8_accuracy(job: WriterJob, fmt: ExportFormat, float_path: Path, *, log: Callable[[str], None]) -> Int8Accuracy:
    """Writes the float twin of `job`'s INT8 file at `float_path`, scores both on the val split of the job's
    data and writes the numbers into the INT8 file's metadata. While the INT8 file loses more than
    `--max-drop`, it is written again with one more of the model's layers kept in float
    (`int8_policy.sensitive_layers`), until one passes or `MAX_FLOAT_LAYERS` are float; the last written is
    kept. Then the INT8 file and its float twin are timed against each other (`Int8Accuracy.speedup`)."""
    cfg, writer = job.cfg, fmt.writer_module(int8=True)
    writer.write_float(job, float_path)
    check = AccuracyCheck(float_path, load_data_config(cfg.data), count=cfg.calib_val, protocol=cfg.protocol,
                          max_drop=cfg.max_drop)  # fmt: skip

    def retry(layers: tuple[int, ...], drop: float) -> tuple[Int8Accuracy, ExportMetadata]:
        log(f"{fmt.name} INT8: mAP50 drop {drop:.4f} above --max-drop {cfg.max_drop}; quantizing again with "
            f"{layer_name(job.model, layers[-1])} in float too")  # fmt: skip
        replace_export(job.path, fmt, lambda path: writer.write(dataclasses.replace(job, path=path), layers))
        return check(job.path)

    accuracy, metadata, layers = keep_layers_float(check(job.path), retry, sensitive_layers(job.model))
    writer.rewrite_metadata(job.path, metadata)
    named = tuple(layer_name(job.model, i) for i in layers)
    return dataclasses.replace(accuracy, float_layers=named, speedup=int8_speedup(float_path, job.path))


def replace_export(path: Path, fmt: ExportFormat, write: Callable[[Path], None]) -> None:
    """Writes a new file (or folder) of the same name with `write(new_path)` in a folder beside `path` (an IR
    names its files after its folder) and moves it over `path`."""
    with tempfile.TemporaryDirectory(prefix=".retry-", dir=path.parent) as tmp:
        new = Path(tmp) / path.name
        write(new)
        if fmt.folder:
            shutil.rmtree(path)
        os.replace(new, path)


def int8_speedup(float_path: Path, int8_path: Path, *, rounds: int = INT8_TIMING_ROUNDS,
                 clock: Callable[[], float] = time.perf_counter) -> float:  # fmt: skip
    """How many times faster the INT8 file runs than its float twin, in the same runtime on the CPU: the
    median over `rounds` interleaved rounds of the ratio of their times on one batch of the export's size
    (`tphyolo.runtime.interleaved`). Printed, never judged: a shared machine moves it."""
    backends = [load_backend(p) for p in (float_path, int8_path)]
    meta = backends[0].metadata
    images = sample_images(meta.batch, *meta.imgsz)
    times = time_interleaved([lambda b=b: b.run(images) for b in backends], warmup=2, rounds=rounds, clock=clock)
    return statistics.median(f / max(q, 1e-9) for f, q in zip(*times, strict=True))


def check_export(
    path: Path, fmt: ExportFormat, refs: dict, device: torch.device
) -> tuple[tuple[tuple[int, ...], float], ...]:
    """(shape, relative error) of the export at `path` against each PyTorch reference of `refs`; nothing for
    formats without a tphyolo backend (TensorRT). Backends that run on the CPU only run there."""
    if fmt.backend is None:
        return ()
    cpu_only = BACKENDS[fmt.backend].cpu_only
    backend = load_backend(path, device=torch.device("cpu") if cpu_only else device, trust_code=True)  # ours
    return tuple((shape, relative_error(backend.run(images), ref)) for shape, (images, ref) in refs.items())


def export_checkpoint(
    weights: str | Path, cfg: ExportConfig, *, log: Callable[[str], None] = LOGGER.info
) -> list[ExportResult]:
    """`export_model` for a checkpoint file (tphyolo or original format); files go beside it by default."""
    weights = Path(weights)
    check_can_export(cfg, resolve_device(cfg.device))  # before the (slow) model build
    check_outputs(output_paths(cfg, weights.with_suffix("")), exist_ok=cfg.exist_ok, weights=weights)
    ckpt = load_checkpoint(weights)
    train_args = ckpt.state.get("train_args", {})
    train_model = train_args.get("model")
    name = Path(train_model).stem if isinstance(train_model, str) and train_model else weights.stem
    if cfg.imgsz is None:  # as predict and val run a checkpoint: at its training size
        trained = trained_imgsz(train_args, source=str(weights))
        cfg = replace(cfg, imgsz=trained or DEFAULT_EXPORT_IMGSZ)
        why = "the checkpoint's training size" if trained else "the checkpoint does not say its training size"
        log(f"image size {cfg.imgsz} ({why}; --img to choose)")
    return export_model(ckpt.build_model(), cfg, stem=weights.with_suffix(""), model_name=name, source=weights.name,
                        weights=weights, log=log)  # fmt: skip


def run_export(job: ExportJob, *, events: RunEvents = NO_EVENTS) -> ExportRun:
    """Write `job` (`export_checkpoint` of its weights and config on its config's device), each file's summary line
    to `events.note` (`RunEvents`; default: this module's logger). Raises
    ValueError / OSError naming the bad setting or file (a format this machine cannot write among them) before
    the model is built."""
    log = events.note or LOGGER.info
    return ExportRun(job, tuple(export_checkpoint(job.weights, job.config, log=log)))
