"""Speed of exported models against PyTorch eager, as rows of the bench JSON schema (`tphyolo.bench.report`).

Baseline: the same weights in PyTorch eager fp32, Conv+BN fused, under `torch.inference_mode`: our model
(`baseline="ours"`), or the original computation of its attention blocks (`baseline="original"`,
`tphyolo.bench.baselines.with_original_attention`). Ours: each backend running the file exported from those
weights at the same fixed size and batch. Before timing, every backend's output on the timing input is checked
against the baseline's (<= 1e-4 relative). The calls are interleaved (baseline, backend 1, backend 2,
baseline, ...), so that load changes on a shared machine slow them alike; each row carries the paired
speedup (median of the per-round ratios), the relative error and the export time.

`tphyolo bench` can call `bench_backends`; by hand:

    python -c "from tphyolo.export.benchmark import *; bench_backends(BackendBenchSettings(), workdir='/tmp/b')"
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from tphyolo.bench.report import Row
from tphyolo.bench.timing import paired_speedup, time_calls
from tphyolo.export.backends import load_backend
from tphyolo.export.exporter import ExportConfig, export_model
from tphyolo.export.parity import FP32_TOLERANCE, relative_error, sample_images

BACKEND_FORMATS = {"onnxruntime": "onnx", "openvino": "openvino", "torchscript": "torchscript"}
BASELINES = ("ours", "original")


@dataclass(frozen=True)
class BackendBenchSettings:
    """model: a built-in name (random weights, seed 0); backends: keys of BACKEND_FORMATS; threads: CPU threads
    of the exported runtimes (default: the cores this process may use; PyTorch keeps its own setting)."""

    model: str = "tph-yolov5l"
    imgsz: int = 640
    batch: int = 1
    backends: tuple[str, ...] = ("onnxruntime", "openvino")
    baseline: str = "ours"
    warmup: int = 1
    repeats: int = 5
    threads: int | None = None

    def __post_init__(self) -> None:
        unknown = [b for b in self.backends if b not in BACKEND_FORMATS]
        if unknown or not self.backends:
            raise ValueError(f"unknown backend(s) {unknown or '(none)'}; known: {list(BACKEND_FORMATS)}")
        if self.baseline not in BASELINES:
            raise ValueError(f"baseline must be one of {BASELINES}, got {self.baseline!r}")


def baseline_model(model: torch.nn.Module, baseline: str) -> torch.nn.Module:
    """The fused eval-mode model the backends are measured against (see the module docstring)."""
    if baseline == "original":
        from tphyolo.bench.baselines import with_original_attention

        model, _ = with_original_attention(model)
    return model.fuse()


def bench_backends(
    settings: BackendBenchSettings, *, workdir: str | Path, log: Callable[[str], None] = print
) -> list[Row]:
    """Exports `settings.model` to `workdir`, checks each backend against the baseline, times them
    interleaved; one Row per backend."""
    from tphyolo.models import build_model

    torch.manual_seed(0)
    model = build_model(settings.model)
    formats = tuple(BACKEND_FORMATS[b] for b in settings.backends)
    cfg = ExportConfig(formats=formats, imgsz=settings.imgsz, batch=settings.batch)
    results = export_model(model, cfg, stem=Path(workdir) / settings.model, model_name=settings.model, log=log)
    by_format = {r.format: r for r in results}
    base = baseline_model(model, settings.baseline)
    images = sample_images(settings.batch, settings.imgsz, settings.imgsz)
    with torch.inference_mode():
        reference = base(images)
    runners, errors = [], {}
    for name in settings.backends:
        backend = load_backend(by_format[BACKEND_FORMATS[name]].path, threads=settings.threads)
        errors[name] = relative_error(backend.run(images), reference)
        if errors[name] > FP32_TOLERANCE:
            raise RuntimeError(f"{name}: output differs from the baseline by {errors[name]:.1e} (> {FP32_TOLERANCE})")
        runners.append(lambda backend=backend: backend.run(images))
    log(f"outputs equal to the {settings.baseline} baseline: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))

    def run_baseline() -> None:
        with torch.inference_mode():
            base(images)

    timings = time_calls([run_baseline, *runners], device=torch.device("cpu"), warmup=settings.warmup,
                         repeats=settings.repeats)  # fmt: skip
    base_t = timings[0]
    rows = []
    for name, ours_t in zip(settings.backends, timings[1:], strict=True):
        row = Row(
            f"export/{name}",
            f"{settings.model} img{settings.imgsz} b{settings.batch} fp32 vs torch eager ({settings.baseline})",
            ours_t.median_ms,
            base_t.median_ms,
            ours_spread_ms=ours_t.spread_ms,
            baseline_spread_ms=base_t.spread_ms,
            extra={
                "paired_speedup": round(paired_speedup(base_t, ours_t), 3),
                "rel_error": float(f"{errors[name]:.2e}"),
                "export_s": round(by_format[BACKEND_FORMATS[name]].seconds, 1),
                "torch_threads": torch.get_num_threads(),
            },
        )
        log(f"{row.name} {row.config}: baseline {base_t.median_ms:.0f} ms, ours {ours_t.median_ms:.0f} ms, "
            f"speedup {row.speedup:.2f}x (paired {row.extra['paired_speedup']:.2f}x)")  # fmt: skip
        rows.append(row)
    return rows
