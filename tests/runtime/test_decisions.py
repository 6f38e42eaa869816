"""Layout and precision are decided once, the same whatever the machine's load: a flag, --deterministic, what
`tphyolo doctor --tune` kept, else the rule by device and CPU (`tphyolo.runtime.decisions`); only the explicit
tuning times anything (`tphyolo.runtime.probe`), with injected steps and clock here, so nothing depends on this
machine's speed."""

import json
import logging
import os

import pytest
import torch
import yaml
from torch import nn

from tphyolo.runtime import decisions, probe
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.cpu_isa import CpuInfo
from tphyolo.runtime.decisions import Decision, decide_runtime, kept_tunings, tuning_key, tuning_path
from tphyolo.runtime.probe import Candidate, candidates, pick, tune

CPU = torch.device("cpu")
AVX2_ONLY = CpuInfo(model="AMD EPYC 7B12", flags=frozenset({"sse4_2", "avx2", "fma"}))
AMX = CpuInfo(model="Intel Xeon Platinum 8481C", flags=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16"}))


class TinyDetector(nn.Sequential):
    stride = torch.tensor([8.0])


def tiny_model() -> nn.Module:
    torch.manual_seed(0)
    return TinyDetector(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.SiLU(), nn.Conv2d(8, 4, 1))


def test_the_rule_decides_by_device_and_cpu_without_timing_anything(monkeypatch, tmp_path):
    monkeypatch.setattr(probe, "step_timer", lambda *a, **k: pytest.fail("a run timed a candidate"))
    monkeypatch.setattr(os, "getloadavg", lambda: (50.0, 50.0, 50.0))  # a busy machine changes nothing
    train_amx, why = decide_runtime(RuntimeConfig(), CPU, mode="train", cpu=AMX, architecture="m", folder=tmp_path)
    assert (train_amx.channels_last, train_amx.amp) == (True, "bf16")
    assert why["layout"].source == why["precision"].source == "rule"
    train_avx2, _ = decide_runtime(RuntimeConfig(), CPU, mode="train", cpu=AVX2_ONLY, folder=tmp_path)
    assert (train_avx2.channels_last, train_avx2.amp) == (False, "off")
    for cpu in (AMX, AVX2_ONLY):  # inference on the CPU: NHWC fp32 with or without bf16
        infer, _ = decide_runtime(RuntimeConfig(), CPU, mode="infer", cpu=cpu, folder=tmp_path)
        assert (infer.channels_last, infer.amp) == (True, "off")
    assert not any(tmp_path.iterdir())  # deciding writes nothing


def test_flags_and_deterministic_win_over_the_rule_and_a_kept_tuning(tmp_path):
    key = tuning_key(CPU, "train", "m", AMX)
    decisions.write_tuning(tuning_path(key, tmp_path), key, channels_last=False, amp="bf16", measured={})
    given, why = decide_runtime(RuntimeConfig(amp="off", channels_last=True), CPU, mode="train", architecture="m",
                                cpu=AMX, folder=tmp_path)  # fmt: skip
    assert (given.channels_last, given.amp) == (True, "off")
    assert why["precision"] == Decision("fp32", "flag", "--amp off")
    exact, why = decide_runtime(RuntimeConfig(deterministic=True), CPU, mode="train", architecture="m", cpu=AMX,
                                folder=tmp_path)  # fmt: skip
    assert (exact.channels_last, exact.amp) == (False, "off")
    assert why["layout"].source == why["precision"].source == "deterministic"
    with pytest.raises(ValueError, match="--deterministic runs fp32 NCHW uncompiled; .* --amp bf16"):
        RuntimeConfig(deterministic=True, amp="bf16")


def test_a_kept_tuning_is_used_for_its_key_only_and_a_damaged_one_is_a_miss(tmp_path, caplog):
    key = tuning_key(CPU, "train", "tph-yolov5n", AMX)
    path = tuning_path(key, tmp_path)
    decisions.write_tuning(path, key, channels_last=False, amp="bf16", measured={"date": "2026-12-06 18:00"})
    tuned, why = decide_runtime(RuntimeConfig(), CPU, mode="train", architecture="tph-yolov5n", cpu=AMX,
                                folder=tmp_path)  # fmt: skip
    assert (tuned.channels_last, tuned.amp) == (False, "bf16") and why["layout"].source == "tuned"
    assert "tphyolo doctor --tune on 2026-12-06 18:00" in why["layout"].why
    other, why = decide_runtime(RuntimeConfig(), CPU, mode="train", architecture="tph-yolov5s", cpu=AMX,
                                folder=tmp_path)  # fmt: skip
    assert why["layout"].source == "rule" and other.channels_last is True
    for damaged in ("[" * 100_000, "[]", "{truncated", json.dumps({"key": key, "choice": {"amp": "bf16"}})):
        path.write_text(damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="tphyolo.runtime"):
            _, why = decide_runtime(RuntimeConfig(), CPU, mode="train", architecture="tph-yolov5n", cpu=AMX,
                                    folder=tmp_path)  # fmt: skip
        assert why["layout"].source == "rule"
        assert [r.getMessage().split(":")[0] for r in caplog.records] == [str(path)]
    path.write_text(" " * (1 << 20) + "{}")  # too large to be a decision: not read
    assert decisions.read_tuning(path, key) is None


class FakeSteps:
    """Steps whose cost per candidate is given: each moves the injected clock."""

    def __init__(self, costs: dict[str, float]) -> None:
        self.costs, self.now, self.calls = costs, 0.0, []

    def clock(self) -> float:
        return self.now

    def __call__(self, option: Candidate) -> None:
        self.calls.append(option.name)
        self.now += self.costs[option.name]


def test_tuning_times_interleaved_keeps_the_fastest_and_notes_a_busy_machine(tmp_path):
    steps = FakeSteps({"NHWC bf16": 1.0, "NCHW bf16": 2.0, "NCHW fp32": 4.0, "NHWC fp32": 3.0})
    found = tune(tiny_model(), CPU, mode="train", architecture="tiny", imgsz=30, folder=tmp_path, measure=steps,
                 clock=steps.clock, cpu=AMX, load=(5.1, 2))  # fmt: skip
    assert found.chosen == Candidate(True, "bf16") and found.busy and "tune again when quiet" in found.line()
    assert steps.calls[:4] == [c.name for c in candidates(CPU, "train", AMX)]  # warm-ups, the rule's first
    kept = kept_tunings(tmp_path)
    assert [(k["architecture"], k["mode"], k["choice"], k["measured"]["load"]) for k in kept] == [
        ("tiny", "train", "NHWC bf16", 5.1)]
    again, why = decide_runtime(RuntimeConfig(), CPU, mode="train", architecture="tiny", cpu=AMX, folder=tmp_path)
    assert why["precision"].source == "tuned" and (again.channels_last, again.amp) == (True, "bf16")


def test_a_candidate_replaces_the_rule_only_by_the_margin():
    rule, other = Candidate(True, "bf16"), Candidate(False, "off")
    assert pick([rule, other], {rule: 1.0, other: 0.97}) == rule  # 3 % faster: a tie keeps the rule
    assert pick([rule, other], {rule: 1.0, other: 0.5}) == other
    assert candidates(CPU, "train", AVX2_ONLY) == (Candidate(False, "off"), Candidate(True, "off"))
    assert tune(tiny_model(), CPU, mode="infer", architecture="x", imgsz=32, cpu=AVX2_ONLY,
                measure=FakeSteps({"NHWC fp32": 1.0, "NCHW fp32": 1.0})) is not None  # fmt: skip


def test_the_real_step_timer_runs_both_modes(tmp_path):
    for mode in ("train", "infer"):
        found = tune(tiny_model(), CPU, mode=mode, architecture="tiny", imgsz=16, folder=tmp_path,
                     cpu=AVX2_ONLY, load=(0.1, 2))  # fmt: skip
        assert set(found.seconds) == {"NCHW fp32", "NHWC fp32"} and all(s > 0 for s in found.seconds.values())


def test_decisions_are_written_as_plain_yaml(tmp_path):
    ran = {"runtime": Decision("openvino", "rule", "a checkpoint on the CPU"), "threads": Decision("2", "flag")}
    path = decisions.write_decisions(tmp_path, {"predict": ran})
    assert yaml.safe_load(path.read_text()) == {"predict": {
        "runtime": {"value": "openvino", "source": "rule", "why": "a checkpoint on the CPU"},
        "threads": {"value": "2", "source": "flag", "why": ""}}}
    assert decisions.describe(ran) == "runtime openvino (rule: a checkpoint on the CPU); threads 2 (flag)"
