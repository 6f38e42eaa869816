"""Finding, verifying, decoding and writing images: the one way the package reads and writes image files.

Decoded images are uint8 BGR (H, W, 3) arrays of the image as displayed: EXIF orientation applied,
grayscale expanded to 3 channels, alpha dropped, 16-bit scaled to 8-bit.

Files are read and written as bytes by Python (`open`) and decoded or encoded in memory by OpenCV, so any
file name the OS allows works, names that are not valid UTF-8 included. Before decoding, the size the file's
header declares is checked against `MAX_IMAGE_PIXELS`: a small file that declares a huge image is refused
with an `ImageError` instead of exhausting memory. Only regular files are opened: a FIFO, a device, a folder
or a broken link named like an image is refused by name.

One policy for the files every command meets, whatever reads them:
- a JPEG cut short (no end marker after its last scan) is restored as libjpeg restores a file read from disk
  (the missing rows grey) and marked `partial`: the commands that score (train, val) list such files, and
  predict names each one;
- a file of several frames (an animated GIF, PNG or WebP, a multi-page TIFF, an MPO) is one image, its first
  frame, with a note saying so.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS, MIN_IMAGE_SIDE
from tphyolo.data.files.paths import NO_SUCH_FILE, regular_file_problem
from tphyolo.errors import InputError

# The one list of image file suffixes (lower case), in the order a stem's image is looked for.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".mpo", ".pgm", ".ppm", ".gif")
_EXIF_ORIENTATION = 0x0112
_TRANSPOSING_ORIENTATIONS = (5, 6, 7, 8)  # EXIF orientations that swap width and height
_JPEG_SCAN = b"\xff\xda"  # start of scan
_JPEG_END = b"\xff\xd9"  # end of image


class ImageError(InputError):
    """An image that cannot be used; the message names the file and the problem."""


class ImageTooLargeError(ImageError):
    """An image whose header declares more than MAX_IMAGE_PIXELS (a decompression bomb, or just too large)."""


@dataclass(frozen=True)
class ImageInfo:
    """Size of the displayed image (after EXIF orientation) and what reading it found; no text names the file.

    `notes`: how it was read (EXIF orientation applied). `partial`: why the pixels are not all the file's (a
    JPEG cut short, its missing part filled grey by the decoder), None when the image is whole. `frame_note`:
    which frame of a file of several is used (the first), None for a single image."""

    height: int
    width: int
    notes: tuple[str, ...] = field(default=())
    partial: str | None = None
    frame_note: str | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        """What a user should be told about the pixels used: `partial` and `frame_note`, when there are any."""
        return tuple(w for w in (self.partial, self.frame_note) if w is not None)


@dataclass(frozen=True)
class ImageHeader:
    """What an image file's header declares: stored width and height, EXIF orientation, format name, and the
    number of frames (pages of a TIFF, frames of an animated GIF, PNG or WebP, images of an MPO)."""

    width: int
    height: int
    orientation: int
    format: str
    frames: int = 1


def is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def read_header(data: bytes, path: Path | str) -> ImageHeader:
    """The header of encoded image `data` (read from `path`, named in errors). Raises ImageError when the
    format is not recognised or the declared size is above MAX_IMAGE_PIXELS; decodes no pixels."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as im:
                width, height = im.size
                orientation = im.getexif().get(_EXIF_ORIENTATION, 1) if im.format in ("JPEG", "MPO", "TIFF") else 1
                fmt = im.format or "unknown"
                frames = int(getattr(im, "n_frames", 1))
    except Image.DecompressionBombError as error:  # PIL's own, higher, limit: its message gives the size
        declared = re.search(r"\((\d+) pixels\)", str(error))
        size = f"{int(declared.group(1)):,} pixels" if declared else "more pixels"
        raise ImageTooLargeError(f"{path}: declares {size}, over the limit of {MAX_IMAGE_PIXELS:,}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError, EOFError) as error:
        raise ImageError(f"{path}: cannot read image ({error})") from None
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageTooLargeError(
            f"{path}: declares {width}x{height} = {width * height:,} pixels, over the limit of {MAX_IMAGE_PIXELS:,}"
        )
    return ImageHeader(width, height, orientation or 1, fmt, frames)


def read_image_size(path: Path | str) -> tuple[int, int]:
    """(height, width) of the image file `path` as displayed (EXIF orientation applied), from its header
    alone, within MAX_IMAGE_PIXELS. Raises ImageError naming the file when it is not a regular file, not an
    image or declares too many pixels; OSError when it cannot be read."""
    info = inspect_image(_read_bytes(path), path)
    return info.height, info.width


def _read_bytes(path: Path | str) -> bytes:
    """The bytes of image file `path`; ImageError naming it when it is there but not a regular file (a FIFO or a
    device is never opened), or when it is empty."""
    problem = regular_file_problem(path)
    if problem is not None and problem != NO_SUCH_FILE:
        raise ImageError(f"{path}: not a regular file ({problem})")
    with open(path, "rb") as f:
        data = f.read()
    if not data:
        raise ImageError(f"{path}: empty file (0 bytes)")
    return data


def _is_truncated_jpeg(header: ImageHeader, data: bytes) -> bool:
    """A JPEG whose last scan has no end marker after it: the file was cut short. (The entropy-coded data
    escapes 0xFF bytes, so 0xFFDA and 0xFFD9 there are markers; bytes after the end marker do not count.)"""
    if header.format not in ("JPEG", "MPO"):
        return False
    last_scan = data.rfind(_JPEG_SCAN)
    return last_scan >= 0 and data.find(_JPEG_END, last_scan) < 0


def decode_pixels(data: bytes, path: Path | str) -> np.ndarray:
    """The uint8 BGR (H, W, 3) pixels of image bytes whose header `inspect_image` has read and found whole (its
    size within MAX_IMAGE_PIXELS, no JPEG cut short), EXIF orientation applied, without reading the header again.
    Raises ImageError naming `path` when they do not decode."""
    try:
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as error:
        raise ImageError(f"{path}: cannot decode image ({str(error).strip().splitlines()[-1]})") from None
    if image is None:
        raise ImageError(f"{path}: cannot decode image")
    return image


def decode_image(data: bytes, path: Path | str) -> tuple[np.ndarray, ImageInfo]:
    """Decode image bytes (read from `path`, named in errors) into uint8 BGR (H, W, 3) as displayed, after
    checking the declared size (`read_header`), with what decoding found (`ImageInfo`). Raises ImageError when
    it does not decode.

    A JPEG cut short is restored as a file read from disk is (the missing rows filled by the decoder; the
    in-memory decoder stops at a missing end marker, so one is appended) and marked `partial`. A file of
    several frames gives its first frame, with a note."""
    info = inspect_image(data, path)
    image = decode_pixels(data + _JPEG_END if info.partial is not None else data, path)
    height, width = image.shape[:2]
    return image, replace(info, height=height, width=width)


def inspect_image(data: bytes, path: Path | str) -> ImageInfo:
    """What `decode_image(data, path)` would find, from the header and the bytes alone, decoding no pixel: the
    displayed size, EXIF orientation, a JPEG cut short (`partial`), several frames. Raises ImageError when the
    format is not recognised or the declared size is above MAX_IMAGE_PIXELS; bytes that pass this may still
    fail to decode."""
    header = read_header(data, path)
    notes = (f"EXIF orientation {header.orientation} applied",) if header.orientation != 1 else ()
    truncated = _is_truncated_jpeg(header, data)
    partial = "truncated JPEG (no end marker): the missing part is filled grey by the decoder" if truncated else None
    frames = f"{header.frames} frames ({header.format}); the first frame is used" if header.frames > 1 else None
    swapped = header.orientation in _TRANSPOSING_ORIENTATIONS
    height, width = (header.width, header.height) if swapped else (header.height, header.width)
    return ImageInfo(height, width, notes, partial, frames)


def load_image(path: Path | str) -> tuple[np.ndarray, ImageInfo]:
    """Decode `path` as `decode_image` does: the uint8 BGR (H, W, 3) image as displayed and what decoding found
    (a partial image, several frames), for the commands that tell the user. Raises ImageError naming the file
    when it is not a regular file, is empty or does not decode; OSError when it cannot be read."""
    return decode_image(_read_bytes(path), path)


def read_image(path: Path | str) -> np.ndarray:
    """The image of `load_image(path)`, for readers whose files were verified (and reported) before."""
    return load_image(path)[0]


def verify_image(path: Path) -> ImageInfo:
    """Check that `path` decodes as training will decode it (`load_image`) and return its displayed size and
    what decoding found. Raises ImageError naming the file otherwise, or when a side is below MIN_IMAGE_SIDE.

    A JPEG without its end marker is accepted as `partial` when it still decodes (the missing rows are
    filled by the decoder).
    """
    try:
        _, info = load_image(path)
    except OSError as error:
        raise ImageError(f"{path}: cannot read ({error.strerror or error})") from None
    if info.width < MIN_IMAGE_SIDE or info.height < MIN_IMAGE_SIDE:
        raise ImageError(f"{path}: image size {info.width}x{info.height} is below {MIN_IMAGE_SIDE} pixels")
    return info


def write_image(path: Path | str, image: np.ndarray, params: tuple[int, ...] = ()) -> Path:
    """Encode uint8 BGR `image` in the format of `path`'s suffix and write it (any file name). Raises OSError
    naming the file when it cannot be encoded or written."""
    path = Path(path)
    ok, encoded = cv2.imencode(path.suffix or ".jpg", image, list(params))
    if not ok:
        raise OSError(f"{path}: cannot encode the image as {path.suffix or '.jpg'}")
    path.write_bytes(encoded.tobytes())
    return path


def resize_long_side(image: np.ndarray, size: int, *, augment: bool) -> np.ndarray:
    """Resize so the long side is `size` pixels, keeping the aspect ratio (no-op when already that size).

    Downscaling uses area interpolation unless `augment` (then bilinear, as training tolerates it)."""
    h0, w0 = image.shape[:2]
    r = size / max(h0, w0)
    if r == 1:
        return image
    interpolation = cv2.INTER_LINEAR if (augment or r > 1) else cv2.INTER_AREA
    new_size = (max(1, round(w0 * r)), max(1, round(h0 * r)))
    return cv2.resize(image, new_size, interpolation=interpolation)
