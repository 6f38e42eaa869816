"""What each tracking benchmark evaluates: which boxes count, for which classes, and what is ignored, one row
per benchmark in `TRACK_RULES` (its files are read by the row of the same name in
`tphyolo.data.mot.layouts.LAYOUTS`).

`prepare(truth, output, fmt)` turns one sequence's ground truth and tracker output into `FrameBoxes` per
evaluated class, frame by frame, ready for the metrics (`tphyolo.metrics.tracking`):

- `visdrone-mot`, as the VisDrone MOT toolkit (evaluateTrackB) does: classes pedestrian, car, van, truck and
  bus (`VISDRONE_CLASSES`); ground-truth rows of category 0 (ignored region) or 11 (others), and rows flagged 0,
  are ignore regions; a ground-truth box or an output box that lies in the ignore regions of its frame is
  dropped (the toolkit's whole-pixel rule, `tphyolo.metrics.ignored.in_ignored_regions`, on the size of the
  sequence's first frame where its frames are beside the annotations, else on an image just large enough for
  every box); output of category 0 or 11 is never
  evaluated; a ground-truth trajectory whose category changes is split in one per category; output after the
  ground truth's last frame is dropped;
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

from tphyolo.data.mot.table import UNKNOWN, TrackTable
from tphyolo.data.mot.visdrone_mot import IGNORED_REGION, OTHERS
from tphyolo.errors import InputError
from tphyolo.metrics.ignored import in_ignored_regions
from tphyolo.ops.boxes import box_iou

VISDRONE_CLASSES = {1: "pedestrian", 4: "car", 5: "van", 6: "truck", 9: "bus"}  # category -> name
MOT_PEDESTRIAN = 1
MOT_DISTRACTORS = (2, 7, 8, 12)  # person_on_vehicle, static_person, distractor, reflection


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


def _xywh(boxes: np.ndarray) -> np.ndarray:
    return np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)


def drop_in_regions(table: TrackTable, regions: TrackTable, *, image_size: tuple[int, int] | None = None) -> TrackTable:
    """`table` without the boxes that lie in the ignored `regions` of their own frame, by the toolkit's rule
    (`tphyolo.metrics.ignored.in_ignored_regions`); `image_size` (height, width), or None where the files do
    not give it (an image just large enough for every box)."""
    if not len(regions) or not len(table):
        return table
    height, width = image_size if image_size is not None else (None, None)
    keep = np.ones(len(table), dtype=bool)
    by_frame = dict(regions.by_frame())
    order = np.argsort(table.frames, kind="stable")
    frames = table.frames[order]
    for frame in np.unique(frames).tolist():
        if frame in by_frame:
            rows = order[frames == frame]
            keep[rows] = ~in_ignored_regions(_xywh(table.boxes[rows]), _xywh(by_frame[frame].boxes),
                                             height=height, width=width)  # fmt: skip
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


@dataclass(frozen=True)
class TrackRules:
    """What one tracking benchmark evaluates (its row of `TRACK_RULES`).

    classes: category -> class name, the classes evaluated one by one; empty for a class-agnostic benchmark,
        whose boxes all count as one class `one_class`;
    classless_as_one: ground truth without classes (every class UNKNOWN, MOT15) counts as one class `one_class`;
    region_categories: ground-truth rows of these categories are ignore regions, not objects;
    unflagged_are_regions: ground-truth rows flagged 0 are ignore regions too (else they are only left out);
    distractors: output boxes matched one-to-one (IoU >= 0.5) to a ground-truth box of these categories are
        dropped;
    split_categories: a ground-truth trajectory whose category changes is split in one per category;
    output_classes: an output box counts for the class its category column names (else for every class).

    Every benchmark drops the boxes (ground truth and output) that lie in its ignore regions
    (`tphyolo.metrics.ignored.in_ignored_regions`) and the output after the sequence's last frame.
    """

    name: str
    classes: dict[int, str]
    one_class: str = "object"
    classless_as_one: bool = False
    region_categories: tuple[int, ...] = ()
    unflagged_are_regions: bool = False
    distractors: tuple[int, ...] = ()
    split_categories: bool = False
    output_classes: bool = False


_RULE_ROWS = (
    TrackRules("mot", {MOT_PEDESTRIAN: "pedestrian"}, classless_as_one=True, distractors=MOT_DISTRACTORS),
    TrackRules("visdrone-mot", VISDRONE_CLASSES, region_categories=(IGNORED_REGION, OTHERS),
               unflagged_are_regions=True, split_categories=True, output_classes=True),
    TrackRules("uavdt", {}, one_class="vehicle"),
)  # fmt: skip
TRACK_RULES: dict[str, TrackRules] = {row.name: row for row in _RULE_ROWS}


def get_track_rules(fmt: str) -> TrackRules:
    """The rules registered as `fmt`; raises ValueError listing the known ones."""
    try:
        return TRACK_RULES[fmt]
    except KeyError:
        raise InputError(f"unknown tracking format {fmt!r}; known: {list(TRACK_RULES)}") from None


def prepare(
    truth: TrackTable,
    output: TrackTable,
    fmt: str,
    *,
    ignore: TrackTable | None = None,
    length: int | None = None,
    frame_size: tuple[int, int] | None = None,
) -> dict[str, FrameBoxes]:
    """Class name -> what is evaluated of that class in one sequence, under the rules of benchmark `fmt` (its row
    of `TRACK_RULES`, see the module docstring). `ignore`: ignore regions from a side file (UAVDT); `frame_size`:
    (height, width) the ignore regions are clipped to (None: an image just large enough for every box)."""
    rules = get_track_rules(fmt)
    regions = ignore if ignore is not None else TrackTable.empty()
    length = length or max(truth.last_frame, regions.last_frame)
    truth, output = _clip(truth, length), _clip(output, length)
    is_region = np.isin(truth.classes, rules.region_categories)
    if rules.unflagged_are_regions:
        is_region |= truth.scores == 0
    regions = TrackTable.concatenate([regions, truth.select(is_region)])
    one_class = not rules.classes or (rules.classless_as_one and bool((truth.classes == UNKNOWN).all()))
    if rules.distractors and not one_class:
        output = output.select(~_on_distractors(truth, output, rules.distractors))
    truth = drop_in_regions(truth.select(~is_region & (truth.scores != 0)), regions, image_size=frame_size)
    output = drop_in_regions(output, regions, image_size=frame_size)
    if rules.split_categories:
        truth = split_by_category(truth)
    if one_class:
        return {rules.one_class: FrameBoxes.split(truth, output, length)}
    return {
        name: FrameBoxes.split(truth.select(truth.classes == category),
                               output.select(output.classes == category) if rules.output_classes else output,
                               length)  # fmt: skip
        for category, name in rules.classes.items()
    }


def _on_distractors(truth: TrackTable, output: TrackTable, distractors: tuple[int, ...]) -> np.ndarray:
    """(n,) bool: output boxes that a one-to-one matching in their frame pairs with a distractor of `truth`."""
    on = np.zeros(len(output), dtype=bool)
    truth_frames = dict(truth.by_frame())
    for frame in np.unique(output.frames).tolist():
        if frame not in truth_frames:
            continue
        rows = np.flatnonzero(output.frames == frame)
        gt = truth_frames[frame]
        on[rows[_matched_to(gt.boxes, output.boxes[rows], np.isin(gt.classes, distractors))]] = True
    return on


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
