"""RuntimeConfig decides weights dtype, memory format and compilation in one place."""

import pytest
import torch
from torch import nn

from tphyolo.runtime.config import RuntimeConfig

CPU = torch.device("cpu")


def test_half_turns_autocast_off_and_is_refused_with_an_explicit_amp_dtype():
    assert RuntimeConfig(half=True, amp="auto").amp_dtype(torch.device("cuda")) is None
    assert RuntimeConfig(amp="bf16").amp_dtype(CPU) == torch.bfloat16
    for amp in ("bf16", "fp16"):
        with pytest.raises(ValueError, match="cannot be combined"):
            RuntimeConfig(half=True, amp=amp)


def test_half_needs_cuda():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        RuntimeConfig(half=True).place_model(nn.Conv2d(3, 4, 3), CPU)


def test_place_model_and_prepare_images_apply_channels_last():
    runtime = RuntimeConfig(channels_last=True)
    model = runtime.place_model(nn.Conv2d(3, 4, 3), CPU)
    assert model.weight.is_contiguous(memory_format=torch.channels_last)
    images = torch.full((2, 3, 8, 8), 255, dtype=torch.uint8)
    x = runtime.prepare_images(images, CPU)
    assert x.dtype == torch.float32 and x.is_contiguous(memory_format=torch.channels_last)
    assert x.max().item() == 1.0
    plain = RuntimeConfig(channels_last=False).prepare_images(images, CPU)
    assert plain.is_contiguous() and torch.equal(plain, x)


def test_the_automatic_layout_is_nhwc_for_inference_on_the_cpu_only():
    auto, cuda = RuntimeConfig(), torch.device("cuda")
    assert auto.channels_last is None
    assert auto.memory_format(CPU) == torch.channels_last
    assert auto.memory_format(CPU, training=True) == torch.contiguous_format
    assert auto.memory_format(cuda) == auto.memory_format(cuda, training=True) == torch.contiguous_format
    for given, layout in ((True, torch.channels_last), (False, torch.contiguous_format)):  # a given layout wins
        for device, training in ((CPU, False), (CPU, True), (cuda, False)):
            assert RuntimeConfig(channels_last=given).memory_format(device, training=training) == layout
    images = torch.zeros((2, 3, 8, 8), dtype=torch.uint8)
    inference = auto.prepare_images(images, CPU)
    training = auto.prepare_images(images, CPU, training=True)
    assert inference.is_contiguous(memory_format=torch.channels_last) and not inference.is_contiguous()
    assert training.is_contiguous()
    model = auto.place_model(nn.Conv2d(3, 4, 3), CPU)
    assert model.weight.is_contiguous(memory_format=torch.channels_last) and not model.weight.is_contiguous()
    assert auto.place_model(model, CPU, training=True).weight.is_contiguous()  # placed for training: back to NCHW


def test_compile_model_only_when_asked():
    model = nn.Linear(2, 2)
    assert RuntimeConfig().compile_model(model) is model
    compiled = RuntimeConfig(compile="default").compile_model(model)
    assert compiled is not model and hasattr(compiled, "_orig_mod")
