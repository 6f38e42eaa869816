"""The bf16 check of a compiled checkpoint (`tphyolo.evaluation.bf16_check`): bf16 where it is faster by
MIN_SPEEDUP and as accurate on the built-in set (or in agreement with f32); run by `tphyolo doctor --tune
--weights`, kept beside the compiled model, and only read by `--precision auto` (which otherwise applies the rule:
bf16 on CPUs with native bf16). Timings are injected: nothing depends on this machine's speed."""

import json
import logging
from dataclasses import replace

import pytest
import torch
from tests.helpers import model_cache_at, save_model_checkpoint

from tphyolo.data.builtin.synthetic import NAMES as BUILTIN_NAMES
from tphyolo.data.builtin.synthetic import split_scene
from tphyolo.evaluation import bf16_check
from tphyolo.evaluation.bf16_check import (
    CHECK_IMAGES,
    CHECK_SIZE,
    MIN_SPEEDUP,
    Bf16Verdict,
    check_bf16,
    compare,
    tune_precision,
)
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.backends.compiled import PRECISION_FILE, cache_entry, load_compiled
from tphyolo.models import build_model
from tphyolo.runtime.cpu_isa import CpuInfo

AVX512_BF16 = CpuInfo(model="AMD EPYC 9B14", flags=frozenset({"avx2", "avx512f", "avx512_bf16"}))
AVX2_ONLY = CpuInfo(model="AMD EPYC 7B12", flags=frozenset({"avx2"}))
MACHINE = "test machine"


class Clock:
    """An injected clock that only the fake backends move: each forward adds its precision's seconds."""

    def __init__(self) -> None:
        self.now, self.calls = 0.0, 0

    def __call__(self) -> float:
        return self.now


class Oracle(Backend):
    """A backend that knows the built-in scenes: its output for the CHECK_IMAGES scenes is their labels (score
    0.9, each a class's one-hot), less the labels of the scenes in `misses`; each forward moves `clock` by
    `seconds`."""

    stride, dtype, device, format = 32, torch.float32, torch.device("cpu"), "oracle"

    def __init__(self, precision: str, *, names=BUILTIN_NAMES, misses=(), clock=None, seconds=0.0) -> None:
        self.precision, self.names, self.misses = precision, list(names), set(misses)
        self.clock, self.seconds = clock, seconds
        self.scenes = [split_scene("val", i, imgsz=CHECK_SIZE)[1] for i in range(CHECK_IMAGES)]

    def prepare(self, images: torch.Tensor) -> torch.Tensor:
        return images.float() / 255

    def run(self, x: torch.Tensor) -> torch.Tensor:
        if self.clock is not None:
            self.clock.now += self.seconds
            self.clock.calls += 1
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




def opener(*, fp32: float, bf16: float, clock: Clock, **kwargs):
    """The two precisions of one model, forwards taking `fp32` and `bf16` seconds on `clock`; `kwargs` per
    precision ({"bf16": {"misses": {0}}}) or for both (names)."""
    both = {k: v for k, v in kwargs.items() if k not in ("fp32_args", "bf16_args")}
    backends = {"fp32": Oracle("fp32", clock=clock, seconds=fp32, **both, **kwargs.get("fp32_args", {})),
                "bf16": Oracle("bf16", clock=clock, seconds=bf16, **both, **kwargs.get("bf16_args", {}))}  # fmt: skip
    return lambda precision: backends[precision]


def test_bf16_as_accurate_and_faster_on_the_built_in_set_is_chosen():
    clock = Clock()
    verdict = check_bf16(opener(fp32=1.6, bf16=1.0, clock=clock), machine=MACHINE, clock=clock)
    assert verdict == Bf16Verdict("bf16", 1.6, "built-in set", 0.995, 0.995, MACHINE)  # 0.995: the 101-point AP
    assert verdict.line() == ("OpenVINO bf16: 1.60x f32 here, mAP50 within 0.000 on the built-in set; "
                              "--precision fp32 forces exact")  # fmt: skip


def test_bf16_that_loses_accuracy_on_the_built_in_set_is_refused():
    clock = Clock()  # one scene of eight found nothing in bf16
    verdict = check_bf16(opener(fp32=1.6, bf16=1.0, clock=clock, bf16_args={"misses": {0}}), machine=MACHINE,
                         clock=clock)  # fmt: skip
    assert verdict.precision == "fp32" and verdict.basis == "built-in set"
    assert verdict.f32_map50 == 0.995 and verdict.f32_map50 - verdict.bf16_map50 > 0.005
    assert "but mAP50 0." in verdict.line() and verdict.line().endswith("--precision bf16 forces it")


def test_bf16_not_faster_by_the_margin_is_refused_before_any_accuracy_is_measured():
    clock = Clock()
    at = opener(fp32=1.0, bf16=1.0 / (MIN_SPEEDUP - 0.05), clock=clock)
    verdict = check_bf16(at, machine=MACHINE, clock=clock)
    assert verdict == Bf16Verdict("fp32", round(MIN_SPEEDUP - 0.05, 3), "not compared", None, None, MACHINE)
    assert verdict.line() == "OpenVINO f32: bf16 only 1.05x f32 here (needs 1.10x); --precision bf16 forces it"
    assert clock.calls == 2 + 3 * 2  # a warm-up each, then rounds until the injected seconds passed BUDGET_S (5 s)


