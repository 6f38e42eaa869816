"""The video sequences of a tracking source: which frames form one stream, in order, and their frame numbers.

A tracker follows objects through one sequence and starts afresh at the next. `resolve_sequences(source)`:

- a video file or a stream (webcam index, URL): one sequence, its frames;
- a folder of images: one sequence named after the folder, its images sorted by name;
- a folder of folders of images (VisDrone-MOT's `sequences/<seq>/`, MOTChallenge's `<seq>/img1/`): one sequence
  per folder, named after it;
- a folder of videos: one sequence per video;
- a glob or a .txt list (`tphyolo.predict.sources.resolve_source`): images grouped by folder, each video alone;
- a list of any of these.

Frame numbers start at 1: a video frame's index + 1 (every `vid_stride`-th frame keeps its own number); an
image's name when the name is a number (`0000001.jpg`, as the MOT benchmarks name frames), else its place in
the sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tphyolo.data.files.image_io import is_image_name
from tphyolo.predict.sources import Frame, Stream, is_video_name, resolve_source

MOT_FRAME_FOLDER = "img1"  # MOTChallenge keeps a sequence's frames in <seq>/img1/


@dataclass(frozen=True)
class VideoSequence:
    """One sequence: `name` (unique among the source's sequences) and `files`: one video or stream, or the
    frames (images) in order."""

    name: str
    files: tuple[Path | Stream, ...]

    def frame_number(self, frame: Frame, position: int) -> int:
        """The 1-based number of `frame`, the `position`-th (from 0) frame read from this sequence."""
        if frame.is_video or not isinstance(frame.path, Path):
            return frame.index + 1
        return image_frame_number(frame.path, position)


def image_frame_number(path: Path, position: int) -> int:
    """The 1-based frame number of image `path`, the `position`-th (from 0) image of its sequence: its name when
    that is a positive number (`0000001.jpg`), else position + 1."""
    stem = Path(path).stem
    return int(stem) if stem.isdigit() and int(stem) > 0 else position + 1


def resolve_sequences(source) -> list[VideoSequence]:
    """The sequences of `source` (see the module docstring). Raises FileNotFoundError or ValueError naming the
    source when it holds no image or video."""
    if isinstance(source, (list, tuple)):
        return _unique_names([s for item in source for s in _sequences_of(item)])
    return _unique_names(_sequences_of(source))


def _sequences_of(source) -> list[VideoSequence]:
    if not isinstance(source, Stream):
        path = Path(str(source)).expanduser()
        if path.is_dir() and not any(_is_media(p) for p in path.iterdir()):
            folders = [_frame_folder(sub) for sub in sorted(p for p in path.iterdir() if p.is_dir())]
            found = [_group(resolve_source(f)) for f in folders if any(is_image_name(p) for p in f.iterdir())]
            if not found:
                raise FileNotFoundError(f"source {path}: no images or videos, nor folders of images, in it")
            return [s for group in found for s in group]
    return _group(resolve_source(source))


def _is_media(path: Path) -> bool:
    return path.is_file() and (is_image_name(path) or is_video_name(path))


def _frame_folder(folder: Path) -> Path:
    frames = folder / MOT_FRAME_FOLDER
    return frames if frames.is_dir() else folder


def _group(files: Sequence[Path | Stream]) -> list[VideoSequence]:
    """Each video or stream alone; images by folder, in the order their folders first appear."""
    sequences: list[VideoSequence] = []
    by_folder: dict[Path, list[Path]] = {}
    for f in files:
        if isinstance(f, Stream):
            sequences.append(VideoSequence(f.name, (f,)))
        elif is_video_name(f):
            sequences.append(VideoSequence(f.stem, (f,)))
        else:
            if f.parent not in by_folder:
                by_folder[f.parent] = []
                sequences.append(VideoSequence(_folder_name(f.parent), ()))  # placeholder, filled below
            by_folder[f.parent].append(f)
    folders = iter(by_folder.values())
    return [s if s.files else VideoSequence(s.name, tuple(next(folders))) for s in sequences]


def _folder_name(folder: Path) -> str:
    folder = folder.resolve()
    return folder.parent.name if folder.name == MOT_FRAME_FOLDER else folder.name


def _unique_names(sequences: list[VideoSequence]) -> list[VideoSequence]:
    """The sequences with a repeated name made unique by `_2`, `_3`, ... in order."""
    seen: dict[str, int] = {}
    out = []
    for s in sequences:
        seen[s.name] = seen.get(s.name, 0) + 1
        out.append(s if seen[s.name] == 1 else VideoSequence(f"{s.name}_{seen[s.name]}", s.files))
    return out
