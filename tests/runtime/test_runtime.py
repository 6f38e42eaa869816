"""RuntimeConfig validation, configure_process (allocator env precedence, CUDA refusal, flags), scoped helpers."""

import argparse
import os

import pytest
import torch
import torch.nn.functional as F

from tphyolo.runtime import config as runtime
from tphyolo.runtime import flags as runtime_flags
from tphyolo.runtime.config import RuntimeConfig, configure_process
from tphyolo.runtime.flags import ALLOC_ENV_VARS


@pytest.fixture
def no_allocator_env(monkeypatch):
    """The allocator env vars unset, whatever the shell running the tests exports. The environment and torch's
    flags that configure_process changes are restored by the suite's autouse fixture (tests/conftest.py)."""
    for name in ALLOC_ENV_VARS:
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_valid_and_frozen():
    cfg = RuntimeConfig()
    assert cfg.amp == "auto" and cfg.compile == "off" and cfg.sdpa_backends == ()
    with pytest.raises(AttributeError):
        cfg.amp = "bf16"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"amp": "fp8"}, "amp must be one of"),
        ({"compile": "fast"}, "compile must be one of"),
        ({"sdpa_backends": ("flash", "turbo")}, "--sdpa-backend must be one of .*, got .turbo."),
        ({"device": "gpu0"}, "bad device"),
        ({"device": "0,0"}, "names a GPU twice"),
    ],
)
def test_bad_values_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RuntimeConfig(**kwargs)


def test_parse_device_spellings():
    assert runtime_flags.parse_device("cpu") == ["cpu"]
    assert runtime_flags.parse_device("0") == ["cuda:0"]
    assert runtime_flags.parse_device("0,1,3") == ["cuda:0", "cuda:1", "cuda:3"]
    assert runtime_flags.parse_device("cuda:2") == ["cuda:2"]


def test_resolve_device_on_this_machine():
    assert RuntimeConfig(device="cpu").torch_device() == torch.device("cpu")
    if not torch.cuda.is_available():
        assert RuntimeConfig(device="auto").torch_device() == torch.device("cpu")
        with pytest.raises(ValueError, match="no CUDA device is available"):
            RuntimeConfig(device="0").torch_device()


def test_amp_dtype_resolution():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert RuntimeConfig(amp="auto").amp_dtype(cpu) is None
    assert RuntimeConfig(amp="bf16").amp_dtype(cpu) == torch.bfloat16
    assert RuntimeConfig(amp="fp16").amp_dtype(cuda) == torch.float16
    assert RuntimeConfig(amp="off").amp_dtype(cuda) is None
    assert RuntimeConfig(amp="fp16").needs_grad_scaler(cuda)
    assert not RuntimeConfig(amp="bf16").needs_grad_scaler(cuda)


def test_configure_process_sets_allocator_env_when_unset(no_allocator_env, monkeypatch):
    report = configure_process(RuntimeConfig(alloc_conf="expandable_segments:True"))
    assert (report["alloc_conf"], report["alloc_conf_source"]) == ("expandable_segments:True", "tphyolo")
    for name in ALLOC_ENV_VARS:
        assert runtime.os.environ[name] == "expandable_segments:True"


@pytest.mark.parametrize("user_var", ALLOC_ENV_VARS)
def test_configure_process_never_overrides_the_user(no_allocator_env, monkeypatch, user_var):
    monkeypatch.setenv(user_var, "max_split_size_mb:128")
    report = configure_process(RuntimeConfig(alloc_conf="expandable_segments:True"))
    assert (report["alloc_conf"], report["alloc_conf_source"]) == ("max_split_size_mb:128", "user")
    other = [n for n in ALLOC_ENV_VARS if n != user_var][0]
    assert runtime.os.environ.get(other) is None


def test_configure_process_quiets_the_profiler_library_unless_the_user_set_it(no_allocator_env, monkeypatch):
    monkeypatch.delenv("KINETO_LOG_LEVEL", raising=False)
    configure_process(RuntimeConfig(device="cpu"))
    assert os.environ["KINETO_LOG_LEVEL"] == "6"
    monkeypatch.setenv("KINETO_LOG_LEVEL", "2")
    configure_process(RuntimeConfig(device="cpu"))
    assert os.environ["KINETO_LOG_LEVEL"] == "2"


def test_configure_process_empty_alloc_conf_sets_nothing(no_allocator_env):
    assert configure_process(RuntimeConfig(alloc_conf=""))["alloc_conf_source"] == "none"
    assert all(runtime.os.environ.get(n) is None for n in ALLOC_ENV_VARS)


def test_configure_process_applies_precision_flags(no_allocator_env):
    configure_process(RuntimeConfig(tf32=False, cudnn_benchmark=False))
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cudnn.benchmark is False
    configure_process(RuntimeConfig(tf32=True, cudnn_benchmark=True))
    assert torch.get_float32_matmul_precision() == "high"
    assert torch.backends.cudnn.allow_tf32 is True and torch.backends.cudnn.benchmark is True


def test_configure_process_refuses_after_cuda_init(no_allocator_env, monkeypatch):
    # Simulated on machines without a GPU: the check reads torch.cuda.is_initialized().
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="before CUDA is initialised"):
        configure_process(RuntimeConfig())
    assert all(runtime.os.environ.get(n) is None for n in ALLOC_ENV_VARS)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device to initialise CUDA for real")
def test_configure_process_refuses_after_real_cuda_init(no_allocator_env):
    torch.zeros(1, device="cuda")
    with pytest.raises(RuntimeError, match="before CUDA is initialised"):
        configure_process(RuntimeConfig())


def test_autocast_context_on_cpu():
    x = torch.randn(4, 8)
    w = torch.randn(8, 8)
    with runtime.autocast(RuntimeConfig(amp="bf16"), torch.device("cpu")):
        assert (x @ w).dtype == torch.bfloat16
    with runtime.autocast(RuntimeConfig(amp="off"), torch.device("cpu")):
        assert (x @ w).dtype == torch.float32


def test_sdpa_context_restricts_backends():
    from tphyolo.runtime.sdpa_probe import kernel_that_ran

    q = torch.randn(1, 2, 16, 8)
    call = lambda: F.scaled_dot_product_attention(q, q, q)  # noqa: E731
    with runtime.sdpa_context(RuntimeConfig(sdpa_backends=("math",))):
        assert kernel_that_ran(call) == "math"
    with runtime.sdpa_context(RuntimeConfig(sdpa_backends=("efficient",))):
        if not torch.cuda.is_available():
            with pytest.raises(RuntimeError):
                call()


def test_runtime_flags_round_trip():
    parser = argparse.ArgumentParser()
    runtime_flags.add_runtime_arguments(parser)
    args = parser.parse_args(
        ["--device", "cpu", "--amp", "bf16", "--compile", "--channels-last", "--sdpa-backend", "math", "--no-tf32"]
    )
    cfg = runtime.runtime_from_args(args)
    assert cfg == RuntimeConfig(
        device="cpu", amp="bf16", compile="default", channels_last=True, sdpa_backends=("math",), tf32=False
    )
    assert runtime.runtime_from_args(parser.parse_args(["--no-keep-cpu-memory"])).keep_cpu_memory is False
    assert runtime.runtime_from_args(parser.parse_args([])).channels_last is None  # automatic
    assert runtime.runtime_from_args(parser.parse_args(["--no-channels-last"])).channels_last is False
