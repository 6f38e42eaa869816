"""`run_benchmarks`: the chosen benchmarks of a `BenchSettings` in one run, under one `RuntimeConfig` (both
sides of every comparison run under it), and the machine they ran on.

`model` sweeps variants of the runtime (`tphyolo.bench.model.variant_runtime`) against its eager variant:
`--channels-last` and `--amp bf16|fp16` apply to every variant, `--amp auto` autocasts the amp variants only,
`--amp off` refuses them. `predict` runs on the CPU (`tphyolo.bench.export`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import torch

from tphyolo.bench.data import bench_data
from tphyolo.bench.export import BackendBenchSettings, bench_backends, bench_tta
from tphyolo.bench.model import AMP_VARIANTS, ModelSettings, bench_model, variant_runtime
from tphyolo.bench.report import Row, machine_info
from tphyolo.bench.serve.bench import ServeBenchSettings, bench_serve
from tphyolo.bench.serve.load import check_loopback
from tphyolo.bench.startup import StartupSettings, bench_startup
from tphyolo.bench.suite.settings import BENCHMARKS, BenchSettings
from tphyolo.errors import UsageError
from tphyolo.models.build import load_model_config
from tphyolo.runtime.config import RuntimeConfig

Log = Callable[[str], None]


def run_benchmarks(
    settings: BenchSettings, *, runtime: RuntimeConfig, log: Log = print
) -> tuple[list[Row], dict[str, Any]]:
    """Run `settings.what` in order (each once) and return their rows and the machine's description. Raises
    UsageError, naming the flag, for settings no benchmark can run, before any timing where it can."""
    s = settings
    if {"model", "predict", "startup"} & set(s.what):  # the model is checked before any timing
        try:
            load_model_config(s.model)
        except (ValueError, OSError) as error:
            raise UsageError(f"--model {s.model}: {error}") from error
    device = runtime.torch_device()
    rows: list[Row] = []
    for what in dict.fromkeys(s.what):
        log(f"== bench {what} on {device} ==")
        if what == "model":
            rows += _model(s, runtime, device, log)
        elif what == "data":
            rows += bench_data(image_size=128 if s.quick else s.img, batch=s.batch, workers=s.workers,
                               batches=s.data_batches or (2 if s.quick else 8), data=s.data, log=log)  # fmt: skip
        elif what == "startup":
            startup = StartupSettings(data=s.data, model="tph-yolov5n" if s.quick else s.model,
                                      image_size=128 if s.quick else s.img, batch=s.batch,
                                      device=runtime.device, compile=runtime.compile)  # fmt: skip
            rows += bench_startup(startup, log=log)
        elif what == "predict":
            rows += _predict(s, device, log)
        elif what == "serve":
            rows += _serve(s, log)
        else:
            raise UsageError(f"unknown benchmark {what!r}; known: {', '.join(BENCHMARKS)}")
    return rows, machine_info(device)


def _model(s: BenchSettings, runtime: RuntimeConfig, device: torch.device, log: Log) -> list[Row]:
    if s.variants is not None:
        variants = s.variants
    elif device.type == "cuda":
        variants = ("eager", "channels_last", "amp", "amp+compile")
        if runtime.amp == "off":
            log(f"--amp off: no {' or '.join(AMP_VARIANTS)} variant")
            variants = tuple(v for v in variants if v not in AMP_VARIANTS)
    else:
        variants = ("eager", "channels_last")
    for variant in variants:  # an unknown variant, or an amp one under --amp off, fails before any timing
        variant_runtime(runtime, variant, device=device)
    settings = ModelSettings(model="tph-yolov5n" if s.quick else s.model, image_size=128 if s.quick else s.img,
                             batch=1 if s.quick else s.batch, variants=variants, modes=s.model_modes,
                             warmup=s.pick(s.warmup, 1, 0), repeats=s.pick(s.repeats, 3, 1))  # fmt: skip
    return bench_model(settings, runtime=runtime, device=device, log=log)


def _predict(s: BenchSettings, device: torch.device, log: Log) -> list[Row]:
    if device.type != "cpu":
        raise UsageError(f"bench predict times CPU runtimes; run it with --device cpu, not {device}")
    try:
        settings = BackendBenchSettings(
            model="tph-yolov5n" if s.quick else s.model, imgsz=64 if s.quick else s.img,
            batch=1 if s.quick else s.batch, backends=s.backends,
            warmup=s.pick(s.warmup, 1, 0), repeats=s.pick(s.repeats, 5, 1), tta_imgsz=128 if s.quick else s.tta_img,
            int8_data=s.data, calib_images=4 if s.quick else 32,
        )  # fmt: skip
    except ValueError as error:
        raise UsageError(str(error)) from error
    with tempfile.TemporaryDirectory(prefix="tphyolo-bench-") as tmp:
        workdir = s.export_dir or tmp
        rows = bench_backends(settings, workdir=workdir, log=log)
        if s.tta:
            rows += bench_tta(settings, workdir=workdir, log=log)
    return rows


def _serve(s: BenchSettings, log: Log) -> list[Row]:
    if not s.weights:
        raise UsageError("bench serve needs --weights (what the servers load, and the in-process baseline)")
    try:
        url = None if s.url is None else check_loopback(s.url)
    except ValueError as error:
        raise UsageError(str(error)) from error
    settings = ServeBenchSettings(weights=tuple(s.weights), imgsz=s.img, concurrency=s.concurrency,
                                  requests=s.requests, url=url, image=s.image)  # fmt: skip
    return bench_serve(settings, log=log)
