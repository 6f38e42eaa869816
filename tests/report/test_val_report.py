"""`tphyolo val --report` with a tiny untrained checkpoint on two VisDrone samples: the report, its records and
`--json` are written, `--json` holds the report's numbers, and `tphyolo report` rebuilds them from the records."""

import json
import shutil

import pytest
import torch
from tests.helpers import save_model_checkpoint

from tphyolo.cli import main
from tphyolo.data.formats.visdrone import NAMES
from tphyolo.models import build_model


@pytest.mark.slow
def test_val_report_writes_what_report_rebuilds(visdrone_mini, tmp_path, capsys):
    torch.manual_seed(0)
    weights = save_model_checkpoint(tmp_path / "tiny.pt", build_model("yolov5n", names=list(NAMES)), list(NAMES))
    root = tmp_path / "data"
    shutil.copytree(visdrone_mini / "annotations", root / "annotations")
    (root / "images").mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:2]:
        shutil.copy(image, root / "images" / image.name)
    (root / "data.yaml").write_text(f"path: {root}\nval: images\nnames: {list(NAMES)}\n")
    argv = ["val", "--weights", str(weights), "--data", str(root / "data.yaml"), "--img", "160", "--batch", "2"]
    argv += ["--device", "cpu", "--workers", "0", "--project", str(tmp_path), "--name", "v", "--protocol", "visdrone"]
    assert main([*argv, "--report", "--json", str(tmp_path / "numbers.json")]) == 0
    run = tmp_path / "v"
    assert "report in" in capsys.readouterr().out
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert numbers == json.loads((run / "report.json").read_text())
    assert numbers["protocol"] == "visdrone" and "visdrone/AP50" in numbers["metrics"]
    assert numbers["sizes"]["overall"]["all"]["objects"] > 50
    assert numbers["settings"]["imgsz"] == 160 and numbers["settings"]["weights"] == str(weights)
    assert not {"tta_scales", "tta_flips", "merge", "merge_iou"} & set(numbers["settings"])  # no --augment
    assert len(numbers["images"]) == 2
    records = json.loads((run / "evaluation.json").read_text())
    assert set(records["speed"]) >= {"preprocess", "inference", "mapping"}
    assert main(["report", str(run)]) == 0
    assert json.loads((run / "report.json").read_text()) == numbers
