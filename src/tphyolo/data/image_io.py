"""Finding, verifying, decoding and writing images: the one way the package reads and writes image files.

Decoded images are uint8 BGR (H, W, 3) arrays of the image as displayed: EXIF orientation applied,
grayscale expanded to 3 channels, alpha dropped, 16-bit scaled to 8-bit.

Files are read and written as bytes by Python (`open`) and decoded or encoded in memory by OpenCV, so any
file name the OS allows works, names that are not valid UTF-8 included. Before decoding, the size the file's
header declares is checked against `MAX_IMAGE_PIXELS`: a small file that declares a huge image is refused
with an `ImageError` instead of exhausting memory.
"""

from __future__ import annotations

import io
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

# The one list of image file suffixes (lower case), in the order a stem's image is looked for.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".mpo", ".pgm", ".ppm")
# The largest image any command decodes, in pixels (width x height as the header declares it): 2**27, e.g.
# 16384 x 8192 (a 384 MiB BGR array). Larger images are skipped or refused, naming the file.
MAX_IMAGE_PIXELS = 2**27
MIN_IMAGE_SIDE = 10
_EXIF_ORIENTATION = 0x0112
_JPEG_END = b"\xff\xd9"


class ImageError(ValueError):
    """An image that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ImageInfo:
    """Size of the displayed image (after EXIF orientation) and non-fatal notes found while verifying."""

    height: int
    width: int
    notes: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class ImageHeader:
    """What an image file's header declares: stored width and height, EXIF orientation, format name."""

    width: int
    height: int
    orientation: int
    format: str


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
    except Image.DecompressionBombError as error:  # PIL's own, higher, limit: its message gives the size
        declared = re.search(r"\((\d+) pixels\)", str(error))
        size = f"{int(declared.group(1)):,} pixels" if declared else "more pixels"
        raise ImageError(f"{path}: declares {size}, over the limit of {MAX_IMAGE_PIXELS:,}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ImageError(f"{path}: cannot read image ({error})") from None
    if width * height > MAX_IMAGE_PIXELS:
        raise ImageError(
            f"{path}: declares {width}x{height} = {width * height:,} pixels, over the limit of {MAX_IMAGE_PIXELS:,}"
        )
    return ImageHeader(width, height, orientation or 1, fmt)


def decode_image(data: bytes, path: Path | str) -> np.ndarray:
    """Decode image bytes (read from `path`, named in errors) into uint8 BGR (H, W, 3) as displayed, after
    checking the declared size (`read_header`). Raises ImageError when it does not decode.

    A JPEG cut short decodes as a file read from disk does (the missing rows filled by the decoder): the
    in-memory decoder stops at a missing end marker, so one is appended."""
    if _is_truncated_jpeg(read_header(data, path), data):
        data += _JPEG_END
    try:
        image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as error:
        raise ImageError(f"{path}: cannot decode image ({str(error).strip().splitlines()[-1]})") from None
    if image is None:
        raise ImageError(f"{path}: cannot decode image")
    return image


def _is_truncated_jpeg(header: ImageHeader, data: bytes) -> bool:
    return header.format in ("JPEG", "MPO") and not data.endswith(_JPEG_END)


def read_image(path: Path | str) -> np.ndarray:
    """Decode `path` into uint8 BGR (H, W, 3) as displayed. Raises ImageError when it does not decode, OSError
    when it cannot be read."""
    with open(path, "rb") as f:
        data = f.read()
    return decode_image(data, path)


def verify_image(path: Path) -> ImageInfo:
    """Check that `path` decodes as training will decode it (`read_image`) and return its displayed size.
    Raises ImageError otherwise.

    A JPEG without its end marker is accepted with a note when it still decodes (the missing rows are
    filled by the decoder).
    """
    path = Path(path)
    try:
        if not path.is_file():
            raise ImageError(f"{path}: not a file")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise ImageError(f"{path}: cannot read ({error.strerror or error})") from None
    if not data:
        raise ImageError(f"{path}: empty file (0 bytes)")
    header = read_header(data, path)
    height, width = decode_image(data, path).shape[:2]
    if width < MIN_IMAGE_SIDE or height < MIN_IMAGE_SIDE:
        raise ImageError(f"{path}: image size {width}x{height} is below {MIN_IMAGE_SIDE} pixels")
    notes = []
    if header.orientation != 1:
        notes.append(f"EXIF orientation {header.orientation} applied")
    if _is_truncated_jpeg(header, data):
        notes.append("truncated JPEG (no end marker): missing part filled by the decoder")
    return ImageInfo(height, width, tuple(notes))


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
