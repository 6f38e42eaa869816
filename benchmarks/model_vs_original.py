"""Our whole model against the same architecture computed the way the original code computes it, per runtime
variant, in one run: a study of our implementation, not a setting a user chooses (`tphyolo bench model` times
the variants against our own eager model).

    python benchmarks/model_vs_original.py --model tph-yolov5l --img 1536 --batch 2 --variants eager,amp --json out.json
    python benchmarks/model_vs_original.py --quick --device cpu      # tph-yolov5n at 128 px, seconds

The baseline (`BASELINE`) is our model with every C3TR, C3STR and CLLABlock swapped for its original-computation
twin (`original_attention.with_original_attention`, same weights) and, in the train step, the original-computation
loss (`original_loss.OriginalLoss`, same numbers). For a model without attention blocks (yolov5n) the train row
measures the loss alone. Before timing, the twin must give our model's eval-mode output in fp32 (within
`TOLERANCE` of the device type, relative).

Variants, steps, runtime flags and synthetic inputs are those of `tphyolo bench model` (`tphyolo.bench.model`):
both models of a variant are prepared by the variant's RuntimeConfig and their calls interleaved. Prints the
table of `tphyolo bench`; `--json` also writes the rows.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from original_attention import max_relative_difference, with_original_attention
from original_loss import OriginalLoss
from study_cli import run_study, study_parser
from torch import nn

from tphyolo.bench.model import (
    AMP_VARIANTS,
    MODES,
    ModelSettings,
    detection_loss,
    infer_step,
    memory_format,
    synthetic_images,
    synthetic_targets,
    train_step,
    variant_runtimes,
)
from tphyolo.bench.report import Row, machine_info, significant
from tphyolo.bench.timing import paired_speedup, peak_memory_mb, time_calls
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.data.letterbox import check_imgsz
from tphyolo.errors import InputError
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, check_field_types, flag
from tphyolo.models.build import build_model
from tphyolo.runtime.config import RuntimeConfig, sdpa_context
from tphyolo.runtime.decisions import decide_runtime

BASELINE = "ours with the original's attention and loss, same variant"
TOLERANCE = {"cpu": 1e-4, "cuda": 1e-3}  # max relative difference of the twin's fp32 output, by device type


@dataclass(frozen=True)
class StudyFlags:
    """The command line; None: the default on the device (variants) or of `--quick` (warmup, repeats)."""

    quick: bool = flag(False, "--quick", help="tph-yolov5n at 128 px, batch 1, one repeat: checks that it runs")
    warmup: int | None = flag(None, "--warmup", bounds=NON_NEGATIVE, help="untimed calls before timing (default 1)")
    repeats: int | None = flag(None, "--repeats", bounds=AT_LEAST_ONE, help="timed calls (default 3)")
    batch: int = flag(2, "--batch", bounds=AT_LEAST_ONE, help="batch size")
    model: str = flag("tph-yolov5s", "--model", help="built-in model name")
    img: int = flag(640, "--img", bounds=IMGSZ_BOUNDS, help="image size, pixels")
    variants: tuple[str, ...] | None = flag(
        None, "--variants", sep=",",
        help="eager,channels_last,amp,compile,amp+compile,decided (default: eager,channels_last on CPU; "
        "eager,channels_last,amp,amp+compile on CUDA)",
    )  # fmt: skip
    modes: tuple[str, ...] = flag(MODES, "--model-modes", sep=",", help="train,infer")
    json: str | None = flag(None, "--json", metavar="PATH", help="also write the results as JSON to PATH")

    def __post_init__(self) -> None:
        check_field_types(self)


def study_settings(flags: StudyFlags, runtime: RuntimeConfig, device: torch.device) -> ModelSettings:
    """The `ModelSettings` the flags name on `device`; raises InputError for an unknown mode."""
    unknown = [m for m in flags.modes if m not in MODES]
    if unknown:
        raise InputError(f"unknown mode(s) {unknown}; known: {MODES}")
    if flags.variants is not None:
        variants = flags.variants
    elif device.type == "cuda":
        variants = ("eager", "channels_last", *(() if runtime.amp == "off" else AMP_VARIANTS))
    else:
        variants = ("eager", "channels_last")
    tiny = flags.quick
    return ModelSettings(
        model="tph-yolov5n" if tiny else flags.model, image_size=128 if tiny else flags.img,
        batch=1 if tiny else flags.batch, variants=variants, modes=flags.modes,
        warmup=flags.warmup if flags.warmup is not None else (0 if tiny else 1),
        repeats=flags.repeats if flags.repeats is not None else (1 if tiny else 3),
    )  # fmt: skip


def bench_model_vs_original(
    settings: ModelSettings, *, runtime: RuntimeConfig, device: torch.device, log: Callable[[str], None] = print
) -> list[Row]:
    """One Row per (mode, variant): our model against its original-computation twin (`BASELINE`), both
    prepared by the variant's RuntimeConfig; raises RuntimeError when the twin computes something else."""
    runs = variant_runtimes(runtime, settings.variants, device=device, log=log)
    torch.manual_seed(0)
    ours = build_model(settings.model, num_classes=settings.num_classes).to(device)
    settings = replace(settings, image_size=check_imgsz(settings.image_size, int(ours.stride.max())))
    twin, replaced = with_original_attention(ours)
    images = synthetic_images(settings.batch, settings.image_size)
    targets = synthetic_targets(settings.batch, settings.num_classes).to(device)
    diff = max_relative_difference(ours, twin, [RuntimeConfig().prepare_images(images, device)])  # fp32, NCHW
    tolerance = TOLERANCE.get(device.type, TOLERANCE["cuda"])
    if diff > tolerance:
        raise RuntimeError(f"{settings.model}: original-attention twin differs by {diff:.2e} (> {tolerance})")
    log(f"{settings.model}: {replaced} attention blocks swapped for the original computation; "
        f"same outputs (max rel. diff {diff:.1e})")  # fmt: skip
    rows = []
    with sdpa_context(runtime):
        for mode in settings.modes:
            for variant, run in runs.items():
                rows.append(_bench_variant(ours, twin, mode, variant, run, settings, images, targets, device, log))
    return rows


