"""`--precision auto` on OpenVINO: bf16 where this CPU computes it natively, faster by MIN_SPEEDUP and as
accurate on the built-in set (or in agreement with f32), decided once per compiled entry and kept; no check
without native bf16; `--precision fp32`/`bf16` skip it (`tphyolo.infer.backends.bf16_check`). Timings are
injected: nothing depends on this machine's speed."""

import json
import logging

import pytest
import torch
from tests.helpers import model_cache_at, save_model_checkpoint

from tphyolo.data.builtin.synthetic import NAMES as BUILTIN_NAMES
from tphyolo.data.builtin.synthetic import split_scene
from tphyolo.infer.backends.bf16_check import (
    CHECK_IMAGES,
    CHECK_SIZE,
    FILE,
    MIN_SPEEDUP,
    Bf16Verdict,
    auto_precision,
    check_bf16,
    compare,
)
from tphyolo.infer.backends.compiled import cache_entry, load_compiled
from tphyolo.models import build_model
from tphyolo.runtime.cpu_isa import CpuInfo
from tphyolo.runtime.probe_freshness import MAX_REMEASURES, Conditions

AVX512_BF16 = CpuInfo(model="AMD EPYC 9B14", flags=frozenset({"avx2", "avx512f", "avx512_bf16"}))
AVX2_ONLY = CpuInfo(model="AMD EPYC 7B12", flags=frozenset({"avx2"}))
MACHINE = "test machine"
T0 = 1.8e9  # seconds since the epoch of the first check
QUIET, BUSY = Conditions(load=0.5, cores=2, time=T0), Conditions(load=6.0, cores=2, time=T0)


class Times:
    """A `RunTimer`: `seconds[precision]` per forward of a backend computing in that precision; counts calls."""

    def __init__(self, fp32: float, bf16: float) -> None:
        self.seconds, self.calls = {"fp32": fp32, "bf16": bf16}, 0

    def __call__(self, backend, x: torch.Tensor) -> float:
        self.calls += 1
        return self.seconds[backend.precision]


def never_timed(backend, x: torch.Tensor) -> float:
    raise AssertionError("the bf16 check ran, but nothing should have been checked")


class Oracle:
    """A backend that knows the built-in scenes: its output for the CHECK_IMAGES scenes is their labels (score
    0.9, each a class's one-hot), less the labels of the scenes in `misses`."""

    stride, dtype, device = 32, torch.float32, torch.device("cpu")

    def __init__(self, precision: str, *, names=BUILTIN_NAMES, misses=()) -> None:
        self.precision, self.names, self.misses = precision, list(names), set(misses)
        self.scenes = [split_scene("val", i, imgsz=CHECK_SIZE)[1] for i in range(CHECK_IMAGES)]

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return images.float() / 255

    def run(self, x: torch.Tensor) -> torch.Tensor:
        rows = torch.zeros(len(x), 32, 5 + len(self.names))
        for i in range(len(x)):
            truth = self.scenes[i]
            if i in self.misses:
                continue
            boxes = torch.as_tensor(truth.boxes)
            n = len(boxes)
            rows[i, :n, :2] = (boxes[:, :2] + boxes[:, 2:]) / 2
            rows[i, :n, 2:4] = boxes[:, 2:] - boxes[:, :2]
            rows[i, :n, 4] = 0.9
            rows[i, torch.arange(n), 5 + torch.as_tensor(truth.classes)] = 1.0
        return rows


def opener(**backends):
    return lambda precision: backends[precision]


def test_bf16_as_accurate_and_faster_on_the_built_in_set_is_chosen():
    at = opener(fp32=Oracle("fp32"), bf16=Oracle("bf16"))
    verdict = check_bf16(at, machine=MACHINE, timer=Times(fp32=1.6, bf16=1.0))
    assert verdict == Bf16Verdict("bf16", 1.6, "built-in set", 0.995, 0.995, MACHINE)  # 0.995: the 101-point AP
    assert verdict.line() == ("OpenVINO bf16: 1.60x f32 here, mAP50 within 0.000 on the built-in set; "
                              "--precision fp32 forces exact")  # fmt: skip


