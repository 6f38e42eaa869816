"""MOTChallenge text files (MOT15-MOT20 layout), one box per line.

- ground truth (`<seq>/gt/gt.txt`): `frame,id,left,top,width,height,consider,class,visibility`: `consider` 0
  leaves the box out of the evaluation, `class` is one of `CLASSES`, `visibility` the visible fraction;
  MOT15 writes `-1` for class and visibility (no classes);
- tracker output (`<seq>.txt`) and detections (`<seq>/det/det.txt`): `frame,id,left,top,width,height,score,x,y,z`
  with id -1 for detections and x, y, z world coordinates (-1 when unknown); 7 values are accepted too.
  tphyolo writes a box's class (its category number, as ground truth's column 8) in place of x, -1 when it has
  none; readers of tracker output ignore the column, and TrackEval's MOTChallenge benchmark takes 1
  (pedestrian) or -1 there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tphyolo.data.mot.rows import box_fields, number, read_rows, write_text, xywh_columns
from tphyolo.data.mot.table import UNKNOWN, TrackTable

CLASSES = {
    1: "pedestrian", 2: "person_on_vehicle", 3: "car", 4: "bicycle", 5: "motorbike", 6: "non_mot_vehicle",
    7: "static_person", 8: "distractor", 9: "occluder", 10: "occluder_on_ground", 11: "occluder_full",
    12: "reflection", 13: "crowd",
}  # fmt: skip


def read_mot(path: Path, *, ground_truth: bool = False) -> TrackTable:
    """Read a MOTChallenge file; `ground_truth`: columns 7-9 are consider flag, class and visibility (else score
    and world coordinates, which are not kept). Raises LabelError naming the file and line."""
    rows = read_rows(path, min_values=6, max_values=10)
    classes = visibility = None
    if ground_truth:
        whole_class = (rows[:, 7] >= 1) & (rows[:, 7] == np.round(rows[:, 7]))
        classes = np.where(whole_class, rows[:, 7], UNKNOWN)
        visibility = np.where((rows[:, 8] >= 0) & (rows[:, 8] <= 1), rows[:, 8], UNKNOWN)
    scores = np.where(rows[:, 6] == -1, 1.0, rows[:, 6]) if ground_truth else rows[:, 6]
    return TrackTable.from_columns(rows[:, 0], rows[:, 1], xywh_columns(rows), scores, classes, visibility=visibility)


def format_mot(table: TrackTable) -> str:
    """Tracker-output text: `frame,id,left,top,width,height,score,class,-1,-1` per row (class: the table's
    category number, -1 for none), in the table's order."""
    columns = zip(table.frames.tolist(), table.ids.tolist(), box_fields(table.boxes), table.scores.tolist(),
                  table.classes.tolist(), strict=True)  # fmt: skip
    lines = [f"{frame},{track_id},{box},{number(score, 4)},{cls},-1,-1" for frame, track_id, box, score, cls in columns]
    return "".join(line + "\n" for line in lines)


def write_mot(path: Path, table: TrackTable) -> Path:
    """Write `format_mot(table)` to `path` (folders made); returns it."""
    return write_text(path, format_mot(table))
