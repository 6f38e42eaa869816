"""`tphyolo profile` on a tiny model writes a trace, an operator table and per-module times."""

import json

import pytest
from tests.helpers import exit_code

from tphyolo.cli import main


@pytest.mark.slow
def test_profile_train_writes_trace_and_tables(tmp_path, capsys):
    out = tmp_path / "prof"
    argv = ["profile", "--model", "tph-yolov5n", "--img", "64", "--batch", "1", "--steps", "1", "--warmup-steps", "0"]
    assert main([*argv, "--device", "cpu", "--out", str(out), "--top", "5"]) == 0
    trace = json.loads((out / "trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert any(str(name).endswith(":C3TR") for name in names)  # the module ranges are in the trace
    assert "aten::" in (out / "ops.txt").read_text()
    modules = (out / "modules.txt").read_text()
    for group in ("type C3TR", "type Conv", "head:level0/s4", "branch TPH attention", "branch P2 (neck + head)"):
        assert group in modules
    printed = capsys.readouterr().out
    assert "top 5 operators" in printed and "branch TPH attention" in printed
    assert printed.index("warming up: 0 tph-yolov5n train steps") < printed.index("profiling: 1 tph-yolov5n")


@pytest.mark.slow
def test_profile_infer_clla_head_channels_last_with_memory(tmp_path):
    out = tmp_path / "prof"
    argv = ["profile", "--model", "tph-yolov5ppn", "--img", "64", "--batch", "1", "--steps", "1", "--mode", "infer"]
    assert main([*argv, "--device", "cpu", "--out", str(out), "--tensorboard", "--channels-last", "--memory"]) == 0
    assert "head:CLLABlock" in (out / "modules.txt").read_text()
    assert "CPU Mem" in (out / "ops.txt").read_text()  # --memory adds the allocation columns
    assert list((out / "tensorboard").glob("*.json"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--steps", "0"], "argument --steps: must be >= 1, got 0"),
        (["--batch", "0"], "argument --batch: must be >= 1, got 0"),
        (["--img", "0"], "argument --img/--imgsz/--img-size: must be in [1, 11584], got 0"),
        (["--num-classes", "0"], "argument --num-classes: must be >= 1, got 0"),
        (["--num-classes", "20000"], "--num-classes 20000: above the limit of 10000 classes"),
        (["--model", "unknown"], "--model unknown: unknown model 'unknown'"),
    ],
)
def test_profile_refuses_nonsense_in_one_line_before_any_work(tmp_path, capsys, flags, message):
    assert exit_code(["profile", *flags, "--device", "cpu", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tphyolo profile: error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_profile_compile_reports_graphs_breaks_and_recompilations(tmp_path, capsys):
    out = tmp_path / "prof"
    argv = ["profile", "--model", "yolov5n", "--img", "64", "--batch", "1", "--steps", "1", "--mode", "infer"]
    assert main([*argv, "--device", "cpu", "--compile", "--out", str(out)]) == 0
    report = json.loads((out / "compile.json").read_text())
    assert report["graphs"] >= 1
    assert report["graph_breaks"] == {} and report["recompilations"] == {}  # our models compile whole
    assert "torch.compile: " in capsys.readouterr().out
