"""`bench model`: a whole model's train step and inference under each runtime variant, against the same model
in the "eager" variant (`BASELINE`), their calls interleaved in one run. The comparison with the original
computation (its attention blocks and loss) is benchmarks/model_vs_original.py, which times the same steps.

A variant is a `RuntimeConfig`: the runtime flags as given, with what the variant's name adds
(`variant_runtime`): "eager" (not compiled, NCHW), "channels_last" (NHWC), "amp" (autocast), "compile"
(torch.compile, the runtime's mode or "default"), "amp+compile" and "decided" (the layout and precision decided
for the mode as every command decides them, `tphyolo.runtime.decisions`: a flag, a kept tuning or the rule);
elsewhere the automatic layout of inference (NHWC on the CPU) does not apply, so that eager and channels_last
compare the two.
`--channels-last`, `--amp bf16|fp16` and `--sdpa-backend` apply to every variant, the baseline included; under
`--amp auto` the amp variants autocast to the device's dtype and the others run fp32; under `--amp off` an amp
variant is refused. Each variant's copy of the model is prepared by its RuntimeConfig (`prepare_model`,
`prepare_images`, `autocast`, `sdpa_context`), as val and predict are.

Train step: forward in train mode, the loss (`YoloLoss`, `detection_loss`) on synthetic targets (20 boxes per
image, hyp "scratch-low" scaled to the model), backward, SGD step (momentum 0.937, Nesterov), with a GradScaler
under fp16. Inference: eval-mode forward under no_grad. Reported per call, plus images per second, with the
autocast dtype, memory format and compile mode that ran. The eager variant's own row, when it is chosen, has no
baseline: it is the baseline of the others.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from torch import nn

from tphyolo.bench.report import Row, significant
from tphyolo.bench.timing import paired_speedup, peak_memory_mb, time_calls
from tphyolo.data.letterbox import check_imgsz
from tphyolo.errors import InputError
from tphyolo.models.build import build_model
from tphyolo.runtime.config import RuntimeConfig, autocast, sdpa_context
from tphyolo.runtime.decisions import decide_runtime
from tphyolo.training.hyp import load_hyp, scale_hyp
from tphyolo.training.loss import YoloLoss

VARIANTS = ("eager", "channels_last", "amp", "compile", "amp+compile", "decided")
AMP_VARIANTS = ("amp", "amp+compile")
MODES = ("train", "infer")
BOXES_PER_IMAGE = 20
BASELINE = "eager, this package"  # what every row but the eager variant's is timed against


@dataclass(frozen=True)
class ModelSettings:
    model: str = "tph-yolov5s"
    image_size: int = 640
    batch: int = 2
    num_classes: int = 10
    variants: tuple[str, ...] = ("eager", "channels_last")
    modes: tuple[str, ...] = MODES
    warmup: int = 1
    repeats: int = 3


def variant_runtime(runtime: RuntimeConfig, variant: str, *, device: torch.device) -> RuntimeConfig:
    """The RuntimeConfig `variant` runs on `device` (see the module docstring); raises ValueError for an
    unknown variant and for an amp variant under amp "off"."""
    if variant not in VARIANTS:
        raise InputError(f"unknown variant {variant!r}; known: {VARIANTS}")
    if variant == "decided":
        return replace(runtime, compile="off")  # layout and precision as given, or as decided per mode
    amp = runtime.amp
    if variant in AMP_VARIANTS:
        if amp == "off":
            raise InputError(f"variant {variant!r} autocasts, but the runtime says --amp off")
        if amp == "auto":
            amp = "fp16" if device.type == "cuda" and not torch.cuda.is_bf16_supported() else "bf16"
    elif amp == "auto":
        amp = "off"
    compiled = runtime.compile if runtime.compile != "off" else "default"
    return replace(
        runtime,
        amp=amp,
        channels_last=bool(runtime.channels_last) or variant == "channels_last",
        compile=compiled if variant.endswith("compile") else "off",
    )


def variant_runtimes(
    runtime: RuntimeConfig, variants: tuple[str, ...], *, device: torch.device, log: Callable[[str], None] = print
) -> dict[str, RuntimeConfig]:
    """variant name -> its RuntimeConfig, in order; a variant that runs the same as an earlier one under these
    flags (channels_last under --channels-last, amp under --amp bf16) is skipped with a note."""
    runs: dict[str, RuntimeConfig] = {}
    for variant in variants:
        run = variant_runtime(runtime, variant, device=device)
        same = next((name for name, earlier in runs.items() if earlier == run), None)
        if same is not None:
            log(f"variant {variant} runs the same as {same} under these runtime flags; skipped")
        else:
            runs[variant] = run
    return runs


def synthetic_targets(batch: int, num_classes: int, *, seed: int = 0, per_image: int = BOXES_PER_IMAGE) -> torch.Tensor:
    """(batch * per_image, 6) targets [image, class, cx, cy, w, h], box coordinates normalised to [0, 1]."""
    generator = torch.Generator().manual_seed(seed)
    n = batch * per_image
    image = torch.arange(batch).repeat_interleave(per_image).float()
    cls = torch.randint(0, num_classes, (n,), generator=generator).float()
    wh = torch.rand(n, 2, generator=generator) * 0.15 + 0.01
    centre = wh / 2 + torch.rand(n, 2, generator=generator) * (1 - wh)
    return torch.cat([image[:, None], cls[:, None], centre, wh], dim=1)


def synthetic_images(batch: int, image_size: int, *, seed: int = 0) -> torch.Tensor:
    """(batch, 3, image_size, image_size) uint8 noise images, as a loader gives them."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (batch, 3, image_size, image_size), generator=generator, dtype=torch.uint8)


