"""A runtime probe's choice taken under load or within the noise is provisional: a quieter run measures it
again, a bounded number of times; every choice is measured again after MAX_AGE_DAYS
(`tphyolo.runtime.probe_freshness`). The load, the clock and the step costs are injected: nothing is timed."""

import json
import logging

import pytest
import torch
from torch import nn

from tphyolo.runtime import probe
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.cpu_isa import CpuInfo
from tphyolo.runtime.probe import Candidate, ProbeJob
from tphyolo.runtime.probe_freshness import DAY_S, MAX_AGE_DAYS, MAX_REMEASURES, Conditions, Freshness, spread

CPU = torch.device("cpu")
AVX2_ONLY = CpuInfo(model="AMD EPYC 7B12", flags=frozenset({"sse4_2", "avx2", "fma"}))
TRAIN = ProbeJob("train", imgsz=64, batch=8)
T0 = 1.8e9  # seconds since the epoch of the first probe
QUIET, BUSY = Conditions(load=0.4, cores=2, time=T0), Conditions(load=5.2, cores=2, time=T0)
CLEAR = {"NCHW fp32": [0.60], "NHWC fp32": [0.40]}  # NHWC by 1.43x, the same time every step: no noise


class Steps:
    """A `Measure` whose steps cost, per candidate name, the given seconds in turn (cycled); counts its calls."""

    def __init__(self, costs: dict[str, list[float]]) -> None:
        self.costs, self.calls = costs, 0
        self._next = dict.fromkeys(costs, 0)

    def __call__(self, option: Candidate) -> float:
        self.calls += 1
        times, index = self.costs[option.name], self._next[option.name]
        self._next[option.name] = index + 1
        return times[index % len(times)]


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SiLU(), nn.Conv2d(8, 4, 1))


def probe_once(folder, conditions: Conditions, costs: dict[str, list[float]] = CLEAR) -> tuple[RuntimeConfig, int]:
    """The runtime chosen for TRAIN under `conditions`, and how many steps it timed."""
    steps = Steps(costs)
    tuned = probe.tuned_runtime(RuntimeConfig(), model(), CPU, TRAIN, folder=folder, measure=steps, cpu=AVX2_ONLY,
                                conditions=conditions)  # fmt: skip
    return tuned, steps.calls


def kept(folder) -> dict:
    (path,) = folder.glob("*.json")
    return json.loads(path.read_text())["measured"]


def test_a_choice_measured_under_load_is_provisional_and_measured_again_when_quieter(tmp_path, caplog):
    tuned, calls = probe_once(tmp_path, BUSY)
    assert tuned.channels_last is True and calls == 8  # 2 warm-ups + 3 rounds of 2
    assert kept(tmp_path) == {"measured_at": T0, "load": 5.2, "cores": 2, "spread": 0.0, "margin": pytest.approx(
        0.6 / 1.05 / 0.4 - 1, abs=1e-4), "remeasures": 0, "provisional": True}  # fmt: skip
    assert probe_once(tmp_path, BUSY)[1] == 0  # still busy: the provisional choice is used, not timed under load
    with caplog.at_level(logging.INFO, logger="tphyolo.runtime"):
        assert probe_once(tmp_path, QUIET)[1] == 8  # quieter: measured again
    (line,) = [r.getMessage() for r in caplog.records]
    assert ("per step; measured again (the kept NHWC fp32 was provisional (load 5.2 on 2 cores) and the machine "
            "is quieter now (load 0.4)) in ") in line  # one line: the choice and why it was measured again
    assert kept(tmp_path)["provisional"] is False and kept(tmp_path)["remeasures"] == 1
    assert probe_once(tmp_path, QUIET)[1] == 0  # settled


def test_a_provisional_choice_is_measured_again_at_most_max_remeasures_times(tmp_path):
    noisy = {"NCHW fp32": [0.50, 0.62, 0.41], "NHWC fp32": [0.48, 0.49, 0.48]}  # 1.04x, a 42% spread
    tuned, calls = probe_once(tmp_path, QUIET, noisy)
    entry = kept(tmp_path)
    assert entry["provisional"] is True and entry["spread"] == pytest.approx(0.21 / 0.50, abs=1e-4)
    assert tuned.channels_last is False  # medians 0.50 and 0.48: within MIN_GAIN, the baseline stays
    timed = [probe_once(tmp_path, QUIET, noisy)[1] for _ in range(MAX_REMEASURES + 2)]
    assert timed == [8] * MAX_REMEASURES + [0, 0]  # then kept as it is
    assert kept(tmp_path)["remeasures"] == MAX_REMEASURES


def test_every_choice_is_measured_again_once_older_than_the_age_limit(tmp_path):
    probe_once(tmp_path, QUIET)
    assert kept(tmp_path)["provisional"] is False
    almost = Conditions(load=0.4, cores=2, time=T0 + (MAX_AGE_DAYS - 1) * DAY_S)
    assert probe_once(tmp_path, almost)[1] == 0
    later = Conditions(load=3.0, cores=2, time=T0 + (MAX_AGE_DAYS + 1) * DAY_S)  # aged: measured even when busy
    assert probe_once(tmp_path, later)[1] == 8
    assert kept(tmp_path)["measured_at"] == later.time and kept(tmp_path)["remeasures"] == 0


def test_a_choice_kept_before_choices_had_a_freshness_is_measured_again(tmp_path):
    probe_once(tmp_path, QUIET)
    (path,) = tmp_path.glob("*.json")
    entry = json.loads(path.read_text())
    del entry["measured"]
    path.write_text(json.dumps(entry))
    assert probe_once(tmp_path, QUIET)[1] == 8 and "measured" in json.loads(path.read_text())


def test_the_margin_and_spread_rules():
    assert spread([0.5]) == 0.0 and spread([0.4, 0.5, 0.6]) == pytest.approx(0.4)
    nchw, nhwc = Candidate(channels_last=False, amp="off"), Candidate(channels_last=True, amp="off")
    # the baseline kept: the other was 2% faster, 3% short of MIN_GAIN
    assert probe.decision_margin((nchw, nhwc), {nchw: 1.0, nhwc: 0.98}, nchw) == pytest.approx(0.98 * 1.05 - 1)
    # the other chosen: its lead over the baseline counts from MIN_GAIN
    assert probe.decision_margin((nchw, nhwc), {nchw: 1.26, nhwc: 1.0}, nhwc) == pytest.approx(0.2)
    settled = Freshness(measured_at=T0, load=1.0, cores=2, spread=0.05, margin=0.2)
    assert not settled.provisional and settled.due(QUIET) is None
    assert Freshness(measured_at=T0, load=1.0, cores=2, spread=0.25, margin=0.2).provisional
    assert Freshness(measured_at=T0, load=2.5, cores=2, spread=0.0, margin=0.2).provisional
