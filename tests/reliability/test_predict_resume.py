"""`predict --resume` reads its run folder as untrusted input: every journal line is checked (shapes, finite
values, known files and frames, class range, nesting) and a bad one is reported with file:line and its unit
redone, so that predictions.json equals an uninterrupted run's; a resume refuses changed weights or added
sources in one line, names a source that is gone and goes on, names an args.yaml without settings, and reads
and converts the args.yaml of an older version."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from tests.helpers import exit_code, one_error_line
from tests.reliability.corpus import jpeg_bytes

from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.job import PredictInputs, PredictJob
from tphyolo.predict.run import run_predict
from tphyolo.predict.runner.journal import JOURNAL_DIR


@pytest.fixture(scope="module")
def finished_run(weights, tmp_path_factory) -> Path:
    """A finished run over 4 images (one unit each) with predictions.json: the oracle of every resume below."""
    root = tmp_path_factory.mktemp("resume")
    (root / "src").mkdir()
    for i in range(4):
        (root / "src" / f"{i}.jpg").write_bytes(jpeg_bytes(i, (64, 96)))
    argv = ["predict", "--weights", str(weights), "--source", str(root / "src"), "--img", "64", "--conf", "0.001",
            "--save-json", "--no-save-img", "--device", "cpu", "--project", str(root), "--name", "run"]  # fmt: skip
    assert exit_code(argv) == 0
    run = root / "run"
    assert len(json.loads((run / "predictions.json").read_text())) > 20  # rows for the journal lines to carry
    return run


def _copy(run: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "predictions.json").unlink()
    return copy


def _moved_source(run: Path, finished_run: Path, tmp_path: Path) -> Path:
    """A copy of the run's source folder in `tmp_path`, which `run`'s args.yaml is made to name."""
    source, old = tmp_path / "src", str(finished_run.parent / "src")
    shutil.copytree(old, source)
    settings = yaml.safe_load((run / "args.yaml").read_text())
    settings["job"]["inputs"]["source"] = str(source)
    settings["sources"] = [s.replace(old, str(source)) for s in settings["sources"]]
    (run / "args.yaml").write_text(yaml.safe_dump(settings))
    return source


def _resume(run: Path) -> int:
    return exit_code(["predict", "--resume", str(run), "--device", "cpu"])


def _spoil(record: dict, kind: str) -> str:
    frame = record["frames"][0]
    if kind == "row_shape":
        frame[3] = [row[:4] for row in frame[3]]
    elif kind == "infinity":
        frame[3][0][0] = float("inf")
    elif kind == "nan":
        frame[3][0][2] = float("nan")
    elif kind == "class_999":
        frame[3][0][5] = 999.0
    elif kind == "unknown_file":
        frame[0] = "never_there"
    elif kind == "unknown_unit":
        record["files"], frame[0] = ["never_there"], "never_there"
    elif kind == "negative_index":
        frame[1] = -5
    return json.dumps(record)


SLOW = pytest.mark.slow  # each resume loads the model and predicts one image: the fast lane keeps three kinds


@pytest.mark.parametrize(
    "kind",
    ["nan", "class_999", "deep", *(pytest.param(k, marks=SLOW) for k in
                                    ("row_shape", "infinity", "unknown_file", "unknown_unit", "negative_index"))],
)  # fmt: skip
def test_a_bad_journal_line_is_reported_and_its_unit_redone(kind, finished_run, tmp_path, capsys):
    run = _copy(finished_run, tmp_path)
    journal = run / JOURNAL_DIR / "rank0.jsonl"
    lines = journal.read_text().splitlines()
    lines[1] = "[" * 100_000 + "]" * 100_000 if kind == "deep" else _spoil(json.loads(lines[1]), kind)
    journal.write_text("\n".join(lines) + "\n")
    assert _resume(run) == 0
    captured = capsys.readouterr()
    assert f"{journal}:2: " in captured.err and "its unit is redone" in captured.err and "Traceback" not in captured.err
    assert "(3 finished before)" in captured.out
    resumed, whole = (json.loads((r / "predictions.json").read_text()) for r in (run, finished_run))
    assert resumed == whole


def test_a_resume_with_other_weights_at_the_same_path_is_refused(finished_run, weights, tmp_path, capsys):
    run = _copy(finished_run, tmp_path)
    settings = yaml.safe_load((run / "args.yaml").read_text())
    other = tmp_path / "other.pt"
    other.write_bytes(weights.read_bytes() + b"\0")  # another file, same bytes but one
    settings["weights_sha256"] = {str(other): settings["weights_sha256"][str(weights)]}
    settings["job"]["detector"]["weights"] = [str(other)]
    (run / "args.yaml").write_text(yaml.safe_dump(settings))
    assert _resume(run) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert f"weights {other} changed since the run began" in line


def test_a_resume_with_an_added_source_is_refused(finished_run, tmp_path, capsys):
    run = _copy(finished_run, tmp_path)
    source = _moved_source(run, finished_run, tmp_path)
    (source / "new.jpg").write_bytes(jpeg_bytes(9))
    assert _resume(run) == 2
    assert f"source {source / 'new.jpg'} was not among the run's sources" in one_error_line(
        capsys.readouterr().err, "predict"
    )


def test_a_removed_source_is_named_and_the_rest_goes_on(finished_run, tmp_path, capsys):
    run = _copy(finished_run, tmp_path)
    source = _moved_source(run, finished_run, tmp_path)
    journal = run / JOURNAL_DIR / "rank0.jsonl"
    journal.write_text("\n".join(journal.read_text().splitlines()[:2]) + "\n")  # units 0 and 1 finished
    (source / "1.jpg").unlink()
    assert _resume(run) == 0
    err = capsys.readouterr().err
    assert f"{source / '1.jpg'} of the run is gone" in err and "Traceback" not in err
    names = {p["image_id"] for p in json.loads((run / "predictions.json").read_text())}
    expected = {p["image_id"] for p in json.loads((finished_run / "predictions.json").read_text())} - {"1", 1}
    assert names == expected


@pytest.mark.parametrize("argv", [[], ["--img", "64"]])
def test_an_args_yaml_without_source_or_weights_is_named(argv, finished_run, tmp_path, capsys):
    run = _copy(finished_run, tmp_path)
    (run / "args.yaml").write_text(yaml.safe_dump({"argv": argv}))
    assert _resume(run) == 2
    line = one_error_line(capsys.readouterr().err, "predict")
    assert f"{run / 'args.yaml'}: 'argv' has no --source" in line


def test_a_run_folder_of_an_older_version_is_read_through_its_flags_and_converted(finished_run, weights, tmp_path):
    """An older version kept the command's flags (`argv`) in args.yaml: `predict --resume` reads them, rewrites
    the file with the job (the fingerprint kept) and finishes the run as it began; from Python, where no flags
    can be read, such a folder is refused in one line saying how to convert it."""
    run = _copy(finished_run, tmp_path)
    settings = yaml.safe_load((run / "args.yaml").read_text())
    source = settings["job"]["inputs"]["source"]
    older = {"argv": [f"--source={source}", f"--weights={weights}", "--img=64", "--conf=0.001", "--save-json",
                      "--no-save-img"], "weights_sha256": settings["weights_sha256"], "sources": settings["sources"]}
    (run / "args.yaml").write_text(yaml.safe_dump(older))
    job = PredictJob(DetectorSpec((str(weights),)), PredictInputs(source=source, resume=run))
    with pytest.raises(ValueError, match=r"args.yaml: written by an older tphyolo .*'tphyolo predict --resume "):
        run_predict(job)
    assert _resume(run) == 0
    converted = yaml.safe_load((run / "args.yaml").read_text())
    assert "argv" not in converted and converted["weights_sha256"] == older["weights_sha256"]
    for job_data in (converted["job"], settings["job"]):  # where it ran aside: the run's own settings
        del job_data["output"], job_data["detector"]["device"]
    assert converted["job"] == settings["job"]
    resumed, whole = (json.loads((r / "predictions.json").read_text()) for r in (run, finished_run))
    assert resumed == whole
