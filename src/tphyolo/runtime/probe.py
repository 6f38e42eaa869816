"""The machine decides: the memory layout (NCHW or NHWC) and autocast dtype (fp32 or bf16) that run a model's
training step or inference fastest here, measured once and kept in the user cache.

`tuned_runtime(runtime, model, device, job)` returns `runtime` with `channels_last` and `amp` filled in where
they were left automatic (`--channels-last` unset, `--amp auto`); a setting given explicitly is kept and narrows
what is timed. The candidates (`candidates`):

- layouts NCHW and NHWC; the first, the baseline, is what the rule of `RuntimeConfig.memory_format` gives
  (NHWC for inference on the CPU, NCHW for training and on GPUs);
- on the CPU, fp32 and, where the CPU has native bf16 (AMX-BF16 or AVX512-BF16, `tphyolo.runtime.cpu_isa`) and
  the mode allows it (`BF16_MODES`), bf16 autocast; on a GPU the dtype of today's rule only (bf16 where the GPU
  supports it, else fp16); on other devices nothing is timed and the rule stands.

Each candidate runs one warm-up step (oneDNN builds its kernels for each layout and dtype on the first call),
then up to MAX_ROUNDS timed steps, interleaved (A B, B A, ...), stopping after the round in which BUDGET_S
seconds have passed; a training step is forward, a loss over every output, and backward, on a copy of the
model (the model itself is untouched), with at most MAX_BATCH images. The fastest median wins, but a candidate
other than the baseline only when it is at least MIN_GAIN times faster (a tie keeps today's rule).

The choice is kept as one JSON file per key in `<user cache>/runtime-probe/` (`probe_cache_dir`), keyed by
the machine (CPU model name and flags, or GPU name and compute capability), torch threads, the torch version,
the model's architecture (its module tree as printed: layers and sizes, not weights), the mode, image size,
timed batch and the candidates. A later run with the same key reads it and times nothing, unless the choice is
provisional (measured under load, or won within the timings' spread) and the machine is quieter now, or older
than a month (`tphyolo.runtime.probe_freshness`, which bounds how often); an unreadable or malformed file is
ignored with one warning line and measured again. Deleting the folder measures everything
again. One INFO line says what was chosen and whether it came from the cache.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.bounded_json import read_json_bounded
from tphyolo.errors import InputError
from tphyolo.runtime.config import RuntimeConfig, autocast
from tphyolo.runtime.cpu_isa import CpuInfo, cpu_info
from tphyolo.runtime.probe_freshness import Conditions, Freshness, current_conditions, spread
from tphyolo.user_cache import user_cache_dir

LOGGER = logging.getLogger("tphyolo.runtime")

MODES = ("train", "infer")
CACHE_FOLDER = "runtime-probe"
CACHE_VERSION = 1
MAX_ROUNDS = 3  # timed steps per candidate, at most
BUDGET_S = 3.0  # no further round once this much has gone into timed rounds (the first round always runs)
MAX_BATCH = 8  # images per timed step, at most (a val batch of 32 is timed at 8)
MIN_GAIN = 1.05  # how much faster than the baseline a candidate must be to replace it
# Where bf16 autocast is a candidate on a CPU with native bf16. Training: the README main job (tph-yolov5n,
# 320 px, 20 epochs, built-in synthetic set) ended at mAP50 0.785 in fp32 (NCHW) and 0.805 in bf16 autocast
# (NHWC): bf16 lost nothing (the bar: no loss over 0.01), so training considers it; the probe still picks it
# only where it is faster (on the Xeon it was measured on, tph-yolov5n's 320 px step was 0.4x in bf16).
# Inference: bf16 autocast changed that job's fp32 model's mAP50 on the built-in val split from 0.785 to 0.778
# (NHWC) and 0.780 (NCHW): more than the 0.005 within which a lower precision counts as harmless, so inference
# stays fp32 unless `--amp bf16` asks.
BF16_MODES: frozenset[str] = frozenset({"train"})

Measure = Callable[["Candidate"], float]  # runs one step of a candidate, returns its seconds


@dataclass(frozen=True)
class ProbeJob:
    """What is timed: a training step ("train") or inference ("infer") of `batch` images of `imgsz` pixels.
    `imgsz_from_model`: the caller left the size to the model (`InferenceConfig.from_model`), so `imgsz` is a
    fallback that whoever loads the model replaces by the size it will run at (its training size,
    `tphyolo.infer.backends.pytorch.settled_job`) before the probe runs."""

    mode: str
    imgsz: int
    batch: int
    imgsz_from_model: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise InputError(f"probe mode must be one of {MODES}, got {self.mode!r}")
        if self.imgsz < 1 or self.batch < 1:
            raise InputError(f"probe needs a positive image size and batch, got {self.imgsz} and {self.batch}")

    @property
    def timed_batch(self) -> int:
        return min(self.batch, MAX_BATCH)


@dataclass(frozen=True)
class Candidate:
    """A layout and an autocast dtype: `channels_last` (NHWC) or not (NCHW), `amp` "off" (fp32), "bf16" or
    "fp16"."""

    channels_last: bool
    amp: str

    @property
    def name(self) -> str:
        return f"{'NHWC' if self.channels_last else 'NCHW'} {'fp32' if self.amp == 'off' else self.amp}"

    def apply(self, runtime: RuntimeConfig) -> RuntimeConfig:
        """`runtime` with this layout and dtype (fp16 weights, `half`, keep amp off)."""
        return replace(runtime, channels_last=self.channels_last, amp="off" if runtime.half else self.amp)


@dataclass(frozen=True)
class Choice:
    """The probe's answer: the `candidate` chosen, each candidate's median `seconds` per step (by name),
    `source` "measured" (now, taking `probe_s`) or "cache", the cache `path`, and its `freshness` (when and how
    it was measured: whether it is provisional, `tphyolo.runtime.probe_freshness`)."""

    candidate: Candidate
    seconds: dict[str, float]
    source: str
    path: Path
    freshness: Freshness
    probe_s: float = 0.0
    why_again: str | None = None  # why a kept choice was measured again, when it was

    def describe(self, job: ProbeJob, device: torch.device) -> str:
        """One line: the choice, each candidate's time per step, where it came from and, when provisional,
        why."""
        times = ", ".join(f"{name} {s * 1e3:.0f} ms" for name, s in self.seconds.items())
        again = f" again ({self.why_again})" if self.why_again else ""
        where = (f"measured{again} in {self.probe_s:.1f} s, kept in {self.path}" if self.source == "measured"
                 else f"from the cache {self.path} (delete it to measure again)")  # fmt: skip
        if self.freshness.provisional:
            where += f"; provisional: {self.freshness.why_provisional()}"
        return (f"runtime probe ({job.mode}, {job.imgsz} px, batch {job.timed_batch}, {device.type}): "
                f"{self.candidate.name} ({times} per step; {where})")  # fmt: skip


def probe_cache_dir() -> Path:
    """`<user cache>/runtime-probe`: one JSON file per measured key."""
    return user_cache_dir() / CACHE_FOLDER


def bf16_allowed(mode: str, cpu: CpuInfo) -> bool:
    """Whether bf16 autocast is a CPU candidate for `mode`: native bf16 on `cpu`, and `mode` in BF16_MODES."""
    return cpu.has_native_bf16 and mode in BF16_MODES


def candidates(runtime: RuntimeConfig, device: torch.device, mode: str, cpu: CpuInfo) -> tuple[Candidate, ...]:
    """What the probe times for `runtime` on `device` in `mode`, the baseline (today's rule) first; empty on a
    device the probe does not time (neither CPU nor CUDA)."""
    if device.type not in ("cpu", "cuda"):
        return ()
    if runtime.channels_last is not None:
        layouts: tuple[bool, ...] = (runtime.channels_last,)
    else:
        rule = runtime.memory_format(device, training=mode == "train") == torch.channels_last
        layouts = (rule, not rule)
    if runtime.half or runtime.amp == "off":
        amps: tuple[str, ...] = ("off",)
    elif runtime.amp != "auto":
        amps = (runtime.amp,)
    elif device.type == "cuda":
        amps = ("bf16" if torch.cuda.is_bf16_supported() else "fp16",)
    else:
        amps = ("off", "bf16") if bf16_allowed(mode, cpu) else ("off",)
    return tuple(Candidate(channels_last=layout, amp=amp) for amp in amps for layout in layouts)


def time_candidates(
    options: Sequence[Candidate], measure: Measure, *, clock: Callable[[], float] = time.perf_counter
) -> dict[Candidate, list[float]]:
    """Each candidate's seconds per timed step: one warm-up call of `measure` each, then up to MAX_ROUNDS
    interleaved rounds (the order reversed every other round), none started after BUDGET_S of them (by
    `clock`)."""
    for option in options:
        measure(option)  # warm-up
    samples: dict[Candidate, list[float]] = {option: [] for option in options}
    start = clock()
    for round_index in range(MAX_ROUNDS):
        for option in options if round_index % 2 == 0 else options[::-1]:
            samples[option].append(measure(option))
        if clock() - start >= BUDGET_S:
            break
    return samples


def pick(options: Sequence[Candidate], seconds: dict[Candidate, float]) -> Candidate:
    """The fastest of `options`, unless the baseline (the first) is within MIN_GAIN of it."""
    baseline, fastest = options[0], min(options, key=lambda option: seconds[option])
    return fastest if seconds[baseline] >= MIN_GAIN * seconds[fastest] else baseline


def decision_margin(options: Sequence[Candidate], seconds: dict[Candidate, float], chosen: Candidate) -> float:
    """How far `pick`'s decision for `chosen` was from going otherwise, relatively: the smallest change of one
    candidate's time that would have changed it (the baseline kept: how much faster the fastest other would have
    had to be to pass MIN_GAIN; another chosen: its lead over every other, the baseline counted at MIN_GAIN)."""
    baseline = options[0]
    if chosen == baseline:
        fastest = min(options[1:], key=lambda option: seconds[option])
        return seconds[fastest] * MIN_GAIN / seconds[baseline] - 1
    leads = [seconds[o] / (MIN_GAIN if o == baseline else 1.0) / seconds[chosen] - 1 for o in options if o != chosen]
    return min(leads)


def machine_name(device: torch.device, cpu: CpuInfo) -> str:
    """What a measurement on `device` is valid for: the CPU's model and flags, or the GPU's name and
    compute capability."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        return f"{torch.cuda.get_device_name(device)} sm_{major}{minor}"
    return cpu.fingerprint


