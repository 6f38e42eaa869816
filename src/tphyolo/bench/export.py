"""Speed of exported models against PyTorch eager, as rows of the bench JSON schema (`tphyolo.bench.report`);
what `tphyolo bench predict` runs.

The baseline (`BASELINE`) is our model with the same weights in PyTorch eager fp32, Conv+BN fused, on the
CPU. Backends (`BACKENDS`): the runtimes of exported files, "onnxruntime", "openvino", "torchscript", "pt2",
and the INT8 files of those that have one, "onnxruntime-int8", "openvino-int8"
(`tphyolo export --int8`, calibrated on `calib_images` images of `int8_data`'s train split; the accuracy check
is skipped: random weights score nothing).

Forward (`bench_backends`): each backend runs the file exported from those weights at the same fixed size and
batch. Before timing, every output on the timing input is checked against our model's (<= 1e-4 relative;
INT8 files within `INT8_TOLERANCE`, their relative error is reported in their rows).

End to end (`bench_tta`): `Predictor` with test-time augmentation (the paper's 4 scales x 2 flips, 8 passes,
merged by WBF) on one uint8 noise image, `tta_imgsz` pixels wide and 9/16 of that high, from its pixels to the
merged detections in original pixels: letterboxing, the passes, NMS, WBF. With random weights, the confidence
threshold is `TTA_CONF`, so that NMS and WBF have as many boxes to handle as on a crowded drone image. The
exported files are a `--dynamic` export (TTA's scales need free sizes). Every backend's detection count is
reported.

In both, the calls are interleaved (baseline, backend 1, backend 2, baseline, ...), so that load changes on a
shared machine slow them alike; each row carries the paired speedup (median of the per-round ratios) and the
export time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from tphyolo.bench.report import Row, significant
from tphyolo.bench.timing import Timing, paired_speedup, time_calls
from tphyolo.errors import InputError
from tphyolo.export.config import ExportConfig
from tphyolo.export.exporter import ExportResult, export_model
from tphyolo.export.formats import INT8_RUNTIME_SUFFIX, RUNTIMES
from tphyolo.export.parity import FP32_TOLERANCE, INT8_TOLERANCE, relative_error, sample_images
from tphyolo.infer.backends import load_backend
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor

BACKENDS = tuple(RUNTIMES)
BASELINE = "ours, PyTorch eager fp32 fused"
TTA_EXPORT_SIZE = 256  # where the --dynamic export for bench_tta is traced and checked; it runs at any size
TTA_CONF = 1e-4  # random weights score ~1e-5..1e-3: each pass keeps up to max_det boxes, as a crowded image does


@dataclass(frozen=True)
class BackendBenchSettings:
    """model: a built-in name (random weights, seed 0); backends: some of BACKENDS; threads: CPU threads of
    the exported runtimes (default: the cores this process may use; PyTorch keeps its own setting). tta_imgsz:
    image width of `bench_tta`. int8_data, calib_images: the calibration of the INT8 backends."""

    model: str = "tph-yolov5l"
    imgsz: int = 640
    batch: int = 1
    backends: tuple[str, ...] = ("onnxruntime", "openvino")
    warmup: int = 1
    repeats: int = 5
    threads: int | None = None
    tta_imgsz: int = 1536
    int8_data: str = "synthetic"
    calib_images: int = 32

    def __post_init__(self) -> None:
        unknown = [b for b in self.backends if b not in BACKENDS]
        if unknown or not self.backends:
            raise InputError(f"unknown backend(s) {unknown or '(none)'}; known: {list(BACKENDS)}")


def baseline_model(model: torch.nn.Module) -> torch.nn.Module:
    """The baseline: `model` fused (Conv+BN), in eval mode."""
    return model.fuse().eval()


def _export(model, settings, workdir, *, imgsz, batch, dynamic, log) -> dict[str, ExportResult]:
    """{backend: its export} for the exported backends of `settings` (float files, then INT8 ones)."""
    stem = Path(workdir) / f"{settings.model}{'_dynamic' if dynamic else ''}"
    exports = {}
    for int8 in (False, True):
        chosen = [b for b in settings.backends if b in RUNTIMES and RUNTIMES[b][1] == int8]
        if not chosen:
            continue
        calibration = {"data": settings.int8_data, "calib_images": settings.calib_images} if int8 else {}
        cfg = ExportConfig(formats=tuple(RUNTIMES[b][0] for b in chosen), imgsz=imgsz, batch=batch, dynamic=dynamic,
                           int8=int8, accuracy_check=False, **calibration)  # fmt: skip
        written = export_model(model, cfg, stem=stem, model_name=settings.model, log=log)
        results = {r.format: r for r in written}
        for result in results.values():
            if not result.ok:
                raise RuntimeError(result.summary())
        exports |= {b: results[RUNTIMES[b][0]] for b in chosen}
    return exports


def is_int8(backend: str) -> bool:
    return RUNTIMES.get(backend, ("", False))[1]


def float_twin(backend: str) -> str | None:
    """The float backend of an INT8 one ("openvino" for "openvino-int8"), None for a float backend."""
    return backend.removesuffix(INT8_RUNTIME_SUFFIX) if is_int8(backend) else None


def bench_backends(
    settings: BackendBenchSettings, *, workdir: str | Path, log: Callable[[str], None] = print
) -> list[Row]:
    """Exports `settings.model` to `workdir`, checks each backend against our model, times the baseline and
    the backends interleaved; one Row per backend."""

    torch.manual_seed(0)
    model = build_model(settings.model)
    exports = _export(model, settings, workdir, imgsz=settings.imgsz, batch=settings.batch, dynamic=False, log=log)
    eager = baseline_model(model)
    images = sample_images(settings.batch, settings.imgsz, settings.imgsz)
    runners: dict[str, Callable[[], torch.Tensor]] = {"ours": lambda: _eager_forward(eager, images)}
    for name, result in exports.items():
        backend = load_backend(result.path, threads=settings.threads, trust_code=True)  # exported just above
        runners[name] = lambda backend=backend: backend.run(images)
    outputs = {name: run() for name, run in runners.items()}
    errors = {name: relative_error(out, outputs["ours"]) for name, out in outputs.items() if name != "ours"}
    for name, error in errors.items():
        tolerance = INT8_TOLERANCE if is_int8(name) else FP32_TOLERANCE
        if error > tolerance:
            raise RuntimeError(f"{name}: output differs from our PyTorch model's by {error:.1e} (> {tolerance})")
    within = f" (INT8 files within {INT8_TOLERANCE})" if any(is_int8(name) for name in errors) else ""
    log(f"outputs equal to our PyTorch model's{within}: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    timings = dict(zip(runners, _time(runners, settings), strict=True))
    config = f"{settings.model} img{settings.imgsz} b{settings.batch}"
    return _rows(
        "predict", config, settings, timings, exports, log,
        extra=lambda base, name: {"rel_error": float(f"{relative_error(outputs[name], outputs[base]):.2e}")},
    )  # fmt: skip


def bench_tta(settings: BackendBenchSettings, *, workdir: str | Path, log: Callable[[str], None] = print) -> list[Row]:
    """End-to-end `Predictor` time with 8-pass TTA + WBF on one image per backend (see the module docstring);
    one Row per backend."""

    torch.manual_seed(0)
    model = build_model(settings.model)
    size = min(TTA_EXPORT_SIZE, settings.tta_imgsz)
    exports = _export(model, settings, workdir, imgsz=size, batch=1, dynamic=True, log=log)
    common = {"imgsz": settings.tta_imgsz, "tta": True, "merge": "wbf", "conf": TTA_CONF, "device": "cpu"}
    predictors = {"ours": Predictor(baseline_model(model), fuse=False, **common)}
    predictors |= {name: Predictor(str(result.path), **common) for name, result in exports.items()}
    width = settings.tta_imgsz
    image = np.random.default_rng(0).integers(0, 256, (width * 9 // 16, width, 3), dtype=np.uint8)
    counts = {name: len(predictor(image)[0]) for name, predictor in predictors.items()}
    log(f"TTA ({len(next(iter(predictors.values())).tta.passes())} passes + WBF) detections: "
        + ", ".join(f"{k} {v}" for k, v in counts.items()))  # fmt: skip
    runners = {name: (lambda p=predictor: p(image)) for name, predictor in predictors.items()}
    timings = dict(zip(runners, _time(runners, settings), strict=True))
    config = f"{settings.model} {width}x{width * 9 // 16} img{width} TTA 8 passes + WBF"
    return _rows(
        "predict/tta", config, settings, timings, exports, log,
        extra=lambda base, name: {"detections": counts[name], "baseline_detections": counts[base]},
    )  # fmt: skip


def _eager_forward(module: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return module(images)


def _time(runners: dict[str, Callable], settings: BackendBenchSettings) -> list[Timing]:
    return time_calls(list(runners.values()), device=torch.device("cpu"), warmup=settings.warmup,
                      repeats=settings.repeats)  # fmt: skip


def _rows(prefix, config, settings, timings, exports, log, *, extra) -> list[Row]:
    """One Row per backend of `settings`, against the baseline "ours"."""
    rows = []
    base_t = timings["ours"]
    for backend in settings.backends:
        ours_t = timings[backend]
        details = {"paired_speedup": significant(paired_speedup(base_t, ours_t)), **extra("ours", backend)}
        twin = float_twin(backend)
        if twin in timings:  # an INT8 file against the float file of its runtime, timed in the same run
            details["paired_vs_float"] = significant(paired_speedup(timings[twin], ours_t))
        details["export_s"] = significant(exports[backend].seconds)
        details["torch_threads"] = torch.get_num_threads()
        described = f"{config} {'int8' if is_int8(backend) else 'fp32'}, vs {BASELINE}"
        row = Row(f"{prefix}/{backend}", described, ours_t.median_ms, base_t.median_ms,
                  ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms, extra=details)  # fmt: skip
        against_float = f"; {details['paired_vs_float']:.2f}x {twin} (paired)" if twin in timings else ""
        log(f"{row.name} {row.config}: baseline {base_t.median_ms:.0f} ms, ours {ours_t.median_ms:.0f} ms, "
            f"speedup {row.speedup:.2f}x (paired {details['paired_speedup']:.2f}x){against_float}")  # fmt: skip
        rows.append(row)
    return rows
