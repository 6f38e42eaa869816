"""How far an exported model's output is from PyTorch's: the measure, the tolerances and the test input.

The decoded output (B, N, 5 + nc) mixes box coordinates in pixels (columns 0-3, up to the image size) with
scores in [0, 1] (columns 4 on). One error relative to the largest value would hide score errors behind the
pixel scale, so the two parts are measured apart: for each, max |output - reference| / max |reference|, and
the larger of the two is the relative error.
"""

from __future__ import annotations

import torch

FP32_TOLERANCE = 1e-4  # exported fp32 models must match PyTorch fp32 this closely
FP16_TOLERANCE = 1e-2  # fp16 weights (and fp16 arithmetic where the target uses it) against PyTorch fp32
# A sanity bound for INT8 files on random images; their accuracy check is what decides. Measured on the main
# job's and the synthetic-fine tph-yolov5n (trained): INT8 files 0.12-0.27 (one shifted score decides the max);
# the same float model fed channel-swapped, mirrored, 8-pixel-shifted or 255-times-scaled images 0.74-1.34.
INT8_TOLERANCE = 0.5
TEST_SEED = 0


def tolerance_for(half: bool) -> float:
    """The relative error an export may show: with fp16 weights (`half`) or in fp32."""
    return FP16_TOLERANCE if half else FP32_TOLERANCE


def relative_error(output: torch.Tensor, reference: torch.Tensor) -> float:
    """max over {boxes (..., :4), scores (..., 4:)} of max |output - reference| / max |reference|; both
    (B, N, 5 + nc). Infinite when the output holds NaN or infinity; ValueError when the shapes differ (a wrong
    export, not a small error)."""
    if output.shape != reference.shape:
        raise ValueError(f"output shape {tuple(output.shape)} differs from PyTorch's {tuple(reference.shape)}")
    output, reference = output.detach().double().cpu(), reference.detach().double().cpu()
    if not torch.isfinite(output).all():
        return float("inf")
    worst = 0.0
    for part in (slice(0, 4), slice(4, None)):
        scale = reference[..., part].abs().max().clamp(min=torch.finfo(torch.float32).tiny)
        worst = max(worst, float((output[..., part] - reference[..., part]).abs().max() / scale))
    return worst


def sample_images(batch: int, height: int, width: int, *, seed: int = TEST_SEED) -> torch.Tensor:
    """(batch, 3, height, width) float32 in [0, 1], the same for a given seed: the export check's input."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(batch, 3, height, width, generator=generator)
