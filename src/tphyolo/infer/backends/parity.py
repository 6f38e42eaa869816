"""How far a compiled or exported model's output is from PyTorch's: the measure, the fp32 tolerance and the
test input, shared by `tphyolo export` (`tphyolo.export.parity`) and the compiled CPU runtimes
(`tphyolo.infer.backends.compiled`).

The decoded output (B, N, 5 + nc) mixes box coordinates in pixels (columns 0-3, up to the image size) with
scores in [0, 1] (columns 4 on). One error relative to the largest value would hide score errors behind the
pixel scale, so the two parts are measured apart: for each, max |output - reference| / max |reference|, and
the larger of the two is the relative error.
"""

from __future__ import annotations

import torch

from tphyolo.errors import InputError

FP32_TOLERANCE = 1e-4  # fp32 models on another runtime must match PyTorch fp32 this closely
TEST_SEED = 0


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """max over {boxes (..., :4), scores (..., 4:)} of max |output - reference| / max |reference|; both
    (B, N, 5 + nc). Infinite when the output holds NaN or infinity; ValueError when the shapes differ (a wrong
    export, not a small error)."""
    if output.shape != reference.shape:
        raise InputError(f"output shape {tuple(output.shape)} differs from PyTorch's {tuple(reference.shape)}")
    output, reference = output.detach().double().cpu(), reference.detach().double().cpu()
    if not torch.isfinite(output).all():
        return float("inf")
    worst = 0.0
    for part in (slice(0, 4), slice(4, None)):
        scale = reference[..., part].abs().max().clamp(min=torch.finfo(torch.float32).tiny)
        worst = max(worst, float((output[..., part] - reference[..., part]).abs().max() / scale))
    return worst


def sample_images(batch: int, height: int, width: int, *, seed: int = TEST_SEED) -> torch.Tensor:
    """(batch, 3, height, width) float32 in [0, 1], the same for a given seed: the parity check's input."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(batch, 3, height, width, generator=generator)
