"""`tphyolo doctor --tune`: the layouts (NCHW, NHWC) and autocast dtypes (fp32, bf16) of a model's training
step timed on this machine, and the fastest kept as this machine's decision for that architecture
(`tphyolo.runtime.decisions`). Nothing else times: training, validation and inference read the kept decision or
apply the rule, so a busy machine cannot change what a run does.

The candidates (`candidates`): both layouts, the rule's first (the baseline); on the CPU fp32 and, where the CPU
has native bf16 (`tphyolo.runtime.cpu_isa`), bf16 autocast; on a GPU the rule's dtype. Each runs one warm-up step
(oneDNN builds its kernels per layout and dtype on the first call), then up to MAX_ROUNDS interleaved timed steps
(`tphyolo.runtime.interleaved`) within BUDGET_S; a step is forward, a loss over every output and backward on a copy
of the model (the model itself is untouched). The fastest median wins, but a candidate other than the baseline
only when it is at least MIN_GAIN times faster (a tie keeps the rule). The load average and cores at the time are
kept beside the choice, and `tphyolo doctor` marks a tuning made on a busy machine.
"""

from __future__ import annotations

import copy
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from tphyolo.errors import InputError
from tphyolo.runtime.config import RuntimeConfig, autocast
from tphyolo.runtime.cpu_isa import CpuInfo, cpu_info
from tphyolo.runtime.decisions import (
    MODES,
    amp_name,
    layout_name,
    machine_load,
    rule,
    tuning_key,
    tuning_path,
    write_tuning,
)
from tphyolo.runtime.interleaved import time_interleaved

MAX_ROUNDS = 3  # timed steps per candidate, at most
BUDGET_S = 3.0  # no further round once this much has gone into timed rounds (the first round always runs)
MAX_BATCH = 8  # images per timed step, at most
MIN_GAIN = 1.05  # how much faster than the baseline a candidate must be to replace it

Measure = Callable[["Candidate"], object]  # runs one step of a candidate


@dataclass(frozen=True)
class Candidate:
    """A layout and an autocast dtype: `channels_last` (NHWC) or not (NCHW), `amp` "off" (fp32), "bf16" or
    "fp16"."""

    channels_last: bool
    amp: str

    @property
    def name(self) -> str:
        return f"{layout_name(self.channels_last)} {amp_name(self.amp)}"


@dataclass(frozen=True)
class Tuning:
    """What `tune` found: the `chosen` candidate, each candidate's median `seconds` per step (by name), the
    `load` average and `cores` while it timed, and the `path` it was kept at."""

    chosen: Candidate
    seconds: dict[str, float]
    load: float
    cores: int
    path: Path

    @property
    def busy(self) -> bool:
        """More runnable processes than cores while it timed: the steps timed other work too."""
        return self.load > self.cores

    def line(self) -> str:
        times = ", ".join(f"{name} {s * 1e3:.0f} ms" for name, s in self.seconds.items())
        busy = f"; busy machine (load {self.load:.1f} on {self.cores} cores): tune again when quiet"
        return f"{self.chosen.name} ({times} per step; kept in {self.path}){busy if self.busy else ''}"


def candidates(device: torch.device, mode: str, cpu: CpuInfo) -> tuple[Candidate, ...]:
    """What `tune` times on `device` in `mode`, the rule's choice first; empty on a device it does not time."""
    if device.type not in ("cpu", "cuda"):
        return ()
    channels_last, amp, _ = rule(device, mode, cpu)
    amps = (amp,) if device.type == "cuda" else ("off", "bf16") if cpu.has_native_bf16 else ("off",)
    options = [Candidate(layout, dtype) for dtype in amps for layout in (False, True)]
    baseline = Candidate(channels_last, amp)
    return (baseline, *[option for option in options if option != baseline])


def pick(options: Sequence[Candidate], seconds: dict[Candidate, float]) -> Candidate:
    """The fastest of `options`, unless the baseline (the first) is within MIN_GAIN of it."""
    baseline, fastest = options[0], min(options, key=lambda option: seconds[option])
    return fastest if seconds[baseline] >= MIN_GAIN * seconds[fastest] else baseline


