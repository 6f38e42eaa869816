"""What each tracking benchmark evaluates: which boxes count, for which classes, and what is ignored.

`prepare(truth, output, fmt)` turns one sequence's ground truth and tracker output into `FrameBoxes` per
evaluated class, frame by frame, ready for the metrics (`tphyolo.metrics.tracking`):

- `visdrone-mot`, as the VisDrone MOT toolkit (evaluateTrackB) does: classes pedestrian, car, van, truck and
  bus (`VISDRONE_CLASSES`); ground-truth rows of category 0 (ignored region) or 11 (others), and rows flagged 0,
  are ignore regions; a ground-truth box or an output box with half of its area or more inside the ignore
  regions of its frame is dropped (here in continuous coordinates, where the toolkit counts whole pixels);
  output of category 0 or 11 is dropped; a ground-truth trajectory whose category changes is split in one per
  category; output after the ground truth's last frame is dropped;
- `mot`, as trackeval's MOTChallenge 2D box evaluation does: with classes in the ground truth (MOT16-20), the
  pedestrians (class 1) flagged 1 are evaluated, and output boxes matched (IoU >= 0.5, one-to-one) to a
  distractor (person on vehicle, static person, distractor, reflection) are dropped; without classes (MOT15),
  every box flagged 1 is, as one class `object`; the output's class column is not read;
- `uavdt`: every vehicle as one class `vehicle` (the UAVDT MOT protocol is class-agnostic), the regions of
  `<seq>_gt_ignore.txt` applied as VisDrone's are.

The sequence has `length` frames: the ground truth's last frame unless the layout says (seqinfo.ini).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tphyolo.data.mot.sequences import TRACK_FORMATS
from tphyolo.data.mot.table import UNKNOWN, TrackTable
from tphyolo.data.mot.visdrone_mot import IGNORED_REGION, OTHERS
from tphyolo.ops.boxes import box_iou

VISDRONE_CLASSES = {1: "pedestrian", 4: "car", 5: "van", 6: "truck", 9: "bus"}  # category -> name
MOT_PEDESTRIAN = 1
MOT_DISTRACTORS = (2, 7, 8, 12)  # person_on_vehicle, static_person, distractor, reflection
IGNORE_OVERLAP = 0.5  # a box this much inside ignore regions is dropped


@dataclass(frozen=True)
class FrameBoxes:
    """One class of one sequence, frame by frame, sparse: `frames` are the numbers (from 1, ascending) of the
    frames with a ground-truth or output box, and entry t of each list is frame `frames[t]`'s ground-truth ids
    and boxes (xyxy) and output ids and boxes. `length` is the sequence's number of frames: the frames left out
    hold nothing, and the metrics count them without visiting them, so a frame number's size costs nothing."""

    truth_ids: list[np.ndarray]
    truth_boxes: list[np.ndarray]
    output_ids: list[np.ndarray]
    output_boxes: list[np.ndarray]
    frames: tuple[int, ...] = ()
    length: int = 0

    @classmethod
    def split(cls, truth: TrackTable, output: TrackTable, length: int) -> FrameBoxes:
        numbers = tuple(np.union1d(truth.frames, output.frames).astype(np.int64).tolist())
        truth_ids, truth_boxes = _per_frame(truth, numbers)
        output_ids, output_boxes = _per_frame(output, numbers)
        return cls(truth_ids, truth_boxes, output_ids, output_boxes, numbers, length)