def test_a_kept_check_nested_too_deep_is_checked_again_with_one_line(tmp_path, caplog):
    """Before, a precision.json nested 100,000 deep ended every run in RecursionError until deleted by hand."""
    (tmp_path / FILE).write_text("[" * 100000)
    at = opener(fp32=Oracle("fp32"), bf16=Oracle("bf16"))
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        chosen = auto_precision(tmp_path, at, cpu=AVX512_BF16, threads=2, timer=Times(fp32=1.6, bf16=1.0),
                                conditions=QUIET)  # fmt: skip
    assert chosen == "bf16" and json.loads((tmp_path / FILE).read_text())["precision"] == "bf16"
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [f"{tmp_path / FILE}: JSON nested 100000 levels deep (at most 16); checking bf16 again"]


def test_bf16_that_loses_accuracy_on_the_built_in_set_is_refused():
    at = opener(fp32=Oracle("fp32"), bf16=Oracle("bf16", misses={0}))  # one scene of eight found nothing
    verdict = check_bf16(at, machine=MACHINE, timer=Times(fp32=1.6, bf16=1.0))
    assert verdict.precision == "fp32" and verdict.basis == "built-in set"
    assert verdict.f32_map50 == 0.995 and verdict.f32_map50 - verdict.bf16_map50 > 0.005
    assert "but mAP50 0." in verdict.line() and verdict.line().endswith("--precision bf16 forces it")


def test_bf16_not_faster_by_the_margin_is_refused_before_any_accuracy_is_measured():
    class Untouchable(Oracle):
        def run(self, x):
            if len(x) > 1:
                raise AssertionError("the accuracy was measured")
            return super().run(x)

    timer = Times(fp32=1.0, bf16=1.0 / (MIN_SPEEDUP - 0.05))
    verdict = check_bf16(opener(fp32=Untouchable("fp32"), bf16=Untouchable("bf16")), machine=MACHINE, timer=timer)
    assert verdict == Bf16Verdict("fp32", round(MIN_SPEEDUP - 0.05, 3), "not compared", None, None, MACHINE)
    assert verdict.line() == "OpenVINO f32: bf16 only 1.05x f32 here (needs 1.10x); --precision bf16 forces it"
    assert timer.calls == 2 + 2 * 5  # a warm-up each, then every round (the fake forwards take no time)


def test_a_model_that_does_not_know_the_built_in_set_is_compared_with_its_own_f32_detections():
    visdrone = [f"class{i}" for i in range(10)]  # other classes: the scenes' labels say nothing about it
    agreeing = check_bf16(opener(fp32=Oracle("fp32", names=visdrone), bf16=Oracle("bf16", names=visdrone)),
                          machine=MACHINE, timer=Times(fp32=2.0, bf16=1.0))  # fmt: skip
    assert agreeing == Bf16Verdict("bf16", 2.0, "agreement with f32", 0.995, 0.995, MACHINE)
    assert agreeing.agreement == 1.0 and "its detections agree with f32's to 1.000 (mAP50 against" in agreeing.line()
    drifting = check_bf16(opener(fp32=Oracle("fp32", names=visdrone),
                                 bf16=Oracle("bf16", names=visdrone, misses={3})),
                          machine=MACHINE, timer=Times(fp32=2.0, bf16=1.0))  # fmt: skip
    assert drifting.precision == "fp32" and drifting.basis == "agreement with f32" and drifting.agreement < 0.995


def test_the_comparison_needs_boxes_to_score_against():
    nothing = [torch.zeros((0, 6)) for _ in range(CHECK_IMAGES)]
    assert compare(nothing, nothing, None, 3)[0] == "too few boxes"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    pytest.importorskip("openvino")
    torch.manual_seed(0)
    model = build_model("yolov5n", names=["car", "van", "bus"]).eval()
    return save_model_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt", model, ["car", "van", "bus"])


def hint(loaded) -> str:
    return loaded.compiled.request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT").to_string()


