"""How detections are made, as plain data: `InferenceConfig` and the shared scoring defaults.

It imports no torch: command-line parsers derive their flags from it cheaply. `tphyolo.infer.detector` runs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace

from tphyolo.data.files.image_limits import IMGSZ_BOUNDS, MAX_IMGSZ
from tphyolo.errors import InputError
from tphyolo.flags import (
    AT_LEAST_ONE,
    FRACTION,
    NON_NEGATIVE,
    Bounds,
    check_field_types,
    checked,
    flag,
    imgsz_flag,
    setting_name,
)
from tphyolo.infer.tta_config import DEFAULT_FLIPS, FLIPS, PAPER_SCALES, PLAIN, TTAConfig

# Detections kept per window (a whole image, a slice, a raster's tile): the VisDrone protocol scores up to 500 per
# image; a sliced image or a raster keeps up to this many per window, so an orthomosaic of many dense frames keeps
# every frame's objects, whether it is read as an image or as a raster.
MAX_DET = 500
PREDICT_CONF = 0.25  # confidence threshold when predicting
VAL_CONF = 0.001  # confidence threshold when scoring (a full precision-recall curve)
# The NMS IoU threshold of `val`, `predict` and training's validation alike (YOLOv5 had 0.6 in val.py, 0.45 in
# detect.py), so that a model scores the same through `val` as through `predict` + `eval`, and best.pt is chosen at
# the setting it is used at. On the README main job's model the synthetic validation scenes score mAP50 0.898 at
# 0.45 and 0.834 at 0.6: duplicates of one object that 0.6 keeps are false positives. What a low threshold costs is
# objects that overlap another of their class: none in the synthetic scenes; in the 40 real VisDrone images of the
# development set (2,531 objects), NMS over the true boxes themselves removes 1.0% of them at 0.45, 0.8% at 0.5,
# 0.3% at 0.6 and 0.2% at 0.7, the most a perfect detector could lose. docs/val.md#nms-threshold has the numbers.
NMS_IOU = 0.45
VAL_BATCH = 32  # images per forward pass when scoring
WBF_IOU = 0.55  # the IoU threshold of weighted boxes fusion unless given
MERGE_METHODS = ("wbf", "nms", "nmm", "greedy-nmm")  # tphyolo.infer.merge
MATCH_MEASURES = ("iou", "ios")  # tphyolo.ops.overlap: intersection over union, or over the smaller box
NMM_MATCH = 0.5  # the overlap threshold of (greedy) non-maximum merging unless given, as SAHI's
MAX_TTA_SCALE = 4.0  # TTA passes enlarge the input at most this much (the paper's largest is 1.3)
MODEL_CHOSEN = ("imgsz", "batch")  # the settings models may choose when the caller leaves them (`from_model`)
RECLASSIFY_MIN_SCORE = 0.01  # detections scoring less are not re-classified (validation keeps thousands of them)
# What runs a checkpoint (`tphyolo.infer.backends.compiled`): "auto" is OpenVINO on the CPU when it is installed
# (measured 1.3-1.6x PyTorch's fp32 NHWC path at 640 px: docs/performance.md), PyTorch on GPUs and without it.
RUNTIMES = ("auto", "pytorch", "openvino", "onnxruntime")
# What a compiled checkpoint computes in: "auto" is exact fp32, or OpenVINO's bf16 on CPUs with AMX / AVX512-BF16
# where a check on this machine and model found it faster and as accurate (`tphyolo.infer.backends.bf16_check`).
PRECISIONS = ("auto", "fp32", "bf16")
# The ONNX opset of `tphyolo export` unless given, and of the trace the compiled runtimes start from: LayerNormalization
# is a single op from 17; every runtime here reads it.
DEFAULT_OPSET = 17


@dataclass(frozen=True)
class InferenceConfig:
    """How detections are made; every field is also the command-line flag of `predict` and `val`.

    imgsz: network input size (long side) of each image or slice, rounded up to a stride multiple by whoever
    letterboxes (`check_imgsz`); batch: images or slices per forward pass. conf, iou: NMS thresholds of each
    run; max_det: most detections per window (`Detector.combine`). classes: keep only these ids; agnostic:
    suppress across classes.
    augment: test-time augmentation with every scale of `tta_scales` and flip of `tta_flips`. merge: how runs
    and slices are combined, "wbf", "nms", "nmm" or "greedy-nmm" (`tphyolo.infer.merge`); merge_iou: its overlap
    threshold (default `merge_threshold`); match: the overlap measure of nms/nmm/greedy-nmm, "iou" or "ios";
    merge_agnostic: merge across classes (so does `agnostic` for nms). WBF fuses within a class, by IoU.
    from_model: the settings of `MODEL_CHOSEN` the caller left to the models (a command line that does not give
    them): "imgsz" becomes a checkpoint's training size or an export's own, "batch" at most a fixed-batch
    export's (`tphyolo.infer.input_shape.settled_config`, which says so in one line each).
    backend (`--runtime`): what runs a checkpoint, from RUNTIMES: "auto" (OpenVINO on the CPU when installed, else
    PyTorch), "pytorch", or a checkpoint compiled once to "openvino" or "onnxruntime", checked against PyTorch
    and cached (`tphyolo.infer.backends.compiled`); models given as modules and exported files run as they are.
    precision: what a compiled checkpoint computes in, from PRECISIONS: "auto" (what `tphyolo doctor --tune
    --weights` kept for the model on this machine, else the rule: bf16 on CPUs with native bf16, fp32 elsewhere,
    `tphyolo.runtime.decisions`), "fp32", "bf16" (OpenVINO only; PyTorch's precision is the runtime's `--amp`).
    """

    imgsz: int = imgsz_flag(640, help="inference size (long side), pixels", bounds=IMGSZ_BOUNDS)
    batch: int = flag(1, "--batch", "--batch-size", help="images (or slices) per forward pass", bounds=AT_LEAST_ONE)
    conf: float = flag(PREDICT_CONF, "--conf", "--conf-thres", help="confidence threshold", bounds=FRACTION)
    iou: float = flag(NMS_IOU, "--iou", "--iou-thres", help="NMS IoU threshold", bounds=FRACTION)
    max_det: int = flag(MAX_DET, "--max-det", help="most detections per window: the whole image, or each slice of "
                        "a sliced image and tile of a raster, whose merged detections keep up to this many per window",
                        bounds=AT_LEAST_ONE)  # fmt: skip
    classes: tuple[int, ...] | None = flag(None, "--classes", help="keep only these class ids", bounds=NON_NEGATIVE)
    agnostic: bool = flag(False, "--agnostic-nms", help="suppress across classes")
    augment: bool = flag(False, "--augment", help="test-time augmentation")
    tta_scales: tuple[float, ...] = flag(
        PAPER_SCALES, "--tta-scales", help="TTA input scales", bounds=Bounds(0, MAX_TTA_SCALE, low_open=True)
    )
    tta_flips: tuple[str, ...] = flag(DEFAULT_FLIPS, "--tta-flips", choices=FLIPS, help="TTA flips")
    merge: str = flag("wbf", "--merge", choices=MERGE_METHODS, help="how TTA, ensemble and slice runs are merged")
    merge_iou: float | None = flag(
        None,
        "--merge-iou",
        help=f"merge overlap threshold (default: {WBF_IOU} for wbf, --iou for nms, {NMM_MATCH} for nmm)",
        bounds=FRACTION,
    )
    match: str = flag(
        "iou", "--match", choices=MATCH_MEASURES, help="merge overlap: iou, or ios (over the smaller box)"
    )
    merge_agnostic: bool = flag(False, "--merge-agnostic", help="merge boxes across classes (nms, nmm, greedy-nmm)")
    from_model: tuple[str, ...] = checked((), choices=MODEL_CHOSEN)
    backend: str = flag(
        "auto", "--runtime", choices=RUNTIMES,
        help="what runs a .pt checkpoint: auto = OpenVINO on the CPU when installed (compiled once, checked "
        "against PyTorch, cached), else PyTorch",
    )  # fmt: skip
    precision: str = flag(
        "auto", "--precision", choices=PRECISIONS,
        help="what a compiled checkpoint computes in: auto = what tphyolo doctor --tune --weights kept, else OpenVINO "
        "bf16 on CPUs with native bf16 and fp32 elsewhere; fp32 is exact",
    )  # fmt: skip

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag (`setting_name`) of the first setting that is out of range or has no
        effect (TTA passes without `augment`)."""
        for name in ("classes", "tta_scales", "tta_flips", "from_model"):  # lists (from Python callers) become tuples
            value = getattr(self, name)
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, name, tuple(value))
        check_field_types(self)  # types, choices and bounds
        if self.augment and (largest := max(self.tta_scales) * self.imgsz) > MAX_IMGSZ:
            raise InputError(
                f"{setting_name(self, 'tta_scales')} {max(self.tta_scales):g} at {setting_name(self, 'imgsz')} "
                f"{self.imgsz}: a {largest:.0f} px input, above the image-size limit of {MAX_IMGSZ}"
            )
        if self.merge == "wbf" and (self.match != "iou" or self.merge_agnostic):
            given = setting_name(self, "match" if self.match != "iou" else "merge_agnostic")
            raise InputError(f"{given}: wbf fuses boxes of one class by IoU; choose {setting_name(self, 'merge')} "
                             "nms, nmm or greedy-nmm")  # fmt: skip
        TTAConfig(self.tta_scales, self.tta_flips)  # validates them
        if self.precision == "bf16" and self.backend not in ("auto", "openvino"):
            flags = setting_name(self, "precision"), setting_name(self, "backend")
            raise InputError(f"{flags[0]} bf16 is a precision of {flags[1]} openvino; {self.backend} has --amp")
        if not self.augment and (self.tta_scales, self.tta_flips) != (PAPER_SCALES, DEFAULT_FLIPS):
            names = f"{setting_name(self, 'tta_scales')}/{setting_name(self, 'tta_flips')}"
            raise InputError(f"{names} choose the passes of {setting_name(self, 'augment')}; add it or drop them")

    def check_classes(self, num_classes: int) -> None:
        """Raises ValueError when `classes` names an id the model does not have (ids 0..num_classes-1)."""
        unknown = [c for c in self.classes or () if c >= num_classes]
        if unknown:
            raise InputError(
                f"{setting_name(self, 'classes')} {' '.join(map(str, unknown))}: the model has {num_classes} "
                f"classes (ids 0..{num_classes - 1})"
            )

    def settings_in_effect(self, *, runs_merged: bool) -> dict[str, object]:
        """The settings by field name, less those that change nothing: the TTA passes without `augment`, and
        merging when no runs are merged (`runs_merged`: TTA, an ensemble or slicing) -- what a report lists."""
        settings = dataclasses.asdict(self)
        del settings["from_model"]  # resolved before any image is read: imgsz and batch say what ran
        if not self.augment:
            del settings["tta_scales"], settings["tta_flips"]
        if not runs_merged:
            del settings["merge"], settings["merge_iou"], settings["match"], settings["merge_agnostic"]
        return settings

    @property
    def tta(self) -> TTAConfig:
        """The TTA passes run: the configured ones with `augment`, else the identity pass alone."""
        return TTAConfig(self.tta_scales, self.tta_flips) if self.augment else PLAIN

    @property
    def merge_across_classes(self) -> bool:
        """Whether merging joins boxes of different classes: `merge_agnostic`, or `agnostic` with NMS."""
        return self.merge_agnostic or (self.agnostic and self.merge == "nms")

    @property
    def merge_threshold(self) -> float:
        """The overlap threshold of merging: `merge_iou` when given, else WBF_IOU for WBF, `iou` for NMS and
        NMM_MATCH for the two NMMs."""
        if self.merge_iou is not None:
            return self.merge_iou
        return {"wbf": WBF_IOU, "nms": self.iou}.get(self.merge, NMM_MATCH)


VAL_DEFAULTS = {"conf": VAL_CONF, "batch": VAL_BATCH}  # where scoring differs from predicting (not in NMS_IOU)
VALIDATION = InferenceConfig(**VAL_DEFAULTS)


def inference_config(
    config: InferenceConfig | None = None, *, tta: bool | TTAConfig | None = None, **fields
) -> InferenceConfig:
    """`config` (default InferenceConfig()) with `fields` replaced; `tta` is a shorthand: True for the
    paper's passes, a TTAConfig for its passes, False for none."""
    if isinstance(tta, TTAConfig):
        fields |= {"augment": True, "tta_scales": tta.scales, "tta_flips": tta.flips}
    elif tta:
        fields["augment"] = True
    elif tta is not None:  # no TTA: the passes go back to their defaults, which then have no effect
        fields |= {"augment": False, "tta_scales": PAPER_SCALES, "tta_flips": DEFAULT_FLIPS}
    return replace(config or InferenceConfig(), **fields)
