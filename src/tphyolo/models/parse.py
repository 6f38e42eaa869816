"""YOLOv5-format model yaml (as a dict) -> layers, their inputs and the outputs to keep.

The yaml holds `nc`, `depth_multiple`, `width_multiple`, `anchors` (a list of per-level flat pixel lists
`[w0, h0, w1, h1, ...]`, or an int: anchors per level, to be fitted to the data later) and two lists of rows,
`backbone` and `head`, each row `[from, number, module, args]`. `from` is a layer index, -1 for the previous
layer (or the image for layer 0), other negative values counting back, or a list of those. Module names
resolve through `tphyolo.models.registry`; string arguments resolve through `SYMBOLS` and `STRING_ARGS`.
Nothing is evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from tphyolo.models.registry import resolve_layer

REQUIRED_KEYS = ("nc", "depth_multiple", "width_multiple", "anchors", "backbone", "head")
SYMBOLS = ("nc", "anchors", "None", "True", "False")
STRING_ARGS = frozenset({"nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area"})
CHANNEL_DIVISOR = 8

Source = int | tuple[int, ...]


@dataclass(frozen=True)
class ParsedModel:
    """What the parser makes of a model yaml.

    layers: one module per yaml row (the last one the detection head).
    sources: per layer, the absolute index of its input layer (-1 = the image) or a tuple of them.
    save: indices of layers whose outputs later layers read (besides the layer right after).
    channels: output channel count of each layer.
    anchors_need_fitting: the yaml gave only a number of anchors; the head holds placeholders.
    """

    layers: list[nn.Module]
    sources: list[Source]
    save: frozenset[int]
    channels: list[int]
    anchors_need_fitting: bool


def make_divisible(x: float, divisor: int = CHANNEL_DIVISOR) -> int:
    """Smallest multiple of `divisor` that is >= x."""
    return math.ceil(x / divisor) * divisor


def parse_model(cfg: Mapping[str, Any], *, in_channels: int = 3) -> ParsedModel:
    """Builds the layers a model yaml describes; ValueError naming the layer on any problem."""
    missing = [key for key in REQUIRED_KEYS if key not in cfg]
    if missing:
        raise ValueError(f"model yaml lacks {missing}; a YOLOv5-format model yaml needs {list(REQUIRED_KEYS)}")
    nc, gd, gw, anchors = cfg["nc"], cfg["depth_multiple"], cfg["width_multiple"], cfg["anchors"]
    if not isinstance(nc, int) or nc < 1:
        raise ValueError(f"model yaml: nc must be a positive int, got {nc!r}")
    na = _anchors_per_level(anchors)
    no = na * (nc + 5)
    symbols = {"nc": nc, "anchors": anchors, "None": None, "True": True, "False": False}

    rows = list(cfg["backbone"]) + list(cfg["head"])
    layers: list[nn.Module] = []
    sources: list[Source] = []
    channels: list[int] = []
    save: set[int] = set()
    anchors_need_fitting = False
    for i, row in enumerate(rows):
        if not isinstance(row, Sequence) or isinstance(row, str) or len(row) != 4:
            raise ValueError(f"layer {i}: a row must be [from, number, module, args], got {row!r}")
        raw_from, number, name, raw_args = row
        try:
            entry = resolve_layer(name)
        except KeyError as err:
            raise ValueError(f"layer {i}: {err.args[0]}") from None
        source = _absolute_source(i, raw_from)
        args = [_resolve_arg(i, name, a, symbols) for a in (raw_args or [])]
        if not isinstance(number, int) or number < 1:
            raise ValueError(f"layer {i} ({name}): number must be a positive int, got {number!r}")
        n = max(round(number * gd), 1) if number > 1 else number

        def channels_of(j: int) -> int:
            return in_channels if j == -1 else channels[j]

        if entry.role in ("conv", "csp"):
            if not isinstance(source, int):
                raise ValueError(f"layer {i} ({name}): takes one input, got from={raw_from!r}")
            if not args or not isinstance(args[0], int):
                raise ValueError(f"layer {i} ({name}): first argument must be the output channels, got {args!r}")
            c_out = args[0] if args[0] == no else make_divisible(args[0] * gw)
            args = [channels_of(source), c_out, *args[1:]]
            if entry.role == "csp":
                args.insert(2, n)
                n = 1
        elif entry.role == "concat":
            if not isinstance(source, tuple):
                raise ValueError(f"layer {i} ({name}): needs a list of inputs, got from={raw_from!r}")
            c_out = sum(channels_of(j) for j in source)
        elif entry.role == "detect":
            source = source if isinstance(source, tuple) else (source,)
            if len(args) < 2:
                raise ValueError(f"layer {i} ({name}): arguments must start with [nc, anchors], got {args!r}")
            if isinstance(args[1], int):
                levels = entry.builder.num_levels(len(source))
                args[1] = [[0.0] * (2 * args[1])] * levels
                anchors_need_fitting = True
            args.append([channels_of(j) for j in source])
            c_out = no
        else:
            if not isinstance(source, int):
                raise ValueError(f"layer {i} ({name}): takes one input, got from={raw_from!r}")
            c_out = channels_of(source)

        try:
            module = entry.builder(*args) if n == 1 else nn.Sequential(*(entry.builder(*args) for _ in range(n)))
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"layer {i} ({name}, args {args!r}): {err}") from err
        layers.append(module)
        sources.append(source)
        channels.append(c_out)
        save.update(j for j in (source if isinstance(source, tuple) else (source,)) if j not in (-1, i - 1))
    if not layers:
        raise ValueError("model yaml has no layers")
    return ParsedModel(layers, sources, frozenset(save), channels, anchors_need_fitting)


def _anchors_per_level(anchors: Any) -> int:
    if isinstance(anchors, int) and not isinstance(anchors, bool) and anchors > 0:
        return anchors
    if (
        isinstance(anchors, list)
        and anchors
        and all(isinstance(level, list) and level and len(level) % 2 == 0 for level in anchors)
        and len({len(level) for level in anchors}) == 1
    ):
        return len(anchors[0]) // 2
    raise ValueError(
        f"model yaml: anchors must be a positive int or a list of equal-length [w, h, ...] lists, got {anchors!r}"
    )


def _absolute_source(i: int, raw: Any) -> Source:
    def one(j: Any) -> int:
        if not isinstance(j, int) or isinstance(j, bool):
            raise ValueError(f"layer {i}: from must be an int or a list of ints, got {raw!r}")
        k = j if j >= 0 else i + j
        if not -1 <= k < i or (k == -1 and j != -1):
            raise ValueError(f"layer {i}: from={raw!r} refers to layer {k}, not an earlier layer")
        return k

    if isinstance(raw, list):
        return tuple(one(j) for j in raw)
    return one(raw)


def _resolve_arg(i: int, name: str, value: Any, symbols: Mapping[str, Any]) -> Any:
    if isinstance(value, list):
        return [_resolve_arg(i, name, v, symbols) for v in value]
    if not isinstance(value, str):
        return value
    if value in symbols:
        return symbols[value]
    if value in STRING_ARGS:
        return value
    raise ValueError(
        f"layer {i} ({name}): unknown argument {value!r}; known symbols: {list(SYMBOLS)}, "
        f"strings: {sorted(STRING_ARGS)}"
    )
