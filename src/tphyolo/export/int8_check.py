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
are what swaps them.
"""

from __future__ import annotations

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
from tphyolo.infer.backends import load_backend
from tphyolo.infer.backends.metadata import ExportMetadata
from tphyolo.infer.config import VALIDATION, inference_config

RECT_PAD = 0.5  # strides of padding of validation's rectangular batches (`build_dataset`)
# Below this float mAP50 the check cannot tell a good INT8 file from a useless one (at the default --max-drop
# 0.01 even an INT8 file that finds nothing would pass).
MIN_FLOAT_MAP50 = 0.01


@dataclass(frozen=True)
class Int8Accuracy:
    """What the check measured: `scored` (which images, which protocol, in words), mAP50 and mAP50-95 of the
    float and the INT8 file (fractions), the allowed mAP50 drop, the class whose AP50 dropped most
    (name, drop), None when no class has objects, and the mean AP50 of the dataset's confusable classes
    (names, float, INT8), None when it lists none with objects in the scored images."""

    scored: str
    float_map50: float
    int8_map50: float
    float_map: float
    int8_map: float
    max_drop: float
    worst_class: tuple[str, float] | None = None
    confusable: tuple[tuple[str, ...], float, float] | None = None

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
        verdict = "ok" if self.ok else "ABOVE --max-drop"
        if self.says_nothing:
            verdict = "UNCHECKED (the float model finds almost nothing)"
        return (
            f"INT8 accuracy on {self.scored}: mAP50 float {self.float_map50:.4f}, INT8 {self.int8_map50:.4f} "
            f"(drop {self.drop:+.4f}, max {self.max_drop}); mAP50-95 float {self.float_map:.4f}, INT8 "
            f"{self.int8_map:.4f} (drop {self.float_map - self.int8_map:+.4f}){details}: {verdict}"
        )


def check_int8_accuracy(
    float_path: Path,
    int8_path: Path,
    data: DataConfig,
    *,
    count: int | None,
    protocol: str,
    max_drop: float,
    progress: bool = True,
) -> tuple[Int8Accuracy, ExportMetadata]:
    """Scores the float and the INT8 export on `count` val images of `data` (None: all); see the module
    docstring. Returns what was measured and the INT8 file's metadata with it recorded (`int8_check`,
    `int8_map50`, `int8_map`, `int8_unchecked`), for the caller to write. ValueError naming the data when its
    val split has no usable image."""
    float_backend, int8_backend = load_backend(float_path), load_backend(int8_path)
    meta = int8_backend.metadata
    records = scan_split(data.split("val"), names=data.names).records if data.split("val") else []
    if not records:
        raise InputError(f"data {data.source or data.root}: no usable image in the 'val' split to check INT8 on")
    chosen = [records[i] for i in spread_indices(len(records), count or len(records))]
    size = max(meta.imgsz)
    batch = meta.batch
    if not meta.dynamic:
        chosen = chosen[: len(chosen) // batch * batch]
        if not chosen:
            raise InputError(f"the INT8 check needs at least {batch} val images (the export's fixed batch)")
    dataset = DetectionDataset(chosen, imgsz=size, rect=RectBatches(batch, pad=RECT_PAD) if meta.dynamic else None,
                               stride=meta.stride)  # fmt: skip
    config = inference_config(VALIDATION, imgsz=size, batch=batch)
    names = list(data.names) or int8_backend.names
    scores = []
    for backend in (float_backend, int8_backend):
        loader = build_dataloader(dataset, LoaderSettings(batch_size=batch))
        scores.append(evaluate(backend, loader, names=names, config=config,
                               settings=EvalSettings(protocol=protocol, progress=progress)))  # fmt: skip
    scored = f"{data_name(data)} val: {len(chosen)} of {len(records)} images, {protocol} protocol"
    accuracy = Int8Accuracy(scored, scores[0].map50, scores[1].map50, scores[0].map, scores[1].map, max_drop,
                            worst_class_drop(*scores), confusable_ap50(*scores, confusable_classes(data)))  # fmt: skip
    recorded = replace(meta, int8_check=scored, int8_map50=(accuracy.float_map50, accuracy.int8_map50),
                       int8_map=(accuracy.float_map, accuracy.int8_map),
                       int8_unchecked=accuracy.unchecked_reason)  # fmt: skip
    return accuracy, recorded


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
