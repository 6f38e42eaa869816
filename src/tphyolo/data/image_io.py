"""Finding, verifying and decoding images.

Decoded images are uint8 BGR (H, W, 3) arrays of the image as displayed: EXIF orientation applied,
grayscale expanded to 3 channels, alpha dropped, 16-bit scaled to 8-bit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

# The one list of image file suffixes (lower case), in the order a stem's image is looked for.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".mpo", ".pgm", ".ppm")
_EXIF_ORIENTATION = 0x0112
_TRANSPOSED_ORIENTATIONS = {5, 6, 7, 8}


class ImageError(ValueError):
    """An image that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ImageInfo:
    """Size of the displayed image (after EXIF orientation) and non-fatal notes found while verifying."""

    height: int
    width: int
    notes: tuple[str, ...] = field(default=())


def is_image_name(path: Path) -> bool:
    return path.suffix.lower() in IMAGE_SUFFIXES


def verify_image(path: Path) -> ImageInfo:
    """Check that `path` is a decodable image and return its displayed size. Raises ImageError otherwise.

    A JPEG without its end marker is accepted with a note when it still decodes (the missing rows are
    filled by the decoder); one that does not decode is an error.
    """
    path = Path(path)
    if not path.is_file():
        raise ImageError(f"{path}: not a file")
    if path.stat().st_size == 0:
        raise ImageError(f"{path}: empty file (0 bytes)")
    try:
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            width, height = im.size
            orientation = im.getexif().get(_EXIF_ORIENTATION, 1)
            fmt = im.format
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as error:
        raise ImageError(f"{path}: cannot read image ({error})") from None
    if width < 10 or height < 10:
        raise ImageError(f"{path}: image size {width}x{height} is below 10 pixels")
    notes = []
    if orientation in _TRANSPOSED_ORIENTATIONS:
        width, height = height, width
    if orientation not in (1, None):
        notes.append(f"EXIF orientation {orientation} applied")
    if fmt in ("JPEG", "MPO"):
        with open(path, "rb") as f:
            f.seek(-2, os.SEEK_END)
            complete = f.read() == b"\xff\xd9"
        if not complete:
            decoded = cv2.imread(str(path), cv2.IMREAD_COLOR)
            if decoded is None:
                raise ImageError(f"{path}: truncated JPEG that does not decode")
            notes.append("truncated JPEG (no end marker): missing part filled by the decoder")
    return ImageInfo(height, width, tuple(notes))


def read_image(path: Path | str) -> np.ndarray:
    """Decode `path` into uint8 BGR (H, W, 3) as displayed. Raises ImageError when it does not decode."""
    image = cv2.imread(str(path), cv2.IMREAD_COLOR)
    if image is None:
        raise ImageError(f"{path}: cannot decode image")
    return image


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
