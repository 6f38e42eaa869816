"""Where the files of a set of sequences are, in the layouts of the tracking benchmarks, and reading them.

- `mot`: ground truth `<dir>/<seq>/gt/gt.txt` (MOTChallenge) or `<dir>/<seq>.txt`; tracker output
  `<dir>/<seq>.txt`; detections `<dir>/<seq>.txt` or `<dir>/<seq>/det/det.txt`;
- `visdrone-mot`: ground truth `<dir>/<seq>.txt` or `<dir>/annotations/<seq>.txt`; output and detections
  `<dir>/<seq>.txt`;
- `uavdt`: ground truth `<dir>/<seq>_gt_whole.txt` with its ignore regions in `<seq>_gt_ignore.txt`;
  output `<dir>/<seq>.txt` in MOTChallenge rows.

A MOTChallenge sequence's length comes from `<seq>/seqinfo.ini` (`seqLength`) when it is there.

A dataset yaml names its video splits under `tracking:` (`tracking_split`):

```yaml
tracking: {format: visdrone-mot, train: VisDrone2019-MOT-train, val: VisDrone2019-MOT-val}
```

each a folder with `sequences/<seq>/` (the frames) and `annotations/` (the ground truth), relative to `path`.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.data.dataset_config import SPLITS, DataConfig
from tphyolo.data.mot.motchallenge import read_mot
from tphyolo.data.mot.rows import MAX_FRAME, read_rows, xywh_columns
from tphyolo.data.mot.table import UNKNOWN, TrackTable
from tphyolo.data.mot.uavdt import IGNORE_SUFFIX, TRUTH_SUFFIX, read_uavdt
from tphyolo.data.mot.visdrone_mot import read_visdrone_mot
from tphyolo.yaml_files import load_yaml_file

TRACK_FORMATS = ("mot", "visdrone-mot", "uavdt")


@dataclass(frozen=True)
class GroundTruthSequence:
    """One sequence's ground truth: `truth` as the file gives it, `ignore` the regions of a side file (UAVDT;
    empty otherwise), `length` the number of frames when the layout records it (else None), `source` the file."""

    name: str
    truth: TrackTable
    ignore: TrackTable
    length: int | None
    source: Path


def _check_format(fmt: str) -> None:
    if fmt not in TRACK_FORMATS:
        raise ValueError(f"unknown tracking format {fmt!r}; known: {list(TRACK_FORMATS)}")


def ground_truth_files(folder: Path, fmt: str) -> dict[str, Path]:
    """Sequence name -> ground-truth file in `folder` for `fmt` (see the module docstring), sorted by name.
    Raises FileNotFoundError when the folder holds none."""
    _check_format(fmt)
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"ground truth {folder}: no such folder")
    if fmt == "uavdt":
        files = {p.name[: -len(TRUTH_SUFFIX)]: p for p in folder.glob(f"*{TRUTH_SUFFIX}")}
        expected = f"<seq>{TRUTH_SUFFIX}"
    elif fmt == "mot":
        files = {p.parent.parent.name: p for p in folder.glob("*/gt/gt.txt")} or _txt_files(folder)
        expected = "<seq>/gt/gt.txt or <seq>.txt"
    else:
        annotations = folder / "annotations"
        files = _txt_files(annotations if annotations.is_dir() else folder)
        expected = "<seq>.txt or annotations/<seq>.txt"
    if not files:
        raise FileNotFoundError(f"ground truth {folder}: no {fmt} sequences ({expected})")
    return dict(sorted(files.items()))


def _txt_files(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in folder.glob("*.txt") if p.is_file()}


def read_ground_truth(folder: Path, fmt: str) -> list[GroundTruthSequence]:
    """Every ground-truth sequence in `folder`, by name. Raises LabelError naming a file and line it cannot use."""
    sequences = []
    for name, path in ground_truth_files(folder, fmt).items():
        ignore, length = TrackTable.empty(), None
        if fmt == "uavdt":
            truth = read_uavdt(path)
            ignore_path = path.with_name(name + IGNORE_SUFFIX)
            if ignore_path.is_file():
                ignore = read_uavdt(ignore_path)
        elif fmt == "mot":
            truth = read_mot(path, ground_truth=True)
            length = sequence_length(path.parent.parent / "seqinfo.ini") if path.name == "gt.txt" else None
        else:
            truth = read_visdrone_mot(path)
        sequences.append(GroundTruthSequence(name, truth, ignore, length, path))
    return sequences


def sequence_length(seqinfo: Path) -> int | None:
    """`seqLength` of a MOTChallenge `seqinfo.ini`, None when the file or the key is missing. Raises ValueError
    naming the file for a file that is not UTF-8 text and for a value that is not ASCII digits from 1 to
    `MAX_FRAME`."""
    if not seqinfo.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        text = seqinfo.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"{seqinfo}: not UTF-8 text (byte {error.start})") from None
    try:
        parser.read_string(text, source=str(seqinfo))
    except configparser.Error as error:
        raise ValueError(f"{seqinfo}: not an ini file ({' '.join(str(error).split())})") from None
    text = parser.get("Sequence", "seqLength", fallback=None)
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]+", text.strip()) or not 1 <= int(text) <= MAX_FRAME:
        raise ValueError(f"{seqinfo}: seqLength {text!r:.40} is not a whole number from 1 to {MAX_FRAME:,}")
    return int(text)


def read_tracker_output(folder: Path, fmt: str, names: Iterable[str]) -> dict[str, TrackTable]:
    """The tracker output `<folder>/<name>.txt` of each sequence in `names` (MOTChallenge rows for `mot` and
    `uavdt`, VisDrone-MOT rows for `visdrone-mot`). Raises FileNotFoundError naming a missing file."""
    _check_format(fmt)
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"tracker output {folder}: no such folder")
    out = {}
    for name in names:
        path = folder / f"{name}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"tracker output {path}: missing (every ground-truth sequence needs its file)")
        out[name] = read_visdrone_mot(path) if fmt == "visdrone-mot" else read_mot(path)
    return out


def detection_files(folder: Path) -> dict[str, Path]:
    """Sequence name -> detection file: `<folder>/<seq>.txt`, or MOTChallenge's `<folder>/<seq>/det/det.txt`;
    sorted by name. Raises FileNotFoundError when there are none."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"detections {folder}: no such folder")
    files = _txt_files(folder) | {p.parent.parent.name: p for p in folder.glob("*/det/det.txt")}
    if not files:
        raise FileNotFoundError(f"detections {folder}: no <seq>.txt or <seq>/det/det.txt files")
    return dict(sorted(files.items()))


