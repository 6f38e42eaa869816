"""UAVDT ground truth (UAV-benchmark-MOTD_v1.0/GT), one box per line:
`frame,id,left,top,width,height,out_of_view,occlusion,category`.

`<seq>_gt_whole.txt` holds every object (category 1 car, 2 truck, 3 bus), `<seq>_gt.txt` the same boxes with
category -1, and `<seq>_gt_ignore.txt` the regions left out of the evaluation. Out-of-view (1-3) and
occlusion (1-4) levels are kept as truncation and occlusion. Tracker output for UAVDT is MOTChallenge text.
"""

from __future__ import annotations

from pathlib import Path

from tphyolo.data.mot.rows import read_rows, xywh_columns
from tphyolo.data.mot.table import TrackTable

CLASSES = {1: "car", 2: "truck", 3: "bus"}
TRUTH_SUFFIX, IGNORE_SUFFIX = "_gt_whole.txt", "_gt_ignore.txt"


def read_uavdt(path: Path) -> TrackTable:
    """Read a UAVDT ground-truth or ignore file (9 values a line; the score is 1). Raises LabelError naming the
    file and line."""
    rows = read_rows(path, min_values=9, max_values=9, whole=(6, 7, 8))
    return TrackTable.from_columns(rows[:, 0], rows[:, 1], xywh_columns(rows), None, rows[:, 8],
                                   truncation=rows[:, 6], occlusion=rows[:, 7])  # fmt: skip
