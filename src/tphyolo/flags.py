"""Command-line flags derived from config dataclasses: one source of truth per setting.

A config field declares its flag with `flag(...)` in place of a plain default:

    conf: float = flag(0.25, "--conf", help="confidence threshold", bounds=FRACTION)

`add_flags(parser, Config)` adds one argparse argument per field that declares a flag, with the field's
default, type (from its annotation), choices, nargs and help; `from_flags(Config, args)` builds the config from
the parsed namespace. So a setting's name, default, choices and help live in one dataclass field.

- A bool field defaulting to False becomes a switch (`--rect`); one defaulting to True must be given a
  negative name (`--no-plots`) and becomes a switch that turns it off.
- A `bool | None` field (None: decided later, "auto") becomes a pair, `--channels-last/--no-channels-last`.
- A tuple field takes one or more values (`nargs="+"`) and is stored as a tuple; with `append=True` it takes
  one value per flag instead, the flag given again for each (`--sdpa-backend flash --sdpa-backend math`).
- With `sep=","` a tuple field takes one value that lists its items (`--blocks c3tr,clla`): split at `sep`,
  blanks around items and empty items dropped, each item converted, checked against `bounds` and `choices`
  (argparse then names the flag and the item), stored as a tuple; the default is shown joined by `sep`.
- `convert` is the argparse `type` of a field whose annotation does not say one (`int | str`: a size or
  "auto"); it converts each value and refuses a bad one with `argparse.ArgumentTypeError`.
- `str | None` and the like take the non-None type; None stays the default. A `Path` field gets a `Path`.
- `required=True`: the command refuses to run without the flag (the field's default serves Python callers).
- The default is appended to the help text, unless it is None, a bool or an empty tuple.
- A numeric field may declare `bounds` (`Bounds`: the values the setting means something for): argparse
  refuses a value outside them at once, in one line naming the flag, before any work, and
  `check_field_types` refuses it on a config built in Python. NaN and infinities are outside every bound.
- A field with `choices` refuses another value the same way: argparse on the command line, `check_field_types`
  on a config built in Python (each value of a tuple; None is the "not given" of an optional field).
- `checked(default, choices=..., bounds=...)` declares the allowed values of a field that has no flag, so that
  `check_field_types` checks it as it checks a flag's.
- A `const` lets the flag be given bare (`--cache` means `--cache ram`).
- A `negative` (name, value) adds a switch that means the flag with that value (`--no-amp` = `--amp off`);
  given together with the flag set to another value, `from_flags` refuses the pair in one line.
- A `square` int field is an image side: it also takes YOLOv5's two-number form (`--img-size 640 640`). Two
  equal numbers are one; two different ones print one line saying the image is letterboxed to a square of the
  larger side, which is then used. `imgsz_flag(...)` declares one under the spellings every command shares
  (`IMGSZ_FLAGS`: `--img`, `--imgsz`, `--img-size`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tphyolo.errors import InputError

_METADATA_KEY = "tphyolo.flag"


@dataclass(frozen=True)
class Bounds:
    """The numbers a setting takes: from `low` to `high` (None: unbounded on that side), each end included
    unless `low_open` / `high_open`. `str(bounds)` says it as the error messages do ("in [0, 0.9]", ">= 1")."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):  # NaN and infinities: no setting means them
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        low, high = _shown(self.low), _shown(self.high)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {low}"
        return f"{'<' if self.high_open else '<='} {high}" if self.high is not None else "any finite number"

    def parser(self, kind: Callable[[str], float]) -> Callable[[str], float]:
        """An argparse `type` that converts with `kind` (int, float) and refuses a value outside these bounds
        (argparse then prints `argument --flag: must be in [1, 11584], got 100000`)."""

        def convert(text: str) -> float:
            value = kind(text)
            if value not in self:
                raise argparse.ArgumentTypeError(f"must be {self}, got {text}")
            return value

        convert.__name__ = kind.__name__  # argparse names the type in "invalid int value" messages
        return convert


