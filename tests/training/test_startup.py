"""The time to the first training step: consecutive phases that add up, recorded by a real run."""

import json
import time

import pytest

from tphyolo.runtime.config import RuntimeConfig
from tphyolo.training.config import TrainConfig
from tphyolo.training.startup import StartupClock, process_age
from tphyolo.training.trainer import train

TRAINER_PHASES = ["imports", "setup", "data", "model", "optimiser", "compile", "first batch", "first step"]


def test_phases_are_consecutive_and_add_up():
    clock = StartupClock()
    time.sleep(0.02)
    clock.mark("a")
    time.sleep(0.01)
    clock.mark("b")
    clock.mark("a")  # a phase marked again accumulates
    assert list(clock.phases)[-2:] == ["a", "b"]
    assert clock.phases["a"] >= 0.02 and clock.phases["b"] >= 0.01
    assert sum(clock.phases.values()) == pytest.approx(clock.total, abs=1e-9)
    assert "time to first step" in clock.summary() and f"b {clock.phases['b']:.2f}" in clock.summary()


def test_process_age_is_the_time_since_this_process_started():
    age = process_age()
    if age is None:
        pytest.skip("no /proc on this system: the imports phase is not measured")
    assert 0 < age < time.time()  # the test process has been running for a while, not for ever
    assert "imports" in StartupClock().phases


def test_first_step_marks_the_first_batch_and_step_once():
    calls = []
    clock = StartupClock()
    seen = []
    for batch in clock.first_step(iter([1, 2, 3]), calls.append):
        seen.append(batch)
        if batch == 1:
            assert "first batch" in clock.phases and "first step" not in clock.phases
    assert seen == [1, 2, 3] and calls == [clock]
    assert list(clock.phases)[-2:] == ["first batch", "first step"]


@pytest.mark.slow
def test_a_run_records_its_time_to_first_step(tiny_synthetic, tmp_path):
    cfg = TrainConfig(data=str(tiny_synthetic), model="tph-yolov5n", imgsz=128, batch=4, epochs=1, workers=0,
                      project=str(tmp_path), name="run", plots=False)  # fmt: skip
    result = train(cfg, RuntimeConfig(device="cpu"))
    record = json.loads((result.run_dir / "startup.json").read_text())
    phases = record["phases_s"]
    expected = TRAINER_PHASES if process_age() is not None else TRAINER_PHASES[1:]
    assert list(phases) == expected
    assert all(seconds >= 0 for seconds in phases.values())
    assert phases["first step"] > 0 and phases["data"] > 0
    assert sum(phases.values()) == pytest.approx(record["total_s"], abs=1e-3)
