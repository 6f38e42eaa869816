"""Where the files of a set of sequences are, in the layouts of the tracking benchmarks, and reading them.

The layouts of the benchmarks (`mot`, `visdrone-mot`, `uavdt`) are rows of `tphyolo.data.mot.layouts.LAYOUTS`;
the functions here read any of them by name.

A dataset yaml names its video splits under `tracking:` (`tracking_split`):

```yaml
tracking: {format: visdrone-mot, train: VisDrone2019-MOT-train, val: VisDrone2019-MOT-val}
```

each a folder with `sequences/<seq>/` (the frames) and `annotations/` (the ground truth), relative to `path`.
"""

from __future__ import annotations

import configparser
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tphyolo.data.dataset_config import SPLITS, DataConfig
from tphyolo.data.labels import LabelError
from tphyolo.data.mot.layouts import LAYOUTS, TrackLayout, get_layout
from tphyolo.data.mot.rows import MAX_FRAME, read_rows, xywh_columns
from tphyolo.data.mot.table import UNKNOWN, TrackTable
from tphyolo.data.mot.visdrone_mot import IGNORED_REGION
from tphyolo.errors import InputError
from tphyolo.yaml_files import load_yaml_file

TRACK_FORMATS = tuple(LAYOUTS)


@dataclass(frozen=True)
class GroundTruthSequence:
    """One sequence's ground truth: `truth` as the file gives it, `ignore` the regions of a side file (UAVDT;
    empty otherwise), `length` the number of frames when the layout records it (else None), `source` the file,
    `frame_size` (height, width) of its frames when the layout gives it (VisDrone-MOT's first frame; else None)."""

    name: str
    truth: TrackTable
    ignore: TrackTable
    length: int | None
    source: Path
    frame_size: tuple[int, int] | None = None


def ground_truth_files(folder: Path, fmt: str) -> dict[str, Path]:
    """Sequence name -> ground-truth file in `folder` for `fmt` (its row of `LAYOUTS`), sorted by name.
    Raises FileNotFoundError when the folder holds none."""
    layout = get_layout(fmt)
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"ground truth {folder}: no such folder")
    files = layout.find_truth(folder)
    if not files:
        raise FileNotFoundError(f"ground truth {folder}: no {fmt} sequences ({layout.truth_pattern})")
    return dict(sorted(files.items()))


def _txt_files(folder: Path) -> dict[str, Path]:
    return {p.stem: p for p in folder.glob("*.txt") if p.is_file()}


def _read_sequence(name: str, path: Path, layout: TrackLayout) -> GroundTruthSequence:
    ignore_path = layout.ignore_file(path) if layout.ignore_file is not None else None
    has_ignore = ignore_path is not None and ignore_path.is_file()
    ignore = layout.read_truth(ignore_path) if has_ignore else TrackTable.empty()
    seqinfo = layout.seqinfo(path) if layout.seqinfo is not None else None
    length = sequence_length(seqinfo) if seqinfo is not None else None
    frame_size = layout.frame_size(path) if layout.frame_size is not None else None
    return GroundTruthSequence(name, layout.read_truth(path), ignore, length, path, frame_size)


def read_ground_truth(folder: Path, fmt: str) -> list[GroundTruthSequence]:
    """Every ground-truth sequence in `folder`, by name. Raises LabelError naming a file and line it cannot use."""
    layout = get_layout(fmt)
    return [_read_sequence(name, path, layout) for name, path in ground_truth_files(folder, fmt).items()]


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
        raise InputError(f"{seqinfo}: not UTF-8 text (byte {error.start})") from None
    try:
        parser.read_string(text, source=str(seqinfo))
    except configparser.Error as error:
        raise InputError(f"{seqinfo}: not an ini file ({' '.join(str(error).split())})") from None
    text = parser.get("Sequence", "seqLength", fallback=None)
    if text is None:
        return None
    if not re.fullmatch(r"[0-9]+", text.strip()) or not 1 <= int(text) <= MAX_FRAME:
        raise InputError(f"{seqinfo}: seqLength {text!r:.40} is not a whole number from 1 to {MAX_FRAME:,}")
    return int(text)


def read_tracker_output(folder: Path, fmt: str, names: Iterable[str]) -> dict[str, TrackTable]:
    """The tracker output `<folder>/<name>.txt` of each sequence in `names`, in the text of `fmt`'s layout
    (MOTChallenge rows for `mot` and `uavdt`, VisDrone-MOT rows for `visdrone-mot`). Raises FileNotFoundError
    naming a missing file."""
    layout = get_layout(fmt)
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"tracker output {folder}: no such folder")
    out = {}
    for name in names:
        path = folder / f"{name}.txt"
        if not path.is_file():
            raise FileNotFoundError(f"tracker output {path}: missing (every ground-truth sequence needs its file)")
        out[name] = layout.read_output(path)
    return out