def _shown(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


# Bounds many settings share.
AT_LEAST_ONE = Bounds(1)  # counts of things done: batch sizes, epochs, steps, repeats
NON_NEGATIVE = Bounds(0)  # counts that may be none: workers, warm-up calls
FRACTION = Bounds(0, 1)  # thresholds and weights in [0, 1]
SEED = Bounds(0, 2**32 - 1)  # what numpy, random and torch all accept


@dataclass(frozen=True)
class FlagSpec:
    """How a config field appears on the command line: its names (first is shown), help, choices, nargs, the
    numbers it takes (`bounds`, None for any) and the value of the bare flag (`const`, None: a value must
    follow)."""

    names: tuple[str, ...]
    help: str
    choices: tuple[Any, ...] | None = None
    nargs: str | int | None = None
    metavar: str | None = None
    bounds: Bounds | None = None
    const: Any = None
    square: bool = False
    append: bool = False
    required: bool = False
    negative: tuple[str, Any] | None = None
    sep: str | None = None
    convert: Callable[[str], Any] | None = None


def flag(default: Any, *names: str, help: str, **options: Any) -> Any:  # noqa: A002 - argparse's word
    """A dataclass field with `default` that is also the command-line flag `names` (see the module docstring).

    `options` are the other fields of FlagSpec by name (choices, nargs, metavar, bounds, const, square, append,
    required, negative, sep, convert), so the list of what a flag can say is written once; an unknown one raises
    TypeError. `choices` may be any iterable (stored as a tuple).
    """
    negative = options.get("negative")
    every_name = (*names, *(negative[:1] if negative else ()))
    if not names or not all(isinstance(n, str) and n.startswith("--") for n in every_name):
        raise InputError(f"flag names must start with '--', got {every_name!r}")
    if isinstance(default, (list, dict, set)):
        raise TypeError(f"{names[0]}: use an immutable default (a tuple), got {type(default).__name__}")
    unknown = sorted(set(options) - _FLAG_OPTIONS)
    if unknown:
        raise TypeError(f"{names[0]}: flag() got unknown options {unknown}")
    if options.get("choices") is not None:
        options["choices"] = tuple(options["choices"])
    spec = FlagSpec(tuple(names), help, **options)
    return dataclasses.field(default=default, metadata={_METADATA_KEY: spec})


_FLAG_OPTIONS = frozenset(f.name for f in dataclasses.fields(FlagSpec)) - {"names", "help"}


_LIMITS_KEY = "tphyolo.limits"


def checked(default: Any, *, choices: Iterable[Any] | None = None, bounds: Bounds | None = None) -> Any:
    """A dataclass field with `default` and no flag whose value `check_field_types` checks against `choices`
    (any iterable, stored as a tuple) and `bounds`, as it checks a flag's."""
    limits = FlagSpec((), "", choices=None if choices is None else tuple(choices), bounds=bounds)
    return dataclasses.field(default=default, metadata={_LIMITS_KEY: limits})


IMGSZ_FLAGS = ("--img", "--imgsz", "--img-size")  # an image side, as YOLOv5's train, val, detect and export spell it


def imgsz_flag(default: int | None, *, help: str, bounds: Bounds | None = None) -> Any:  # noqa: A002 - argparse's
    """A field that is an image side in pixels (`square`), under the spellings `IMGSZ_FLAGS`."""
    return flag(default, *IMGSZ_FLAGS, help=help, bounds=bounds, square=True)


def flag_spec(field: dataclasses.Field) -> FlagSpec | None:
    """The FlagSpec a field declares, or None."""
    return field.metadata.get(_METADATA_KEY)


def _value_type(annotation: Any) -> tuple[Callable[[str], Any] | None, bool]:
    """(the type argparse converts each value to, whether the field is a tuple) for a field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _value_type(kinds[0]) if len(kinds) == 1 else (None, False)
    if origin is tuple:
        inner, _ = _value_type(typing.get_args(annotation)[0])
        return inner, True
    return (annotation if annotation in (int, float, str, Path) else None), False


def _is_optional_bool(annotation: Any) -> bool:
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return union and set(typing.get_args(annotation)) == {bool, type(None)}


def _flag_fields(cls: type) -> list[tuple[dataclasses.Field, FlagSpec, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, spec, hints[f.name]) for f in dataclasses.fields(cls) if (spec := flag_spec(f)) is not None]


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    defaults: Mapping[str, Any] | None = None,
    exclude: Iterable[str] = (),
) -> None:
    """Add a flag for every field of dataclass `cls` declared with `flag()`, except those in `exclude`.

    `defaults` replaces field defaults for this parser only (e.g. `val` scores with conf 0.001 where
    `predict` keeps 0.25); the dataclass itself is unchanged.
    """
    defaults, exclude = dict(defaults or {}), set(exclude)
    unknown = set(defaults) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        raise ValueError(f"defaults for unknown {cls.__name__} fields: {sorted(unknown)}")
    for field, spec, annotation in _flag_fields(cls):
        if field.name in exclude:
            continue
        if spec.negative is not None and field.name in defaults:
            raise ValueError(f"{cls.__name__}.{field.name}: a flag with a negative takes no per-parser default")
        default = defaults.get(field.name, field.default)
        parser.add_argument(*spec.names, **_argument(cls, field.name, spec, annotation, default))
        if spec.negative is not None:
            name, value = spec.negative
            parser.add_argument(name, action="store_true", help=f"same as {spec.names[0]} {value}")


def _argument(cls: type, name: str, spec: FlagSpec, annotation: Any, default: Any) -> dict[str, Any]:
    """The keyword arguments of `add_argument` for field `name` of `cls`, declared by `spec`."""
    kwargs: dict[str, Any] = {"dest": name, "default": default, "required": spec.required}
    if annotation is bool:
        if default and not all(n.startswith("--no") for n in spec.names):
            raise InputError(f"{cls.__name__}.{name} defaults to True: its flag needs a --no-... name")
        return kwargs | {"action": "store_false" if default else "store_true", "help": spec.help}
    if _is_optional_bool(annotation):
        return kwargs | {"action": argparse.BooleanOptionalAction, "help": spec.help}
    value_type, is_tuple = _value_type(annotation)
    value_type = spec.convert or value_type
    shown = (spec.sep or " ").join(map(str, default)) if isinstance(default, tuple) else default
    kwargs.update(
        help=spec.help if default in (None, ()) else f"{spec.help} (default: {shown})",
        nargs=spec.nargs or ("+" if is_tuple else "?" if spec.const is not None else None),
    )
    if spec.negative is not None:
        kwargs["default"] = None  # "not given", so that from_flags can tell a contradiction from a default
    if spec.const is not None:
        kwargs["const"] = spec.const
    if value_type is not None:
        kwargs["type"] = value_type if spec.bounds is None or spec.convert else spec.bounds.parser(value_type)
    if spec.choices is not None:
        kwargs["choices"] = spec.choices
    if spec.metavar is not None:
        kwargs["metavar"] = spec.metavar
    if spec.append:
        if not is_tuple:
            raise InputError(f"{cls.__name__}.{name}: append=True needs a tuple field")
        kwargs.update(nargs=None, action=_AppendToTuple)
    if spec.square:
        kwargs.update(nargs="+", action=_SquareSide, metavar=spec.metavar or "PIXELS")
    if spec.sep is not None:
        if not is_tuple or spec.append or spec.square:
            raise InputError(f"{cls.__name__}.{name}: sep= needs a tuple field, without append or square")
        kwargs.pop("choices", None)  # checked per item by the type
        kwargs.update(nargs=None, type=_separated(spec, value_type or str))
    return kwargs


def _separated(spec: FlagSpec, kind: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    """An argparse `type` for a `sep` flag: the items of one value as a tuple, each converted by `kind` and
    checked against the flag's `bounds` and `choices`."""

    def convert(text: str) -> tuple[Any, ...]:
        items = []
        for part in (p.strip() for p in text.split(spec.sep)):
            if not part:
                continue
            try:
                item = kind(part)
            except ValueError as error:
                raise argparse.ArgumentTypeError(f"expected {spec.sep!r}-separated {kind.__name__} values, "
                                                 f"got {part!r} in {text!r}") from error  # fmt: skip
            if spec.bounds is not None and item not in spec.bounds:
                raise argparse.ArgumentTypeError(f"each value must be {spec.bounds}, got {part}")
            if spec.choices is not None and item not in spec.choices:
                shown = ", ".join(map(str, spec.choices))
                raise argparse.ArgumentTypeError(f"invalid choice: {part!r} (choose from {shown})")
            items.append(item)
        return tuple(items)

    convert.__name__ = f"{spec.sep!r}-separated list"
    return convert


class _AppendToTuple(argparse._AppendAction):  # an append action, as `tphyolo train`'s relaunch recognises
    """Adds each value given to the tuple stored so far (the default included), one per flag."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), values))


class _SquareSide(argparse.Action):
    """Stores one image side from one number or YOLOv5's two (`--img-size 640 640`): equal numbers are one
    side; two different ones are letterboxed to a square of the larger, said in one line on stderr."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if len(values) > 2:
            parser.error(f"argument {option_string}: takes one size, or two as YOLOv5's H W; got {len(values)}")
        side = max(values)
        if len(set(values)) > 1:
            shown = " ".join(map(str, values))
            print(
                f"{parser.prog}: {option_string} {shown}: tphyolo letterboxes to a square of one side, "
                f"so it uses {option_string} {side} (the larger)",
                file=sys.stderr,
            )
        setattr(namespace, self.dest, side)


def from_flags(cls: type, args: argparse.Namespace, **overrides: Any) -> Any:
    """An instance of `cls` from the flags `add_flags` added (fields without a parsed flag keep their default,
    `overrides` win). Lists from nargs become tuples. Raises ValueError for a flag given with another value
    than its `negative` means, beside that negative (`--amp bf16 --no-amp`)."""
    values = {}
    for field, spec, _ in _flag_fields(cls):
        if not hasattr(args, field.name):
            continue
        value = getattr(args, field.name)
        if spec.negative is not None:
            name, meaning = spec.negative
            if getattr(args, name[2:].replace("-", "_"), False):
                if value not in (None, meaning):
                    raise InputError(f"{spec.names[0]} {value} and {name} contradict each other; give one")
                value = meaning
            if value is None:
                continue  # not given: the field's default
        values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**(values | overrides))


