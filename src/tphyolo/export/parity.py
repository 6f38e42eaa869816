"""How far an exported model's output is from PyTorch's: the measure and the test input
(`tphyolo.infer.backends.parity`, which the compiled CPU runtimes share), and the tolerance of each kind of export.
"""

from __future__ import annotations

from tphyolo.infer.backends.parity import FP32_TOLERANCE, TEST_SEED, relative_error, sample_images

FP16_TOLERANCE = 1e-2  # fp16 weights (and fp16 arithmetic where the target uses it) against PyTorch fp32
# A sanity bound for INT8 files on random images; their accuracy check is what decides. Measured on the main
# job's and the synthetic-fine tph-yolov5n (trained): INT8 files 0.12-0.27 (one shifted score decides the max);
# the same float model fed channel-swapped, mirrored, 8-pixel-shifted or 255-times-scaled images 0.74-1.34.
# On a CPU without VNNI (AVX2 only) the test suite's weakly trained tph-yolov5-swins INT8 file measured 0.53:
# the bound sits below the wrong-input errors with that margin.
INT8_TOLERANCE = 0.6

__all__ = ["FP16_TOLERANCE", "FP32_TOLERANCE", "INT8_TOLERANCE", "TEST_SEED", "relative_error", "sample_images",
           "tolerance_for"]  # fmt: skip


def tolerance_for(half: bool) -> float:
    """The relative error an export may show: with fp16 weights (`half`) or in fp32."""
    return FP16_TOLERANCE if half else FP32_TOLERANCE
