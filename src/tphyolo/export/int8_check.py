"""The accuracy check of an INT8 export: the INT8 file and its float twin, scored on the same images.

Both files run in the same runtime, on `count` images of the dataset's val split (all of them by default;
otherwise spread evenly over the split), with validation's thresholds (conf 0.001, IoU 0.45) and the chosen
protocol. A dynamic export is scored as `tphyolo val` scores a model (rectangular batches, long side at the
export size); a fixed-size one at its size and batch, every image letterboxed to the square (whole batches
only: the last images that do not fill one are left out). The drop is float mAP50 minus INT8 mAP50, in
absolute terms; `Int8Accuracy.ok` says whether it is within `max_drop`. A float model that scores below
`MIN_FLOAT_MAP50` finds (almost) nothing on these images, so its INT8 twin cannot be shown to lose anything: the
check then says nothing (`says_nothing`), is not `ok`, and the file's metadata marks it unchecked
(`int8_unchecked`). When the dataset lists `confusable:`
classes (`synthetic-fine`, the crop classifier's datasets), their mean AP50 is reported too: small score shifts
are what swaps them. AP50 by object size (under 16 px, 16 to 32 px, larger: `tphyolo.metrics.size_bins`) is
reported for both files: rounding to 8 bits erases the small objects first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tphyolo.classify.data import confusable_classes
from tphyolo.data.dataset import DetectionDataset, RectBatches
from tphyolo.data.dataset_config import DataConfig
from tphyolo.data.loader import LoaderSettings, build_dataloader
from tphyolo.data.scan import scan_split
from tphyolo.errors import InputError
from tphyolo.evaluation.loop import evaluate
from tphyolo.evaluation.results import EvalResults
from tphyolo.evaluation.settings import EvalSettings
from tphyolo.export.calibration import data_name, spread_indices
from tphyolo.infer.backends import ExportedBackend, load_backend
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.config import VALIDATION, inference_config
from tphyolo.metrics.size_bins import size_bin_ap50

RECT_PAD = 0.5  # strides of padding of validation's rectangular batches (`build_dataset`)
# Below this float mAP50 the check cannot tell a good INT8 file from a useless one (at the default --max-drop
# 0.01 even an INT8 file that finds nothing would pass).
MIN_FLOAT_MAP50 = 0.01


@dataclass(frozen=True)
class Int8Accuracy:
    """What the check measured: `scored` (which images, which protocol, in words), mAP50 and mAP50-95 of the
    float and the INT8 file (fractions), the allowed mAP50 drop, the class whose AP50 dropped most
    (name, drop), None when no class has objects, and the mean AP50 of the dataset's confusable classes
    (names, float, INT8), None when it lists none with objects in the scored images; `size_ap50`: (bin, float
    AP50, INT8 AP50) per object-size bin, None for a bin without objects; `float_layers`: the layers kept in
    float beyond the family's policy to bring the drop within the bound (names, in the order added);
    `speedup`: how many times faster the INT8 file ran than its float twin (timed once, printed only)."""

    scored: str
    float_map50: float
    int8_map50: float
    float_map: float
    int8_map: float
    max_drop: float
    worst_class: tuple[str, float] | None = None
    confusable: tuple[tuple[str, ...], float, float] | None = None
    size_ap50: tuple[tuple[str, float | None, float | None], ...] = ()
    float_layers: tuple[str, ...] = ()
    speedup: float | None = None

    @property
    def drop(self) -> float:
        """mAP50 lost to quantization (negative when INT8 scores higher)."""
        return self.float_map50 - self.int8_map50

    @property
    def says_nothing(self) -> bool:
        """The float model scores (near) zero: no drop can be measured from it."""
        return self.float_map50 < MIN_FLOAT_MAP50

    @property
    def ok(self) -> bool:
        return not self.says_nothing and self.drop <= self.max_drop

    @property
    def unchecked_reason(self) -> str:
        """What the metadata records when the check says nothing ("" when it says something)."""
        if not self.says_nothing:
            return ""
        return f"the float model scores mAP50 {self.float_map50:.4f} on the check's images, below {MIN_FLOAT_MAP50}"

    def summary(self) -> str:
        details = ""
        if self.worst_class is not None:
            details = f"; largest class AP50 drop {self.worst_class[1]:+.4f} ({self.worst_class[0]})"
        if self.confusable is not None:
            names, before, after = self.confusable
            details += (
                f"; confusable classes ({', '.join(names)}) AP50 float {before:.4f}, INT8 {after:.4f} "
                f"(drop {before - after:+.4f})"
            )
        if self.size_ap50:
            details += "; AP50 by object size " + ", ".join(
                f"{name} {_ap(before)} -> {_ap(after)}" for name, before, after in self.size_ap50
            )
        if self.float_layers:
            details += f"; layers kept in float: {', '.join(self.float_layers)}"
        if self.speedup is not None:
            details += f"; INT8 runs {self.speedup:.2f}x the float file's speed"
        verdict = "ok" if self.ok else "ABOVE --max-drop"
        if self.says_nothing:
            verdict = "UNCHECKED (the float model finds almost nothing)"
        return (
            f"INT8 accuracy on {self.scored}: mAP50 float {self.float_map50:.4f}, INT8 {self.int8_map50:.4f} "
            f"(drop {self.drop:+.4f}, max {self.max_drop}); mAP50-95 float {self.float_map:.4f}, INT8 "
            f"{self.int8_map:.4f} (drop {self.float_map - self.int8_map:+.4f}){details}: {verdict}"
        )


def _ap(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


class AccuracyCheck:
    """The check's images and the float file's scores on them, made once; called with an INT8 file (or each
    of several tries of one), it scores that file alike and compares (see the module docstring). ValueError
    naming the data when its val split has no usable image."""

    def __init__(self, float_path: Path, data: DataConfig, *, count: int | None, protocol: str, max_drop: float,
                 progress: bool = True) -> None:  # fmt: skip
        float_backend = load_backend(float_path)
        meta = float_backend.metadata
        records = scan_split(data.split("val"), names=data.names).records if data.split("val") else []
        if not records:
            raise InputError(f"data {data.source or data.root}: no usable image in the 'val' split to check INT8 on")
        chosen = [records[i] for i in spread_indices(len(records), count or len(records))]
        size, batch = max(meta.imgsz), meta.batch
        if not meta.dynamic:
            chosen = chosen[: len(chosen) // batch * batch]
            if not chosen:
                raise InputError(f"the INT8 check needs at least {batch} val images (the export's fixed batch)")
        rect = RectBatches(batch, pad=RECT_PAD) if meta.dynamic else None
        self.dataset = DetectionDataset(chosen, imgsz=size, rect=rect, stride=meta.stride)
        self.config = inference_config(VALIDATION, imgsz=size, batch=batch)
        self.settings = EvalSettings(protocol=protocol, progress=progress, keep_images=True)
        self.names = list(data.names) or float_backend.names
        self.confusable = confusable_classes(data)
        self.scored = f"{data_name(data)} val: {len(chosen)} of {len(records)} images, {protocol} protocol"
        self.max_drop = max_drop
        self.float_scores = self._score(float_backend)

    def _score(self, backend: ExportedBackend) -> EvalResults:
        loader = build_dataloader(self.dataset, LoaderSettings(batch_size=self.config.batch))
        return evaluate(backend, loader, names=self.names, config=self.config, settings=self.settings)

    def __call__(self, int8_path: Path) -> tuple[Int8Accuracy, ExportMetadata]:
        """What the INT8 file at `int8_path` loses, and its metadata with that recorded (`int8_check`,
        `int8_map50`, `int8_map`, `int8_unchecked`), for the caller to write."""
        int8_backend = load_backend(int8_path)
        before, after = self.float_scores, self._score(int8_backend)
        accuracy = Int8Accuracy(self.scored, before.map50, after.map50, before.map, after.map, self.max_drop,
                                worst_class_drop(before, after), confusable_ap50(before, after, self.confusable),
                                size_bins(before, after, nc=len(self.names)))  # fmt: skip
        recorded = replace(int8_backend.metadata, int8_check=self.scored,
                           int8_map50=(accuracy.float_map50, accuracy.int8_map50),
                           int8_map=(accuracy.float_map, accuracy.int8_map),
                           int8_unchecked=accuracy.unchecked_reason)  # fmt: skip
        return accuracy, recorded


def keep_layers_float(
    first: tuple[Int8Accuracy, ExportMetadata],
    retry: Callable[[tuple[int, ...], float], tuple[Int8Accuracy, ExportMetadata]],
    candidates: Sequence[int],
) -> tuple[Int8Accuracy, ExportMetadata, tuple[int, ...]]:
    """The accuracy check's retries: while the INT8 file's drop is above the bound (and the check says something),
    `retry(layers, drop)` writes and checks it again with one more of `candidates` (layer indices, in order) in
    float. Returns the last check's accuracy and metadata and the layers it kept in float (none when the first
    passed); the last retry's when even all candidates do not bring the drop within the bound."""
    (accuracy, metadata), layers = first, ()
    while not accuracy.ok and not accuracy.says_nothing and len(layers) < len(candidates):
        layers = tuple(candidates[: len(layers) + 1])
        accuracy, metadata = retry(layers, accuracy.drop)
    return accuracy, metadata, layers