def setting_name(config: Any, field_name: str) -> str:
    """What a user calls the setting `field_name` of a config dataclass (class or instance): its first flag
    (`--img`), or the field name when it has no flag."""
    field = next((f for f in dataclasses.fields(config) if f.name == field_name), None)
    if field is None:
        raise KeyError(f"{type(config).__name__} has no field {field_name!r}")
    spec = flag_spec(field)
    return spec.names[0] if spec is not None else field_name


def _fits(value: Any, annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, kind) for kind in typing.get_args(annotation))
    if origin is tuple:
        kind = typing.get_args(annotation)[0]
        return isinstance(value, tuple) and all(_fits(item, kind) for item in value)
    if annotation is type(None):
        return value is None
    if annotation is float:
        return type(value) in (int, float)
    if annotation in (int, str, bool):
        return type(value) is annotation
    return True  # a type this check does not know


def field_types(cls: type, names: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The resolved annotation of each field of dataclass `cls`, with `names` (name -> type) known besides the
    module's own: a name its module imports only for type checkers (`if TYPE_CHECKING:`) and `names` does not give
    is taken as `typing.Any`, which every value fits."""
    known = dict(names or {})
    while True:
        try:
            return typing.get_type_hints(cls, localns=known)
        except NameError as error:
            if error.name is None or error.name in known:
                raise
            known[error.name] = Any


def check_field_types(config: Any) -> None:
    """Raises InputError, naming the setting as `setting_name` does, for the first field of dataclass instance
    `config` whose value does not have its annotated type (an int for float is accepted; bool is not an int)
    or, for a field whose flag (or `checked`) declares `choices` or `bounds`, is not among or within them (each
    value of a tuple; None passes: an optional field's "not given"). The one check of every config's values:
    its `__post_init__` calls it, and checks by hand only what relates two fields. A name annotations import only
    for type checkers is not checked (`field_types`)."""
    hints = field_types(type(config))
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if not _fits(value, hints[field.name]):
            kind = getattr(hints[field.name], "__name__", str(hints[field.name]))
            raise InputError(f"{setting_name(config, field.name)} must be {kind}, got {value!r:.60}")
        limits = flag_spec(field) or field.metadata.get(_LIMITS_KEY)
        if limits is None:
            continue
        values = [v for v in (value if isinstance(value, tuple) else (value,)) if v is not None]
        if limits.choices is not None and (wrong := [v for v in values if v not in limits.choices]):
            shown = ", ".join(map(str, (c for c in limits.choices if c is not None)))
            raise InputError(f"{setting_name(config, field.name)} must be one of {shown}, got {wrong[0]!r:.60}")
        if limits.bounds is not None and (outside := [v for v in values if v not in limits.bounds]):
            raise InputError(f"{setting_name(config, field.name)} must be {limits.bounds}, got {outside[0]!r}")
