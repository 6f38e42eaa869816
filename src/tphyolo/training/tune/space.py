"""What a hyperparameter search searches: a range per hyp key, around the hyp file it starts from.

By default every key of the hyp file is searched within YOLOv5's evolve ranges (`EVOLVE_RANGES`: low, high and
a mutation gain per key); a yaml names keys to search differently:

    lr0: [0.0001, 0.02]                    # low, high (gain 1)
    momentum: {low: 0.8, high: 0.95, gain: 0.3}
    anchor_t: fixed                        # not searched: every trial keeps the hyp file's value

A key with gain 0 is not searched; nor is a key that has no range (`label_smoothing`), nor `copy_paste`, which
changes nothing for box labels (`tphyolo` hyp docs). A range always contains the hyp file's value (it is widened
to it), so that trial 1, which trains on the hyp file as it is, lies in the space every searcher draws from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np

from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

DECIMALS = 5  # searched values are rounded to this many decimal places, as YOLOv5's evolution does
FIXED = "fixed"  # the space yaml's word for "not searched"


def _finite(value: float) -> bool:
    """Whether `value` is a finite number that a float holds (an int of 400 digits is not)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


@dataclass(frozen=True)
class HypRange:
    """Where one hyperparameter is searched: [low, high].

    gain: how strongly evolution mutates it (YOLOv5's evolve gain; 0 holds it at the hyp file's value).
    log: drawn on a log scale by the TPE and random searchers (low must be > 0).
    integer: the value is a whole number (anchors per level).
    """

    low: float
    high: float
    gain: float = 1.0
    log: bool = False
    integer: bool = False

    def __post_init__(self) -> None:
        for name in ("low", "high", "gain"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not _finite(value):
                raise InputError(f"{name} must be a finite number, got {str(value)[:40]}")
        if self.low > self.high:
            raise InputError(f"low {self.low} is above high {self.high}")
        if self.gain < 0:
            raise InputError(f"gain must be >= 0, got {self.gain}")
        if self.log and self.low <= 0:
            raise InputError(f"a log-scale range needs low > 0, got {self.low}")

    @property
    def searched(self) -> bool:
        return self.gain > 0 and self.low < self.high

    def clip(self, value: float) -> float:
        """`value` within [low, high], rounded to DECIMALS places (to a whole number when `integer`)."""
        value = min(max(float(value), self.low), self.high)
        return float(round(value)) if self.integer else round(value, DECIMALS)

    def widened_to(self, value: float) -> HypRange:
        """This range, stretched to contain `value`."""
        return replace(self, low=min(self.low, value), high=max(self.high, value))


# YOLOv5's evolve ranges (its hyperparameter evolution's meta table): key -> (gain, low, high).
_EVOLVE_TABLE: dict[str, tuple[float, float, float]] = {
    "lr0": (1, 1e-5, 1e-1),
    "lrf": (1, 0.01, 1.0),
    "momentum": (0.3, 0.6, 0.98),
    "weight_decay": (1, 0.0, 0.001),
    "warmup_epochs": (1, 0.0, 5.0),
    "warmup_momentum": (1, 0.0, 0.95),
    "warmup_bias_lr": (1, 0.0, 0.2),
    "box": (1, 0.02, 0.2),
    "cls": (1, 0.2, 4.0),
    "cls_pw": (1, 0.5, 2.0),
    "obj": (1, 0.2, 4.0),
    "obj_pw": (1, 0.5, 2.0),
    "iou_t": (0, 0.1, 0.7),
    "anchor_t": (1, 2.0, 8.0),
    "anchors": (2, 2.0, 10.0),
    "fl_gamma": (0, 0.0, 2.0),
    "hsv_h": (1, 0.0, 0.1),
    "hsv_s": (1, 0.0, 0.9),
    "hsv_v": (1, 0.0, 0.9),
    "degrees": (1, 0.0, 45.0),
    "translate": (1, 0.0, 0.9),
    "scale": (1, 0.0, 0.9),
    "shear": (1, 0.0, 10.0),
    "perspective": (0, 0.0, 0.001),
    "flipud": (1, 0.0, 1.0),
    "fliplr": (0, 0.0, 1.0),
    "mosaic": (1, 0.0, 1.0),
    "mixup": (1, 0.0, 1.0),
    "copy_paste": (0, 0.0, 1.0),  # YOLOv5 gives 1; here it pastes nothing for box labels, so it is not searched
}
EVOLVE_RANGES: Mapping[str, HypRange] = MappingProxyType(
    {
        key: HypRange(low, high, gain, log=key == "lr0", integer=key == "anchors")
        for key, (gain, low, high) in _EVOLVE_TABLE.items()
    }
)


@dataclass(frozen=True)
class SearchSpace:
    """The hyp file a search starts from (`base`) and the ranges of the keys it searches (`ranges`, every one
    searched and containing the base value). A trial's hyp is `hyp(values)`: the base with the searched keys
    replaced."""

    base: Mapping[str, float]
    ranges: Mapping[str, HypRange] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.ranges) - set(self.base))
        if unknown:
            raise InputError(f"searched keys {unknown} are not in the hyp file; its keys: {sorted(self.base)}")
        object.__setattr__(self, "base", dict(self.base))  # copies (plain dicts: a space is pickled to trials)
        object.__setattr__(self, "ranges", dict(self.ranges))

    @property
    def keys(self) -> tuple[str, ...]:
        """The searched keys, in the hyp file's order."""
        return tuple(key for key in self.base if key in self.ranges)

    def baseline(self) -> dict[str, float]:
        """The searched keys' values in the hyp file: trial 1's."""
        return {key: self.base[key] for key in self.keys}

    def clip(self, values: Mapping[str, float]) -> dict[str, float]:
        """`values` (searched keys only) clipped to their ranges and rounded (`HypRange.clip`)."""
        unknown = sorted(set(values) - set(self.ranges))
        if unknown:
            raise KeyError(f"not searched: {unknown}; searched: {list(self.keys)}")
        return {key: self.ranges[key].clip(value) for key, value in values.items()}

    def hyp(self, values: Mapping[str, float]) -> dict[str, float]:
        """A whole hyp mapping: the base with `values` (clipped) in place of its searched keys; whole numbers
        stay ints so that the result is a hyp file `load_hyp` accepts."""
        merged = {**self.base, **self.clip(values)}
        return {key: int(v) if key in self.ranges and self.ranges[key].integer else v for key, v in merged.items()}

    def sample(self, rng: np.random.Generator) -> dict[str, float]:
        """A point drawn uniformly from every range (log-uniformly where `log`)."""
        values = {}
        for key in self.keys:
            span = self.ranges[key]
            if span.log:
                value = math.exp(rng.uniform(math.log(span.low), math.log(span.high)))
            else:
                value = rng.uniform(span.low, span.high)
            values[key] = span.clip(value)
        return values