def detection_loss(model: nn.Module, image_size: int) -> YoloLoss:
    """`YoloLoss` of `model`'s head with hyp "scratch-low" scaled to the model and `image_size`."""
    head = model.head
    hyp = scale_hyp(load_hyp("scratch-low"), num_levels=head.nl, num_classes=head.nc, imgsz=image_size)
    return YoloLoss.from_model(model, hyp)


def train_step(model: nn.Module, module: nn.Module, images: torch.Tensor, targets: torch.Tensor,
               runtime: RuntimeConfig, image_size: int, *,
               loss_fn: nn.Module | None = None) -> Callable[[], None]:  # fmt: skip
    """One optimiser step of `module` (`model` prepared by `runtime`; `model` supplies the head for the loss)
    on prepared `images`, under the runtime's autocast, with a GradScaler when it needs one; the loss is
    `loss_fn` (preds, targets) -> (loss, items), default `detection_loss(model, image_size)`."""
    if runtime.half:
        raise InputError("a train step needs fp32 weights; half is for inference")
    device = images.device
    loss_fn = (loss_fn or detection_loss(model, image_size)).to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01, momentum=0.937, nesterov=True)
    scaler = torch.amp.GradScaler(device.type, enabled=runtime.needs_grad_scaler(device))

    def step() -> None:
        module.train()
        optimizer.zero_grad(set_to_none=True)
        with autocast(runtime, device):
            preds = module(images)
        loss, _ = loss_fn(preds, targets)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step


def infer_step(module: nn.Module, images: torch.Tensor, runtime: RuntimeConfig) -> Callable[[], None]:
    """One eval-mode forward of `module` on prepared `images` under no_grad and the runtime's autocast."""

    def step() -> None:
        module.eval()
        with torch.no_grad(), autocast(runtime, images.device):
            module(images)

    return step


def memory_format(module: nn.Module, images: torch.Tensor) -> str:
    """The memory format that ran: "channels_last" when `images` and the convolution weights of `module` are
    NHWC, "contiguous" when both are NCHW, else "mixed"."""
    tensors = [images, *(p for p in module.parameters() if p.dim() == 4)]
    if all(x.is_contiguous() for x in tensors):  # 1 x 1 kernels are both; a (B, 3, H, W) image is not
        return "contiguous"
    return "channels_last" if all(x.is_contiguous(memory_format=torch.channels_last) for x in tensors) else "mixed"


