"""The one assembly of a detector: `build_detector(spec)`, from a `DetectorSpec` to the `Detector` it describes.

Prediction (`Predictor`) and validation (`tphyolo.val`) both build their detector here, so that the same spec
gives the same detector, and so the same detections, whichever runs it:

    built = build_detector(DetectorSpec("best.pt", inference=InferenceConfig(imgsz=640)))
    built.detector, built.config, built.slicing, built.decisions

The steps, in order: load the backends (`load_backends`), settle what was left to the models (slicing, then
image size and batch: `tphyolo.infer.input_shape`), fix the image size (a stride multiple, or a fixed-size
export's own size), load and check the crop classifier, and make the `Detector`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from tphyolo.classify.classifier import as_classifier
from tphyolo.data.letterbox import check_imgsz
from tphyolo.infer.backends.pytorch import Backend, load_backends, what_ran
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.detector import Detector
from tphyolo.infer.input_shape import fixed_input_shape, settled_config, settled_slicing
from tphyolo.infer.slicing import SliceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.config import RuntimeConfig, resolve_device

LOGGER = logging.getLogger(__name__)


def spec_runtime(spec: DetectorSpec) -> RuntimeConfig:
    """How `spec` runs: its runtime, or the default one."""
    return spec.runtime or RuntimeConfig()


def spec_device(spec: DetectorSpec, local_rank: int = 0) -> torch.device:
    """The device `spec` runs on: its `device` when given, else its runtime's (the `local_rank`-th GPU)."""
    return resolve_device(spec.device) if spec.device is not None else spec_runtime(spec).torch_device(local_rank)


@dataclass(frozen=True)
class BuiltDetector:
    """What `build_detector` returns: the `detector` (its backends, settled config and crop classifier) and the
    `slicing` it runs with (None: whole images; an AUTO size resolved against the image size)."""

    detector: Detector
    slicing: SliceConfig | None

    @property
    def config(self) -> InferenceConfig:
        """The settled inference config: nothing left to the models, `imgsz` the one images are letterboxed to."""
        return self.detector.config

    @property
    def decisions(self) -> dict:
        """What runs the model(s) and why (`tphyolo.infer.backends.pytorch.what_ran`)."""
        return what_ran(self.detector.backends)


def build_detector(
    spec: DetectorSpec, *, local_rank: int = 0, backends: Sequence[Backend] | None = None
) -> BuiltDetector:
    """The detector `spec` describes, on `spec_device(spec, local_rank)`.

    backends: models already loaded from `spec.weights` (then nothing is loaded again; `spec.weights`,
    `runtime`, `device` and `fuse` are not read). The image size becomes a multiple of the largest stride
    (rounded up, with a warning), or a fixed-size export's own size (with a warning when another was asked for).
    Raises InputError, before any image is read, as the steps do: a runtime that cannot run on the device,
    models that disagree, fixed-size exports that disagree or a batch above an export's, a class id the models
    do not have, a crop classifier whose classes are not the models'."""
    if backends is None:
        backends = load_backends(spec.weights, runtime=spec_runtime(spec), device=spec_device(spec, local_rank),
                                 fuse=spec.fuse, backend=spec.inference.backend,
                                 precision=spec.inference.precision)  # fmt: skip
    config, slicing = settled_slicing(backends, spec.inference, spec.slicing)  # a slicing left to the models
    config = settled_config(backends, config)  # what the caller left to the models (`from_model`)
    fixed = fixed_input_shape(backends, config)
    if fixed is None:
        config = replace(config, imgsz=check_imgsz(config.imgsz, max(b.stride for b in backends)))
    elif max(fixed) != config.imgsz:
        LOGGER.warning("a fixed-size export: images are letterboxed to its %dx%d, not to --img %d",
                       fixed[1], fixed[0], config.imgsz)  # fmt: skip
        config = replace(config, imgsz=max(fixed))
    classifier = spec.classifier
    if classifier is not None:
        classifier = as_classifier(classifier, detector_names=backends[0].names, device=backends[0].device,
                                   runtime=spec_runtime(spec), weight=spec.classifier_weight)  # fmt: skip
    detector = Detector(backends, config, weights=spec.model_weights, classifier=classifier)
    return BuiltDetector(detector, slicing.resolved(config.imgsz) if slicing is not None else None)
