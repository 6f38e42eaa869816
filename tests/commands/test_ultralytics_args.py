"""ultralytics' `key=value` words and YOLOv5's `--switch=True|False` are read as tphyolo's flags, with one line
each saying what it became; a key no flag takes is refused with exactly what to type."""

import argparse

import pytest
from tests.commands.test_yolov5_flags import _error_lines

from tphyolo.cli import COMMANDS, build_parser
from tphyolo.commands.options.ultralytics import ULTRALYTICS_KEYS


def _parsed(argv: list[str]) -> dict:
    values = vars(build_parser(commands=[argv[0]]).parse_args(argv))
    values.pop("_module")
    return values


@pytest.mark.parametrize(
    ("ultralytics", "tphyolo"),
    [
        (["predict", "weights=x.pt", "source=y"], ["predict", "--weights", "x.pt", "--source", "y"]),
        (["predict", "model=best.pt", "source=y", "conf=0.3", "max_det=100", "classes=[0,2]", "save_txt=True",
          "save=False", "show_labels=False", "half=1"],
         ["predict", "--weights", "best.pt", "--source", "y", "--conf", "0.3", "--max-det", "100", "--classes", "0",
          "2", "--save-txt", "--no-save-img", "--hide-labels", "--half"]),
        (["predict", "--weights", "a.pt", "b.pt", "source=y", "--save-txt=True", "--save-conf=false",
          "--channels-last=False", "amp=False", "--name", "run=1"],
         ["predict", "--weights", "a.pt", "b.pt", "--source", "y", "--save-txt", "--no-channels-last", "--no-amp",
          "--name", "run=1"]),
        (["train", "data=d.yaml", "model=yolov5s.yaml", "imgsz=640", "batch=16", "epochs=100", "device=0",
          "plots=False", "val=False", "cache=True"],
         ["train", "--data", "d.yaml", "--model", "yolov5s.yaml", "--imgsz", "640", "--batch", "16", "--epochs",
          "100", "--device", "0", "--no-plots", "--noval", "--cache"]),
        (["train", "model=runs/train/exp/weights/best.pt", "--no-plots=False"],
         ["train", "--weights", "runs/train/exp/weights/best.pt"]),
        (["val", "weights=w.pt", "data=d.yaml", "split=test", "plots=True"],
         ["val", "--weights", "w.pt", "--data", "d.yaml", "--task", "test", "--plots"]),
        (["export", "model=w.pt", "format=onnx", "dynamic=True"], ["export", "--weights", "w.pt", "--format", "onnx",
                                                                   "--dynamic"]),
    ],
)  # fmt: skip
def test_ultralytics_keys_and_yolov5_switch_values_parse_as_the_flags(ultralytics, tphyolo, capsys):
    assert _parsed(ultralytics) == _parsed(tphyolo)  # was: "unrecognized arguments" / "ignored explicit argument"
    said = capsys.readouterr().err.splitlines()
    words = [w for w in ultralytics[1:] if "=" in w and w != "run=1"]
    assert [line.split(": ", 1)[1].split(" -> ")[0] for line in said] == words  # one line for each word


def test_each_word_says_what_it_became(capsys):
    _parsed(["predict", "weights=x.pt", "source=y", "--save-txt=True", "--save-conf=False"])
    assert capsys.readouterr().err.splitlines() == [
        "tphyolo predict: weights=x.pt -> --weights x.pt",
        "tphyolo predict: source=y -> --source y",
        "tphyolo predict: --save-txt=True -> --save-txt",
        "tphyolo predict: --save-conf=False -> (nothing to give: the default)",
    ]


def test_an_unknown_key_says_exactly_what_to_type(capsys):
    assert _error_lines(["predict", "weights=x.pt", "sorce=images/"], capsys) == [
        "tphyolo predict: error: unrecognized argument sorce=images/; did you mean --source images/? "
        "(see 'tphyolo predict -h')"
    ]
    assert _error_lines(["train", "data=d.yaml", "lr0=0.02"], capsys) == [
        "tphyolo train: error: unrecognized argument lr0=0.02; lr0 is a hyperparameter: give `lr0: 0.02` in a hyp "
        "yaml, --hyp FILE (see 'tphyolo train -h')"
    ]
    lines = _error_lines(["predict", "weights=x.pt", "source=y", "show=True"], capsys)
    assert lines[0] == "tphyolo predict: error: unrecognized argument show=True (see 'tphyolo predict -h')"
    assert lines[1].startswith("tphyolo predict: --show is ultralytics': no window")


def test_every_key_of_the_table_names_a_flag_some_command_takes():
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    options = {o for name in COMMANDS for a in commands[name]._actions for o in a.option_strings}
    assert {key: [f for f in flags if f not in options] for key, flags in ULTRALYTICS_KEYS.items()} == {
        key: [] for key in ULTRALYTICS_KEYS
    }
