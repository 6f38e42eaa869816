"""Flags derived from config dataclasses: defaults, types, choices, switches, tuples, round trip."""

import argparse
import dataclasses
import importlib
import math
import re
import typing
from dataclasses import dataclass
from pathlib import Path

import pytest

from tphyolo.flags import (
    IMGSZ_FLAGS,
    Bounds,
    add_flags,
    check_field_types,
    checked,
    flag,
    flag_spec,
    from_flags,
    imgsz_flag,
    setting_name,
)


@dataclass(frozen=True)
class Example:
    size: int = flag(640, "--img", "--imgsz", help="image size")
    conf: float = flag(0.25, "--conf", help="confidence threshold")
    mode: str = flag("wbf", "--merge", help="merge method", choices=("wbf", "nms"))
    classes: tuple[int, ...] | None = flag(None, "--classes", help="keep these classes")
    scales: tuple[float, ...] = flag((1.0, 0.5), "--scales", help="scales")
    rect: bool = flag(False, "--rect", help="rectangular batches")
    plots: bool = flag(True, "--no-plots", help="skip plots")
    weights: str | None = flag(None, "--weights", help="start from these weights")
    internal: int = 7  # no flag: not on the command line


def parse(*argv, **kwargs):
    parser = argparse.ArgumentParser()
    add_flags(parser, Example, **kwargs)
    return parser.parse_args(list(argv))


def test_defaults_round_trip_to_the_dataclass_defaults():
    assert from_flags(Example, parse()) == Example()


def test_values_are_converted_by_the_field_types():
    cfg = from_flags(Example, parse("--imgsz", "320", "--conf", "0.5", "--classes", "0", "3", "--scales", "2",
                                    "--rect", "--no-plots", "--merge", "nms", "--weights", "w.pt"))  # fmt: skip
    assert cfg == Example(320, 0.5, "nms", (0, 3), (2.0,), True, False, "w.pt")


def test_choices_and_types_are_enforced_by_argparse():
    with pytest.raises(SystemExit):
        parse("--merge", "mean")
    with pytest.raises(SystemExit):
        parse("--img", "big")


def test_help_shows_the_default_and_parser_defaults_can_differ_per_command(capsys):
    parser = argparse.ArgumentParser()
    add_flags(parser, Example, defaults={"conf": 0.001}, exclude=("rect",))
    text = parser.format_help()
    assert "confidence threshold (default: 0.001)" in text and "--rect" not in text and "--internal" not in text
    assert from_flags(Example, parser.parse_args([])).conf == 0.001
    assert from_flags(Example, parser.parse_args([]), internal=9).internal == 9


def test_declaration_mistakes_are_refused():
    with pytest.raises(ValueError, match="start with '--'"):
        flag(1, "-x", help="x")
    with pytest.raises(TypeError, match="immutable default"):
        flag([1], "--x", help="x")
    with pytest.raises(TypeError, match=r"--x: flag\(\) got unknown options \['choises'\]"):
        flag(1, "--x", help="x", choises=(1, 2))
    assert flag_spec(flag("a", "--x", help="x", choices=iter("ab"))).choices == ("a", "b")

    @dataclass(frozen=True)
    class Bad:
        on: bool = flag(True, "--on", help="on")

    with pytest.raises(ValueError, match="--no-"):
        add_flags(argparse.ArgumentParser(), Bad)
    with pytest.raises(ValueError, match="unknown"):
        add_flags(argparse.ArgumentParser(), Example, defaults={"nope": 1})


