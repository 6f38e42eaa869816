"""Inference sources: an image file, a folder, a glob pattern, a .txt list of files, a video file, or a live
stream (a webcam index such as `0`, or an rtsp/rtmp/http(s) video URL, opened by OpenCV).

`resolve_source(source)` lists the files (and streams) a source names (images and videos, in a stable order);
`iter_frames(files)` decodes them one frame at a time as uint8 BGR (H, W, 3) arrays, each with an output name
unique among the files (`source_names`), and can skip the files that do not decode instead of stopping.

Every entry named like an image or a video is listed, whatever it is: one that is not a regular file (a
folder named x.jpg, a FIFO, a link to /dev/zero, a dangling link, a link loop) is skipped when its turn comes,
named with what it is, and never opened. An image file is read by `tphyolo.data.files.image_io.load_image`: a JPEG
cut short is used with its missing part grey and a file of several frames gives its first frame, each told
on its Frame (`Frame.notes`) for the command to show.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from tphyolo.data.files.globbing import glob_once
from tphyolo.data.files.image_io import ImageError, is_image_name, load_image
from tphyolo.data.files.paths import NO_SUCH_FILE, regular_file_problem
from tphyolo.errors import InputError

VIDEO_SUFFIXES = frozenset({".mp4", ".avi", ".mov", ".mkv", ".m4v", ".mpeg", ".mpg", ".wmv", ".webm", ".asf"})
STREAM_SCHEMES = ("rtsp://", "rtmp://", "http://", "https://")


@dataclass(frozen=True)
class Stream:
    """A live or network video opened by OpenCV: `source` is a webcam index (`"0"`) or an rtsp/rtmp/http(s)
    URL. Its frames are numbered from 0 as they arrive; its length is unknown."""

    source: str

    @property
    def target(self) -> int | str:
        """What `cv2.VideoCapture` opens: the webcam index as an int, or the URL."""
        return int(self.source) if self.source.isdigit() else self.source

    @property
    def name(self) -> str:
        """Output name: `webcam0`, or the URL's host and path with every run of other characters than letters,
        digits, `-` and `.` made one `_` (`rtsp://cam:554/live` -> `cam_554_live`)."""
        if self.source.isdigit():
            return f"webcam{self.source}"
        rest = self.source.split("://", 1)[1]
        return re.sub(r"[^A-Za-z0-9.-]+", "_", rest).strip("_") or "stream"


def is_stream(source: str | Path) -> bool:
    """Whether `source` names a stream: a URL of STREAM_SCHEMES, or digits that name no file or folder here."""
    text = str(source)
    if text.lower().startswith(STREAM_SCHEMES):
        return True
    return text.isdigit() and not Path(text).exists()


@dataclass(frozen=True)
class Frame:
    """One decoded image: `image` uint8 BGR (H, W, 3); `path` the file it came from (a stream's source text
    for a stream); `index` the frame number in a video or stream (0 for an image); `fps` the rate of the frames
    yielded (the video's frame rate divided by the frame stride; None for an image); `name` the file's output
    name (see `source_names`; the file's stem when the frame was made without one); `notes` what reading the
    file found that the user should be told, each naming the file (a partial JPEG, the first of several
    frames); `file` the position of its file among the files `iter_frames` was given."""

    image: np.ndarray
    path: Path | str
    index: int = 0
    fps: float | None = None
    name: str | None = None
    notes: tuple[str, ...] = ()
    file: int = 0

    @property
    def is_video(self) -> bool:
        return self.fps is not None


def is_video_name(path: Path) -> bool:
    return path.suffix.lower() in VIDEO_SUFFIXES


def _is_media_name(path: Path) -> bool:
    return is_image_name(path) or is_video_name(path)


def _media_in(paths: Sequence[Path]) -> list[Path]:
    """The entries of `paths` named like an image or a video, sorted; regular files or not (see the module
    docstring: the others are skipped by name when read)."""
    return sorted(p for p in paths if _is_media_name(p))


def _once_each(paths: Sequence[Path]) -> list[Path]:
    """One path per file: of the paths reaching the same file through symlinked folders (a `**` glob follows a
    link back up the tree many times over), the shortest."""
    shortest: dict[str, Path] = {}
    for path in paths:
        key = os.path.realpath(path)  # a link loop resolves to itself, never raises
        if key not in shortest or (len(path.parts), str(path)) < (len(shortest[key].parts), str(shortest[key])):
            shortest[key] = path
    return list(shortest.values())


def _from_list(path: Path) -> list[Path]:
    files = []
    for n, line in enumerate(map(os.fsdecode, path.read_bytes().splitlines()), start=1):  # names as the OS has them
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        p = Path(line).expanduser()
        p = p if p.is_absolute() else path.parent / p
        if not os.path.lexists(p):  # there but not a regular file: skipped by name when read
            raise FileNotFoundError(f"{path}:{n}: listed file {p} does not exist")
        if not _is_media_name(p):
            raise InputError(f"{path}:{n}: {p} is not an image or video file")
        files.append(p)
    return files


def resolve_source(source: str | Path | Stream | Sequence[str | Path | Stream]) -> list[Path | Stream]:
    """The image and video files named by `source` (or by each entry of a sequence), in order.

    An image or video name gives that entry (a folder named x.jpg too: it is skipped when read, not listed); a
    folder gives its images and videos (not recursive, sorted by name); a path that exists is that path,
    even when its name holds `*`, `?` or `[`; otherwise such a name is a glob pattern (recursive with `**`); a
    `.txt` file lists one path per line (relative to the list's folder, `#` comments allowed); a webcam index
    or a video URL gives a Stream (`is_stream`). Raises FileNotFoundError or ValueError naming the source when
    it yields nothing usable.
    """
    if isinstance(source, (list, tuple)):
        return [f for s in source for f in resolve_source(s)]
    if isinstance(source, Stream):
        return [source]
    text = str(source)
    if is_stream(text):
        return [Stream(text)]
    if any(ch in text for ch in "*?[") and not os.path.lexists(Path(text).expanduser()):
        files = _media_in(_once_each(glob_once(text)))  # each real folder once: link loops end
        if not files:
            raise FileNotFoundError(f"source {text!r}: the pattern matches no image or video file")
        return files
    path = Path(text).expanduser()
    if _is_media_name(path) and os.path.lexists(path):  # a file, or something named like one: skipped when read
        return [path]
    if path.is_dir():
        files = _media_in(list(path.iterdir()))
        if not files:
            raise FileNotFoundError(f"source {path}: the folder holds no image or video file")
        return files
    if (problem := regular_file_problem(path)) == NO_SUCH_FILE:
        raise FileNotFoundError(f"source {path}: no such file or folder")
    if problem is not None:
        raise InputError(f"source {path}: not a regular file ({problem})")
    if path.suffix.lower() == ".txt":
        files = _from_list(path)
        if not files:
            raise InputError(f"source {path}: the list names no file")
        return files
    raise InputError(f"source {path}: not an image, a video, a folder, a glob or a .txt list")


def source_names(files: Sequence[Path | Stream]) -> list[str]:
    """An output name per file, unique among `files` (a file listed twice keeps one name): its path relative to
    the files' common folder, without the suffix (`a/x`, `b/x`), posix-style; files that would share a name
    differ by their suffix only and get it appended (`x_jpg`, `x_png`). Files of one folder get their stems.
    A stream is named by `Stream.name`."""
    paths = [f for f in files if not isinstance(f, Stream)]
    by_path = dict(zip(paths, _file_names(paths), strict=True))
    return [f.name if isinstance(f, Stream) else by_path[f] for f in files]


def _file_names(files: Sequence[Path]) -> list[str]:
    absolute = [Path(os.path.abspath(f)) for f in files]
    root = Path(os.path.commonpath([f.parent for f in absolute])) if absolute else Path()
    relative = [f.relative_to(root) for f in absolute]
    stems = [r.with_suffix("").as_posix() for r in relative]
    owners: dict[str, set[Path]] = {}
    for stem, f in zip(stems, absolute, strict=True):
        owners.setdefault(stem, set()).add(f)
    names = []
    for stem, f in zip(stems, absolute, strict=True):
        names.append(f"{stem}_{f.suffix[1:].lower()}" if len(owners[stem]) > 1 else stem)
    return names


def video_capture(video: Path | Stream) -> cv2.VideoCapture:
    """An opened capture of a video file or a stream. Raises ImageError when it does not open; OpenCV opens
    videos by name, so a name that is not valid UTF-8 is refused before it reaches OpenCV."""
    if isinstance(video, Stream):
        label, target = video.source, video.target
    else:
        label = target = str(video)
        problem = regular_file_problem(video)
        if problem not in (None, NO_SUCH_FILE):  # a FIFO would block, a device never ends
            raise ImageError(f"{video}: not a regular file ({problem})")
        try:
            target.encode("utf-8")
        except UnicodeEncodeError:
            raise ImageError(f"{video}: cannot open a video whose file name is not valid UTF-8") from None
    capture = cv2.VideoCapture(target)
    if not capture.isOpened():
        capture.release()
        raise ImageError(f"{label}: cannot open {'stream' if isinstance(video, Stream) else 'video'}")
    return capture


def _is_video(source: Path | Stream) -> bool:
    return isinstance(source, Stream) or is_video_name(source)


def count_frames(files: Sequence[Path | Stream], *, vid_stride: int = 1) -> int | None:
    """Frames `iter_frames(files, vid_stride=...)` will yield (a video's count as its container reports it;
    0 for a video that does not open), or None when a stream's length is unknown."""
    total = 0
    for f in files:
        if isinstance(f, Stream):
            return None
        if is_video_name(f):
            try:
                capture = video_capture(f)
            except ImageError:
                continue
            total += -(-max(int(capture.get(cv2.CAP_PROP_FRAME_COUNT)), 0) // vid_stride)
            capture.release()
        else:
            total += 1
    return total


def _video_frames(
    capture: cv2.VideoCapture, source: Path | Stream, name: str, vid_stride: int, position: int
) -> Iterator[Frame]:
    """Frames 0, vid_stride, 2 * vid_stride, ... of an opened capture (released at the end), of the file at
    `position`; the frames in between are grabbed without decoding."""
    fps = (capture.get(cv2.CAP_PROP_FPS) or 30.0) / vid_stride
    path = source.source if isinstance(source, Stream) else source
    try:
        index = 0
        while True:
            ok, image = capture.read()
            if not ok:
                break
            yield Frame(image, path, index, fps, name, file=position)
            if not all(capture.grab() for _ in range(vid_stride - 1)):
                break
            index += vid_stride
    finally:
        capture.release()


def source_units(files: Sequence[Path | Stream], *, batch: int) -> list[list[int]]:
    """The files (positions in `files`) that are predicted together: each run of consecutive images cut into
    groups of `batch`, each video or stream alone. A batch of frames never spans two units, so that the
    batches, and the floats they give, depend on the file list alone; the units are what the ranks of a
    distributed prediction share out (`tphyolo.runtime.sharding`) and what a resumed one redoes whole."""
    if batch < 1:
        raise InputError(f"batch must be at least 1, got {batch}")
    units: list[list[int]] = []
    for i, f in enumerate(files):
        if _is_video(f):
            units.append([i])
        elif units and not _is_video(files[units[-1][-1]]) and len(units[-1]) < batch:
            units[-1].append(i)
        else:
            units.append([i])
    return units


def iter_frames(
    files: Sequence[Path | Stream],
    *,
    only: Sequence[int] | None = None,
    on_skip: Callable[[Path | Stream, Exception], None] | None = None,
    vid_stride: int = 1,
) -> Iterator[Frame]:
    """Decode `files` in order (only those at the positions `only`, in that order, when given; the output
    names are those of the whole list): an image gives one Frame, a video or stream one Frame per
    `vid_stride` frames (the first, then every `vid_stride`-th).

    A file that cannot be read or decoded (OSError, ImageError) stops the iteration, unless `on_skip` is
    given: then it is called with the file and the error, and the next file follows."""
    if vid_stride < 1:
        raise InputError(f"vid_stride must be at least 1, got {vid_stride}")
    names = source_names(files)
    for position in range(len(files)) if only is None else only:
        f, name = files[position], names[position]
        try:
            if not _is_video(f):
                image, info = load_image(f)
            else:
                capture = video_capture(f)
        except (OSError, ImageError) as error:
            if on_skip is None:
                raise
            on_skip(f, error)
            continue
        if not _is_video(f):
            notes = tuple(f"{f}: {warning}" for warning in info.warnings)
            yield Frame(image, f, name=name, notes=notes, file=position)
            continue
        count = 0
        for frame in _video_frames(capture, f, name, vid_stride, position):
            count += 1
            yield frame
        if count == 0:
            label = f.source if isinstance(f, Stream) else f
            error = ImageError(f"{label}: the {'stream' if isinstance(f, Stream) else 'video'} has no decodable frame")
            if on_skip is None:
                raise error
            on_skip(f, error)
