"""VisDrone-MOT text files (`annotations/<seq>.txt`, results `<seq>.txt`), one box per line:
`frame,id,left,top,width,height,score,category,truncation,occlusion`.

In ground truth `score` is 1 for a box that is evaluated and 0 for one that is not, `category` is VisDrone's
(0 ignored region, 1 pedestrian ... 10 motor, 11 others; `tphyolo.data.formats.visdrone.NAMES` are 1-10),
truncation 0-1 and occlusion 0-2 are levels. In results and detections (id -1) `score` is the confidence and
truncation and occlusion are -1.
"""

from __future__ import annotations

from pathlib import Path

from tphyolo.data.mot.rows import box_fields, number, read_rows, write_text, xywh_columns
from tphyolo.data.mot.table import TrackTable

IGNORED_REGION, OTHERS = 0, 11


def read_visdrone_mot(path: Path) -> TrackTable:
    """Read a VisDrone-MOT file (8 to 10 values a line). Raises LabelError naming the file and line."""
    rows = read_rows(path, min_values=8, max_values=10, whole=(7, 8, 9))
    return TrackTable.from_columns(rows[:, 0], rows[:, 1], xywh_columns(rows), rows[:, 6], rows[:, 7],
                                   truncation=rows[:, 8], occlusion=rows[:, 9])  # fmt: skip


def format_visdrone_mot(table: TrackTable) -> str:
    """`frame,id,left,top,width,height,score,category,truncation,occlusion` per row, in the table's order."""
    columns = zip(table.frames.tolist(), table.ids.tolist(), box_fields(table.boxes), table.scores.tolist(),
                  table.classes.tolist(), table.truncation.tolist(), table.occlusion.tolist(), strict=True)  # fmt: skip
    lines = [f"{f},{i},{box},{number(s, 4)},{c},{t},{o}" for f, i, box, s, c, t, o in columns]
    return "".join(line + "\n" for line in lines)


def write_visdrone_mot(path: Path, table: TrackTable) -> Path:
    """Write `format_visdrone_mot(table)` to `path` (folders made); returns it."""
    return write_text(path, format_visdrone_mot(table))
