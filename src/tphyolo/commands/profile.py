"""`tphyolo profile`: torch.profiler over a few training (or inference) steps of a model at a size.

    tphyolo profile --model tph-yolov5l --img 640 --batch 2 --steps 3 --out runs/profile
    tphyolo profile --model tph-yolov5-swins --mode infer --device cuda --amp bf16 --memory --tensorboard

Writes to --out: `trace.json` (chrome://tracing or https://ui.perfetto.dev), `ops.txt` (the top-k operator
table, also printed), `modules.txt` (forward time per module type, per head part, and of the TPH-attention
and P2 branches, from `record_function` ranges opened by forward hooks); with --memory on CUDA also
`memory_snapshot.pickle` (https://pytorch.org/memory_viz) and `memory_timeline.html`; with --tensorboard a
TensorBoard trace under `tensorboard/`; with --compile `compile.json` (also printed): the graphs compiled, the
graph breaks and the recompilations, with their reasons. The runtime flags are those of training, applied as
everywhere by `RuntimeConfig` (`place_model`, `compile_model`, `prepare_images`, `autocast`, `sdpa_context`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE

if TYPE_CHECKING:  # torch is imported when the command runs, not when `tphyolo profile -h` parses
    from tphyolo.runtime.config import RuntimeConfig

USES_RUNTIME = True


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="tph-yolov5s", help="built-in model name or yaml (default tph-yolov5s)")
    parser.add_argument("--img", type=IMGSZ_BOUNDS.parser(int), default=640, help="image size (default 640)")
    parser.add_argument("--batch", type=AT_LEAST_ONE.parser(int), default=2, help="batch size (default 2)")
    parser.add_argument("--mode", choices=("train", "infer"), default="train", help="what a step is (default train)")
    parser.add_argument("--steps", type=AT_LEAST_ONE.parser(int), default=3, help="profiled steps (default 3)")
    parser.add_argument(
        "--warmup-steps", type=NON_NEGATIVE.parser(int), default=1, help="steps run before profiling (default 1)"
    )
    parser.add_argument(
        "--num-classes",
        type=AT_LEAST_ONE.parser(int),
        default=10,
        help="classes of the model (default 10)",
    )
    parser.add_argument(
        "--top", type=AT_LEAST_ONE.parser(int), default=25, help="rows of the operator table (default 25)"
    )
    parser.add_argument("--out", type=Path, default=Path("runs/profile"), help="output folder (default runs/profile)")
    parser.add_argument("--memory", action="store_true", help="record memory (CUDA: snapshot and timeline)")
    parser.add_argument("--tensorboard", action="store_true", help="also write a TensorBoard trace")


def run(args: argparse.Namespace) -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from tphyolo.bench.compile_report import compile_report, reset_compile_counters
    from tphyolo.bench.model import infer_step, synthetic_images, synthetic_targets, train_step
    from tphyolo.bench.profile import ModuleLabels, label_times, layer_strides, summarize
    from tphyolo.data.letterbox import check_imgsz
    from tphyolo.errors import UsageError
    from tphyolo.models.build import build_model, load_model_config
    from tphyolo.models.parse import MAX_CLASSES
    from tphyolo.runtime.config import sdpa_context

    try:  # before any work
        config = load_model_config(args.model)
    except (ValueError, OSError) as error:
        raise UsageError(f"--model {args.model}: {error}") from error
    if args.num_classes > MAX_CLASSES:
        raise UsageError(f"--num-classes {args.num_classes}: above the limit of {MAX_CLASSES} classes")
    runtime: RuntimeConfig = args.runtime
    device = runtime.torch_device()
    cuda = device.type == "cuda"
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    training = args.mode == "train"
    model = build_model(config, num_classes=args.num_classes, origin=str(args.model))
    args.img = check_imgsz(args.img, int(model.stride.max()))
    model = runtime.place_model(model, device, training=training)
    strides = layer_strides(model, args.img, device=device)
    labelled = model if runtime.compile == "off" else None  # hooks would break compiled graphs
    if runtime.compile != "off":
        reset_compile_counters()
    module = runtime.compile_model(model)
    images = runtime.prepare_images(synthetic_images(args.batch, args.img), device, training=training)
    targets = synthetic_targets(args.batch, args.num_classes).to(device)
    step = (
        train_step(model, module, images, targets, runtime, args.img)
        if args.mode == "train"
        else infer_step(module, images, runtime)
    )

    what = f"{args.model} {args.mode} steps at {args.img} px, batch {args.batch}, on {device}"
    with sdpa_context(runtime):
        compiling = " (the first compiles the model: minutes)" if runtime.compile != "off" else ""
        print(f"warming up: {args.warmup_steps} {what}{compiling} ...", flush=True)
        for _ in range(args.warmup_steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        if args.memory and cuda:
            torch.cuda.memory._record_memory_history(max_entries=200_000)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities, record_shapes=args.memory, profile_memory=args.memory,
                     with_stack=args.memory and cuda) as prof:  # fmt: skip
            labels = ModuleLabels(labelled) if labelled is not None else None
            print(f"profiling: {args.steps} {what} ...", flush=True)
            with labels if labels is not None else contextlib.nullcontext():
                for _ in range(args.steps):
                    step()
                    prof.step()
            if cuda:
                torch.cuda.synchronize(device)

    print(f"writing the trace and tables to {out} ...", flush=True)
    prof.export_chrome_trace(str(out / "trace.json"))
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=args.top)
    (out / "ops.txt").write_text(table + "\n")
    amp = runtime.amp_dtype(device)
    title = f"{args.model} {args.mode} img{args.img} b{args.batch} on {device}, {args.steps} steps, amp={amp}"
    print(f"== top {args.top} operators: {title} ==")
    print(table)

    if labels is not None:
        times = label_times(prof, list(labels.labels.values()), args.steps)
        lines = [
            f"forward time per step by module ({title}); device ms only on CUDA",
            f"{'group':40s} {'cpu ms':>10s} {'device ms':>10s}",
        ]
        lines += [f"{name:40s} {cpu:10.2f} {dev:10.2f}" for name, cpu, dev in summarize(times, strides)]
        text = "\n".join(lines)
    else:
        text = "per-module times are not recorded under --compile (forward hooks would split the compiled graph)"
    (out / "modules.txt").write_text(text + "\n")
    print(text)

    if runtime.compile != "off":
        report = compile_report()
        (out / "compile.json").write_text(json.dumps(report.to_dict(), indent=2) + "\n")
        print(report.format())

    if args.memory and cuda:
        torch.cuda.memory._dump_snapshot(str(out / "memory_snapshot.pickle"))
        torch.cuda.memory._record_memory_history(enabled=None)
        prof.export_memory_timeline(str(out / "memory_timeline.html"), device=str(device))
    if args.tensorboard:  # the TensorBoard profiler plugin reads chrome traces named <worker>.<n>.pt.trace.json
        board = out / "tensorboard"
        board.mkdir(exist_ok=True)
        shutil.copyfile(
            out / "trace.json", board / f"{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.pt.trace.json"
        )
    print(f"wrote {out / 'trace.json'}, {out / 'ops.txt'}, {out / 'modules.txt'}")
    return 0