def _per_frame(table: TrackTable, numbers: tuple[int, ...]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    place = {number: t for t, number in enumerate(numbers)}
    ids = [np.zeros(0, np.int64) for _ in numbers]
    boxes = [np.zeros((0, 4)) for _ in numbers]
    for frame, rows in table.by_frame():
        ids[place[frame]], boxes[place[frame]] = rows.ids, rows.boxes
    return ids, boxes


def covered_fraction(boxes: np.ndarray, regions: np.ndarray) -> np.ndarray:
    """(N,) the fraction of each xyxy box's area inside the union of the xyxy `regions` (0 for a box without
    area), computed exactly on the grid the region edges make."""
    boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
    regions = np.asarray(regions, dtype=np.float64).reshape(-1, 4)
    if not len(boxes) or not len(regions):
        return np.zeros(len(boxes))
    xs, ys = np.unique(regions[:, [0, 2]]), np.unique(regions[:, [1, 3]])  # cell edges
    cx, cy = (xs[:-1] + xs[1:]) / 2, (ys[:-1] + ys[1:]) / 2  # cell centres
    in_x = (regions[:, None, 0] <= cx) & (cx <= regions[:, None, 2])  # (regions, cells x)
    in_y = (regions[:, None, 1] <= cy) & (cy <= regions[:, None, 3])  # (regions, cells y)
    covered = (in_y[:, :, None] & in_x[:, None, :]).any(0).astype(np.float64)  # (cells y, cells x)
    area = np.einsum("nx,yx,ny->n", _overlaps(boxes[:, [0, 2]], xs), covered, _overlaps(boxes[:, [1, 3]], ys))
    box_area = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return np.divide(area, box_area, out=np.zeros(len(boxes)), where=box_area > 0)


def _overlaps(spans: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """(N, cells) the length each (N, 2) span [lo, hi] shares with each interval between consecutive `edges`."""
    return np.maximum(np.minimum(spans[:, 1:2], edges[None, 1:]) - np.maximum(spans[:, 0:1], edges[None, :-1]), 0)


def drop_in_regions(table: TrackTable, regions: TrackTable) -> TrackTable:
    """`table` without the boxes that lie IGNORE_OVERLAP or more inside the `regions` of their own frame."""
    if not len(regions) or not len(table):
        return table
    keep = np.ones(len(table), dtype=bool)
    by_frame = dict(regions.by_frame())
    order = np.argsort(table.frames, kind="stable")
    frames = table.frames[order]
    for frame in np.unique(frames).tolist():
        if frame in by_frame:
            rows = order[frames == frame]
            keep[rows] = covered_fraction(table.boxes[rows], by_frame[frame].boxes) < IGNORE_OVERLAP
    return table.select(keep)


def split_by_category(truth: TrackTable) -> TrackTable:
    """Ground truth whose trajectories each keep one category: a trajectory whose category changes continues
    under a new id (above every id used) for each further category."""
    ids = truth.ids.copy()
    next_id = int(ids.max()) + 1 if len(ids) else 1
    for track_id in np.unique(truth.ids).tolist():
        rows = truth.ids == track_id
        for category in np.unique(truth.classes[rows])[1:].tolist():
            ids[rows & (truth.classes == category)] = next_id
            next_id += 1
    return TrackTable(**{**vars(truth), "ids": ids})


def _clip(table: TrackTable, length: int) -> TrackTable:
    return table.select(table.frames <= length)


def prepare(
    truth: TrackTable, output: TrackTable, fmt: str, *, ignore: TrackTable | None = None, length: int | None = None
) -> dict[str, FrameBoxes]:
    """Class name -> what is evaluated of that class in one sequence, under the rules of benchmark `fmt` (see the
    module docstring). `ignore`: ignore regions from a side file (UAVDT)."""
    if fmt not in TRACK_FORMATS:
        raise ValueError(f"unknown tracking format {fmt!r}; known: {list(TRACK_FORMATS)}")
    regions = ignore if ignore is not None else TrackTable.empty()
    length = length or max(truth.last_frame, regions.last_frame)
    output = _clip(output, length)
    if fmt == "mot":
        return _prepare_mot(_clip(truth, length), output, length)
    if fmt == "uavdt":
        kept_truth = drop_in_regions(_clip(truth, length), regions)
        return {"vehicle": FrameBoxes.split(kept_truth, drop_in_regions(output, regions), length)}
    is_region = np.isin(truth.classes, (IGNORED_REGION, OTHERS)) | (truth.scores == 0)
    regions = TrackTable.concatenate([regions, truth.select(is_region)])
    kept_truth = split_by_category(drop_in_regions(truth.select(~is_region), regions))
    output = drop_in_regions(output.select(~np.isin(output.classes, (IGNORED_REGION, OTHERS))), regions)
    return {
        name: FrameBoxes.split(kept_truth.select(kept_truth.classes == category),
                               output.select(output.classes == category), length)  # fmt: skip
        for category, name in VISDRONE_CLASSES.items()
    }


def _prepare_mot(truth: TrackTable, output: TrackTable, length: int) -> dict[str, FrameBoxes]:
    considered = truth.scores != 0
    if (truth.classes == UNKNOWN).all():  # MOT15: no classes, no distractors
        return {"object": FrameBoxes.split(truth.select(considered), output, length)}
    keep_output = np.ones(len(output), dtype=bool)
    truth_frames = dict(truth.by_frame())
    for frame in np.unique(output.frames).tolist():
        if frame not in truth_frames:
            continue
        rows = np.flatnonzero(output.frames == frame)
        gt = truth_frames[frame]
        keep_output[rows[_matched_to(gt.boxes, output.boxes[rows], np.isin(gt.classes, MOT_DISTRACTORS))]] = False
    pedestrians = truth.select(considered & (truth.classes == MOT_PEDESTRIAN))
    return {"pedestrian": FrameBoxes.split(pedestrians, output.select(keep_output), length)}


def _matched_to(truth_boxes: np.ndarray, output_boxes: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Indices of the output boxes that a one-to-one matching of maximal total IoU (pairs of IoU >= 0.5) pairs
    with a ground-truth box where `target` is True."""
    from scipy.optimize import linear_sum_assignment

    iou = box_iou(truth_boxes, output_boxes)
    iou[iou < 0.5 - np.finfo(float).eps] = 0.0
    rows, cols = linear_sum_assignment(-iou)
    matched = iou[rows, cols] > np.finfo(float).eps
    rows, cols = rows[matched], cols[matched]
    return cols[target[rows]]