def step_timer(model: nn.Module, device: torch.device, mode: str, *, imgsz: int, batch: int) -> Measure:
    """A `Measure` that runs one step of `mode` for a candidate on a copy of `model` (one copy per layout, made
    on first use), prepared as training and inference prepare theirs."""
    training = mode == "train"
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (min(batch, MAX_BATCH), 3, imgsz, imgsz), generator=generator, dtype=torch.uint8)
    copies: dict[bool, nn.Module] = {}

    def measure(option: Candidate) -> None:
        run = RuntimeConfig(channels_last=option.channels_last, amp=option.amp)
        if option.channels_last not in copies:
            placed = run.place_model(copy.deepcopy(model), device, training=training)
            copies[option.channels_last] = placed.train(training)
        module = copies[option.channels_last]
        x = run.prepare_images(images, device, training=training)
        if training:
            with autocast(run, device):
                outputs = module(x)
            sum(output.float().square().mean() for output in _tensors(outputs)).backward()
            module.zero_grad(set_to_none=True)
        else:
            with torch.no_grad(), autocast(run, device):
                module(x)

    return measure


def tune(
    model: nn.Module,
    device: torch.device,
    *,
    mode: str,
    architecture: str,
    imgsz: int,
    folder: Path | None = None,
    measure: Measure | None = None,
    clock: Callable[[], float] = time.perf_counter,
    cpu: CpuInfo | None = None,
    load: tuple[float, int] | None = None,
) -> Tuning | None:
    """Time the candidates of `model`'s `mode` step (MAX_BATCH images) at `imgsz` on `device` and keep the fastest for
    `architecture` (in `folder`, default `decisions.decisions_dir()`), the load average and cores kept beside it
    (`load`, default this machine's now). `measure` and `clock` replace the step and the clock (tests). None when
    only one candidate exists (nothing to decide)."""
    if mode not in MODES:
        raise InputError(f"tuning mode must be one of {MODES}, got {mode!r}")
    device, cpu = torch.device(device), cpu if cpu is not None else cpu_info()
    options = candidates(device, mode, cpu)
    if len(options) < 2:
        return None
    imgsz = _stride_multiple(model, imgsz)
    measure = measure or step_timer(model, device, mode, imgsz=imgsz, batch=MAX_BATCH)
    calls = [lambda option=option: measure(option) for option in options]
    samples = time_interleaved(calls, rounds=MAX_ROUNDS, budget_s=BUDGET_S, clock=clock,
                               after_call=lambda: _synchronize(device))  # fmt: skip
    seconds = {option: statistics.median(times) for option, times in zip(options, samples, strict=True)}
    chosen = pick(options, seconds)
    load_now, cores = load if load is not None else machine_load()
    key = tuning_key(device, mode, architecture, cpu)
    path = tuning_path(key, folder)
    measured = {"date": time.strftime("%Y-%m-%d %H:%M", time.localtime()), "load": load_now, "cores": cores,
                "imgsz": imgsz, "seconds": {o.name: round(s, 6) for o, s in seconds.items()}}  # fmt: skip
    write_tuning(path, key, channels_last=chosen.channels_last, amp=chosen.amp, measured=measured)
    return Tuning(chosen, {o.name: s for o, s in seconds.items()}, load_now, cores, path)


def _stride_multiple(model: nn.Module, side: int) -> int:
    """`side` rounded up to a multiple of the model's largest stride (a side it can run), when it has one."""
    stride = getattr(model, "stride", None)
    step = int(torch.as_tensor(stride).max()) if stride is not None else 1
    return -(-side // step) * step


def _tensors(outputs: object) -> list[torch.Tensor]:
    """The tensors of a model's output: a tensor, or a list/tuple of them (nested)."""
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for item in outputs for t in _tensors(item)]  # type: ignore[union-attr]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
