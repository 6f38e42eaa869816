"""`bench model` variants are RuntimeConfigs derived from the runtime flags, and run as those flags say."""

import json

import pytest
import torch

from tphyolo.bench.model import VARIANTS, variant_runtime, variant_runtimes
from tphyolo.cli import main
from tphyolo.runtime.config import RuntimeConfig

CPU = torch.device("cpu")


def _runs(runtime: RuntimeConfig, variants=VARIANTS, notes=None) -> dict[str, RuntimeConfig]:
    return variant_runtimes(runtime, variants, device=CPU, log=(notes if notes is not None else []).append)


def test_default_flags_give_one_change_per_variant():
    runs = _runs(RuntimeConfig(sdpa_backends=("math",)))
    assert {name: (run.amp, run.channels_last, run.compile) for name, run in runs.items()} == {
        "eager": ("off", False, "off"),
        "channels_last": ("off", True, "off"),
        "amp": ("bf16", False, "off"),
        "compile": ("off", False, "default"),
        "amp+compile": ("bf16", False, "default"),
        "decided": ("auto", None, "off"),  # left to the decision, per mode
    }
    assert all(run.sdpa_backends == ("math",) for run in runs.values())  # the other flags pass through


def test_channels_last_flag_applies_to_every_variant():
    notes = []
    runs = _runs(RuntimeConfig(channels_last=True, compile="max-autotune"), notes=notes)
    assert list(runs) == ["eager", "amp", "compile", "amp+compile", "decided"]  # "channels_last" = "eager" here
    assert all(run.channels_last for run in runs.values())
    assert runs["compile"].compile == "max-autotune" and runs["eager"].compile == "off"
    assert notes == ["variant channels_last runs the same as eager under these runtime flags; skipped"]


def test_explicit_amp_dtype_applies_to_every_variant():
    runs = _runs(RuntimeConfig(amp="fp16"), ("eager", "channels_last", "amp"))
    assert list(runs) == ["eager", "channels_last"]
    assert {run.amp for run in runs.values()} == {"fp16"}


def test_amp_off_refuses_the_amp_variants():
    for variant in ("amp", "amp+compile"):
        with pytest.raises(ValueError, match="--amp off"):
            variant_runtime(RuntimeConfig(amp="off"), variant, device=CPU)
    runs = _runs(RuntimeConfig(amp="off"), ("eager", "channels_last", "compile"))
    assert all(run.amp_dtype(CPU) is None for run in runs.values())


def test_unknown_variant():
    with pytest.raises(ValueError, match="unknown variant 'turbo'"):
        variant_runtime(RuntimeConfig(), "turbo", device=CPU)


def _bench_rows(tmp_path, *flags) -> list[dict]:
    out = tmp_path / "bench.json"
    argv = ["bench", "model", "--quick", "--device", "cpu", "--model-modes", "infer", "--json", str(out), *flags]
    assert main(argv) == 0
    return json.loads(out.read_text())["rows"]


@pytest.mark.slow
def test_channels_last_flag_runs_nhwc(tmp_path):
    (row,) = _bench_rows(tmp_path, "--variants", "eager", "--channels-last")
    assert row["config"] == "tph-yolov5n img128 b1 eager"
    assert (row["extra"]["memory_format"], row["extra"]["amp"]) == ("channels_last", "off")
    assert row["ours_ms"] > 0 and row["baseline_ms"] is None  # eager is the baseline of the other variants


@pytest.mark.slow
def test_eager_runs_nchw_and_honours_an_explicit_amp_dtype(tmp_path):
    (row,) = _bench_rows(tmp_path, "--variants", "eager", "--amp", "bf16")
    assert (row["extra"]["memory_format"], row["extra"]["amp"]) == ("contiguous", "bf16")


def test_amp_off_gives_no_bf16_row(tmp_path, capsys):
    out = tmp_path / "bench.json"
    argv = ["bench", "model", "--quick", "--device", "cpu", "--amp", "off", "--variants", "eager,amp"]
    assert main([*argv, "--json", str(out)]) == 2
    assert "--amp off" in capsys.readouterr().err
    assert not out.exists()
