"""Flags derived from config dataclasses: defaults, types, choices, switches, tuples, round trip."""

import argparse
from dataclasses import dataclass

import pytest

from tphyolo.flags import add_flags, flag, from_flags


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

    @dataclass(frozen=True)
    class Bad:
        on: bool = flag(True, "--on", help="on")

    with pytest.raises(ValueError, match="--no-"):
        add_flags(argparse.ArgumentParser(), Bad)
    with pytest.raises(ValueError, match="unknown"):
        add_flags(argparse.ArgumentParser(), Example, defaults={"nope": 1})
