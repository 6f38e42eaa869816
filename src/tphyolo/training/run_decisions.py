"""The layout and autocast a training run runs with: decided once (`tphyolo.runtime.decisions`: a flag,
--deterministic, what `tphyolo doctor --tune` kept, else the rule), kept in its checkpoints (`RUNTIME_KEY` in
train_args), and kept by a resume, so that a resumed run computes as it began whatever the machine's load or a
later tuning."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.decisions import Decision, decide_runtime

RUNTIME_KEY = "_runtime"  # train_args: the layout and autocast a run trained with
AMPS = ("off", "bf16", "fp16")


def training_runtime(
    runtime: RuntimeConfig, device: torch.device, *, architecture: str, resumed: dict[str, Any] | None, source: str
) -> tuple[RuntimeConfig, dict[str, Decision]]:
    """`runtime` with the layout and autocast left automatic decided for training `architecture` on `device`, and
    the decisions ({"layout", "precision", "threads"}); `resumed`: the train_args of the checkpoint a run
    resumes (`source`, its path), whose RUNTIME_KEY, when valid, fills what the flags left automatic."""
    runtime_out, decisions = decide_runtime(runtime, device, mode="train", architecture=architecture)
    ran = (resumed or {}).get(RUNTIME_KEY)
    if isinstance(ran, dict) and type(ran.get("channels_last")) is bool and ran.get("amp") in AMPS:
        why = f"as {source} ran"
        if runtime.channels_last is None and not runtime.deterministic:
            runtime_out = replace(runtime_out, channels_last=ran["channels_last"])
            decisions["layout"] = Decision("NHWC" if ran["channels_last"] else "NCHW", "resumed", why)
        if runtime.amp == "auto" and not runtime.half and not runtime.deterministic:
            runtime_out = replace(runtime_out, amp=ran["amp"])
            decisions["precision"] = Decision("fp32" if ran["amp"] == "off" else ran["amp"], "resumed", why)
    threads = Decision(str(torch.get_num_threads()), "rule", "PyTorch's intra-op threads")
    return runtime_out, {**decisions, "threads": threads}


def ran_with(runtime: RuntimeConfig) -> dict[str, Any]:
    """What a checkpoint keeps under RUNTIME_KEY of a run on `runtime` (decided: no automatic setting left)."""
    return {"channels_last": bool(runtime.channels_last), "amp": runtime.amp}
