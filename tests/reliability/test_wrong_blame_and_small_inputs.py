"""Inputs of the fourth probe that were refused without naming their file, blamed a flag the user never typed,
or did something other than asked: a resumed search's tune.yaml and trials.csv (a value of the wrong type, bytes
that are not UTF-8, a searched column missing), search-space numbers too large for a float, keys the hyp file
lacks, more CPUs per trial than the machine has, a resumed prediction's args.yaml with a bad value, `export
--calib-images` without `--int8`, and a class named `..` with `--save-crop`. Each is generated here and ends
in one line naming the file (and key or line) or the flag given; none starts Ray."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tests.helpers import exit_code, one_error_line

from tphyolo.ops.detections import Detections
from tphyolo.predict.results import save_crops


def test_a_class_named_dot_dot_writes_its_crops_inside_the_crops_folder(tmp_path):
    image = np.full((40, 40, 3), 128, np.uint8)
    detections = Detections(torch.tensor([[5.0, 5.0, 20.0, 20.0]] * 3), torch.tensor([0.9, 0.8, 0.7]),
                            torch.tensor([0, 1, 2]))  # fmt: skip
    crops = tmp_path / "run" / "crops"
    written = save_crops(image, detections, ["..", ".", "../x"], crops, "img")
    assert len(written) == 3 and all(crops in p.resolve().parents for p in written)
    assert sorted(p.relative_to(crops).parent.name for p in written) == ["_", "__", "___x"]


def test_calibration_flags_without_int8_are_refused(weights, tmp_path, capsys):
    argv = ["export", "--weights", str(weights), "--format", "onnx", "--calib-images", "10", "--out", str(tmp_path)]
    assert exit_code(argv) == 2
    line = one_error_line(capsys.readouterr().err, "export")
    assert "--calib-images" in line and "--int8" in line
    assert not any(tmp_path.iterdir())


def test_a_bad_value_in_a_resumed_predictions_args_yaml_names_the_file(tmp_path, capsys):
    (tmp_path / "args.yaml").write_text(yaml.safe_dump({"argv": ["--source", "x", "--weights", "w", "--img=100000"]}))
    assert exit_code(["predict", "--resume", str(tmp_path)]) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert line.startswith(f"tphyolo predict: error: {tmp_path / 'args.yaml'}: 'argv'") and "100000" in line


# tune ------------------------------------------------------------------------------------------------------


@pytest.fixture
def search_folder(tiny_synthetic, tmp_path) -> Path:
    """A search folder of one finished trial out of two, as an interrupted `tune` leaves it."""
    pytest.importorskip("ray.tune")
    from tphyolo.training.config import TrainConfig
    from tphyolo.training.hyp import load_hyp
    from tphyolo.training.tune.config import TuneConfig
    from tphyolo.training.tune.trials import TrialRow, write_trials

    run_dir = tmp_path / "exp"
    run_dir.mkdir()
    settings = {"tune": TuneConfig(trials=2).to_dict(),
                "train": TrainConfig(data=str(tiny_synthetic), hyp="synthetic").to_dict()}  # fmt: skip
    (run_dir / "tune.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
    write_trials(run_dir / "trials.csv", [TrialRow(1, "done", 0.2, 0.3, 0.19, 2, load_hyp("synthetic"))])
    return run_dir


def _resume_error(run_dir: Path, capsys) -> str:
    assert exit_code(["tune", "--resume", str(run_dir), "--device", "cpu"]) == 2
    return one_error_line(capsys.readouterr().err, "tune")


def test_a_bad_value_in_a_resumed_tune_yaml_names_the_file_and_key(search_folder, capsys):
    settings = yaml.safe_load((search_folder / "tune.yaml").read_text())
    settings["tune"]["trials"] = "many"
    (search_folder / "tune.yaml").write_text(yaml.safe_dump(settings))
    line = _resume_error(search_folder, capsys)
    assert f"{search_folder / 'tune.yaml'}: key 'tune'" in line


def test_a_trials_csv_that_is_not_utf8_names_the_file(search_folder, capsys):
    path = search_folder / "trials.csv"
    path.write_bytes(path.read_bytes() + b"3,done,0.1,0.1,0.1,1,caf\xe9\n")
    assert f"{path}: not UTF-8 text" in _resume_error(search_folder, capsys)


def test_a_trials_csv_without_a_searched_column_names_the_file_and_column(search_folder, capsys):
    path = search_folder / "trials.csv"
    lines = [line.split(",") for line in path.read_text().splitlines()]
    lr0 = lines[0].index("lr0")
    path.write_text("".join(",".join(cells[:lr0] + cells[lr0 + 1 :]) + "\n" for cells in lines))
    assert f"{path}: no column 'lr0'" in _resume_error(search_folder, capsys)


@pytest.mark.parametrize(
    ("space", "message"),
    [("lr0: [0, 1" + "0" * 400 + "]\n", "lr0: high must be a finite number"),
     ("not_a_hyp: [0, 1]\n", "names ['not_a_hyp'], which the hyp file does not set")],
)  # fmt: skip
def test_a_bad_search_space_names_its_file(space, message, search_folder, capsys):
    path = search_folder.parent / "space.yaml"
    path.write_text(space)
    settings = yaml.safe_load((search_folder / "tune.yaml").read_text())
    settings["tune"]["space"] = str(path)
    (search_folder / "tune.yaml").write_text(yaml.safe_dump(settings))
    line = _resume_error(search_folder, capsys)
    assert f"{path}: " in line and message in line


def test_more_cpus_per_trial_than_the_machine_has_names_the_flag(tiny_synthetic, tmp_path, capsys):
    pytest.importorskip("ray.tune")
    argv = ["tune", "--data", str(tiny_synthetic), "--hyp", "synthetic", "--trials", "1", "--cpus-per-trial", "1000",
            "--device", "cpu", "--project", str(tmp_path)]  # fmt: skip
    assert exit_code(argv) == 2
    assert "--cpus-per-trial 1000: this machine has" in one_error_line(capsys.readouterr().err, "tune")
