"""Tracking metrics through the `trackeval` library: HOTA (DetA, AssA, LocA), CLEAR (MOTA, MOTP, IDSW, FP, FN)
and Identity (IDF1, IDP, IDR), per class, per sequence, and combined.

    result = evaluate_tracking(truth_dir, output_dir, fmt="visdrone-mot")
    print(result.table())
    result.combined["HOTA"], result.per_class["car"]["IDF1"]

What is evaluated in each benchmark is `tphyolo.metrics.track_protocols`; this module hands the prepared boxes to
trackeval's metric classes (IoU similarity; CLEAR and Identity match at IoU >= 0.5; HOTA averages over the
thresholds 0.05 ... 0.95) and combines them as trackeval's own evaluator does: sequences of a class by summing
counts, classes "combined" by summing counts over classes (detection-averaged, as the VisDrone toolkit's overall
score) and "class-averaged" by the mean over classes with ground truth.

Percentages are 0-100 (HOTA, MOTA, IDF1, ...), counts are whole numbers (IDSW, FP, FN, ...); LocA and MOTP are
None (printed '-') where no output box matched a true one, as for a class without detections.
Older trackeval releases use `np.float`/`np.int`, which numpy 1.24 removed: those aliases are provided for
the duration of a trackeval call, and only after such a release failed without them (`_numpy_aliases`).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tphyolo.data.mot.sequences import read_ground_truth, read_tracker_output
from tphyolo.data.mot.table import TrackTable
from tphyolo.errors import InputError
from tphyolo.metrics.track_protocols import FrameBoxes, prepare
from tphyolo.ops.boxes import box_iou

# (name shown, trackeval metric, its field, kind): "mean" = mean over HOTA's thresholds, x 100; "percent"; "count"
FIELDS = (
    ("HOTA", "HOTA", "HOTA", "mean"), ("DetA", "HOTA", "DetA", "mean"), ("AssA", "HOTA", "AssA", "mean"),
    ("LocA", "HOTA", "LocA", "mean"), ("MOTA", "CLEAR", "MOTA", "percent"), ("MOTP", "CLEAR", "MOTP", "percent"),
    ("IDF1", "Identity", "IDF1", "percent"), ("IDP", "Identity", "IDP", "percent"),
    ("IDR", "Identity", "IDR", "percent"), ("IDSW", "CLEAR", "IDSW", "count"), ("FP", "CLEAR", "CLR_FP", "count"),
    ("FN", "CLEAR", "CLR_FN", "count"), ("Frag", "CLEAR", "Frag", "count"), ("MT", "CLEAR", "MT", "count"),
    ("ML", "CLEAR", "ML", "count"), ("GT", "Count", "GT_Dets", "count"), ("GT_IDs", "Count", "GT_IDs", "count"),
    ("IDs", "Count", "IDs", "count"),
)  # fmt: skip
LOCALISATION = ("LocA", "MOTP")  # how well matched boxes align: undefined (None) without a match
TABLE_FIELDS = ("HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1", "IDP", "IDR", "IDSW", "FP", "FN")
_REMOVED_ALIASES = {"float": float, "int": int, "bool": bool, "object": object}
T = TypeVar("T")


@dataclass(frozen=True)
class TrackingResult:
    """Metrics by name (`FIELDS`): `per_class[class]` over all sequences (the classes with ground truth or
    output), `combined` over classes (detection-averaged), `class_averaged` (over the classes with ground
    truth), and `per_sequence[sequence][class]`."""

    protocol: str
    per_class: dict[str, dict[str, float]]
    combined: dict[str, float]
    class_averaged: dict[str, float]
    per_sequence: dict[str, dict[str, dict[str, float]]]

    def to_dict(self) -> dict[str, Any]:
        return {"protocol": self.protocol, "combined": self.combined, "class_averaged": self.class_averaged,
                "per_class": self.per_class, "per_sequence": self.per_sequence}  # fmt: skip

    def table(self, fields: tuple[str, ...] = TABLE_FIELDS) -> str:
        """A text table: one row per class, then `combined` and, with several classes, `class-avg`."""
        rows = list(self.per_class.items()) + [("combined", self.combined)]
        if len(self.per_class) > 1:
            rows.append(("class-avg", self.class_averaged))
        width = max(len(name) for name, _ in rows)
        lines = [f"{'class':<{width}}" + "".join(f"{f:>8}" for f in fields)]
        for name, metrics in rows:
            lines.append(f"{name:<{width}}" + "".join(_cell(metrics[f], f) for f in fields))
        return "\n".join(lines)


def _cell(value: float | None, field: str) -> str:
    kind = next(k for name, _, _, k in FIELDS if name == field)
    if value is None:
        return f"{'-':>8}"
    return f"{int(value):>8d}" if kind == "count" else f"{value:>8.2f}"


def evaluate_tracking(truth_dir: Path, output_dir: Path, *, fmt: str) -> TrackingResult:
    """Score the tracker output in `output_dir` against the ground truth in `truth_dir`, both in the layout of
    `fmt` (`tphyolo.data.mot.sequences`). Raises FileNotFoundError for a missing folder or output file and
    LabelError naming a file and line that cannot be read."""
    sequences = read_ground_truth(truth_dir, fmt)
    outputs = read_tracker_output(output_dir, fmt, [s.name for s in sequences])
    prepared = {
        s.name: prepare(s.truth, outputs[s.name], fmt, ignore=s.ignore, length=s.length, frame_size=s.frame_size)
        for s in sequences
    }
    return score_sequences(prepared, protocol=fmt)


def evaluate_tables(
    truth: Mapping[str, TrackTable], output: Mapping[str, TrackTable], *, fmt: str
) -> TrackingResult:
    """As `evaluate_tracking`, for tables in memory: sequence name -> ground truth, -> tracker output."""
    missing = sorted(set(truth) - set(output))
    if missing:
        raise InputError(f"no tracker output for sequence(s) {missing}")
    return score_sequences({name: prepare(truth[name], output[name], fmt) for name in truth}, protocol=fmt)


def score_sequences(prepared: Mapping[str, Mapping[str, FrameBoxes]], *, protocol: str) -> TrackingResult:
    """The metrics of prepared sequences (sequence -> class -> FrameBoxes, see `track_protocols.prepare`)."""
    return _with_numpy_aliases(lambda: _score(prepared, protocol))


def _metrics() -> dict[str, Any]:
    from trackeval.metrics import CLEAR, HOTA, Count, Identity

    quiet = {"THRESHOLD": 0.5, "PRINT_CONFIG": False}
    return {"HOTA": HOTA(), "CLEAR": CLEAR(quiet), "Identity": Identity(quiet), "Count": Count()}


def _score(prepared: Mapping[str, Mapping[str, FrameBoxes]], protocol: str) -> TrackingResult:
    metrics = _metrics()
    classes = list(dict.fromkeys(c for per_class in prepared.values() for c in per_class))
    raw: dict[str, dict[str, dict[str, Any]]] = {}  # sequence -> class -> metric -> trackeval result
    for sequence, per_class in prepared.items():
        raw[sequence] = {}
        for cls, boxes in per_class.items():
            data = trackeval_data(boxes, where=f"{sequence} ({cls})")
            raw[sequence][cls] = {name: metric.eval_sequence(data) for name, metric in metrics.items()}
    by_class = {
        cls: {name: metric.combine_sequences({s: raw[s][cls][name] for s in raw if cls in raw[s]})
              for name, metric in metrics.items()}
        for cls in classes
    }  # fmt: skip
    with_truth = {cls: res for cls, res in by_class.items() if res["Count"]["GT_Dets"] > 0} or by_class
    combined = {name: metric.combine_classes_det_averaged({c: r[name] for c, r in by_class.items()})
                for name, metric in metrics.items()}  # fmt: skip
    averaged = {name: metric.combine_classes_class_averaged({c: r[name] for c, r in with_truth.items()})
                for name, metric in metrics.items()}  # fmt: skip
    averaged["Count"] = combined["Count"]
    present = {cls: res for cls, res in by_class.items() if res["Count"]["GT_Dets"] + res["Count"]["Dets"] > 0}
    return TrackingResult(
        protocol=protocol,
        per_class={cls: _summary(res) for cls, res in (present or by_class).items()},
        combined=_summary(combined),
        class_averaged=_summary(averaged),
        per_sequence={s: {cls: _summary(res) for cls, res in per_class.items()} for s, per_class in raw.items()},
    )


def _summary(results: Mapping[str, Mapping[str, Any]]) -> dict[str, float | None]:
    """The `FIELDS` of trackeval's `results`; the localisation ones (LocA, MOTP) None where no box matched,
    which trackeval reports as 100 and 0."""
    out: dict[str, float | None] = {}
    matched = results["CLEAR"]["CLR_TP"] > 0
    for name, metric, field, kind in FIELDS:
        value = results[metric][field]
        if name in LOCALISATION and not matched:
            out[name] = None
        elif kind == "mean":
            out[name] = 100.0 * float(np.mean(value))
        elif kind == "percent":
            out[name] = 100.0 * float(value)
        else:
            out[name] = int(value)
    return out


def trackeval_data(boxes: FrameBoxes, *, where: str) -> dict[str, Any]:
    """The per-sequence dict trackeval's metrics read: ids relabelled 0..n-1, IoU similarity per frame.
    Raises ValueError naming `where` and the frame when an id appears twice in one frame."""
    data: dict[str, Any] = {"num_timesteps": boxes.length}  # the frames without boxes are left out of the lists
    for side, ids, key in (("truth", boxes.truth_ids, "gt"), ("output", boxes.output_ids, "tracker")):
        for t, frame_ids in enumerate(ids):
            if len(np.unique(frame_ids)) != len(frame_ids):
                frame = boxes.frames[t]
                raise InputError(f"{where}: {side} id {_first_repeat(frame_ids)} appears twice in frame {frame}")
        unique = np.unique(np.concatenate(ids)) if ids else np.zeros(0, np.int64)
        data[f"{key}_ids"] = [np.searchsorted(unique, frame_ids) for frame_ids in ids]
        data[f"num_{key}_ids"] = len(unique)
        data[f"num_{key}_dets"] = int(sum(len(frame_ids) for frame_ids in ids))
    data["similarity_scores"] = [
        box_iou(truth, output) for truth, output in zip(boxes.truth_boxes, boxes.output_boxes, strict=True)
    ]
    return data


def _first_repeat(ids: np.ndarray) -> int:
    values, counts = np.unique(ids, return_counts=True)
    return int(values[counts > 1][0])


def _with_numpy_aliases(run: Callable[[], T]) -> T:
    """`run()`; when it fails because trackeval uses an alias numpy removed (`np.float` ...), again with the
    aliases provided for the duration of the call."""
    try:
        return run()
    except AttributeError as error:
        if not re.search(r"module 'numpy' has no attribute '(float|int|bool|object)'", str(error)):
            raise
    with _numpy_aliases():
        return run()


@contextlib.contextmanager
def _numpy_aliases() -> Iterator[None]:
    """numpy's removed aliases (np.float = float, ...) inside the block; removed again after it."""
    added = [name for name in _REMOVED_ALIASES if name not in np.__dict__]
    for name in added:
        setattr(np, name, _REMOVED_ALIASES[name])
    try:
        yield
    finally:
        for name in added:
            delattr(np, name)
