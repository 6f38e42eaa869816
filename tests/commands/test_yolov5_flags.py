"""YOLOv5's flags: its spellings of settings tphyolo has are aliases that parse to the same values, and every
other flag of its four scripts gets a one-line hint instead of a bare 'unrecognized arguments'."""

import argparse
import re

import pytest

from tphyolo.cli import COMMANDS, build_parser, main
from tphyolo.commands.options.yolov5 import HINTS, ULTRALYTICS_HINTS, YOLOV5_FLAGS, YOLOV5_SCRIPTS, unknown_flag_hints

REQUIRED = {  # the flags each command cannot parse without
    "train": [],
    "val": ["--weights", "w.pt", "--data", "d.yaml"],
    "predict": ["--source", "a.jpg", "--weights", "w.pt"],
    "export": ["--weights", "w.pt"],
}


def _command_parser(name: str) -> argparse.ArgumentParser:
    parser = build_parser(commands=[name])
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


def _parsed(argv: list[str]) -> dict:
    values = vars(build_parser(commands=[argv[0]]).parse_args(argv))
    values.pop("_module")
    return values


@pytest.mark.parametrize("command", sorted(YOLOV5_FLAGS))
def test_every_yolov5_flag_is_taken_or_has_a_hint(command):
    parser = _command_parser(command)
    taken = _options(parser)
    missing = [flag for flag in YOLOV5_FLAGS[command] if flag not in taken and flag not in HINTS[command]]
    assert not missing, f"YOLOv5 {YOLOV5_SCRIPTS[command]} flags with neither a tphyolo flag nor a hint: {missing}"


@pytest.mark.parametrize("command", sorted(HINTS))
def test_a_hinted_flag_is_refused_not_taken_as_an_abbreviation(command):
    # argparse takes unique prefixes of long options: a hinted flag must reach the hint, not another flag
    parser = build_parser(commands=[command])
    for flag in HINTS[command]:
        if flag in _options(_command_parser(command)):
            continue  # taken since the hint was written: the hint is then never shown
        _, unknown = parser.parse_known_args([command, *REQUIRED[command], flag])
        assert unknown == [flag], flag


def test_hints_name_only_commands_that_exist():
    texts = [text for hints in HINTS.values() for text in hints.values()]
    named = {name for text in texts for name in re.findall(r"`tphyolo (\w+)", text)}
    assert named <= set(COMMANDS), sorted(named - set(COMMANDS))


@pytest.mark.parametrize(
    ("command", "yolov5", "tphyolo"),
    [
        (
            "predict",
            ["--conf-thres", "0.4", "--iou-thres", "0.5", "--img-size", "1024", "--batch-size", "4",
             "--line-thickness", "2", "--nosave"],
            ["--conf", "0.4", "--iou", "0.5", "--img", "1024", "--batch", "4", "--line-width", "2", "--no-save-img"],
        ),
        (
            "val",
            ["--conf-thres", "0.01", "--iou-thres", "0.7", "--img-size", "1536", "--batch-size", "2"],
            ["--conf", "0.01", "--iou", "0.7", "--img", "1536", "--batch", "2"],
        ),
        (
            "train",
            ["--img-size", "640", "--batch-size", "4", "--cfg", "tph-yolov5s", "--cache"],
            ["--img", "640", "--batch", "4", "--model", "tph-yolov5s", "--cache", "ram"],
        ),
        ("export", ["--img-size", "320", "--batch-size", "2", "--include", "openvino"],
         ["--img", "320", "--batch", "2", "--format", "openvino"]),
    ],
)  # fmt: skip
def test_yolov5_spellings_parse_to_the_same_settings(command, yolov5, tphyolo):
    base = [command, *REQUIRED[command]]
    assert _parsed(base + yolov5) == _parsed(base + tphyolo) != _parsed(base)


def test_the_crop_classifier_takes_img_size_too():
    assert _parsed(["classify", "train", "--img-size", "96"]) == _parsed(["classify", "train", "--img", "96"])


def test_a_bare_cache_flag_caches_in_ram_and_disk_still_parses():
    assert _parsed(["train", "--cache"])["cache"] == "ram"
    assert _parsed(["train", "--cache", "disk"])["cache"] == "disk"
    assert _parsed(["train"])["cache"] is None


def test_an_unknown_yolov5_flag_gets_one_hint_line_after_the_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--evolve", "300", "--adam"])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0] == "tphyolo train: error: unrecognized argument --evolve (see 'tphyolo train -h')"
    assert lines[1:] == [
        f"tphyolo train: --evolve is YOLOv5's: {HINTS['train']['--evolve']}",
        f"tphyolo train: --adam is YOLOv5's: {HINTS['train']['--adam']}",
    ]


def test_unknown_flags_without_a_hint_keep_the_one_line_error(capsys):
    with pytest.raises(SystemExit):
        main(["predict", "--no-such-flag"])
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_hints_match_flags_given_with_values():
    assert unknown_flag_hints("train", ["--evolve=10", "12", "--bogus"]) == [
        f"--evolve is YOLOv5's: {HINTS['train']['--evolve']}"
    ]
    assert unknown_flag_hints("val", ["--evolve"]) == []  # a hint belongs to the command it was written for


def _error_lines(argv: list[str], capsys) -> list[str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


def test_yolov5s_detect_command_points_to_predict(capsys):
    lines = _error_lines(["detect", "--weights", "best.pt", "--source", "images/"], capsys)
    assert lines == [
        "tphyolo: error: argument COMMAND: invalid choice: 'detect' (see 'tphyolo -h')",
        "tphyolo: detect is YOLOv5's detect.py: use `tphyolo predict` (it takes YOLOv5's flags)",
    ]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [(["predict", *REQUIRED["predict"], "--show"], "--show"), (["track", "--show"], "--show"),
     (["track", "--source", "v.mp4", "--weights", "w.pt", "--persist"], "--persist")],
)  # fmt: skip
def test_ultralytics_flags_get_their_hint_not_a_close_flag(capsys, argv, flag):
    command = argv[0]
    lines = _error_lines(argv, capsys)
    assert lines == [f"tphyolo {command}: error: unrecognized argument {flag} (see 'tphyolo {command} -h')",
                     f"tphyolo {command}: {flag} is ultralytics': {ULTRALYTICS_HINTS[command][flag]}"]  # fmt: skip
