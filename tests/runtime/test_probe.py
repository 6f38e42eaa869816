"""The runtime probe: the layout and precision left automatic are decided by timing the candidates (here with
injected step costs, so nothing depends on this machine's speed), kept in the cache, reused without timing,
overridden by explicit flags; bf16 is a candidate only on a CPU with native bf16."""

import json
import logging

import pytest
import torch
from torch import nn

from tphyolo.infer.backends.pytorch import TorchBackend
from tphyolo.runtime import probe
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.cpu_isa import CpuInfo, parse_cpuinfo
from tphyolo.runtime.probe import BF16_MODES, Candidate, ProbeJob, candidates, probe_key
from tphyolo.runtime.probe_freshness import Conditions

CPU = torch.device("cpu")
AVX2_ONLY = CpuInfo(model="AMD EPYC 7B12", flags=frozenset({"sse4_2", "avx2", "fma"}))
AVX512_NO_BF16 = CpuInfo(model="Intel Xeon Gold 6248", flags=frozenset({"avx2", "avx512f", "avx512_vnni"}))
AMX = CpuInfo(model="Intel Xeon Platinum 8481C", flags=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))
NCHW, NHWC = Candidate(channels_last=False, amp="off"), Candidate(channels_last=True, amp="off")
TRAIN = ProbeJob("train", imgsz=64, batch=8)
INFER = ProbeJob("infer", imgsz=64, batch=1)
QUIET = Conditions(load=0.3, cores=2, time=1.8e9)  # the machine of every probe here unless a test says otherwise


def tuned_runtime(*args, **kwargs):
    """The probe's `tuned_runtime` under QUIET conditions unless the call gives its own."""
    return probe.tuned_runtime(*args, **{"conditions": QUIET, **kwargs})


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(), nn.Conv2d(8, 4, 1))


class TinyDetector(nn.Sequential):
    """What a backend asks of a detection model besides its forward: a stride and class names."""

    stride = torch.tensor([8.0])
    names = ["a", "b"]


class FakeSteps:
    """A `Measure` whose step costs are given per candidate name; counts the steps it was asked for."""

    def __init__(self, costs: dict[str, float]) -> None:
        self.costs, self.calls = costs, []

    def __call__(self, option: Candidate) -> float:
        self.calls.append(option.name)
        return self.costs[option.name]


def never_called(option: Candidate) -> float:
    raise AssertionError(f"timed {option.name}, but the choice should not need timing")


def test_the_faster_layout_is_chosen_timed_interleaved_and_kept(tmp_path, caplog):
    steps = FakeSteps({"NCHW fp32": 0.60, "NHWC fp32": 0.43})
    with caplog.at_level(logging.INFO, logger="tphyolo.runtime"):
        tuned = tuned_runtime(RuntimeConfig(device="cpu"), tiny_model(), CPU, TRAIN, folder=tmp_path,
                              measure=steps, cpu=AVX2_ONLY)  # fmt: skip
    assert (tuned.channels_last, tuned.amp) == (True, "off")
    # one warm-up each, then rounds in alternating order (the fake steps take no wall time: every round runs)
    a, b = "NCHW fp32", "NHWC fp32"
    assert steps.calls == [a, b] + [a, b, b, a, a, b]
    (kept,) = tmp_path.glob("*.json")
    entry = json.loads(kept.read_text())
    assert entry["choice"] == {"channels_last": True, "amp": "off"}
    assert entry["seconds"] == {"NCHW fp32": 0.60, "NHWC fp32": 0.43}
    assert entry["key"]["mode"] == "train" and entry["key"]["batch"] == 8 and entry["key"]["imgsz"] == 64
    assert entry["key"]["machine"].startswith("AMD EPYC 7B12 | flags ")
    (line,) = [r.getMessage() for r in caplog.records if "runtime probe" in r.getMessage()]
    assert "NHWC fp32 (NCHW fp32 600 ms, NHWC fp32 430 ms per step; measured in" in line