def read_detections(path: Path) -> TrackTable:
    """Detections of one sequence in MOTChallenge (`frame,-1,left,top,width,height,score[,-1,-1,-1]`) or
    VisDrone-MOT rows (`...,score,category,-1,-1`): the category is column 8 where it is a whole number >= 0
    (so -1 there reads as no category). Raises LabelError naming the file and line."""
    rows = read_rows(path, min_values=7, max_values=10)
    category = rows[:, 7]
    classes = np.where((category >= 0) & (category == np.round(category)), category, UNKNOWN)
    return TrackTable.from_columns(rows[:, 0], rows[:, 1], xywh_columns(rows), rows[:, 6], classes)


@dataclass(frozen=True)
class TrackingSplit:
    """A split of videos: `folder` holds `sequences/<seq>/` (frames) and `annotations/` (ground truth in
    `fmt`)."""

    folder: Path
    fmt: str

    @property
    def sequences(self) -> dict[str, Path]:
        """Sequence name -> its frame folder, sorted by name."""
        root = self.folder / "sequences"
        return {p.name: p for p in sorted(root.iterdir()) if p.is_dir()} if root.is_dir() else {}

    @property
    def annotations(self) -> Path:
        return self.folder / "annotations"


def tracking_split(config: DataConfig, split: str = "val") -> TrackingSplit:
    """The video split `split` named under `tracking:` in the yaml of `config`. Raises ValueError naming the
    yaml when it names none, or FileNotFoundError when its folder is missing."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {list(SPLITS)}")
    entry = load_yaml_file(config.source).get("tracking") if config.source is not None else None
    where = config.source or config.root
    if not isinstance(entry, dict) or not isinstance(entry.get(split), str):
        raise ValueError(f"{where}: no 'tracking:' entry with a '{split}' folder (a dataset of videos names them, "
                         f"e.g. tracking: {{format: visdrone-mot, {split}: <folder>}})")  # fmt: skip
    fmt = entry.get("format", "visdrone-mot")
    _check_format(fmt)
    folder = config.root / entry[split]
    if not (folder / "sequences").is_dir():
        raise FileNotFoundError(f"{where}: tracking split {split!r} has no sequences/ folder in {folder}")
    return TrackingSplit(folder, fmt)