def bench_model(
    settings: ModelSettings,
    *,
    runtime: RuntimeConfig | None = None,
    device: torch.device,
    log: Callable[[str], None] = print,
) -> list[Row]:
    """One Row per (mode, variant) of `settings`: our model under the variant's RuntimeConfig (`variant_runtime`
    of `runtime`, default the default RuntimeConfig) against the same model under the eager variant's
    (`BASELINE`); per mode, the eager steps and every variant's are interleaved in one timing."""

    runtime = runtime or RuntimeConfig()
    runs = variant_runtimes(runtime, settings.variants, device=device, log=log)
    eager = variant_runtime(runtime, "eager", device=device)
    torch.manual_seed(0)
    model = build_model(settings.model, num_classes=settings.num_classes).to(device)
    settings = replace(settings, image_size=check_imgsz(settings.image_size, int(model.stride.max())))
    images = synthetic_images(settings.batch, settings.image_size)
    targets = synthetic_targets(settings.batch, settings.num_classes).to(device)
    rows = []
    with sdpa_context(runtime):
        for mode in settings.modes:
            if mode not in MODES:
                raise InputError(f"mode must be one of {MODES}, got {mode!r}")
            rows += _bench_mode(model, mode, eager, runs, settings, images, targets, device, log)
    return rows


def _bench_mode(model, mode, eager, runs, settings, images, targets, device, log) -> list[Row]:
    """Times one mode: the eager baseline and each variant of `runs` (for "decided", as `decide_runtime`
    decides), each on its own copy of `model` prepared by its RuntimeConfig, their calls interleaved."""
    prepared = {}
    for variant, run in {"eager": eager, **runs}.items():
        if variant == "decided":
            run, _ = decide_runtime(run, device, mode=mode)
        module, x = run.prepare_model(copy.deepcopy(model), device), run.prepare_images(images, device)
        if mode == "train":
            step = train_step(model, module, x, targets, run, settings.image_size)
        else:
            step = infer_step(module, x, run)
        prepared[variant] = (run, step, memory_format(module, x))
    timings = time_calls([step for _, step, _ in prepared.values()], device=device, warmup=settings.warmup,
                         repeats=settings.repeats)  # fmt: skip
    timed = dict(zip(prepared, timings, strict=True))
    base_t = timed["eager"]
    base_mb = peak_memory_mb(prepared["eager"][1], device=device)
    rows = []
    for variant in runs:
        run, step, layout = prepared[variant]
        ours_t = timed[variant]
        ours_mb = base_mb if variant == "eager" else peak_memory_mb(step, device=device)
        per_s = 1e3 * settings.batch
        ran = {"amp": run.amp, "memory_format": layout, "compile": run.compile}
        extra = {"ours_img_s": significant(per_s / ours_t.median_ms)}
        config = f"{settings.model} img{settings.image_size} b{settings.batch} {variant}"
        if variant == "eager":
            row = Row(f"model/{mode}", config, ours_t.median_ms, ours_peak_mb=ours_mb, ours_spread_ms=ours_t.spread_ms,
                      extra=extra | ran)  # fmt: skip
            log(f"{row.name} {row.config}: {ours_t.median_ms:.0f} ms, peak {ours_mb:.0f} MiB (the baseline)")
        else:
            extra |= {"base_img_s": significant(per_s / base_t.median_ms),
                      "paired_speedup": significant(paired_speedup(base_t, ours_t)), **ran}  # fmt: skip
            row = Row(f"model/{mode}", f"{config}, vs {BASELINE}", ours_t.median_ms, base_t.median_ms,
                      ours_peak_mb=ours_mb, baseline_peak_mb=base_mb, ours_spread_ms=ours_t.spread_ms,
                      baseline_spread_ms=base_t.spread_ms, extra=extra)  # fmt: skip
            log(f"{row.name} {row.config}: eager {base_t.median_ms:.0f} ms, {variant} {ours_t.median_ms:.0f} ms, "
                f"speedup {row.speedup:.2f}x (paired {extra['paired_speedup']:.2f}x), "
                f"peak {base_mb:.0f} -> {ours_mb:.0f} MiB")  # fmt: skip
        rows.append(row)
    return rows
