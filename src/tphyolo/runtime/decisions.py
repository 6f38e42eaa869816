"""What runs: the memory layout and autocast precision a model runs with, decided once, the same whatever the
machine's load, and said.

A setting left automatic (`--channels-last` unset, `--amp auto`) is decided by the first of these that answers:

1. `--deterministic`: the exact path, NCHW fp32 (and PyTorch for checkpoints, `tphyolo.infer`);
2. a kept tuning: `tphyolo doctor --tune` timed the candidates of a training step for this architecture on this
   machine (`tphyolo.runtime.probe`) and kept the fastest in `<user cache>/decisions/`; nothing else measures,
   so a kept decision changes only when the user tunes again (or the key changes: CPU, threads, torch version,
   architecture);
3. the rule (`rule`), a table by device and CPU instruction set that we measured, below.

A setting given as a flag is kept (source "flag"). Every decision carries its source and why (`Decision`); the
commands print them once and write them into the run folder (`decisions.yaml`, `write_decisions`).

The rule, and where each entry comes from (tph-yolov5n, the README main job, 2-core machines):

- training on a CPU with native bf16 (AMX-BF16 or AVX512-BF16, `tphyolo.runtime.cpu_isa`): NHWC with bf16
  autocast. A training step at 320 px, batch 8, took 1347 ms in NHWC bf16 against 4103 ms in NCHW fp32 on an AMD
  EPYC with AVX512-BF16, and NHWC bf16 was the fastest on an AMX Xeon too; the README main job ended at mAP50
  0.805 in bf16 against 0.785 in fp32 (bf16 loses nothing there).
- training on a CPU without native bf16: NCHW fp32 (bf16 is emulated there, slower; the exact path).
- inference on a CPU (PyTorch): NHWC fp32. NHWC ran an inference pass 1.07-2.1x faster than NCHW
  (`benchmarks/memory_format.py`); bf16 autocast moved the README model's mAP50 by 0.007, more than the 0.005
  within which this project counts a lower precision harmless.
- on a GPU: NCHW, with bf16 autocast where the GPU supports it, else fp16 (YOLOv5's and ultralytics' choice).
- elsewhere (MPS): NCHW fp32.

The compiled runtime's precision (`tphyolo.infer.backends.compiled`) follows the same pattern: a flag, a kept
check (`tphyolo doctor --tune --weights`), else its rule (`compiled_precision_rule`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import yaml

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.bounded_json import CacheFileError, read_json_bounded, read_kept_json
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.cpu_isa import CpuInfo, cpu_info
from tphyolo.user_cache import user_cache_dir

LOGGER = logging.getLogger("tphyolo.runtime")

MODES = ("train", "infer")
SOURCES = ("flag", "deterministic", "tuned", "rule", "resumed", "file", "fallback")
CACHE_FOLDER = "decisions"
KEY_VERSION = 1
MAX_FILE_BYTES = 64 << 10  # decisions.yaml is well under 1 KB; a larger one is rewritten whole
FILE = "decisions.yaml"  # what a run folder keeps of the decisions


@dataclass(frozen=True)
class Decision:
    """One setting as it ran: `value` ("NHWC", "bf16", "openvino", "2", ...), `source` (from SOURCES: a flag,
    --deterministic, a kept tuning, the rule, the checkpoint a run resumes, the model file itself, or a fallback
    when the choice could not run) and `why`, in words."""

    value: str
    source: str
    why: str = ""

    def describe(self) -> str:
        return f"{self.value} ({self.source}{': ' + self.why if self.why else ''})"

    def as_dict(self) -> dict[str, str]:
        return {"value": self.value, "source": self.source, "why": self.why}


def describe(decisions: dict[str, Decision]) -> str:
    """One line: each decision by name, with its source and why."""
    return "; ".join(f"{name} {decision.describe()}" for name, decision in decisions.items())


def write_decisions(run_dir: Path, decisions: dict[str, Any]) -> Path:
    """`run_dir/decisions.yaml` with `decisions` (a job's name -> its decisions: name -> Decision, or lists of
    such for an ensemble) as plain YAML, beside what other jobs of the folder wrote there (a training's final
    validation adds "val" to "train"). Returns the file."""
    path = Path(run_dir) / FILE
    plain: dict[str, Any] = {}
    try:
        if path.is_file() and path.stat().st_size <= MAX_FILE_BYTES:
            kept = yaml.safe_load(path.read_text())
            plain = kept if isinstance(kept, dict) else {}
    except (OSError, yaml.YAMLError, RecursionError):
        plain = {}  # rewritten whole
    plain.update({name: _plain(value) for name, value in decisions.items()})
    write_text_atomic(path, yaml.safe_dump(plain, sort_keys=False))
    return path


def _plain(value: Any) -> Any:
    if isinstance(value, Decision):
        return value.as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def layout_name(channels_last: bool) -> str:
    return "NHWC" if channels_last else "NCHW"


def amp_name(amp: str) -> str:
    return "fp32" if amp == "off" else amp


def rule(device: torch.device, mode: str, cpu: CpuInfo) -> tuple[bool, str, str]:
    """The rule's (channels_last, amp, why) for `mode` ("train" or "infer") on `device` (module docstring)."""
    if device.type == "cuda":
        amp = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return False, amp, f"a GPU: NCHW with {amp} autocast"
    if device.type != "cpu":
        return False, "off", f"{device.type}: NCHW fp32"
    if mode == "train":
        if cpu.has_native_bf16:
            return True, "bf16", "a CPU with native bf16: NHWC bf16 autocast, measured fastest for training"
        return False, "off", "a CPU without native bf16: NCHW fp32"
    return True, "off", "inference on the CPU: NHWC fp32"


