"""`run_val` from Python, without the command line: a job scored by a detector that knows the answer gives its
perfect numbers, the run folder with the files asked for, its job (args.yaml) and the json; with a report, the
json holds the report's numbers; a job whose data fail to load leaves no run folder."""

import json
from dataclasses import replace

import pytest
import yaml
from tests.evaluation.test_evaluate import CPU, VISDRONE_NAMES
from tests.evaluation.test_validate import NamedOracle, _loader

from tphyolo.evaluation.jobs import ValJob
from tphyolo.evaluation.results import results_json
from tphyolo.evaluation.settings import ValConfig
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.report.val_run import run_val
from tphyolo.runtime.run_dir import OutputDir, job_from_data

INFERENCE = InferenceConfig(imgsz=320, batch=2, conf=0.001, iou=0.99)


@pytest.fixture
def oracle(data_yaml):
    """The ground-truth detector of one run (it hands out each batch's answer once)."""
    return NamedOracle(_loader(data_yaml, imgsz=320, batch=2), VISDRONE_NAMES)  # the loader val builds


def test_a_job_scores_writes_its_run_folder_and_the_json(oracle, data_yaml, tmp_path):
    job = ValJob(DetectorSpec(oracle, inference=INFERENCE), data_yaml,
                 ValConfig(protocol="coco", workers=0, save_json=True), json=tmp_path / "out" / "numbers.json",
                 output=OutputDir(project=str(tmp_path), name="v"))  # fmt: skip
    run = run_val(job, runtime=CPU)
    assert run.results.save_dir == tmp_path / "v" and run.report is None
    assert run.results.images == 4 and run.results.map == pytest.approx(1.0, abs=1e-6)
    assert (tmp_path / "v" / "predictions.json").is_file()
    assert json.loads((tmp_path / "out" / "numbers.json").read_text()) == run.numbers == results_json(run.results)
    saved = job_from_data(ValJob, yaml.safe_load((tmp_path / "v" / "args.yaml").read_text())["job"], where="args.yaml")
    model = f"<{type(oracle).__qualname__} object>"  # a model given in memory is named, not kept
    assert saved == replace(job, detector=replace(job.detector, weights=model), data=str(data_yaml))


@pytest.mark.slow
def test_a_job_with_a_report_writes_the_reports_numbers(oracle, data_yaml, tmp_path):
    job = ValJob(DetectorSpec(oracle, inference=INFERENCE), data_yaml, ValConfig(protocol="visdrone", workers=0),
                 report=True, json=tmp_path / "numbers.json",
                 output=OutputDir(project=str(tmp_path), name="v"))  # fmt: skip
    run = run_val(job, runtime=CPU)
    assert run.report == tmp_path / "v" / "report.html" and run.report.is_file()
    numbers = json.loads((tmp_path / "numbers.json").read_text())
    assert numbers == run.numbers == json.loads((tmp_path / "v" / "report.json").read_text())
    assert numbers["protocol"] == "visdrone" and numbers["settings"]["imgsz"] == 320 and len(numbers["images"]) == 4


def test_a_job_whose_data_fail_to_load_leaves_no_run_folder(oracle, tmp_path):
    job = ValJob(DetectorSpec(oracle, inference=INFERENCE), tmp_path / "none.yaml", ValConfig(workers=0),
                 output=OutputDir(project=str(tmp_path / "runs"), name="v"))  # fmt: skip
    with pytest.raises((FileNotFoundError, ValueError), match="none.yaml"):
        run_val(job, runtime=CPU)
    assert not (tmp_path / "runs").exists()