def _bench_variant(ours, twin, mode, variant, run, settings, images, targets, device, log) -> Row:
    """Times one mode of one variant: both models prepared by `run` (for "decided", as `decide_runtime`
    decides), their calls interleaved."""
    if variant == "decided":
        run, _ = decide_runtime(run, device, mode=mode)
    steps = []
    for model in (twin, ours):
        module, x = run.prepare_model(copy.deepcopy(model), device), run.prepare_images(images, device)
        steps.append(_step(model, module, x, mode, run, settings, targets, original=model is twin))
    layout = memory_format(module, x)  # of ours, prepared last
    base_t, ours_t = time_calls(steps, device=device, warmup=settings.warmup, repeats=settings.repeats)
    base_mb, ours_mb = (peak_memory_mb(fn, device=device) for fn in steps)
    per_s = 1e3 * settings.batch
    row = Row(
        f"model/{mode}",
        f"{settings.model} img{settings.image_size} b{settings.batch} {variant}, vs {BASELINE}",
        ours_t.median_ms, base_t.median_ms, ours_peak_mb=ours_mb, baseline_peak_mb=base_mb,
        ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms,
        extra={"ours_img_s": significant(per_s / ours_t.median_ms),
               "base_img_s": significant(per_s / base_t.median_ms),
               "paired_speedup": significant(paired_speedup(base_t, ours_t)),
               "amp": run.amp, "memory_format": layout, "compile": run.compile},
    )  # fmt: skip
    log(f"{row.name} {row.config}: original {base_t.median_ms:.0f} ms, ours {ours_t.median_ms:.0f} ms, "
        f"speedup {row.speedup:.2f}x (paired {row.extra['paired_speedup']:.2f}x), "
        f"peak {base_mb:.0f} -> {ours_mb:.0f} MiB")  # fmt: skip
    return row


def _step(model: nn.Module, module: nn.Module, x: torch.Tensor, mode: str, run: RuntimeConfig,
          settings: ModelSettings, targets: torch.Tensor, *, original: bool) -> Callable[[], None]:  # fmt: skip
    """A train or inference step of `module` (`model` prepared by `run`) on prepared images `x`; `original`:
    the train step's loss is the original computation."""
    if mode == "train":
        loss = detection_loss(model, settings.image_size)
        return train_step(model, module, x, targets, run, settings.image_size,
                          loss_fn=OriginalLoss(loss) if original else loss)  # fmt: skip
    return infer_step(module, x, run)


def study(flags: StudyFlags, runtime: RuntimeConfig, *, log: Callable[[str], None] = print) -> tuple[list[Row], dict]:
    """The rows `flags` name under `runtime` (`bench_model_vs_original`), and the machine."""
    device = runtime.torch_device()
    rows = bench_model_vs_original(study_settings(flags, runtime, device), runtime=runtime, device=device, log=log)
    return rows, machine_info(device)


def build_parser() -> argparse.ArgumentParser:
    """The script's flags (`StudyFlags`) and the runtime flags of training."""
    return study_parser(StudyFlags, __doc__)


def main(argv: list[str] | None = None) -> int:
    return run_study(build_parser(), StudyFlags, study, argv)


if __name__ == "__main__":
    raise SystemExit(main())