def probe_key(
    model: nn.Module, device: torch.device, job: ProbeJob, options: Sequence[Candidate], cpu: CpuInfo
) -> dict[str, Any]:
    """The key a choice is cached under (JSON-ready; see the module docstring)."""
    return {
        "version": CACHE_VERSION,
        "machine": machine_name(device, cpu),
        "device": device.type,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "model": hashlib.sha256(repr(model).encode()).hexdigest()[:16],
        "mode": job.mode,
        "imgsz": job.imgsz,
        "batch": job.timed_batch,
        "candidates": [option.name for option in options],
    }


def cache_path(key: dict[str, Any], folder: Path) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return folder / f"{digest}.json"


def read_cached(path: Path, key: dict[str, Any], options: Sequence[Candidate]) -> Choice | None:
    """The choice kept at `path` for `key`, or None when there is none; a file that cannot be read, is not
    the probe's JSON, holds another key or names a choice outside `options` is ignored with one warning."""
    if not path.exists():
        return None
    try:
        entry = read_json_bounded(path)
        if not isinstance(entry, dict) or entry.get("key") != key:
            raise ValueError("not a choice for this key")
        chosen = entry["choice"]
        candidate = Candidate(channels_last=chosen["channels_last"], amp=chosen["amp"])
        seconds = {str(name): float(s) for name, s in entry["seconds"].items()}
        if candidate not in options:
            raise ValueError(f"its choice {candidate.name} is not a candidate")
        freshness = Freshness.from_json(entry.get("measured"))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        LOGGER.warning("%s: ignoring an unreadable runtime probe cache file (%s); measuring again", path, error)
        return None
    return Choice(candidate=candidate, seconds=seconds, source="cache", path=path, freshness=freshness)