def test_a_cached_choice_is_reused_without_timing(tmp_path, caplog):
    model = tiny_model()
    first = tuned_runtime(RuntimeConfig(), model, CPU, INFER, folder=tmp_path,
                          measure=FakeSteps({"NHWC fp32": 0.05, "NCHW fp32": 0.09}), cpu=AVX2_ONLY)  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tphyolo.runtime"):
        again = tuned_runtime(RuntimeConfig(), model, CPU, INFER, folder=tmp_path, measure=never_called, cpu=AVX2_ONLY)
    assert again == first and again.channels_last is True
    assert any("from the cache" in r.getMessage() for r in caplog.records)
    # another image size, batch, mode or machine is another key: timed again
    other = FakeSteps({"NHWC fp32": 0.2, "NCHW fp32": 0.1})
    bigger = tuned_runtime(RuntimeConfig(), model, CPU, ProbeJob("infer", imgsz=128, batch=1), folder=tmp_path,
                           measure=other, cpu=AVX2_ONLY)  # fmt: skip
    assert bigger.channels_last is False and len(other.calls) == 8
    assert len(list(tmp_path.glob("*.json"))) == 2


def test_the_baseline_stays_unless_a_candidate_is_clearly_faster(tmp_path):
    steps = FakeSteps({"NCHW fp32": 0.50, "NHWC fp32": 0.49})  # 1.02x: within MIN_GAIN
    tuned = tuned_runtime(RuntimeConfig(), tiny_model(), CPU, TRAIN, folder=tmp_path, measure=steps, cpu=AVX2_ONLY)
    assert tuned.channels_last is False  # today's training layout


def test_rounds_stop_once_the_budget_is_spent(tmp_path):
    ticks = iter(range(0, 1000, 10))  # a clock that says 10 s passed between any two readings
    seconds = probe.time_candidates((NCHW, NHWC), FakeSteps({"NCHW fp32": 2.0, "NHWC fp32": 1.0}),
                                    clock=lambda: next(ticks))  # fmt: skip
    assert seconds == {NCHW: [2.0], NHWC: [1.0]}  # one round after the warm-up, no more


def test_explicit_flags_override_the_probe(tmp_path):
    model = tiny_model()
    fixed = RuntimeConfig(channels_last=False, amp="bf16")
    assert tuned_runtime(fixed, model, CPU, TRAIN, folder=tmp_path, measure=never_called, cpu=AMX) == fixed
    # one setting given: the other is still timed, among the candidates the given one allows
    steps = FakeSteps({"NHWC fp32": 0.3, "NHWC bf16": 0.1})
    tuned = tuned_runtime(RuntimeConfig(channels_last=True), model, CPU, INFER, folder=tmp_path, measure=steps,
                          cpu=AVX2_ONLY)  # fmt: skip
    assert (tuned.channels_last, tuned.amp) == (True, "off") and steps.calls == []  # one candidate: nothing timed
    layout = tuned_runtime(RuntimeConfig(amp="off"), model, CPU, TRAIN, folder=tmp_path,
                           measure=FakeSteps({"NCHW fp32": 0.3, "NHWC fp32": 0.1}), cpu=AMX)  # fmt: skip
    assert (layout.channels_last, layout.amp) == (True, "off")
    assert not list(tmp_path.glob("*.json"))[1:]  # only the one timed choice was kept


@pytest.mark.parametrize("cpu", [AVX2_ONLY, AVX512_NO_BF16], ids=["avx2", "avx512-without-bf16"])
@pytest.mark.parametrize("mode", ["train", "infer"])
def test_bf16_is_never_a_candidate_without_native_bf16(cpu, mode):
    names = [c.name for c in candidates(RuntimeConfig(), CPU, mode, cpu)]
    assert names == (["NCHW fp32", "NHWC fp32"] if mode == "train" else ["NHWC fp32", "NCHW fp32"])


def test_bf16_candidates_follow_the_measured_rule_on_a_cpu_with_native_bf16():
    # Inference: bf16 autocast lost 0.005-0.007 mAP50 on the main job's model: not a candidate. Training: as
    # the main job's fp32/bf16 comparison decided (BF16_MODES).
    assert [c.name for c in candidates(RuntimeConfig(), CPU, "infer", AMX)] == ["NHWC fp32", "NCHW fp32"]
    train = [c.name for c in candidates(RuntimeConfig(), CPU, "train", AMX)]
    bf16 = ["NCHW bf16", "NHWC bf16"] if "train" in BF16_MODES else []
    assert train == ["NCHW fp32", "NHWC fp32", *bf16]
    # asked for, bf16 is what runs, whatever the CPU
    assert [c.name for c in candidates(RuntimeConfig(amp="bf16"), CPU, "infer", AVX2_ONLY)] == [
        "NHWC bf16",
        "NCHW bf16",
    ]


