"""`tphyolo train` flags: derived from TrainConfig, every historical spelling kept, and the torchrun relaunch
spelling back exactly what was parsed from the argv the command was given."""

import dataclasses

import pytest
import torch
from tests.helpers import exit_code

from tphyolo.cli import build_parser, main
from tphyolo.commands.options.argv import flags_for
from tphyolo.commands.train import command_parser
from tphyolo.flags import flag_spec, from_flags
from tphyolo.runtime import distributed
from tphyolo.runtime.config import runtime_from_args
from tphyolo.training.config import TrainConfig


def parse(*argv: str):
    return build_parser().parse_args(["train", *argv])


def test_every_flagged_field_is_a_flag_with_the_dataclass_default():
    parser = command_parser()
    actions = {a.dest: a for a in parser._actions if a.option_strings}
    flagged = [f for f in dataclasses.fields(TrainConfig) if flag_spec(f) is not None]
    assert len(flagged) >= 25
    for field in flagged:
        action = actions[field.name]
        assert action.default == field.default, field.name
        assert set(flag_spec(field).names) == set(action.option_strings), field.name
    assert from_flags(TrainConfig, parse()) == TrainConfig()


def test_historical_spellings_still_parse():
    args = parse(
        "--imgsz", "640", "--batch-size", "4", "--nominal-batch", "64", "--cfg", "yolov5s", "--noautoanchor",
        "--no-plots", "--cos-lr", "--cache", "ram", "--label-smoothing", "0", "--sync-bn", "--exist-ok",
    )  # fmt: skip
    cfg = from_flags(TrainConfig, args)
    assert (cfg.imgsz, cfg.batch, cfg.nominal_batch, cfg.model) == (640, 4, 64, "yolov5s")
    assert (cfg.autoanchor, cfg.plots, cfg.cos_lr, cfg.cache, cfg.sync_bn, cfg.exist_ok) == (
        False, False, True, "ram", True, True,
    )  # fmt: skip
    assert cfg.label_smoothing == 0.0 and from_flags(TrainConfig, parse()).label_smoothing is None
    assert from_flags(TrainConfig, parse("--img", "512", "--batch", "2", "--nbs", "8")).imgsz == 512
    assert parse("--resume").resume == "" and parse("--resume", "x/last.pt").resume == "x/last.pt"
    assert parse().resume is None
    with pytest.raises(SystemExit):
        parse("--optimizer", "LBFGS")


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--img", "640", "--save-period", "-3", "--label-smoothing", "0", "--no-plots", "--noautoanchor"],
        ["--data", "my data.yaml", "--weights=-w.pt", "--optimizer", "SGD", "--cache", "disk", "--rect"],
        ["--resume"],
        ["--resume", "runs/train/exp/weights/last.pt", "--device", "0,1", "--no-amp", "--compile"],
        ["--no-channels-last", "--device", "cpu"],
        [
            "--amp",
            "bf16",
            "--compile",
            "max-autotune",
            "--sdpa-backend",
            "flash",
            "--sdpa-backend",
            "math",
            "--channels-last",
            "--no-tf32",
            "--no-cudnn-benchmark",
            "--alloc-conf",
            "",
        ],
    ],  # fmt: skip
)
def test_flags_for_spells_back_what_was_parsed(argv):
    args = parse(*argv)
    again = parse(*flags_for(command_parser(), args))
    assert vars(again) == vars(args)
    assert from_flags(TrainConfig, again) == from_flags(TrainConfig, args)
    assert runtime_from_args(again) == runtime_from_args(args)


@pytest.fixture
def process_settings(monkeypatch):
    """`main` applies process settings (allocator env, TF32, cudnn.benchmark): keep the user's allocator
    setting (which wins) and restore the torch flags afterwards."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False")
    saved = (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield
    torch.set_float32_matmul_precision(saved[0])
    torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved[1:]


def test_several_gpus_relaunch_torchrun_with_the_given_argv_not_sys_argv(monkeypatch, process_settings):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # two GPUs, as far as the check can tell
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr("sys.argv", ["tphyolo", "predict", "--source", "elsewhere.jpg"])
    launched = []

    def fake_launch(argv, *, nproc):
        launched.append((list(argv), nproc))
        return 7

    monkeypatch.setattr(distributed, "launch_torchrun", fake_launch)
    given = ["train", "--data", "d.yaml", "--img", "1536", "--epochs", "3", "--label-smoothing", "0", "--device", "0,1"]
    assert main(given) == 7
    [(argv, nproc)] = launched
    assert nproc == 2 and argv[0] == "train" and "elsewhere.jpg" not in argv
    args, expected = build_parser().parse_args(argv), build_parser().parse_args(given)
    assert from_flags(TrainConfig, args) == from_flags(TrainConfig, expected)
    assert from_flags(TrainConfig, args).label_smoothing == 0.0 and from_flags(TrainConfig, args).imgsz == 1536
    assert runtime_from_args(args) == runtime_from_args(expected) and args.device == "0,1"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--label-smoothing", "2"], "argument --label-smoothing: must be in [0, 1], got 2"),
        (["--grad-clip", "-1"], "argument --grad-clip: must be >= 0, got -1"),
        (["--grad-clip", "inf"], "argument --grad-clip: must be >= 0, got inf"),
        (["--batch", "-1"], "argument --batch/--batch-size: must be >= 1, got -1"),
        (["--img", "0"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 0"),
        (["--seed", "-1"], "argument --seed: must be in [0, 4294967295], got -1"),
        (["--workers", "-1"], "argument --workers: must be >= 0, got -1"),
        (["--amp", "bf16", "--no-amp"], "--amp bf16 and --no-amp contradict each other"),
        (["--resume", "x/last.pt", "--epochs", "50", "--batch", "2"], "--batch, --epochs would be ignored"),
        (["--device", "0,1"], "--device 0,1: asks for CUDA, but no CUDA device is available"),
    ],
)
def test_nonsense_settings_are_refused_in_one_line(tmp_path, capsys, monkeypatch, process_settings, flags, message):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert exit_code(["train", "--project", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tphyolo train: error: ") and message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())