def test_a_model_that_does_not_know_the_built_in_set_is_compared_with_its_own_f32_detections():
    visdrone = [f"class{i}" for i in range(10)]  # other classes: the scenes' labels say nothing about it
    clock = Clock()
    agreeing = check_bf16(opener(fp32=2.0, bf16=1.0, clock=clock, names=visdrone), machine=MACHINE, clock=clock)
    assert agreeing == Bf16Verdict("bf16", 2.0, "agreement with f32", 0.995, 0.995, MACHINE)
    assert agreeing.agreement == 1.0 and "its detections agree with f32's to 1.000 (mAP50 against" in agreeing.line()
    drifting = check_bf16(opener(fp32=2.0, bf16=1.0, clock=clock, names=visdrone, bf16_args={"misses": {3}}),
                          machine=MACHINE, clock=clock)  # fmt: skip
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


def chosen(loaded) -> tuple[str, str]:
    """(precision, source) of the precision decision as made, before a CPU without bf16 made it fall back to fp32
    (its `why` then starts with what was asked: "bf16 (rule: ...) asked for; ...")."""
    decided = loaded.decisions["precision"]
    if decided.source != "fallback":
        return decided.value, decided.source
    value, rest = decided.why.split(" (", 1)
    return value, rest.split(":", 1)[0]


def bf16_hint() -> str:
    """The hint a compiled model asked for bf16 reports on this machine: "bf16" where OpenVINO's CPU plugin can
    run it, "f32" where it cannot (a CPU without bf16 instructions: OpenVINO keeps f32 whatever it is asked)."""
    import openvino as ov

    return "bf16" if "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES") else "f32"


def test_auto_applies_the_rule_without_measuring_and_the_flags_override_it(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setattr(bf16_check, "check_bf16", lambda *a, **k: pytest.fail("loading ran the bf16 check"))
    with model_cache_at(tmp_path / "cache"):
        native = load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16)
        decided = native.decisions["precision"]
        if bf16_hint() == "bf16":
            assert native.compiled.precision == "bf16" == hint(native).replace("f32", "fp32")
            assert decided.source == "rule"
        else:  # the rule chose bf16 for the CPU it was told of; this one runs f32, and the decision says so
            assert native.compiled.precision == "fp32" and hint(native) == "f32"
            assert decided.source == "fallback" and decided.why.startswith("bf16 (rule:")
        emulated = load_compiled(checkpoint, precision="auto", cpu=AVX2_ONLY)
        assert emulated.compiled.precision == "fp32" and hint(emulated) == "f32"
        forced = load_compiled(checkpoint, precision="fp32", cpu=AVX512_BF16)
        assert hint(forced) == "f32" and forced.decisions["precision"].source == "flag"
        assert not (cache_entry(checkpoint, runtime="openvino", fuse=True) / PRECISION_FILE).exists()


def test_a_tuned_check_is_kept_read_by_auto_and_only_for_its_machine(checkpoint, tmp_path, monkeypatch, caplog):
    refused = Bf16Verdict("fp32", 1.3, "built-in set", 0.7, 0.6, "")
    monkeypatch.setattr(bf16_check, "check_bf16", lambda open_at, *, machine, clock: replace(refused, machine=machine))
    with model_cache_at(tmp_path / "cache"):
        verdict = tune_precision(checkpoint, cpu=AVX512_BF16, threads=2, load=(6.0, 2))
        entry = cache_entry(checkpoint, runtime="openvino", fuse=True)
        kept = json.loads((entry / PRECISION_FILE).read_text())
        assert verdict.precision == kept["precision"] == "fp32" and kept["measured"]["load"] == 6.0
        tuned = load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16, threads=2)
        assert tuned.compiled.precision == "fp32" and tuned.decisions["precision"].source == "tuned"
        other = load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16, threads=1)  # not the tuned machine
        assert chosen(other) == ("bf16", "rule")
        (entry / PRECISION_FILE).write_text("[" * 100_000)  # a damaged file: a miss with one line
        with caplog.at_level(logging.WARNING, logger="tphyolo"):
            damaged = load_compiled(checkpoint, precision="auto", cpu=AVX512_BF16, threads=2)
        assert chosen(damaged)[1] == "rule"
        assert any(r.getMessage().endswith("nested 100000 levels deep (at most 16); the rule decides the precision")
                   for r in caplog.records)  # fmt: skip


def test_without_native_bf16_nothing_is_tuned(checkpoint, tmp_path):
    with model_cache_at(tmp_path / "cache"):
        assert tune_precision(checkpoint, cpu=AVX2_ONLY, threads=2) is None
        assert not (cache_entry(checkpoint, runtime="openvino", fuse=True) / PRECISION_FILE).exists()
