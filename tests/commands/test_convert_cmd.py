"""`tphyolo convert checkpoint|visdrone`."""

import pytest
import torch
from tests.helpers import load_parity, parity_file

from tphyolo.checkpoint.format import load_checkpoint
from tphyolo.cli import main


@pytest.mark.slow
def test_convert_original_checkpoint(parity_dir, tmp_path, capsys):
    src = parity_file(parity_dir, "official-tph-yolov5-visdrone.ckpt.pt")
    dst = tmp_path / "ours.pt"
    assert main(["convert", "checkpoint", str(src), str(dst)]) == 0
    assert "10 classes" in capsys.readouterr().out
    expected = load_parity(parity_dir, "official-tph-yolov5-visdrone.ckpt.expected.pt")
    # The converted file is a plain weights_only checkpoint...
    payload = torch.load(dst, weights_only=True)
    assert payload["nc"] == expected["nc"]
    # ...whose model reproduces the original outputs.
    model = load_checkpoint(dst).build_model()
    with torch.no_grad():
        out = model(expected["input"])
    assert ((out - expected["eval_out"]).norm() / expected["eval_out"].norm()).item() < 1e-4


def test_convert_visdrone(visdrone_mini, tmp_path, capsys):
    assert main(["convert", "visdrone", str(visdrone_mini), str(tmp_path / "yolo")]) == 0
    assert (tmp_path / "yolo" / "data.yaml").is_file()
    labels = sorted((tmp_path / "yolo" / "labels").glob("*.txt"))
    assert len(labels) == len(list((visdrone_mini / "annotations").glob("*.txt")))


@pytest.mark.parametrize("argv", [["convert"], ["convert", "checkpoint", "only-one-arg"], ["convert", "pdf", "a", "b"]])
def test_convert_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


def test_convert_missing_file_is_one_line(tmp_path, capsys):
    assert main(["convert", "checkpoint", str(tmp_path / "missing.pt"), str(tmp_path / "out.pt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "missing.pt" in err