def compiled_precision_rule(cpu: CpuInfo) -> tuple[str, str]:
    """What a checkpoint compiled to OpenVINO computes in by the rule, and why: bf16 on a CPU with native bf16
    (OpenVINO's own default there; the README main job's model: 1.40x f32, mAP50 0.6921 f32 against 0.6919 bf16
    on the built-in set), fp32 elsewhere (bf16 emulated is slower)."""
    if cpu.has_native_bf16:
        return "bf16", "a CPU with native bf16 (OpenVINO's own default there; --precision fp32 forces exact)"
    return "fp32", "a CPU without native bf16"


def machine_load() -> tuple[float, int]:
    """The 1-minute load average and the CPU cores now, kept beside a measurement (0 where there is no load
    average: Windows); a load above the cores means the measurement timed other work too."""
    try:
        load = os.getloadavg()[0]
    except (OSError, AttributeError):
        load = 0.0
    return round(load, 2), os.cpu_count() or 1


def decisions_dir() -> Path:
    """`<user cache>/decisions`: the decisions kept by `tphyolo doctor --tune`."""
    return user_cache_dir() / CACHE_FOLDER


def tuning_key(device: torch.device, mode: str, architecture: str, cpu: CpuInfo) -> dict[str, Any]:
    """What a kept tuning is valid for: the machine (the CPU's model and flags, or the GPU), torch threads, the
    torch version, the architecture (its name or file) and the mode; not the image size (one decision serves
    every size)."""
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        machine = f"{torch.cuda.get_device_name(device)} sm_{major}{minor}"
    else:
        machine = cpu.fingerprint
    return {"version": KEY_VERSION, "machine": machine, "device": device.type, "threads": torch.get_num_threads(),
            "torch": torch.__version__, "architecture": architecture, "mode": mode}  # fmt: skip


def tuning_path(key: dict[str, Any], folder: Path | None = None) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    return (folder if folder is not None else decisions_dir()) / f"{digest}.json"


def _tuning_entry(entry: Any) -> dict[str, Any]:
    """A kept tuning's content checked: {"key": {...}, "choice": {"channels_last": bool, "amp": str},
    "measured": {...}}. Raises ValueError saying what is missing."""
    if not isinstance(entry, dict) or not isinstance(entry.get("key"), dict):
        raise ValueError("not a kept decision")
    choice = entry.get("choice")
    if not isinstance(choice, dict) or type(choice.get("channels_last")) is not bool or choice.get("amp") not in (
            "off", "bf16", "fp16"):  # fmt: skip
        raise ValueError("no layout and precision in it")
    measured = entry.get("measured") if isinstance(entry.get("measured"), dict) else {}
    return {"key": entry["key"], "choice": {"channels_last": choice["channels_last"], "amp": choice["amp"]},
            "measured": measured}  # fmt: skip


