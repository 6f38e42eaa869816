"""What a validation run scores and writes, as plain data: `ValConfig` (for `val`) and `EvalSettings` (for the
loop, `evaluate`).

It imports no torch: `tphyolo val -h` derives its flags from `ValConfig`'s fields (`tphyolo.flags.flag`). The
files a run writes are writers (`tphyolo.evaluation.writers`); a flag here only chooses which ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from tphyolo.data.scan_options import scan_cache_flag
from tphyolo.flags import NON_NEGATIVE, check_field_types, flag
from tphyolo.infer.slicing import SliceConfig
from tphyolo.metrics.registry import PROTOCOLS

if TYPE_CHECKING:  # annotations only: `tphyolo val -h` imports no torch
    from tphyolo.classify.classifier import CropClassifier
    from tphyolo.runtime.sharding import Shard

TASKS = ("val", "test")  # the splits `val` scores


@dataclass(frozen=True)
class EvalSettings:
    """How `evaluate` runs and scores: `protocol` (a name of `tphyolo.metrics.registry.PROTOCOLS`), a progress
    bar, a crop `classifier` (loaded for the model's classes: `tphyolo.classify.classifier.as_classifier`) that
    re-labels the detections of its classes, for a bare model (a Detector of `tphyolo.infer.build.build_detector`
    brings its own), `slicing` (a
    SliceConfig: sliced predictions on the full images, windows letterboxed to the inference config's `imgsz`),
    `keep_images` (each image's detections and ground truth kept in `image_results`, for the report) and `shard`
    (in a distributed run, which images this rank's loader holds: `tphyolo.runtime.sharding.Shard`)."""

    protocol: str = "yolo"
    progress: bool = False
    classifier: CropClassifier | None = None
    slicing: SliceConfig | None = None
    keep_images: bool = False
    shard: Shard | None = None


DEFAULT_EVAL = EvalSettings()


@dataclass(frozen=True)
class ValConfig:
    """A `val` run: the split (`task`) of the data to score, by `protocol`, read by `workers` processes, and
    what it writes into `save_dir` (a folder, or a function that creates one, called once the data are loaded
    so that a run failing before leaves no folder): `save_json`, `save_txt`, `plots`
    (`tphyolo.evaluation.writers`). Fields with a flag are `tphyolo val`'s.

    datasets_dir: where built-in configs' relative paths start. scan_cache: read and write the label scan
    cache. progress: a progress bar. on_problems: called with the report of unusable files in the split
    (default: a logged warning). keep_images: as `EvalSettings`. The detector's settings (slicing, crop
    classifier) are its `tphyolo.infer.spec.DetectorSpec`'s.
    """

    task: str = flag("val", "--task", choices=TASKS, help="split to evaluate")
    protocol: str = flag("yolo", "--protocol", choices=tuple(PROTOCOLS), help="scoring rules")
    datasets_dir: str | None = flag(
        None, "--datasets-dir", help="folder that built-in configs' relative paths start from (./datasets)"
    )
    workers: int = flag(2, "--workers", bounds=NON_NEGATIVE, help="data loading processes, at most the CPU cores")
    scan_cache: bool = scan_cache_flag()
    save_json: bool = flag(False, "--save-json", help="COCO results json (predictions.json)")
    save_txt: bool = flag(False, "--save-txt", help="YOLO txt with scores per image (labels/)")
    plots: bool = flag(False, "--plots", help="PR/F1/P/R curves, confusion matrix, batch images")
    save_dir: str | Path | Callable[[], Path] | None = None
    progress: bool = False
    on_problems: Callable[[str], None] | None = None
    keep_images: bool = False

    @property
    def writes(self) -> bool:
        """Whether the run writes any file (`save_json`, `save_txt` or `plots`)."""
        return self.save_json or self.save_txt or self.plots

    def __post_init__(self) -> None:
        check_field_types(self)  # types, choices and bounds


VAL_CONFIG_FIELDS = frozenset(f.name for f in fields(ValConfig))