def size_bins(
    float_scores: EvalResults, int8_scores: EvalResults, *, nc: int
) -> tuple[tuple[str, float | None, float | None], ...]:
    """(bin, float AP50, INT8 AP50) per object-size bin (`tphyolo.metrics.size_bins`)."""
    before = size_bin_ap50(float_scores.image_results, nc=nc)
    after = size_bin_ap50(int8_scores.image_results, nc=nc)
    return tuple((name, before[name], after[name]) for name in before)


def worst_class_drop(float_scores: EvalResults, int8_scores: EvalResults) -> tuple[str, float] | None:
    """(name, float AP50 - INT8 AP50) of the class that lost most, over classes with objects."""
    int8_ap50 = {c.name: c.map50 for c in int8_scores.per_class}
    drops = [(c.name, c.map50 - int8_ap50[c.name]) for c in float_scores.per_class if c.name in int8_ap50]
    return max(drops, key=lambda item: item[1], default=None)


def confusable_ap50(
    float_scores: EvalResults, int8_scores: EvalResults, names: tuple[str, ...]
) -> tuple[tuple[str, ...], float, float] | None:
    """(names, float mean AP50, INT8 mean AP50) over those of `names` with objects in the scored images, or
    None when none has any."""
    float_ap50 = {c.name: c.map50 for c in float_scores.per_class}
    int8_ap50 = {c.name: c.map50 for c in int8_scores.per_class}
    present = tuple(n for n in names if n in float_ap50 and n in int8_ap50)
    if not present:
        return None
    before = sum(float_ap50[n] for n in present) / len(present)
    after = sum(int8_ap50[n] for n in present) / len(present)
    return present, before, after