def write_cached(choice: Choice, key: dict[str, Any]) -> None:
    """Keep `choice` under `key` at `choice.path`; a folder that cannot be written is reported in one warning."""
    chosen = {"channels_last": choice.candidate.channels_last, "amp": choice.candidate.amp}
    entry = {"key": key, "choice": chosen, "name": choice.candidate.name, "seconds": choice.seconds,
             "measured": choice.freshness.as_json()}  # fmt: skip
    try:
        choice.path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(choice.path, json.dumps(entry, indent=1) + "\n")
    except OSError as error:
        LOGGER.warning("%s: could not keep the runtime probe's choice (%s); it is measured again next time",
                       choice.path, error.strerror or error)  # fmt: skip


def step_timer(model: nn.Module, runtime: RuntimeConfig, device: torch.device, job: ProbeJob) -> Measure:
    """A `Measure` that runs one step of `job` for a candidate on a copy of `model` (one copy per layout, made
    on first use), prepared by the candidate's RuntimeConfig as training and inference prepare theirs."""
    training = job.mode == "train"
    generator = torch.Generator().manual_seed(0)
    images = torch.randint(0, 256, (job.timed_batch, 3, job.imgsz, job.imgsz), generator=generator,
                           dtype=torch.uint8)  # fmt: skip
    copies: dict[bool, nn.Module] = {}

    def measure(option: Candidate) -> float:
        run = option.apply(runtime)
        if option.channels_last not in copies:
            placed = run.place_model(copy.deepcopy(model), device, training=training)
            copies[option.channels_last] = placed.train(training)
        module = copies[option.channels_last]
        x = run.prepare_images(images, device, training=training)
        _synchronize(device)
        start = time.perf_counter()
        if training:
            with autocast(run, device):
                outputs = module(x)
            sum(output.float().square().mean() for output in _tensors(outputs)).backward()
            module.zero_grad(set_to_none=True)
        else:
            with torch.no_grad(), autocast(run, device):
                module(x)
        _synchronize(device)
        return time.perf_counter() - start

    return measure


