"""What `tphyolo predict` and `tphyolo val` share on the command line: the inference flags (derived from
`InferenceConfig`), the output-folder flags (`OutputDir`) and the device check in the flags' words."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import Any


def add_inference_flags(
    parser: argparse.ArgumentParser, *, defaults: Mapping[str, Any] | None = None, exclude: Iterable[str] = ()
) -> None:
    """The InferenceConfig flags (with this command's `defaults`, without `exclude`) and the OutputDir flags."""
    from tphyolo.engine.inference import InferenceConfig
    from tphyolo.engine.writers import OutputDir
    from tphyolo.flags import add_flags

    add_flags(parser, InferenceConfig, defaults=defaults, exclude=exclude)
    add_flags(parser, OutputDir)


def inference_device(runtime):
    """The torch.device `runtime` runs on, checked by the runtime before anything is loaded."""
    device = runtime.torch_device()
    try:
        runtime.check_device(device)
    except ValueError as error:
        if runtime.half:
            raise ValueError(f"--half needs a CUDA device, got {device}") from error
        raise
    return device
