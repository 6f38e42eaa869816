"""The comma-separated number rows every MOT text format is made of, read with one-line errors.

A line is `frame,id,left,top,width,height,...` (MOTChallenge, VisDrone-MOT, UAVDT); blank lines and trailing
commas are tolerated, as the published files have them. Every value is a plain decimal number (ASCII digits, an
optional sign, point and exponent: not `1_0`, `²` or `inf`), and a frame number is at most `MAX_FRAME`: readers
of these files keep frames sparse, but a number past it is not a frame of any video.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.labels import LabelError, finite_numbers, read_label_text

ROW_START = ("frame", "id", "left", "top", "width", "height")
MAX_FRAME = 10**9  # about a year of video at 30 fps
# decimal ASCII; nan and inf pass here to be refused as non-finite
PLAIN_NUMBER = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|nan|inf|infinity)", re.IGNORECASE)


def read_rows(
    path: Path,
    *,
    min_values: int,
    max_values: int,
    whole: tuple[int, ...] = (),
    fractions: tuple[int, ...] = (),
) -> np.ndarray:
    """The rows of `path` as (N, max_values) float64, missing trailing values as -1.

    Raises LabelError naming the file and line for a line with fewer than `min_values` or more than
    `max_values` values, an empty or non-numeric field, a frame below 1 or not whole, an id that is not whole,
    a value of a column of `whole` (0-based: levels, categories) that is not a
    whole number >= -1, a value of a column of `fractions` (confidences) outside [0, 1], or a negative width or
    height."""
    path = Path(path)
    rows = []
    for n, line in enumerate(read_label_text(path).splitlines(), start=1):
        fields = [f.strip() for f in line.strip().split(",")]
        while fields and fields[-1] == "":
            fields.pop()
        if not fields:
            continue
        where = f"{path}:{n}"
        if not min_values <= len(fields) <= max_values:
            raise LabelError(f"{where}: expected {min_values} to {max_values} comma-separated values "
                             f"({','.join(ROW_START)},...), got {len(fields)}: {line.strip()!r:.80}")  # fmt: skip
        if "" in fields:
            raise LabelError(f"{where}: field {fields.index('') + 1} is empty in {line.strip()!r:.80}")
        odd = next((i for i, f in enumerate(fields) if not PLAIN_NUMBER.fullmatch(f)), None)
        if odd is not None:
            column = f"field {odd + 1} ({_column_name(odd)})"
            raise LabelError(f"{where}: {column} {fields[odd]!r:.40} is not a number (plain ASCII decimal)")
        values = finite_numbers(fields, where, line)
        if not 1 <= values[0] <= MAX_FRAME or values[0] != int(values[0]):
            raise LabelError(f"{where}: frame {values[0]:g} is not a frame number (whole, from 1 to {MAX_FRAME:,})")
        for i in (1, *whole):
            if i < len(values) and (values[i] != int(values[i]) or (i in whole and values[i] < -1)):
                kind = "a whole number" if i == 1 else "a level or category (a whole number >= -1)"
                raise LabelError(f"{where}: field {i + 1} ({_column_name(i)}) {values[i]:g} is not {kind}")
        odd = next((i for i in fractions if i < len(values) and not 0 <= values[i] <= 1), None)
        if odd is not None:
            raise LabelError(f"{where}: field {odd + 1} (score) {values[odd]:g} is not a confidence in [0, 1]")
        if values[4] < 0 or values[5] < 0:
            raise LabelError(f"{where}: negative box size {values[4]:g}x{values[5]:g}")
        rows.append(values + [-1.0] * (max_values - len(values)))
    return np.array(rows, dtype=np.float64).reshape(-1, max_values)


def _column_name(i: int) -> str:
    return ROW_START[i] if i < len(ROW_START) else f"column {i + 1}"


def xywh_columns(rows: np.ndarray) -> np.ndarray:
    """(N, 4) xyxy boxes of rows whose columns 2-5 are left, top, width, height."""
    boxes = rows[:, 2:6].copy()
    boxes[:, 2:] += boxes[:, :2]
    return boxes


def number(value: float, decimals: int = 2) -> str:
    """A value as the published files write it: whole numbers without a point, others with up to `decimals`."""
    r = round(value)
    if abs(value - r) < 0.5 * 10**-decimals:
        return str(int(r))
    return f"{value:.{decimals}f}".rstrip("0")


def box_fields(table_boxes: np.ndarray) -> list[str]:
    """`left,top,width,height` text of each (N, 4) xyxy box."""
    return [
        f"{number(x1)},{number(y1)},{number(x2 - x1)},{number(y2 - y1)}" for x1, y1, x2, y2 in table_boxes.tolist()
    ]


def write_text(path: Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path`, making its folders; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, text)