def test_auto_checks_once_per_entry_keeps_the_choice_and_the_flags_override_it(checkpoint, tmp_path, caplog):
    def load(precision: str, timer):
        return load_compiled(checkpoint, precision=precision, cpu=AVX512_BF16, timer=timer, conditions=QUIET)

    with model_cache_at(tmp_path / "cache"):
        with caplog.at_level(logging.INFO, logger="tphyolo"):
            slower = Times(fp32=1.0, bf16=1.2)
            loaded = load("auto", slower)
        assert slower.calls and loaded.compiled.precision == "fp32" and hint(loaded) == "f32"
        entry = cache_entry(checkpoint, runtime="openvino", fuse=True)
        kept = json.loads((entry / FILE).read_text())
        assert kept["precision"] == "fp32" and kept["basis"] == "not compared" and kept["speedup"] == 0.833
        assert any(r.getMessage().startswith("OpenVINO f32: bf16 only 0.83x f32 here") for r in caplog.records)
        assert load("auto", never_timed).compiled.precision == "fp32"  # the kept choice
        assert hint(load("bf16", never_timed)) == "bf16"
        assert load("fp32", never_timed).compiled.precision == "fp32"
        (entry / FILE).write_text(json.dumps({**kept, "machine": "another CPU"}))  # a cache moved to another machine
        checked = Times(fp32=1.0, bf16=1.3)
        load("auto", checked)
        assert checked.calls and json.loads((entry / FILE).read_text())["machine"] != "another CPU"


def test_without_native_bf16_auto_is_f32_and_nothing_is_checked(checkpoint, tmp_path):
    with model_cache_at(tmp_path / "cache"):
        loaded = load_compiled(checkpoint, precision="auto", cpu=AVX2_ONLY, timer=never_timed, conditions=QUIET)
    assert loaded.compiled.precision == "fp32" and hint(loaded) == "f32"
    assert not (cache_entry(checkpoint, runtime="openvino", fuse=True) / FILE).exists()


def test_a_check_made_under_load_is_made_again_on_a_quieter_run_a_bounded_number_of_times(checkpoint, tmp_path, caplog):
    def auto(conditions, timer):
        return load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16, timer=timer, conditions=conditions)

    with model_cache_at(tmp_path / "cache"):
        with caplog.at_level(logging.INFO, logger="tphyolo"):
            auto(BUSY, Times(fp32=1.0, bf16=1.25))  # 0.8x: f32, but measured on a busy machine
        entry = cache_entry(checkpoint, runtime="openvino", fuse=True)
        kept = json.loads((entry / FILE).read_text())["measured"]
        assert kept["provisional"] is True and kept["load"] == 6.0 and kept["remeasures"] == 0
        (line,) = [r.getMessage() for r in caplog.records if r.getMessage().startswith("OpenVINO f32:")]
        assert line.endswith("--precision bf16 forces it [provisional: load 6.0 on 2 cores]")
        auto(BUSY, never_timed)  # still busy: the kept check stands
        again = Times(fp32=1.0, bf16=1.25)
        auto(QUIET, again)  # quieter: checked again, and now settled
        assert again.calls and json.loads((entry / FILE).read_text())["measured"]["provisional"] is False
        auto(QUIET, never_timed)


class NoisyTimes(Times):
    """bf16 about 1.1x f32 (MIN_SPEEDUP), with steps that vary by far more than that margin."""

    def __call__(self, backend, x: torch.Tensor) -> float:
        self.calls += 1
        return (0.7, 1.4, 1.0)[self.calls % 3] * self.seconds[backend.precision]


def test_a_check_within_its_noise_is_made_again_at_most_max_remeasures_times(checkpoint, tmp_path):
    with model_cache_at(tmp_path / "cache"):
        entry = cache_entry(checkpoint, runtime="openvino", fuse=True)
        timed = []
        for _ in range(MAX_REMEASURES + 3):
            timer = NoisyTimes(fp32=1.0, bf16=1.0)
            load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16, timer=timer, conditions=QUIET)
            timed.append(timer.calls > 0)
        kept = json.loads((entry / FILE).read_text())["measured"]
    assert timed == [True] * (1 + MAX_REMEASURES) + [False, False]
    assert kept["provisional"] is True and kept["remeasures"] == MAX_REMEASURES