def test_a_corrupted_cache_file_is_ignored_with_one_line(tmp_path, caplog):
    model, runtime = tiny_model(), RuntimeConfig()
    options = candidates(runtime, CPU, "train", AVX2_ONLY)
    path = probe.cache_path(probe_key(model, CPU, TRAIN, options, AVX2_ONLY), tmp_path)
    for garbage in ("{not json", json.dumps({"key": "elsewhere"}), json.dumps([1, 2])):
        path.write_text(garbage)
        caplog.clear()
        steps = FakeSteps({"NCHW fp32": 0.6, "NHWC fp32": 0.4})
        with caplog.at_level(logging.INFO, logger="tphyolo.runtime"):
            tuned = tuned_runtime(runtime, model, CPU, TRAIN, folder=tmp_path, measure=steps, cpu=AVX2_ONLY)
        assert tuned.channels_last is True and steps.calls  # measured again
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and str(path) in warnings[0] and "ignoring" in warnings[0]
        assert json.loads(path.read_text())["choice"] == {"channels_last": True, "amp": "off"}  # rewritten
    assert probe.cached_choices(tmp_path)[0]["choice"] == "NHWC fp32"


def test_the_real_step_timer_runs_each_candidate_on_a_copy():
    model = tiny_model().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    for job in (ProbeJob("train", imgsz=32, batch=2), ProbeJob("infer", imgsz=32, batch=1)):
        measure = probe.step_timer(model, RuntimeConfig(), CPU, job)
        assert all(measure(option) > 0 for option in (NCHW, NHWC, Candidate(channels_last=True, amp="bf16")))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)  # BatchNorm statistics untouched
    assert model.training and next(model.parameters()).grad is None


def test_inference_backends_follow_the_probe(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # the user cache of this test
    torch.manual_seed(0)
    detector = TinyDetector(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(), nn.Conv2d(8, 7, 1))
    backend = TorchBackend.load(detector, runtime=RuntimeConfig(device="cpu"), device=CPU, job=INFER)
    (kept,) = (tmp_path / "tphyolo" / "runtime-probe").glob("*.json")
    chosen = json.loads(kept.read_text())["choice"]
    assert chosen["amp"] == "off"  # inference never considers bf16 by itself
    assert (backend.runtime.channels_last, backend.runtime.amp) == (chosen["channels_last"], "off")
    assert TorchBackend.load(detector, runtime=RuntimeConfig(), device=CPU).runtime == RuntimeConfig()  # no job


def test_cpuinfo_names_the_isa():
    text = (
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz\n"
        "flags\t\t: fpu sse avx2 avx512f avx512_vnni avx512_bf16 amx_bf16 amx_int8 amx_tile\n\nprocessor\t: 1\n"
    )
    cpu = parse_cpuinfo(text)
    assert cpu.model == "Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz"
    assert cpu.isa == ("AVX2", "AVX-512", "AVX512-VNNI", "AVX512-BF16", "AMX-BF16", "AMX-INT8")
    assert cpu.has_native_bf16 and not AVX512_NO_BF16.has_native_bf16 and not AVX2_ONLY.has_native_bf16
    assert AVX512_NO_BF16.isa == ("AVX2", "AVX-512", "AVX512-VNNI")
    assert parse_cpuinfo("") == CpuInfo(model="", flags=frozenset())


def test_a_probe_that_fails_keeps_the_baseline_and_caches_nothing(tmp_path, caplog):
    def broken(option: Candidate) -> float:
        raise IndexError("pop from empty list")  # a model that replays recorded outputs, say

    with caplog.at_level(logging.WARNING, logger="tphyolo.runtime"):
        tuned = tuned_runtime(RuntimeConfig(), tiny_model(), CPU, INFER, folder=tmp_path, measure=broken, cpu=AMX)
    assert (tuned.channels_last, tuned.amp) == (True, "off")  # today's rule for inference on the CPU
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == "runtime probe failed (IndexError: pop from empty list); keeping NHWC fp32"
    assert not list(tmp_path.iterdir())
