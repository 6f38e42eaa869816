"""The layers a model yaml may name: module name -> (builder, role).

A yaml row is `[from, number, module, args]`. `module` is looked up here (`nn.Upsample` and `Upsample` both
work, see `ALIASES`); nothing is ever evaluated. The `role` tells the parser (`tphyolo.models.parse`) how to
derive the builder's arguments from the yaml args and the channel counts of earlier layers:

- "conv":   builder(c_in, c_out, *args[1:]). c_in is the channel count of the `from` layer; c_out is
            args[0] scaled by width_multiple and rounded up to a multiple of 8 (unless it equals the head's
            output count). `number` > 1 stacks that many copies in an nn.Sequential.
- "csp":    builder(c_in, c_out, n, *args[1:]), channels as for "conv"; the repeat count `number`
            (after depth scaling, max(round(number * depth_multiple), 1) when number > 1) is passed as `n`
            and the layer itself is not repeated.
- "concat": builder(*args); `from` is a list and c_out is the sum of the channels of those layers.
- "detect": builder(*args, [channels of each `from` layer]); the builder is a `DetectionHead` subclass
            (see `tphyolo.models.heads`) and args are [nc, anchors]. An integer `anchors` means that many
            anchors per level, to be fitted later: the parser passes placeholders for
            `builder.num_levels(len(from))` levels.
- "plain":  builder(*args); c_out = c_in (upsampling, pooling, ...).

To add a layer, add one line to `LAYERS` (its module must not import this file).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.attention import C3TR
from tphyolo.models.blocks import C3, SPP, SPPF, Bottleneck, Concat, Conv, Focus
from tphyolo.models.cbam import CBAM
from tphyolo.models.clla import CLLADetect
from tphyolo.models.heads import Detect
from tphyolo.models.swin import C3STR

ROLES = ("conv", "csp", "concat", "detect", "plain")


@dataclass(frozen=True)
class LayerEntry:
    """How to build one named layer: `builder(*derived_args)`; `role` is one of ROLES."""

    builder: Callable[..., nn.Module]
    role: str

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise InputError(f"unknown layer role {self.role!r}; known: {ROLES}")


LAYERS: dict[str, LayerEntry] = {
    "Conv": LayerEntry(Conv, "conv"),
    "Bottleneck": LayerEntry(Bottleneck, "conv"),
    "Focus": LayerEntry(Focus, "conv"),
    "SPP": LayerEntry(SPP, "conv"),
    "SPPF": LayerEntry(SPPF, "conv"),
    "CBAM": LayerEntry(CBAM, "conv"),
    "C3": LayerEntry(C3, "csp"),
    "C3TR": LayerEntry(C3TR, "csp"),
    "C3STR": LayerEntry(C3STR, "csp"),  # shift mask as in the released models
    "C3STRStandard": LayerEntry(partial(C3STR, shift_mask="standard"), "csp"),  # Swin paper's shift mask
    "Concat": LayerEntry(Concat, "concat"),
    "Upsample": LayerEntry(nn.Upsample, "plain"),
    "Detect": LayerEntry(Detect, "detect"),
    "CLLADetect": LayerEntry(CLLADetect, "detect"),
}

# Spellings found in YOLOv5-format yaml files -> names in LAYERS.
ALIASES: dict[str, str] = {
    "nn.Upsample": "Upsample",
    "torch.nn.Upsample": "Upsample",
}


def resolve_layer(name: str) -> LayerEntry:
    """The entry for a yaml module name; KeyError listing the known names if there is none."""
    entry = LAYERS.get(ALIASES.get(name, name))
    if entry is None:
        raise KeyError(f"unknown module {name!r}; known: {sorted(LAYERS) + sorted(ALIASES)}")
    return entry