def detection_files(folder: Path, *, kind: str = "detections") -> dict[str, Path]:
    """Sequence name -> detection file: `<folder>/<seq>.txt`, or MOTChallenge's `<folder>/<seq>/det/det.txt`;
    sorted by name; `folder` may also be one such file (its sequence: MOTChallenge's `<seq>` for a
    `<seq>/det/det.txt`, else the file's stem). Raises FileNotFoundError, naming the files as `kind`, when there
    are none."""
    folder = Path(folder)
    if folder.is_file():
        return {_sequence_name(folder, "det"): folder}
    if not folder.is_dir():
        raise FileNotFoundError(f"{kind} {folder}: no such file or folder")
    files = _txt_files(folder) | {p.parent.parent.name: p for p in folder.glob("*/det/det.txt")}
    if not files:
        raise FileNotFoundError(f"{kind} {folder}: no <seq>.txt or <seq>/det/det.txt files")
    return dict(sorted(files.items()))


def read_detections(path: Path) -> TrackTable:
    """Detections of one sequence in MOTChallenge (`frame,-1,left,top,width,height,score[,-1,-1,-1]`) or
    VisDrone-MOT rows (`...,score,category,-1,-1`): the category is column 8 where it is a whole number >= 0
    (so -1 there reads as no category). A score is a detector's confidence, in [0, 1] (trackers' thresholds are
    fractions: rescale detectors that score otherwise, as DPM's public MOT17 detections do). Raises LabelError
    naming the file and line."""
    return _table(read_rows(path, min_values=7, max_values=10, fractions=(6,)))


def read_tracks(path: Path) -> TrackTable:
    """Tracks of one sequence: tracker output or ground truth in the rows of `read_detections`, each with a
    track id >= 1 but ignored regions (category 0, whatever their id); the score column is not a confidence here
    (ground truth's flags and levels). Raises LabelError naming the file for a row of another category without
    a track id (id -1: a detection file's rows, which go to --detections), else as `read_rows`."""
    table = _table(read_rows(path, min_values=7, max_values=10))
    bad = np.flatnonzero((table.ids < 1) & (table.classes != IGNORED_REGION))
    if len(bad):
        k = int(bad[0])
        raise LabelError(f"{path}: frame {table.frames[k]}: id {table.ids[k]} is not a track id (track files need "
                         "ids >= 1 but on ignored regions; a detection file's rows go to --detections)")  # fmt: skip
    return table


def _table(rows: np.ndarray) -> TrackTable:
    category = rows[:, 7]
    classes = np.where((category >= 0) & (category == np.round(category)), category, UNKNOWN)
    return TrackTable.from_columns(rows[:, 0], rows[:, 1], xywh_columns(rows), rows[:, 6], classes)


def track_files(folder: Path) -> tuple[dict[str, Path], Callable[[Path], TrackTable], str]:
    """Sequence name -> file of the tracks in `folder`, how to read one, and the layout whose category numbers
    its category column holds: UAVDT ground truth (`<seq>_gt_whole.txt`: "uavdt"), MOTChallenge ground truth
    (`<seq>/gt/gt.txt`: "mot"), else `detection_files` read by `read_tracks` (a `tphyolo track` run's
    output or VisDrone-MOT ground truth: "visdrone-mot"). `folder` may also be one such file, known by the
    same names. Raises FileNotFoundError when there are none."""
    folder = Path(folder)
    for fmt in ("uavdt", "mot"):
        layout = get_layout(fmt)
        if folder.is_file():  # one file: the layout that finds it where it lies
            root = folder.parent.parent.parent if fmt == "mot" else folder.parent
            files = {name: path for name, path in layout.find_truth(root).items() if path == folder}
        else:
            files = layout.find_truth(folder) if folder.is_dir() else {}
        if files and (fmt != "mot" or any(p.name == "gt.txt" for p in files.values())):
            return dict(sorted(files.items())), layout.read_truth, fmt
    return detection_files(folder, kind="tracks"), read_tracks, "visdrone-mot"


def _sequence_name(path: Path, kind: str) -> str:
    """The sequence of one file: MOTChallenge's `<seq>` for `<seq>/<kind>/<kind>.txt`, else the file's stem."""
    return path.parent.parent.name if path.name == f"{kind}.txt" and path.parent.name == kind else path.stem


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
    def output_text(self) -> str:
        """The text its benchmark takes as tracker output: "mot" (MOTChallenge rows) or "visdrone"."""
        return get_layout(self.fmt).output_text

    @property
    def annotations(self) -> Path:
        return self.folder / "annotations"


def tracking_split(config: DataConfig, split: str = "val") -> TrackingSplit:
    """The video split `split` named under `tracking:` in the yaml of `config`. Raises ValueError naming the
    yaml when it names none, or FileNotFoundError when its folder is missing."""
    if split not in SPLITS:
        raise InputError(f"unknown split {split!r}; known: {list(SPLITS)}")
    entry = load_yaml_file(config.source).get("tracking") if config.source is not None else None
    where = config.source or config.root
    if not isinstance(entry, dict) or not isinstance(entry.get(split), str):
        raise InputError(f"{where}: no 'tracking:' entry with a '{split}' folder (a dataset of videos names them, "
                         f"e.g. tracking: {{format: visdrone-mot, {split}: <folder>}})")  # fmt: skip
    fmt = entry.get("format", "visdrone-mot")
    get_layout(fmt)  # an unknown format fails here
    folder = config.root / entry[split]
    if not (folder / "sequences").is_dir():
        raise FileNotFoundError(f"{where}: tracking split {split!r} has no sequences/ folder in {folder}")
    return TrackingSplit(folder, fmt)
