"""`tphyolo doctor` and `tphyolo.doctor.report()`: the schema and truthfulness of the report on this machine."""

import json
from dataclasses import replace

import pytest
import torch

from tphyolo import doctor
from tphyolo.cli import main
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.decisions import decide_runtime, kept_tunings


@pytest.mark.slow
def test_doctor_json_schema_and_exit_code(capsys):
    assert main(["doctor", "--json", "--compile-check"]) == 0
    report = json.loads(capsys.readouterr().out)
    for key in (
        "tphyolo", "python", "torch", "cuda", "devices", "sdpa", "precision", "allocator", "compile", "cpu",
        "pinned_memory", "problems",
    ):  # fmt: skip
        assert key in report, key
    assert report["torch"]["version"] == torch.__version__
    assert report["cuda"]["available"] == torch.cuda.is_available()
    assert len(report["devices"]) == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert set(report["sdpa"]["probes"]) == {"small", "masked"}
    for row in report["sdpa"]["probes"].values():
        assert set(row) == {"default", "flash", "efficient", "cudnn", "math"}
        assert row["math"] == "ok"
        assert not row["default"].startswith("error")
    assert report["compile"]["available"] in (True, False)
    assert report["cpu"]["torch_threads"] == torch.get_num_threads()
    for problem in report["problems"]:
        assert problem["message"] and problem["fix"]


def test_doctor_names_the_kernel_that_ran_on_cpu():
    probes = doctor.report(compile_check=False).sdpa["probes"]
    if not torch.cuda.is_available():
        # The CPU build has a fused flash kernel; the efficient and cudnn kernels are CUDA-only.
        assert probes["small"]["default"] in ("flash (cpu)", "math")
        assert probes["small"]["efficient"].startswith("unavailable")


def test_problems_have_fixes():
    report = doctor.report(compile_check=False)
    broken = replace(report, compile={"available": False, "error": "no compiler", "backend": "inductor (C++)"})
    messages = [p.message for p in doctor.find_problems(broken)]
    assert any("torch.compile does not work" in m for m in messages)
    broken = replace(report, cpu=dict(report.cpu, torch_threads=64, usable_cores=2))
    assert any("64 threads" in p.message and "OMP_NUM_THREADS=2" in p.fix for p in doctor.find_problems(broken))


def test_human_report_mentions_kernels(capsys):
    assert main(["doctor", "--no-compile-check"]) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "sdpa small" in out and "ran:" in out and "not checked" in out
    assert "probing attention kernels" in captured.err  # a slow probe says so before it starts


def test_the_cpu_malloc_line_says_who_sets_it(monkeypatch, capsys):
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    report = doctor.report(compile_check=False)
    assert report.allocator["cpu_malloc"]["user_choice"] is None
    assert "keep freed blocks up to 1024 MiB" in doctor.format_report(report)
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "0")
    report = doctor.report(compile_check=False)
    assert "left to your setting MALLOC_TRIM_THRESHOLD_=0" in doctor.format_report(report)


def test_cpu_only_is_a_fact_not_a_problem():
    report = doctor.report(compile_check=False)
    cpu_only = replace(report, cuda=dict(report.cuda, available=False, device_count=0, built_with=None), devices=())
    assert not any("CUDA" in p.message for p in doctor.find_problems(cpu_only))
    assert doctor.device_summary(replace(cpu_only, cuda=dict(cpu_only.cuda, built_with=None))).startswith("CPU only")
    gpu = replace(report, cuda=dict(report.cuda, available=True, device_count=1), devices=({"index": 0, "name": "X"},))
    assert doctor.device_summary(gpu) == "1 CUDA GPU(s) (0: X)"


def test_compile_probe_runs_by_default_only_with_a_gpu(monkeypatch):
    calls = []
    monkeypatch.setattr(
        "tphyolo.doctor.probes.probe_compile", lambda device: calls.append(device) or {"available": True}
    )
    report = doctor.report()
    assert report.compile.get("skipped") is (not torch.cuda.is_available())
    assert len(calls) == int(torch.cuda.is_available())
    assert doctor.report(compile_check=True).compile == {"available": True}


def test_a_cuda_build_without_a_gpu_says_what_it_costs_and_how_to_install_the_cpu_build():
    report = doctor.report(compile_check=False)
    assert report.install["torch_bytes"] > 0  # measured from the installed files
    install = {"torch_bytes": 1_200_000_000, "cuda_libraries_bytes": 4_300_000_000}
    no_gpu = replace(report, cuda=dict(report.cuda, available=False, built_with="13.0"), devices=(), install=install)
    (problem,) = [p for p in doctor.find_problems(no_gpu) if "CUDA build" in p.message]
    assert "takes 5.5 GB here, 4.3 GB of it CUDA libraries" in problem.message
    assert "--index-url https://download.pytorch.org/whl/cpu" in problem.fix
    cpu_build = replace(no_gpu, cuda=dict(no_gpu.cuda, built_with=None), install={**install, "cuda_libraries_bytes": 0})
    assert not any("CUDA build" in p.message for p in doctor.find_problems(cpu_build))


def test_report_is_a_value_with_this_machines_numbers():
    found = doctor.report(compile_check=False)
    assert isinstance(found, doctor.DoctorReport)
    assert found.torch["version"] == torch.__version__ and found.cpu["torch_threads"] == torch.get_num_threads()
    assert found.install["torch_bytes"] > 0 and found.sdpa["probes"]["small"]["math"] == "ok"
    with pytest.raises(AttributeError):  # frozen: a report is what was found, not a place to write
        found.torch = {}
    assert found.to_dict()["torch"]["version"] == torch.__version__
    assert f"torch         {torch.__version__}" in found.text()


def test_tune_measures_keeps_and_lists_the_training_decision(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["doctor", "--tune", "--model", "yolov5n", "--img", "32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(("train yolov5n: NCHW fp32 (", "train yolov5n: NHWC fp32 ("))
    (kept,) = kept_tunings(tmp_path / "tphyolo" / "decisions")
    assert kept["architecture"] == "yolov5n" and kept["mode"] == "train" and set(kept["measured"]["seconds"]) == {
        "NCHW fp32", "NHWC fp32"}  # the suite's CPU has no native bf16 (conftest)
    _, why = decide_runtime(RuntimeConfig(), torch.device("cpu"), mode="train", architecture="yolov5n")
    assert why["layout"].source == "tuned" and why["layout"].value == kept["choice"].split()[0]
