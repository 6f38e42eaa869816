"""Numbers outside what a flag means are refused at once, in one line naming the flag, before any work: the
probe's list for the commands without a model to load (bench, profile, data, classify, export, val, train)."""

import pytest
from tests.helpers import exit_code


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bench", "model", "--batch", "0"], "argument --batch: must be >= 1, got 0"),
        (["bench", "model", "--img", "0"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 0"),
        (["bench", "model", "--warmup", "-1"], "argument --warmup: must be >= 0, got -1"),
        (["bench", "model", "--repeats", "0"], "argument --repeats: must be >= 1, got 0"),
        (["bench", "serve", "--concurrency", "1,0"], "argument --concurrency: each value must be >= 1, got 0"),
        (["bench", "data", "--workers", "0,-2"], "argument --workers: each value must be >= 0, got -2"),
        (["bench", "model", "--model", "unknown"], "--model unknown: unknown model 'unknown'"),
        (["bench", "startup", "--model", "no.yaml"], "--model no.yaml: model yaml no.yaml does not exist"),
        (["data", "check", "--data", "synthetic", "--max-problems", "-1"], "argument --max-problems: must be >= 0"),
        (["classify", "train", "--lr", "-1"], "argument --lr: must be > 0, got -1"),
        (["classify", "train", "--lr", "nan"], "argument --lr: must be > 0, got nan"),
        (["classify", "train", "--seed", "-1"], "argument --seed: must be in [0, 4294967295], got -1"),
        (["classify", "train", "--batch", "1"], "argument --batch/--batch-size: must be >= 2, got 1"),
        (["export", "--weights", "w.pt", "--opset", "99"], "argument --opset: must be in [14, 20], got 99"),
        (["export", "--weights", "w.pt", "--img", "100000"], "--img/--imgsz/--img-size: must be in [1, 11584]"),
        (["val", "--weights", "w.pt", "--workers", "-1"], "argument --workers: must be >= 0, got -1"),
        (["train", "--epochs", "0"], "argument --epochs: must be >= 1, got 0"),
        (["train", "--device", "mps"], "--device mps: "),
    ],
)
def test_a_number_outside_the_flag_is_one_line_naming_it(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)  # nothing may be written: a run folder would land here
    runtime = ["--device", "cpu"] if argv[0] in ("bench", "classify", "val", "train") and "--device" not in argv else []
    assert exit_code([*argv, *runtime]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"tphyolo {argv[0]}") and ": error: " in err and message in err and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir())
