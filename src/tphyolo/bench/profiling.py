"""torch.profiler over a few training (or inference) steps of a model at a size: the library behind `tphyolo
profile`.

    report = profile_model(ProfileConfig(model="tph-yolov5l", imgsz=640, steps=3), RuntimeConfig())
    print(report.ops_table)

Writes to `config.out`: `trace.json` (chrome://tracing or https://ui.perfetto.dev), `ops.txt` (the top-k operator
table), `modules.txt` (forward time per module type, per head part, and of the TPH-attention and P2 branches,
from `record_function` ranges opened by forward hooks, `tphyolo.bench.profile`); with `memory` on CUDA also
`memory_snapshot.pickle` (https://pytorch.org/memory_viz) and `memory_timeline.html`; with `tensorboard` a
TensorBoard trace under `tensorboard/`; under `--compile` `compile.json`: the graphs compiled, the graph breaks
and the recompilations, with their reasons. The runtime settings are those of training, applied as everywhere by
`RuntimeConfig` (`place_model`, `compile_model`, `prepare_images`, `autocast`, `sdpa_context`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import UsageError
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, check_field_types, flag, imgsz_flag

if TYPE_CHECKING:  # torch is imported when a profile runs, so that `tphyolo profile -h` reads ProfileConfig cheaply
    from tphyolo.bench.profile import ModuleLabels
    from tphyolo.runtime.config import RuntimeConfig


@dataclass(frozen=True)
class ProfileConfig:
    """What to profile: `steps` steps of `mode` (train: forward, loss, backward, optimiser step; infer: forward)
    of `model` with `num_classes` classes on `batch` random images of `imgsz` pixels, after `warmup_steps`; the
    `top` operators tabled; files written to `out` (see the module docstring)."""

    model: str = flag("tph-yolov5s", "--model", help="built-in model name or yaml")
    imgsz: int = imgsz_flag(640, help="image size", bounds=IMGSZ_BOUNDS)
    batch: int = flag(2, "--batch", help="batch size", bounds=AT_LEAST_ONE)
    mode: str = flag("train", "--mode", choices=("train", "infer"), help="what a step is")
    steps: int = flag(3, "--steps", help="profiled steps", bounds=AT_LEAST_ONE)
    warmup_steps: int = flag(1, "--warmup-steps", help="steps run before profiling", bounds=NON_NEGATIVE)
    num_classes: int = flag(10, "--num-classes", help="classes of the model", bounds=AT_LEAST_ONE)
    top: int = flag(25, "--top", help="rows of the operator table", bounds=AT_LEAST_ONE)
    out: str = flag("runs/profile", "--out", help="output folder")
    memory: bool = flag(False, "--memory", help="record memory (CUDA: snapshot and timeline)")
    tensorboard: bool = flag(False, "--tensorboard", help="also write a TensorBoard trace")

    def __post_init__(self) -> None:
        check_field_types(self)


@dataclass(frozen=True)
class ProfileReport:
    """What a profile found: `title` (model, mode, size, batch, device, steps, precision), the operator table,
    the per-module times (or why there are none), the compile report's text (None without --compile) and the
    files written."""

    title: str
    ops_table: str
    modules: str
    compile_text: str | None
    files: tuple[Path, ...]


def profile_model(
    config: ProfileConfig, runtime: RuntimeConfig, *, log: Callable[[str], None] = print
) -> ProfileReport:
    """Profiles `config` under `runtime` (see the module docstring), saying what it does through `log`. Raises
    UsageError, naming the flag, for a model that cannot be built, before any file is written."""
    # imported when a profile runs, not with this module: `tphyolo profile -h` imports it for ProfileConfig alone
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tphyolo.bench.compile_report import compile_report, reset_compile_counters
    from tphyolo.bench.model import infer_step, synthetic_images, synthetic_targets, train_step
    from tphyolo.bench.profile import ModuleLabels, layer_strides
    from tphyolo.data.letterbox import check_imgsz
    from tphyolo.models.build import build_model, load_model_config
    from tphyolo.models.parse import MAX_CLASSES
    from tphyolo.runtime.config import sdpa_context

    try:
        model_config = load_model_config(config.model)
    except (ValueError, OSError) as error:
        raise UsageError(f"--model {config.model}: {error}") from error
    if config.num_classes > MAX_CLASSES:
        raise UsageError(f"--num-classes {config.num_classes}: above the limit of {MAX_CLASSES} classes")
    device = runtime.torch_device()
    cuda = device.type == "cuda"
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)

    training = config.mode == "train"
    model = build_model(model_config, num_classes=config.num_classes, origin=str(config.model))
    imgsz = check_imgsz(config.imgsz, int(model.stride.max()))
    model = runtime.place_model(model, device, training=training)
    strides = layer_strides(model, imgsz, device=device)
    labelled = model if runtime.compile == "off" else None  # hooks would break compiled graphs
    if runtime.compile != "off":
        reset_compile_counters()
    module = runtime.compile_model(model)
    images = runtime.prepare_images(synthetic_images(config.batch, imgsz), device, training=training)
    targets = synthetic_targets(config.batch, config.num_classes).to(device)
    if training:
        step = train_step(model, module, images, targets, runtime, imgsz)
    else:
        step = infer_step(module, images, runtime)

    what = f"{config.model} {config.mode} steps at {imgsz} px, batch {config.batch}, on {device}"
    labels = ModuleLabels(labelled) if labelled is not None else None
    with sdpa_context(runtime):
        compiling = " (the first compiles the model: minutes)" if runtime.compile != "off" else ""
        log(f"warming up: {config.warmup_steps} {what}{compiling} ...")
        for _ in range(config.warmup_steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        if config.memory and cuda:
            torch.cuda.memory._record_memory_history(max_entries=200_000)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=config.memory, profile_memory=config.memory,
                     with_stack=config.memory and cuda) as prof:  # fmt: skip
            log(f"profiling: {config.steps} {what} ...")
            with labels if labels is not None else contextlib.nullcontext():
                for _ in range(config.steps):
                    step()
                    prof.step()
            if cuda:
                torch.cuda.synchronize(device)

    log(f"writing the trace and tables to {out} ...")
    files = [out / "trace.json", out / "ops.txt", out / "modules.txt"]
    prof.export_chrome_trace(str(files[0]))
    table = prof.key_averages().table(sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total",
                                      row_limit=config.top)  # fmt: skip
    files[1].write_text(table + "\n")
    title = (f"{config.model} {config.mode} img{imgsz} b{config.batch} on {device}, {config.steps} steps, "
             f"amp={runtime.amp_dtype(device)}")  # fmt: skip
    modules = _module_times(prof, labels, strides, config.steps, title)
    files[2].write_text(modules + "\n")
    compile_text = None
    if runtime.compile != "off":
        report = compile_report()
        files.append(out / "compile.json")
        files[-1].write_text(json.dumps(report.to_dict(), indent=2) + "\n")
        compile_text = report.format()
    if config.memory and cuda:
        files += [out / "memory_snapshot.pickle", out / "memory_timeline.html"]
        torch.cuda.memory._dump_snapshot(str(files[-2]))
        torch.cuda.memory._record_memory_history(enabled=None)
        prof.export_memory_timeline(str(files[-1]), device=str(device))
    if config.tensorboard:  # the TensorBoard profiler plugin reads chrome traces named <worker>.<n>.pt.trace.json
        board = out / "tensorboard"
        board.mkdir(exist_ok=True)
        files.append(board / f"{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.pt.trace.json")
        shutil.copyfile(files[0], files[-1])
    return ProfileReport(title, table, modules, compile_text, tuple(files))


def _module_times(prof, labels: ModuleLabels | None, strides, steps: int, title: str) -> str:  # noqa: ANN001
    """The per-module table of a profile (forward time per step by module type, head part and branch)."""
    from tphyolo.bench.profile import label_times, summarize  # torch: lazily, as in profile_model

    if labels is None:
        return "per-module times are not recorded under --compile (forward hooks would split the compiled graph)"
    times = label_times(prof, list(labels.labels.values()), steps)
    lines = [
        f"forward time per step by module ({title}); device ms only on CUDA",
        f"{'group':40s} {'cpu ms':>10s} {'device ms':>10s}",
    ]
    lines += [f"{name:40s} {cpu:10.2f} {dev:10.2f}" for name, cpu, dev in summarize(times, strides)]
    return "\n".join(lines)
