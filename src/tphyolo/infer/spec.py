"""The detector as data: `DetectorSpec`, every setting of a detector, which `tphyolo.infer.build.build_detector`
assembles. It imports no torch, so that a job built from the command line may hold one.

    spec = DetectorSpec("best.pt", inference=InferenceConfig(imgsz=640), slicing=SliceConfig(512))
    spec = DetectorSpec.from_keywords("best.pt", imgsz=640, slice=512)  # the same, as Predictor takes it

Every job that runs a detector (`PredictJob`, `TrackJob`, `ServeJob`, `ValJob`, `AnalyzeJob`) holds one; the
commands fill it from the flags of `tphyolo.commands.options.detector`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tphyolo.infer.config import InferenceConfig, inference_config
from tphyolo.infer.slicing import NO_SLICING, SliceConfig
from tphyolo.infer.tta_config import TTAConfig

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

    @property
    def models(self) -> tuple[Weights, ...]:
        """`weights` as one entry per model (one for a single path or model)."""
        return tuple(self.weights) if isinstance(self.weights, list | tuple) else (self.weights,)

    @classmethod
    def from_keywords(
        cls,
        weights: Weights | Sequence[Weights],
        config: InferenceConfig | None = None,
        *,
        slice: int | str | SliceConfig | None = None,  # noqa: A002 - the public keyword is `slice`, as Predictor's
        tta: bool | TTAConfig | None = None,
        **settings: Any,
    ) -> DetectorSpec:
        """The spec of `weights` as `Predictor` takes its keywords: `config` with InferenceConfig fields by name
        (`imgsz=1536, conf=0.25`) and `tta` (True: the paper's passes; a TTAConfig) replaced; `slice` a window
        size, AUTO, MODEL or a SliceConfig (None or 0: whole images); the other `settings` are this class's
        fields by name (`runtime`, `device` (a str or torch.device), `fuse`, `model_weights`, `classifier`,
        `classifier_weight`)."""
        own = {name: settings.pop(name) for name in _KEYWORD_FIELDS & set(settings)}
        if own.get("device") is not None:
            own["device"] = str(own["device"])
        if own.get("model_weights") is not None:
            own["model_weights"] = tuple(own["model_weights"])
        slicing = slice
        if not isinstance(slice, SliceConfig):
            slicing = None if slice in (None, NO_SLICING) else SliceConfig(slice)
        return cls(weights, inference=inference_config(config, tta=tta, **settings), slicing=slicing, **own)


_KEYWORD_FIELDS = frozenset(f.name for f in fields(DetectorSpec)) - {"weights", "inference", "slicing"}
