"""Run folders started together: each run gets a folder of its own (`new_run_dir` takes a name by creating it);
the job a run folder keeps (args.yaml): every command's job written as plain data and read back equal, paths
absolute, a bad file refused in one line naming it and the setting."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

from tphyolo.analyze.config import AnalyzeInputs, AnalyzeTracking
from tphyolo.analyze.job import AnalyzeJob
from tphyolo.errors import InputError
from tphyolo.evaluation.jobs import ValJob
from tphyolo.evaluation.settings import ValConfig
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.job import PredictInputs, PredictJob, RasterSettings
from tphyolo.predict.outputs import OutputSettings
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.run_dir import (
    JOB_FILE,
    JOB_KEY,
    OutputDir,
    differences,
    job_data,
    job_from_data,
    new_run_dir,
    removed_if_left_empty,
    write_job_file,
)
from tphyolo.track.job import TrackerChoice, TrackInputs, TrackJob, TrackOutputs

RUNS = 8


def test_runs_started_together_get_distinct_folders(tmp_path, monkeypatch):
    """Threads released together by a barrier each ask for runs/exp. A look at the folder (`Path.exists`) waits
    until every run has looked, as runs started in the same instant do: a name chosen by looking first (the old
    check-then-`mkdir(exist_ok=True)`) then gives every run the same folder; names taken by creating them stay
    distinct whatever the order."""
    start = threading.Barrier(RUNS, timeout=10)
    looked = threading.Barrier(RUNS, timeout=10)
    first_look = threading.local()
    exists = Path.exists

    def exists_once_all_looked(self: Path, *args, **kwargs) -> bool:
        found = exists(self, *args, **kwargs)
        if getattr(first_look, "pending", False):  # a run's first look (other threads pass)
            first_look.pending = False
            with contextlib.suppress(threading.BrokenBarrierError):
                looked.wait()
        return found

    monkeypatch.setattr(Path, "exists", exists_once_all_looked)

    def run(_: int) -> Path:
        first_look.pending = True
        start.wait()
        return new_run_dir(tmp_path / "runs", "exp")

    with ThreadPoolExecutor(RUNS) as pool:
        folders = list(pool.map(run, range(RUNS)))
    assert len(set(folders)) == RUNS, sorted(f.name for f in folders)
    assert sorted(f.name for f in folders) == sorted(["exp", *(f"exp{n}" for n in range(2, RUNS + 1))])


def test_names_are_numbered_and_exist_ok_reuses(tmp_path):
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp"
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp2"
    (tmp_path / "exp3").write_text("a file takes the name too")
    assert new_run_dir(tmp_path, "exp") == tmp_path / "exp4"
    assert new_run_dir(tmp_path, "exp", exist_ok=True) == tmp_path / "exp"
    assert new_run_dir(tmp_path / "new" / "deep", "exp") == tmp_path / "new" / "deep" / "exp"


def test_a_failed_run_leaves_no_folder_holding_only_its_bookkeeping(tmp_path):
    fresh, earlier = tmp_path / "exp", tmp_path / "kept"
    fresh.mkdir()
    earlier.mkdir()
    (earlier / "args.yaml").write_text("argv: []\n")  # an earlier run's, reused with --exist-ok
    for folder in (fresh, earlier):
        with pytest.raises(FileNotFoundError), removed_if_left_empty(folder, ignoring=("args.yaml",)):
            (folder / "args.yaml").write_text("argv: [--x]\n")
            (folder / "mot").mkdir(exist_ok=True)
            raise FileNotFoundError("input")
    assert not fresh.exists() and (earlier / "args.yaml").is_file()


def _read_back(cls, job, tmp_path: Path):
    write_job_file(tmp_path / JOB_FILE, job, fingerprint={"a": 1})
    saved = yaml.safe_load((tmp_path / JOB_FILE).read_text())
    assert saved["fingerprint"] == {"a": 1}
    return job_from_data(cls, saved[JOB_KEY], where=str(tmp_path / JOB_FILE))


def test_every_commands_job_is_written_as_plain_data_and_read_back_equal(tmp_path):
    """A job of each command that makes a run folder, with nested settings, tuples, paths and None, survives
    args.yaml: read back, it equals the job (its paths were absolute already; a `str | Path` field reads back
    as text)."""
    weights = tmp_path / "w.pt"
    weights.touch()
    inference = InferenceConfig(conf=0.3, classes=(1, 3), augment=True, tta_scales=(1.0,))
    detector = DetectorSpec((str(weights),), inference=inference, slicing=SliceConfig(256, 0.25),
                            model_weights=(1.0,), runtime=RuntimeConfig(amp="off"))  # fmt: skip
    jobs = [
        PredictJob(detector, PredictInputs(source=str(tmp_path), resume=tmp_path / "run"),
                   RasterSettings(bands=(1, 2, 3)), OutputSettings(save_txt=True)),
        TrackJob(detector, TrackInputs(source=str(tmp_path)), TrackerChoice("botsort", "sparse"),
                 TrackOutputs(save_mot=True), output=OutputDir(str(tmp_path), "t", exist_ok=True)),
        TrackJob(inputs=TrackInputs(detections=str(tmp_path))),
        ValJob(replace(detector, weights=str(weights)), str(tmp_path / "data.yaml"),
               ValConfig(protocol="coco", workers=0), report=True, json=tmp_path / "n.json"),
        AnalyzeJob(AnalyzeInputs(lines=str(weights), tracks=tmp_path), tracking=AnalyzeTracking(cmc="none")),
    ]  # fmt: skip
    for job in jobs:
        assert _read_back(type(job), job, tmp_path) == job


def test_paths_are_made_absolute_hooks_left_out_and_objects_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("w.pt").touch()
    job = ValJob(DetectorSpec(torch.nn.Identity()), "visdrone", ValConfig(on_problems=print),
                 json=Path("out/n.json"))  # fmt: skip
    data = job_data(job)
    assert data["detector"]["weights"] == "<Identity object>" and "on_problems" not in data["config"]
    assert data["data"] == "visdrone" and data["json"] == str(tmp_path / "out" / "n.json")  # a name stays a name
    spec = job_data(PredictJob(DetectorSpec(("w.pt", "yolov5n")), PredictInputs(source="*.jpg")))
    assert spec["detector"]["weights"] == [str(tmp_path / "w.pt"), "yolov5n"]
    assert spec["inputs"]["source"] == str(tmp_path / "*.jpg")
    assert _read_back(ValJob, job, tmp_path).config.on_problems is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["detector"]["inference"].update(conf=2), r"args.yaml: detector.inference: --conf must be in "),
        (lambda d: d["detector"]["slicing"].update(size="big"), r"args.yaml: detector.slicing: "),
        (lambda d: d["inputs"].update(vid_stride="2"), r"args.yaml: inputs: --vid-stride must be int, got '2'"),
        (lambda d: d["outputs"].update(save_everything=True), r"args.yaml: outputs.save_everything: not a setting"),
        (lambda d: d.update(raster=[1]), r"raster: expected a mapping \(the settings of RasterSettings\), got list"),
    ],
)  # fmt: skip
def test_a_bad_job_file_is_one_line_naming_the_file_and_the_setting(change, message, tmp_path):
    data = job_data(PredictJob(DetectorSpec("w.pt", slicing=SliceConfig(512)), PredictInputs(source="x")))
    change(data)
    with pytest.raises(InputError, match=message) as error:
        job_from_data(PredictJob, data, where=str(tmp_path / "args.yaml"))
    assert "\n" not in str(error.value) and str(tmp_path) in str(error.value)


def test_differences_name_each_setting_with_both_values():
    then = job_data(PredictJob(DetectorSpec("w.pt"), PredictInputs(source="x")))
    now = job_data(PredictJob(DetectorSpec("w.pt", inference=InferenceConfig(conf=0.5, classes=(2,))),
                              PredictInputs(source="x")))  # fmt: skip
    assert differences(then, now) == [("detector.inference.conf", 0.25, 0.5), ("detector.inference.classes", None, [2])]
    assert differences(then, then) == []
