"""The tracking benchmarks' file layouts, one row each in `LAYOUTS`: where a sequence's ground truth is, how it
and the tracker output are read, and which text the benchmark takes as output.

- `mot` (MOTChallenge): ground truth `<dir>/<seq>/gt/gt.txt` or `<dir>/<seq>.txt`, its length from
  `<seq>/seqinfo.ini`; output in MOTChallenge rows;
- `visdrone-mot`: ground truth `<dir>/<seq>.txt` or `<dir>/annotations/<seq>.txt`; output in VisDrone-MOT rows;
- `uavdt`: ground truth `<dir>/<seq>_gt_whole.txt`, its ignore regions in `<seq>_gt_ignore.txt`; output in
  MOTChallenge rows.

What each benchmark evaluates is the matching row of `tphyolo.metrics.track_protocols.TRACK_RULES` (a test
checks that both tables name the same benchmarks). A new benchmark is its reader, if its text is new, one row
here and one row there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from tphyolo.data.mot.motchallenge import read_mot
from tphyolo.data.mot.table import TrackTable
from tphyolo.data.mot.uavdt import IGNORE_SUFFIX, TRUTH_SUFFIX, read_uavdt
from tphyolo.data.mot.visdrone_mot import read_visdrone_mot
from tphyolo.errors import InputError

MOT_TEXT, VISDRONE_TEXT = "mot", "visdrone"  # the two texts of tracker output (`tphyolo.track.writers`)


def _txt_files(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in folder.glob("*.txt") if p.is_file()}


def _mot_truth(folder: Path) -> dict[str, Path]:
    return {p.parent.parent.name: p for p in folder.glob("*/gt/gt.txt")} or _txt_files(folder)


def _visdrone_truth(folder: Path) -> dict[str, Path]:
    annotations = folder / "annotations"
    return _txt_files(annotations if annotations.is_dir() else folder)


def _uavdt_truth(folder: Path) -> dict[str, Path]:
    return {p.name[: -len(TRUTH_SUFFIX)]: p for p in folder.glob(f"*{TRUTH_SUFFIX}")}


def _mot_seqinfo(truth: Path) -> Path | None:
    return truth.parent.parent / "seqinfo.ini" if truth.name == "gt.txt" else None


def _first_frame_size(truth: Path) -> tuple[int, int] | None:
    """(height, width) of the first frame of `<split>/sequences/<seq>/` beside `<split>/annotations/<seq>.txt`,
    as the VisDrone-MOT toolkit reads it (0000001.jpg); None where the frames are not there."""
    # image_io loads cv2: imported here so that reading the format names (a command's --help) does not
    from tphyolo.data.files.image_io import is_image_name, read_image_size

    folder = truth.parent.parent / "sequences" / truth.stem
    if truth.parent.name != "annotations" or not folder.is_dir():
        return None
    frames = sorted(p for p in folder.iterdir() if is_image_name(p))
    return read_image_size(frames[0]) if frames else None


def _uavdt_ignore(truth: Path) -> Path:
    return truth.with_name(truth.name[: -len(TRUTH_SUFFIX)] + IGNORE_SUFFIX)


@dataclass(frozen=True)
class TrackLayout:
    """One benchmark's files.

    find_truth: folder -> sequence name -> ground-truth file (`truth_pattern` says what it looks for);
    read_truth, read_output: a ground-truth file, a tracker-output file -> TrackTable;
    ignore_file: ground-truth file -> the side file of its ignore regions (read with `read_truth`, used when it
        exists), or None for a benchmark without one;
    seqinfo: ground-truth file -> the MOTChallenge `seqinfo.ini` that gives the sequence's length, or None;
    frame_size: ground-truth file -> the (height, width) its ignore regions are clipped to, or None where the
        layout does not give it;
    output_text: the text of its tracker output, MOT_TEXT or VISDRONE_TEXT.
    """

    name: str
    find_truth: Callable[[Path], dict[str, Path]]
    truth_pattern: str
    read_truth: Callable[[Path], TrackTable]
    read_output: Callable[[Path], TrackTable]
    output_text: str
    ignore_file: Callable[[Path], Path] | None = None
    seqinfo: Callable[[Path], Path | None] | None = None
    frame_size: Callable[[Path], tuple[int, int] | None] | None = None


_LAYOUT_ROWS = (
    TrackLayout("mot", _mot_truth, "<seq>/gt/gt.txt or <seq>.txt", partial(read_mot, ground_truth=True), read_mot,
                MOT_TEXT, seqinfo=_mot_seqinfo),
    TrackLayout("visdrone-mot", _visdrone_truth, "<seq>.txt or annotations/<seq>.txt", read_visdrone_mot,
                read_visdrone_mot, VISDRONE_TEXT, frame_size=_first_frame_size),
    TrackLayout("uavdt", _uavdt_truth, f"<seq>{TRUTH_SUFFIX}", read_uavdt, read_mot, MOT_TEXT,
                ignore_file=_uavdt_ignore),
)  # fmt: skip
LAYOUTS: dict[str, TrackLayout] = {row.name: row for row in _LAYOUT_ROWS}


def get_layout(fmt: str) -> TrackLayout:
    """The layout registered as `fmt`; raises ValueError listing the known ones."""
    try:
        return LAYOUTS[fmt]
    except KeyError:
        raise InputError(f"unknown tracking format {fmt!r}; known: {list(LAYOUTS)}") from None
