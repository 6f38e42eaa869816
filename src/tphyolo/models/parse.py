"""YOLOv5-format model yaml (as a dict) -> layers, their inputs and the outputs to keep.

The yaml holds `nc`, `depth_multiple`, `width_multiple`, `anchors` (a list of per-level flat pixel lists
`[w0, h0, w1, h1, ...]`, or an int: anchors per level, to be fitted to the data later) and two lists of rows,
`backbone` and `head`, each row `[from, number, module, args]`. `from` is a layer index, -1 for the previous
layer (or the image for layer 0), other negative values counting back, or a list of those. Module names
resolve through `tphyolo.models.registry`; string arguments resolve through `SYMBOLS` and `STRING_ARGS`.
Nothing is evaluated.

Sizes are bounded before any layer is built, so that a small yaml (or a checkpoint's embedded one) cannot make
the build run for ever or exhaust memory: at most `MAX_LAYERS` rows, `MAX_REPEATS` repeats of a row (after
`depth_multiple`), `MAX_CHANNELS` channels (after `width_multiple`), `MAX_CLASSES` classes, `MAX_ANCHORS`
anchors per level, other integer arguments (kernels, strides, pools, heads) at most `MAX_SMALL_ARG`, and
multiples in (0, `MAX_MULTIPLE`].
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import nn

from tphyolo.errors import InputError
from tphyolo.models.registry import resolve_layer

REQUIRED_KEYS = ("nc", "depth_multiple", "width_multiple", "anchors", "backbone", "head")
SYMBOLS = ("nc", "anchors", "None", "True", "False")
STRING_ARGS = frozenset({"nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area"})
CHANNEL_DIVISOR = 8
MAX_LAYERS = 1000
MAX_REPEATS = 100
MAX_CHANNELS = 4096
MAX_CLASSES = 10_000
MAX_ANCHORS = 32
MAX_SMALL_ARG = 256
MAX_MULTIPLE = 4.0

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
        raise InputError(f"model yaml lacks {missing}; a YOLOv5-format model yaml needs {list(REQUIRED_KEYS)}")
    nc, gd, gw, anchors = cfg["nc"], cfg["depth_multiple"], cfg["width_multiple"], cfg["anchors"]
    if not isinstance(nc, int) or nc < 1:
        raise InputError(f"model yaml: nc must be a positive int, got {nc!r}")
    if nc > MAX_CLASSES:
        raise InputError(f"model yaml: nc={nc} is above the limit of {MAX_CLASSES} classes")
    for key, value in (("depth_multiple", gd), ("width_multiple", gw)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= MAX_MULTIPLE:
            raise InputError(f"model yaml: {key} must be a number in (0, {MAX_MULTIPLE:g}], got {value!r}")
    na = _anchors_per_level(anchors)
    no = na * (nc + 5)
    symbols = {"nc": nc, "anchors": anchors, "None": None, "True": True, "False": False}

    for part in ("backbone", "head"):
        if not isinstance(cfg[part], (list, tuple)):
            raise InputError(f"model yaml: {part} must be a list of rows, got {type(cfg[part]).__name__}")
    rows = list(cfg["backbone"]) + list(cfg["head"])
    if len(rows) > MAX_LAYERS:
        raise InputError(f"model yaml: {len(rows)} layers, above the limit of {MAX_LAYERS}")
    layers: list[nn.Module] = []
    sources: list[Source] = []
    channels: list[int] = []
    save: set[int] = set()
    anchors_need_fitting = False
    for i, row in enumerate(rows):
        if not isinstance(row, Sequence) or isinstance(row, str) or len(row) != 4:
            raise InputError(f"layer {i}: a row must be [from, number, module, args], got {row!r}")
        raw_from, number, name, raw_args = row
        try:
            entry = resolve_layer(name)
        except KeyError as err:
            raise InputError(f"layer {i}: {err.args[0]}") from None
        source = _absolute_source(i, raw_from)
        args = [_resolve_arg(i, name, a, symbols) for a in (raw_args or [])]
        if not isinstance(number, int) or number < 1:
            raise InputError(f"layer {i} ({name}): number must be a positive int, got {number!r}")
        n = max(round(number * gd), 1) if number > 1 else number
        if n > MAX_REPEATS:
            raise InputError(f"layer {i} ({name}): {n} repeats, above the limit of {MAX_REPEATS}")
        if entry.role != "detect":
            _check_sizes(i, name, args)

        def channels_of(j: int) -> int:
            return in_channels if j == -1 else channels[j]

        if entry.role in ("conv", "csp"):
            if not isinstance(source, int):
                raise InputError(f"layer {i} ({name}): takes one input, got from={raw_from!r}")
            if not args or not isinstance(args[0], int):
                raise InputError(f"layer {i} ({name}): first argument must be the output channels, got {args!r}")
            c_out = args[0] if args[0] == no else make_divisible(args[0] * gw)
            if c_out > MAX_CHANNELS:
                raise InputError(f"layer {i} ({name}): {c_out} channels, above the limit of {MAX_CHANNELS}")
            args = [channels_of(source), c_out, *args[1:]]
            if entry.role == "csp":
                args.insert(2, n)
                n = 1
        elif entry.role == "concat":
            if not isinstance(source, tuple):
                raise InputError(f"layer {i} ({name}): needs a list of inputs, got from={raw_from!r}")
            c_out = sum(channels_of(j) for j in source)
        elif entry.role == "detect":
            source = source if isinstance(source, tuple) else (source,)
            if len(args) < 2:
                raise InputError(f"layer {i} ({name}): arguments must start with [nc, anchors], got {args!r}")
            if isinstance(args[1], int):
                if not 0 < args[1] <= MAX_ANCHORS:
                    raise InputError(f"layer {i} ({name}): anchors per level must be in 1..{MAX_ANCHORS}")
                levels = entry.builder.num_levels(len(source))
                args[1] = [[0.0] * (2 * args[1])] * levels
                anchors_need_fitting = True
            args.append([channels_of(j) for j in source])
            c_out = no
        else:
            if not isinstance(source, int):
                raise InputError(f"layer {i} ({name}): takes one input, got from={raw_from!r}")
            c_out = channels_of(source)

        try:
            module = entry.builder(*args) if n == 1 else nn.Sequential(*(entry.builder(*args) for _ in range(n)))
        except (TypeError, ValueError, RuntimeError) as err:
            raise InputError(f"layer {i} ({name}, args {args!r}): {err}") from err
        layers.append(module)
        sources.append(source)
        channels.append(c_out)
        save.update(j for j in (source if isinstance(source, tuple) else (source,)) if j not in (-1, i - 1))
    if not layers:
        raise InputError("model yaml has no layers")
    return ParsedModel(layers, sources, frozenset(save), channels, anchors_need_fitting)


def _check_sizes(i: int, name: str, args: list) -> None:
    """The first argument (output channels) at most MAX_CHANNELS, every other integer at most MAX_SMALL_ARG."""

    def integers(values: list) -> list[int]:
        out = []
        for v in values:
            if isinstance(v, list):
                out += integers(v)
            elif isinstance(v, int) and not isinstance(v, bool):
                out.append(v)
        return out

    head, rest = integers(args[:1]), integers(args[1:])
    if any(abs(v) > MAX_CHANNELS for v in head) or any(abs(v) > MAX_SMALL_ARG for v in rest):
        raise InputError(
            f"layer {i} ({name}): argument out of bounds in {args!r} (channels at most {MAX_CHANNELS}, "
            f"other integers at most {MAX_SMALL_ARG})"
        )


def _anchors_per_level(anchors: Any) -> int:
    if isinstance(anchors, int) and not isinstance(anchors, bool) and 0 < anchors <= MAX_ANCHORS:
        return anchors
    if (
        isinstance(anchors, list)
        and anchors
        and all(isinstance(level, list) and level and len(level) % 2 == 0 for level in anchors)
        and len({len(level) for level in anchors}) == 1
    ):
        return len(anchors[0]) // 2
    raise InputError(
        f"model yaml: anchors must be a positive int or a list of equal-length [w, h, ...] lists, got {anchors!r}"
    )


def _absolute_source(i: int, raw: Any) -> Source:
    def one(j: Any) -> int:
        if not isinstance(j, int) or isinstance(j, bool):
            raise InputError(f"layer {i}: from must be an int or a list of ints, got {raw!r}")
        k = j if j >= 0 else i + j
        if not -1 <= k < i or (k == -1 and j != -1):
            raise InputError(f"layer {i}: from={raw!r} refers to layer {k}, not an earlier layer")
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
    raise InputError(
        f"layer {i} ({name}): unknown argument {value!r}; known symbols: {list(SYMBOLS)}, "
        f"strings: {sorted(STRING_ARGS)}"
    )