def build_search_space(
    base: Mapping[str, float], *, overrides: Mapping[str, HypRange | None] | None = None
) -> SearchSpace:
    """The space searched around the hyp `base`: EVOLVE_RANGES for its keys, `overrides` replacing them (None:
    not searched). Ranges are widened to contain the base values; keys left unsearched keep their base value.
    Raises ValueError for an override of a key the hyp file does not have."""
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise InputError(f"the search space names {unknown}, which the hyp file does not set; it sets {list(base)}")
    ranges = {}
    for key, value in base.items():
        span = overrides[key] if key in overrides else EVOLVE_RANGES.get(key)
        if span is not None and span.searched:
            ranges[key] = span.widened_to(value)
    return SearchSpace(base, ranges)


def load_space_overrides(path: str | Path) -> dict[str, HypRange | None]:
    """The ranges a space yaml sets (module docstring), None for a key it marks `fixed`. Raises ValueError
    naming the file and the key for anything else."""
    data = load_yaml_file(path)
    if not isinstance(data, Mapping):
        raise InputError(f"{path}: a search space is a mapping of hyp names to ranges, got {type(data).__name__}")
    ranges: dict[str, HypRange | None] = {}
    for key, spec in data.items():
        try:
            ranges[key] = _parse_range(spec)
        except (TypeError, ValueError) as error:
            raise InputError(f"{path}: {key}: {error}") from None
    return ranges


def _parse_range(spec: object) -> HypRange | None:
    if spec == FIXED:
        return None
    if isinstance(spec, list) and len(spec) == 2:
        return HypRange(*spec)
    if isinstance(spec, Mapping):
        allowed = {"low", "high", "gain", "log", "integer"}
        if set(spec) - allowed or not {"low", "high"} <= set(spec):
            raise InputError(f"a range mapping has low and high, and may have gain, log, integer; got {sorted(spec)}")
        for flag in ("log", "integer"):
            if flag in spec and not isinstance(spec[flag], bool):
                raise InputError(f"{flag} must be true or false, got {spec[flag]!r}")
        return HypRange(**spec)
    raise InputError(f"expected [low, high], {{low: .., high: .., gain: ..}} or {FIXED!r}, got {spec!r}")