def read_tuning(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The tuning kept at `path` for `key`: {"channels_last": bool, "amp": str, "measured": {...}}, or None when
    there is none. A file that is too large, not JSON, nested past reason or not a tuning is a miss with one
    warning naming it (`read_kept_json`); another key's is a miss without a word."""
    try:
        entry = _tuning_entry(read_kept_json(path, instead="the rule decides"))
    except CacheFileError:
        return None
    except ValueError as error:
        LOGGER.warning("%s: %s; the rule decides", path, error)
        return None
    if entry["key"] != key:
        return None  # another machine's, torch's or architecture's: not this run's decision
    return {**entry["choice"], "measured": entry["measured"]}


def write_tuning(path: Path, key: dict[str, Any], *, channels_last: bool, amp: str, measured: dict) -> None:
    """Keep a tuning (`tphyolo doctor --tune`) at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"key": key, "choice": {"channels_last": channels_last, "amp": amp}, "measured": measured}
    write_text_atomic(path, json.dumps(entry, indent=1) + "\n")


def decide_runtime(
    runtime: RuntimeConfig,
    device: torch.device,
    *,
    mode: str,
    architecture: str | None = None,
    cpu: CpuInfo | None = None,
    folder: Path | None = None,
) -> tuple[RuntimeConfig, dict[str, Decision]]:
    """`runtime` with `channels_last` and `amp` made explicit for `mode` on `device`, and the decisions that
    set them ({"layout": ..., "precision": ...}; module docstring). `architecture`: the model's name or file, the
    key of a kept tuning (None: no tuning is looked up); `cpu`: default this machine's; `folder`: where tunings
    are kept (default `decisions_dir()`). Reads at most one small file; measures nothing."""
    device = torch.device(device)
    cpu = cpu if cpu is not None else cpu_info()
    rule_layout, rule_amp, why = rule(device, mode, cpu)
    tuned = None
    if not runtime.deterministic and architecture is not None and device.type in ("cpu", "cuda"):
        key = tuning_key(device, mode, architecture, cpu)
        path = tuning_path(key, folder)
        if (kept := read_tuning(path, key)) is not None:
            when = kept["measured"].get("date", "?") if isinstance(kept["measured"], dict) else "?"
            tuned = (kept["channels_last"], kept["amp"], f"tphyolo doctor --tune on {when}, kept in {path}")
    if runtime.channels_last is not None:
        layout = Decision(layout_name(runtime.channels_last), "flag", "--channels-last")
    elif runtime.deterministic:
        layout = Decision("NCHW", "deterministic", "--deterministic")
    elif tuned is not None:
        layout = Decision(layout_name(tuned[0]), "tuned", tuned[2])
    else:
        layout = Decision(layout_name(rule_layout), "rule", why)
    if runtime.half:
        precision = Decision("fp16", "flag", "--half: fp16 weights")
        amp = "off"
    elif runtime.amp != "auto":
        precision, amp = Decision(amp_name(runtime.amp), "flag", f"--amp {runtime.amp}"), runtime.amp
    elif runtime.deterministic:
        precision, amp = Decision("fp32", "deterministic", "--deterministic"), "off"
    elif tuned is not None:
        precision, amp = Decision(amp_name(tuned[1]), "tuned", tuned[2]), tuned[1]
    else:
        precision, amp = Decision(amp_name(rule_amp), "rule", why), rule_amp
    decided = replace(runtime, channels_last=layout.value == "NHWC", amp=amp)
    return decided, {"layout": layout, "precision": precision}


def kept_tunings(folder: Path | None = None) -> list[dict[str, Any]]:
    """Every decision kept by `tphyolo doctor --tune` in `folder` (default `decisions_dir()`), for `tphyolo
    doctor`: its key's fields, "choice" ("NHWC bf16"), "measured" (date, load, cores, seconds) and "file"; a file
    that is not one as {"file", "error"}."""
    folder = folder if folder is not None else decisions_dir()
    found: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            entry = _tuning_entry(read_json_bounded(path))
            choice = entry["choice"]
            name = f"{layout_name(choice['channels_last'])} {amp_name(choice['amp'])}"
            found.append({**entry["key"], "choice": name, "measured": entry["measured"], "file": str(path)})
        except (CacheFileError, ValueError) as error:
            found.append({"file": str(path), "error": str(error).removeprefix(f"{path}: ")[:160]})
    return found