def tuned_runtime(
    runtime: RuntimeConfig,
    model: nn.Module,
    device: torch.device,
    job: ProbeJob,
    *,
    folder: Path | None = None,
    measure: Measure | None = None,
    cpu: CpuInfo | None = None,
    conditions: Conditions | None = None,
) -> RuntimeConfig:
    """`runtime` with `channels_last` and `amp` decided for `model` on `device` in `job`: by the flags where
    they are explicit, else by the probe (cached in `folder`, default `probe_cache_dir()`; a kept choice that is
    provisional or old is measured again, `tphyolo.runtime.probe_freshness`). `measure` (default `step_timer`),
    `cpu` (default this machine's) and `conditions` (default `current_conditions()`) are the probe's clock,
    machine and load. A probe that fails (out of memory, or a model that cannot run random images) keeps the
    baseline, with one warning, and caches nothing."""
    device, cpu = torch.device(device), cpu if cpu is not None else cpu_info()
    job = replace(job, imgsz=_stride_multiple(model, job.imgsz))
    options = candidates(runtime, device, job.mode, cpu)
    if not options:
        return runtime
    if len(options) == 1:
        return options[0].apply(runtime)
    key = probe_key(model, device, job, options, cpu)
    path = cache_path(key, folder if folder is not None else probe_cache_dir())
    now = conditions if conditions is not None else current_conditions()
    choice = read_cached(path, key, options)
    remeasures, why = 0, None
    if choice is not None and (why := choice.freshness.due(now)) is not None:
        why = f"the kept {choice.candidate.name} was {why}"
        choice, remeasures = None, choice.freshness.next_remeasures(now)
    if choice is None:
        choice = _measured_choice(options, measure or step_timer(model, runtime, device, job), path=path, now=now,
                                  remeasures=remeasures)  # fmt: skip
        if choice is None:
            return options[0].apply(runtime)
        choice = replace(choice, why_again=why)
        write_cached(choice, key)
    LOGGER.info("%s", choice.describe(job, device))
    return choice.candidate.apply(runtime)


def _measured_choice(
    options: Sequence[Candidate], measure: Measure, *, path: Path, now: Conditions, remeasures: int
) -> Choice | None:
    """The choice among `options` timed by `measure` now (under `now`, measured again for the `remeasures`-th
    time), or None when the timing fails (said in one warning: the caller keeps the baseline)."""
    start = time.perf_counter()
    try:
        samples = time_candidates(options, measure)
    except Exception as error:  # a model that cannot run the probe's step still runs its own inputs
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:160]
        LOGGER.warning("runtime probe failed (%s: %s); keeping %s", type(error).__name__, reason, options[0].name)
        return None
    seconds = {option: statistics.median(times) for option, times in samples.items()}
    chosen = pick(options, seconds)
    freshness = Freshness.measured(now, spread=max(spread(times) for times in samples.values()),
                                   margin=decision_margin(options, seconds, chosen), remeasures=remeasures)  # fmt: skip
    return Choice(candidate=chosen, seconds={o.name: seconds[o] for o in options}, source="measured", path=path,
                  freshness=freshness, probe_s=time.perf_counter() - start)  # fmt: skip


def cached_choices(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every choice kept in `folder` (default `probe_cache_dir()`), for `tphyolo doctor`: its key's fields,
    "choice" (the candidate's name), "seconds" and "provisional" (`probe_freshness.Freshness.provisional`); an
    unreadable file as {"file", "error"}."""
    folder = folder if folder is not None else probe_cache_dir()
    found: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = read_json_bounded(path)
            provisional = Freshness.from_json(entry.get("measured")).provisional
            found.append({**entry["key"], "choice": entry["name"], "seconds": entry["seconds"], "file": str(path),
                          "provisional": provisional})  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            found.append({"file": str(path), "error": str(error)[:160]})
    return found


def _stride_multiple(model: nn.Module, side: int) -> int:
    """`side` rounded up to a multiple of the model's largest stride (a side it can run), when it has one."""
    stride = getattr(model, "stride", None)
    step = int(torch.as_tensor(stride).max()) if stride is not None else 1
    return -(-side // step) * step


def _tensors(outputs: Any) -> list[torch.Tensor]:
    """The tensors of a model's output: a tensor, or a list/tuple of them (nested)."""
    if isinstance(outputs, torch.Tensor):
        return [outputs]
    return [t for item in outputs for t in _tensors(item)]


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
