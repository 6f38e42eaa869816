"""`bench model`: a whole model's train step and inference, ours against the same architecture with the
original-computation attention blocks (`with_original_attention`), per runtime variant.

Variants: "eager" (fp32, NCHW), "channels_last" (NHWC convolutions), "amp" (autocast to the runtime's AMP
dtype; bf16 when the runtime says "auto" or "off"), "compile" (torch.compile with the runtime's mode, "default"
when off) and "amp+compile". The baseline model gets the same variant as ours.

Train step: forward in train mode, `YoloLoss` on synthetic targets (20 boxes per image, hyp "scratch-low"
scaled to the model), backward, SGD step (momentum 0.937, Nesterov), with a GradScaler under fp16.
Inference: eval-mode forward under no_grad. Reported per call, plus images per second.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from tphyolo.bench.baselines import strict_fp32, with_original_attention
from tphyolo.bench.report import Row
from tphyolo.bench.timing import paired_speedup, peak_memory_mb, time_calls

VARIANTS = ("eager", "channels_last", "amp", "compile", "amp+compile")
MODES = ("train", "infer")
BOXES_PER_IMAGE = 20


@dataclass(frozen=True)
class ModelSettings:
    model: str = "tph-yolov5s"
    image_size: int = 640
    batch: int = 2
    num_classes: int = 10
    variants: tuple[str, ...] = ("eager", "channels_last")
    modes: tuple[str, ...] = MODES
    amp_dtype: torch.dtype = torch.bfloat16
    compile_mode: str = "default"
    warmup: int = 1
    repeats: int = 3


def synthetic_targets(batch: int, num_classes: int, *, seed: int = 0, per_image: int = BOXES_PER_IMAGE) -> torch.Tensor:
    """(batch * per_image, 6) targets [image, class, cx, cy, w, h], box coordinates normalised to [0, 1]."""
    generator = torch.Generator().manual_seed(seed)
    n = batch * per_image
    image = torch.arange(batch).repeat_interleave(per_image).float()
    cls = torch.randint(0, num_classes, (n,), generator=generator).float()
    wh = torch.rand(n, 2, generator=generator) * 0.15 + 0.01
    centre = wh / 2 + torch.rand(n, 2, generator=generator) * (1 - wh)
    return torch.cat([image[:, None], cls[:, None], centre, wh], dim=1)


def _loss_for(model: nn.Module, image_size: int):
    from tphyolo.engine.hyp import load_hyp, scale_hyp
    from tphyolo.engine.loss import YoloLoss

    head = model.head
    hyp = scale_hyp(load_hyp("scratch-low"), num_levels=head.nl, num_classes=head.nc, imgsz=image_size)
    return YoloLoss.from_model(model, hyp)


def prepare(model: nn.Module, variant: str, settings: ModelSettings) -> tuple[nn.Module, torch.dtype | None, bool]:
    """A copy of `model` set up for `variant`: (module to call, autocast dtype or None, channels-last inputs)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {VARIANTS}")
    module = copy.deepcopy(model)
    channels_last = variant == "channels_last"
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
    amp = settings.amp_dtype if variant.startswith("amp") else None
    if variant.endswith("compile"):
        module = torch.compile(module, mode=settings.compile_mode)
    return module, amp, channels_last


def train_step(model: nn.Module, module: nn.Module, images: torch.Tensor, targets: torch.Tensor,
               amp: torch.dtype | None, image_size: int) -> Callable[[], None]:  # fmt: skip
    """One optimiser step of `module` (a prepared copy of `model`, which supplies the head for the loss)."""
    loss_fn = _loss_for(model, image_size).to(images.device)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    scaler = torch.amp.GradScaler(images.device.type, enabled=amp == torch.float16)

    def step() -> None:
        module.train()
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(images.device.type, dtype=amp, enabled=amp is not None):
            preds = module(images)
        loss, _ = loss_fn(preds, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step


def infer_step(module: nn.Module, images: torch.Tensor, amp: torch.dtype | None) -> Callable[[], None]:
    def step() -> None:
        module.eval()
        with torch.no_grad(), torch.autocast(images.device.type, dtype=amp, enabled=amp is not None):
            module(images)

    return step


def check_same_outputs(ours: nn.Module, baseline: nn.Module, images: torch.Tensor) -> float:
    """max |ours - baseline| / max(1, max |baseline|) of the eval-mode (decoded) outputs in strict fp32;
    the models are left in eval mode."""
    with torch.no_grad(), strict_fp32():
        got, expected = ours.eval()(images), baseline.eval()(images)
    return float((got - expected).abs().max() / expected.abs().max().clamp(min=1.0))


def bench_model(settings: ModelSettings, *, device: torch.device, log: Callable[[str], None] = print) -> list[Row]:
    """One Row per (mode, variant): ours against the original-attention twin."""
    from tphyolo.models.build import build_model

    torch.manual_seed(0)
    ours = build_model(settings.model, num_classes=settings.num_classes).to(device)
    baseline, replaced = with_original_attention(ours)
    generator = torch.Generator().manual_seed(0)
    shape = (settings.batch, 3, settings.image_size, settings.image_size)
    images = torch.rand(shape, generator=generator).to(device)
    targets = synthetic_targets(settings.batch, settings.num_classes).to(device)
    diff = check_same_outputs(ours, baseline, images)
    tolerance = 1e-4 if device.type == "cpu" else 1e-3
    if diff > tolerance:
        raise RuntimeError(f"{settings.model}: original-attention twin differs by {diff:.2e} (> {tolerance})")
    log(f"{settings.model}: {replaced} attention blocks swapped for the original computation; "
        f"same outputs (max rel. diff {diff:.1e})")  # fmt: skip
    rows = []
    for mode in settings.modes:
        for variant in settings.variants:
            steps = [_step(model, mode, variant, settings, images, targets) for model in (baseline, ours)]
            base_t, ours_t = time_calls(steps, device=device, warmup=settings.warmup, repeats=settings.repeats)
            base_mb, ours_mb = (peak_memory_mb(fn, device=device) for fn in steps)
            del steps
            per_s = 1e3 * settings.batch
            row = Row(
                f"model/{mode}",
                f"{settings.model} img{settings.image_size} b{settings.batch} {variant}",
                ours_t.median_ms, base_t.median_ms, ours_peak_mb=ours_mb, baseline_peak_mb=base_mb,
                ours_spread_ms=ours_t.spread_ms, baseline_spread_ms=base_t.spread_ms,
                extra={"ours_img_s": round(per_s / ours_t.median_ms, 2),
                       "base_img_s": round(per_s / base_t.median_ms, 2),
                       "paired_speedup": round(paired_speedup(base_t, ours_t), 3)},
            )  # fmt: skip
            log(f"{row.name} {row.config}: baseline {base_t.median_ms:.0f} ms, ours {ours_t.median_ms:.0f} ms, "
                f"speedup {row.speedup:.2f}x (paired {row.extra['paired_speedup']:.2f}x), "
                f"peak {base_mb:.0f} -> {ours_mb:.0f} MiB")  # fmt: skip
            rows.append(row)
    return rows


def _step(model: nn.Module, mode: str, variant: str, settings: ModelSettings, images, targets) -> Callable[[], None]:
    """A train or inference step of a copy of `model` prepared for `variant`."""
    module, amp, channels_last = prepare(model, variant, settings)
    x = images.contiguous(memory_format=torch.channels_last) if channels_last else images
    if mode == "train":
        return train_step(model, module, x, targets, amp, settings.image_size)
    if mode == "infer":
        return infer_step(module, x, amp)
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