def test_bounds_refuse_outside_values_nan_and_infinities():
    closed, half_open = Bounds(1, 10), Bounds(0, 1, high_open=True)
    assert 1 in closed and 10 in closed and 0 not in closed and 11 not in closed
    assert 0.0 in half_open and 1.0 not in half_open and str(half_open) == "in [0, 1)"
    for bounds in (Bounds(), Bounds(0), Bounds(high=5)):
        assert all(v not in bounds for v in (math.nan, math.inf, -math.inf))
    assert (str(Bounds(0, low_open=True)), str(Bounds(high=2**32 - 1)), str(Bounds())) == (
        "> 0",
        "<= 4294967295",
        "any finite number",
    )
    parse = Bounds(1, 10).parser(int)
    assert parse("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match="must be in \\[1, 10\\], got 11"):
        parse("11")


@dataclass(frozen=True)
class Bounded:
    size: int = flag(8, "--size", help="size", bounds=Bounds(1, 64))
    scales: tuple[float, ...] = flag((1.0,), "--scales", help="scales", bounds=Bounds(0, 4, low_open=True))

    def __post_init__(self):
        check_field_types(self)


def test_a_flag_with_bounds_is_checked_by_argparse_and_by_the_config(capsys):
    parser = argparse.ArgumentParser(prog="x")
    add_flags(parser, Bounded)
    assert from_flags(Bounded, parser.parse_args(["--size", "64", "--scales", "0.5", "4"])) == Bounded(64, (0.5, 4.0))
    for argv, message in ((["--size", "65"], "argument --size: must be in [1, 64], got 65"),
                          (["--scales", "1", "0"], "argument --scales: must be in (0, 4], got 0")):  # fmt: skip
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert message in capsys.readouterr().err
    with pytest.raises(ValueError, match="^--size must be in \\[1, 64\\], got 0$"):
        Bounded(size=0)
    with pytest.raises(ValueError, match="^--scales must be in \\(0, 4\\], got nan$"):
        Bounded(scales=(1.0, math.nan))


@dataclass(frozen=True)
class Sized:
    imgsz: int = flag(640, "--img", "--img-size", help="image side", bounds=Bounds(1, 4096), square=True)


def parse_sized(*argv):
    parser = argparse.ArgumentParser(prog="tphyolo predict")
    add_flags(parser, Sized)
    return from_flags(Sized, parser.parse_args(list(argv)))


def test_a_square_side_takes_yolov5s_two_equal_numbers_as_one(capsys):
    assert parse_sized("--img-size", "512", "512").imgsz == 512
    assert parse_sized("--img", "320").imgsz == 320
    assert capsys.readouterr().err == ""


def test_two_different_sides_are_said_in_one_line_and_the_larger_is_used(capsys):
    assert parse_sized("--img-size", "480", "640").imgsz == 640
    lines = capsys.readouterr().err.splitlines()
    assert lines == ["tphyolo predict: --img-size 480 640: tphyolo letterboxes to a square of one side, "
                     "so it uses --img-size 640 (the larger)"]  # fmt: skip


def test_a_square_side_keeps_its_bounds_and_takes_at_most_two_numbers():
    with pytest.raises(SystemExit):
        parse_sized("--img-size", "640", "640", "640")
    with pytest.raises(SystemExit):
        parse_sized("--img-size", "640", "0")


@dataclass(frozen=True)
class Runtime:
    amp: str = flag("auto", "--amp", const="auto", choices=("auto", "bf16", "off"), negative=("--no-amp", "off"),
                    help="autocast dtype")  # fmt: skip
    kernels: tuple[str, ...] = flag((), "--kernel", append=True, choices=("flash", "math"), help="allowed kernels")
    nhwc: bool | None = flag(None, "--channels-last", help="memory format (default: automatic)")
    lines: Path | None = flag(None, "--lines", required=True, help="lines file")


def parse_runtime(*argv):
    parser = argparse.ArgumentParser()
    add_flags(parser, Runtime)
    return parser.parse_args(["--lines", "l.yaml", *argv])


def test_a_negative_means_the_flag_with_its_value_and_contradictions_are_refused():
    assert from_flags(Runtime, parse_runtime()).amp == "auto"
    assert from_flags(Runtime, parse_runtime("--amp")).amp == "auto"  # bare: the const
    assert from_flags(Runtime, parse_runtime("--amp", "bf16")).amp == "bf16"
    assert from_flags(Runtime, parse_runtime("--no-amp")).amp == "off"
    assert from_flags(Runtime, parse_runtime("--no-amp", "--amp", "off")).amp == "off"
    for argv in (["--amp", "bf16", "--no-amp"], ["--no-amp", "--amp"]):
        with pytest.raises(ValueError, match=f"--amp {argv[-1] == '--amp' and 'auto' or 'bf16'} and --no-amp cont"):
            from_flags(Runtime, parse_runtime(*argv))
    with pytest.raises(ValueError, match="no per-parser default"):
        add_flags(argparse.ArgumentParser(), Runtime, defaults={"amp": "off"})


def test_an_append_flag_collects_one_value_per_flag_into_a_tuple():
    assert from_flags(Runtime, parse_runtime()).kernels == ()
    assert from_flags(Runtime, parse_runtime("--kernel", "math", "--kernel", "flash")).kernels == ("math", "flash")
    with pytest.raises(SystemExit):
        parse_runtime("--kernel", "slow")
    with pytest.raises(SystemExit):  # one value per flag
        parse_runtime("--kernel", "math", "flash")


def test_an_optional_bool_is_a_pair_of_switches_and_none_when_not_given():
    assert [from_flags(Runtime, parse_runtime(*argv)).nhwc for argv in ([], ["--channels-last"],
            ["--no-channels-last"])] == [None, True, False]  # fmt: skip


def test_a_required_flag_is_refused_when_missing_and_a_path_field_gets_a_path(capsys):
    assert from_flags(Runtime, parse_runtime()).lines == Path("l.yaml")
    parser = argparse.ArgumentParser(prog="x")
    add_flags(parser, Runtime)
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert "the following arguments are required: --lines" in capsys.readouterr().err


def test_every_image_side_flag_has_the_shared_spellings():
    @dataclass(frozen=True)
    class Sized:
        imgsz: int = imgsz_flag(320, help="side", bounds=Bounds(1, 4096))

    parser = argparse.ArgumentParser()
    add_flags(parser, Sized)
    assert [from_flags(Sized, parser.parse_args([name, "640"])).imgsz for name in IMGSZ_FLAGS] == [640] * 3
    assert from_flags(Sized, parser.parse_args(["--img-size", "512", "512"])).imgsz == 512
    with pytest.raises(SystemExit):
        parser.parse_args(["--img", "8192"])


@dataclass(frozen=True)
class Listed:
    blocks: tuple[str, ...] = flag(("c3tr", "clla"), "--blocks", sep=",", choices=("c3tr", "c3str", "clla"),
                                   help="blocks")  # fmt: skip
    workers: tuple[int, ...] = flag((0, 1), "--workers", sep=",", bounds=Bounds(0), help="worker counts")
    dtypes: tuple[str, ...] | None = flag(None, "--dtypes", sep=",", help="dtypes")


def parse_listed(*argv):
    parser = argparse.ArgumentParser(prog="x")
    add_flags(parser, Listed)
    return from_flags(Listed, parser.parse_args(list(argv)))


def test_a_separated_flag_takes_one_value_listing_its_items(capsys):
    assert parse_listed() == Listed()
    listed = parse_listed("--blocks", "c3str, clla,", "--workers", "2,0,4", "--dtypes", "fp16,bf16")
    assert listed == Listed(blocks=("c3str", "clla"), workers=(2, 0, 4), dtypes=("fp16", "bf16"))
    for argv, said in ((["--blocks", "c3tr,nope"], "invalid choice: 'nope'"), (["--workers", "1,-1"], ">= 0, got -1"),
                       (["--workers", "1,two"], "'two'")):  # fmt: skip
        with pytest.raises(SystemExit):
            parse_listed(*argv)
        assert said in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    add_flags(parser, Listed)
    assert "(default: c3tr,clla)" in parser.format_help()
    with pytest.raises(SystemExit):  # one value, not several
        parse_listed("--blocks", "c3tr", "clla")


def test_a_convert_flag_parses_what_its_annotation_cannot_say(capsys):
    def window(text: str) -> int | str:
        if text == "auto":
            return text
        if int(text) < 32:
            raise argparse.ArgumentTypeError(f"must be >= 32, got {text}")
        return int(text)

    @dataclass(frozen=True)
    class Sliced:
        size: int | str | None = flag(None, "--slice", convert=window, help="window")

    parser = argparse.ArgumentParser(prog="x")
    add_flags(parser, Sliced)
    assert [from_flags(Sliced, parser.parse_args(a)).size for a in ([], ["--slice", "auto"], ["--slice", "64"])] == [
        None, "auto", 64]  # fmt: skip
    with pytest.raises(SystemExit):
        parser.parse_args(["--slice", "8"])
    assert "argument --slice: must be >= 32, got 8" in capsys.readouterr().err


@dataclass(frozen=True)
class Chosen:
    mode: str = flag("wbf", "--merge", help="merge method", choices=("wbf", "nms"))
    flips: tuple[str, ...] = flag((), "--flips", help="flips", choices=("lr", "ud"))
    cache: str | None = flag(None, "--cache", help="cache", choices=("ram", "disk"))
    measure: str = checked("iou", choices=("iou", "ios"))
    limit: float = checked(0.5, bounds=Bounds(0, 1))

    def __post_init__(self):
        check_field_types(self)


def test_a_config_built_in_python_refuses_a_value_outside_its_choices_or_bounds():
    # Before, check_field_types skipped choices: Chosen(mode="soft") was accepted, and fields without a flag
    # had no declared limits at all.
    assert Chosen(mode="nms", flips=("lr", "ud"), cache="disk", measure="ios", limit=1) is not None
    with pytest.raises(ValueError, match="^--merge must be one of wbf, nms, got 'soft'$"):
        Chosen(mode="soft")
    with pytest.raises(ValueError, match="^--flips must be one of lr, ud, got 'x'$"):
        Chosen(flips=("lr", "x"))
    with pytest.raises(ValueError, match="^--cache must be one of ram, disk, got 'tape'$"):
        Chosen(cache="tape")
    with pytest.raises(ValueError, match="^measure must be one of iou, ios, got 'giou'$"):
        Chosen(measure="giou")
    with pytest.raises(ValueError, match="^limit must be in \\[0, 1\\], got 2$"):
        Chosen(limit=2)
    parser = argparse.ArgumentParser()
    add_flags(parser, Chosen)
    assert {a.dest for a in parser._actions} == {"help", "mode", "flips", "cache"}  # checked() adds no flag


def _config_classes() -> list[type]:
    """Every frozen dataclass of the package with a field whose values are limited (`flag` or `checked`)."""
    root = Path(__file__).resolve().parents[1] / "src" / "tphyolo"
    classes = {}
    for path in sorted(root.rglob("*.py")):
        if not re.search(r"\b(flag|imgsz_flag|checked)\(", path.read_text(encoding="utf-8")):
            continue
        module = importlib.import_module(".".join(("tphyolo", *path.relative_to(root).with_suffix("").parts)))
        for value in vars(module).values():
            if (dataclasses.is_dataclass(value) and isinstance(value, type) and value.__module__ == module.__name__
                    and value.__dataclass_params__.frozen and any(_limits(f) for f in dataclasses.fields(value))):
                classes[value.__qualname__] = value
    return [classes[name] for name in sorted(classes)]


def _limits(field):
    return flag_spec(field) or field.metadata.get("tphyolo.limits")


CONFIG_CLASSES = _config_classes()


def test_the_config_classes_are_found():
    names = {c.__name__ for c in CONFIG_CLASSES}
    assert {"TrainConfig", "InferenceConfig", "TrackerConfig", "OCSortConfig", "ServeConfig", "ExportConfig",
            "RuntimeSettings"} <= names, sorted(names)  # fmt: skip


REQUIRED = {"BenchSettings": {"what": ("model",)}}  # the fields without a default of each class


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_config_field_with_choices_refuses_a_value_outside_them(cls):
    # Before, a choice was checked by argparse only, or by hand in some configs' __post_init__ (a Python caller
    # of the others, e.g. ValConfig(task="bogus") or TrackerChoice(cmc="gyro"), got no error).
    hints = typing.get_type_hints(cls)
    required = REQUIRED.get(cls.__name__, {})
    assert required.keys() == {f.name for f in dataclasses.fields(cls) if f.default is f.default_factory}
    chosen = [f for f in dataclasses.fields(cls) if (spec := _limits(f)) is not None and spec.choices]
    for field in chosen:
        kind = type(next(c for c in _limits(field).choices if c is not None))
        bad = "not-a-choice" if kind is str else max(c for c in _limits(field).choices if c is not None) + 1000
        value = (bad,) if typing.get_origin(hints[field.name]) is tuple or "tuple" in str(hints[field.name]) else bad
        with pytest.raises(ValueError, match=re.escape(f"{setting_name(cls, field.name)} must be one of")):
            cls(**(required | {field.name: value}))


def _outside(bounds: Bounds, kind: type) -> float:
    """A value of `kind` outside `bounds`."""
    if bounds.low is not None:
        return kind(bounds.low) if bounds.low_open else kind(math.floor(bounds.low) - 1)
    return kind(bounds.high) if bounds.high_open else kind(math.ceil(bounds.high) + 1)


@pytest.mark.parametrize("cls", CONFIG_CLASSES, ids=lambda c: c.__name__)
def test_every_config_field_with_bounds_refuses_a_value_outside_them(cls):
    # Before, TrackerConfig, OCSortConfig and DetectorNoise had their own bounds tables, and flag holders such as
    # PredictInputs or SliceFlags took any number from a Python caller.
    hints = typing.get_type_hints(cls)
    for field in [f for f in dataclasses.fields(cls) if (spec := _limits(f)) is not None and spec.bounds]:
        spec = _limits(field)
        is_tuple = "tuple" in str(hints[field.name])
        kind = int if re.search(r"\bint\b", str(hints[field.name])) else float
        value = _outside(spec.bounds, kind)
        with pytest.raises(ValueError, match=re.escape(f"{setting_name(cls, field.name)} must be {spec.bounds}, got")):
            cls(**(REQUIRED.get(cls.__name__, {}) | {field.name: (value,) if is_tuple else value}))
