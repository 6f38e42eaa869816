"""The detector as data: `DetectorSpec`, every setting of a detector, which `tphyolo.infer.build.build_detector`
assembles. It imports no torch, so that a job built from the command line may hold one.

    spec = DetectorSpec("best.pt", inference=InferenceConfig(imgsz=640), slicing=SliceConfig(512))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.slicing import SliceConfig

if TYPE_CHECKING:  # annotations only: this module imports no torch
    from tphyolo.classify.classifier import CropClassifier
    from tphyolo.infer.backends.pytorch import Weights
    from tphyolo.runtime.config import RuntimeConfig


@dataclass(frozen=True)
class DetectorSpec:
    """Every setting of a detector, and nothing about what it is run on.

    weights: a model, a checkpoint or exported file, or a sequence of them (an ensemble, each with its WBF weight
    in `model_weights`, default 1). inference: thresholds, TTA, merging, image size, batch, backend and precision
    (`InferenceConfig`; fields in its `from_model` are settled by the models). runtime: how to run (device,
    precision, layout, compile; None: `RuntimeConfig()`); `device` (a device spec such as "cpu" or "cuda:1")
    overrides its device. fuse: fold BatchNorm into convolutions first. slicing: windows in original pixels (None:
    whole images). classifier: a crop-classifier checkpoint or a CropClassifier, for the models' classes;
    `classifier_weight` replaces its share (None: the one saved with it)."""

    weights: Weights | Sequence[Weights]
    inference: InferenceConfig = InferenceConfig()
    runtime: RuntimeConfig | None = None
    device: str | None = None
    fuse: bool = True
    model_weights: tuple[float, ...] | None = None
    slicing: SliceConfig | None = None
    classifier: str | Path | CropClassifier | None = None
    classifier_weight: float | None = None
