"""Request bodies -> images: what the service accepts, and the status of what it does not.

An image is checked where it arrives and decoded where it is detected: `check_request_image` reads its header
in the server process (the declared size against MAX_IMAGE_PIXELS, the displayed size after EXIF orientation,
a JPEG cut short) and keeps its encoded bytes; the inference worker decodes them (`decode_request_image`) as
every command decodes files (`tphyolo.data.files.image_io.decode_image`), so that the service sees the pixels
`tphyolo predict` sees. The bytes, not the pixels, cross to the worker process: a 1920x1080 JPEG of 0.5 MB
instead of 6.2 MB of pixels, decoded by the process that then runs its forward (a batch's images at once). The
answers to what cannot be used:

- 415: a media type other than MEDIA_TYPES (a multipart part may also say application/octet-stream);
- 413: an image declaring more than MAX_IMAGE_PIXELS (a decompression bomb), naming the limit;
- 422: no bytes, bytes that are not an image, a JPEG cut short (predict fills it grey and warns; a service has
  nobody to warn, so it refuses it), and bytes whose header reads but whose pixels do not decode (found by the
  worker: the request's other images are detected all the same, its answer is this 422).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tphyolo.data.files.image_io import ImageError, ImageTooLargeError, decode_pixels, inspect_image
from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS
from tphyolo.serve.problems import RequestProblem

MEDIA_TYPES = ("image/jpeg", "image/png", "image/webp", "image/tiff")
_UNTYPED = ("application/octet-stream", "")  # a multipart part that does not say what it holds


@dataclass(frozen=True)
class RequestImage:
    """An image of a request, checked (`check_request_image`) but not decoded: its encoded `data`, `where`
    (how errors name it: "body", a multipart file name) and `shape`, its (height, width) as displayed."""

    data: bytes
    where: str
    shape: tuple[int, int]


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, lower case, without its parameters."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def check_media_type(content_type: str | None, *, where: str, untyped_ok: bool = False) -> None:
    """415 naming `where` unless `content_type` is one of MEDIA_TYPES (or, with `untyped_ok`, says nothing)."""
    kind = media_type(content_type)
    if kind in MEDIA_TYPES or (untyped_ok and kind in _UNTYPED):
        return
    raise RequestProblem(
        415, f"{where}: unsupported media type {kind or 'none'!r}; send one of {', '.join(MEDIA_TYPES)}"
    )


def check_request_image(data: bytes, *, where: str) -> RequestImage:
    """`data` checked from its header alone (no pixel decoded). Raises RequestProblem 413 or 422 (see the
    module docstring)."""
    if not data:
        raise RequestProblem(422, f"{where}: empty (0 bytes)")
    try:
        info = inspect_image(data, where)
    except ImageTooLargeError as error:
        raise RequestProblem(413, f"{error} (the image pixel limit, MAX_IMAGE_PIXELS = {MAX_IMAGE_PIXELS:,})") from None
    except ImageError as error:
        raise RequestProblem(422, _without_object_names(str(error))) from None
    if info.partial is not None:
        raise RequestProblem(422, f"{where}: {info.partial.split(':')[0]}")
    return RequestImage(data, where, (info.height, info.width))


def decode_request_image(image: RequestImage) -> np.ndarray:
    """The uint8 BGR (H, W, 3) pixels of a checked image. Raises RequestProblem 422 when they do not decode."""
    try:
        pixels = decode_pixels(image.data, image.where)  # its header was read where it arrived
    except ImageError as error:
        raise RequestProblem(422, _without_object_names(str(error))) from None
    if pixels.shape[:2] != image.shape:  # the header said one size and the pixels are another
        raise RequestProblem(422, f"{image.where}: the header declares {image.shape[1]}x{image.shape[0]} pixels, "
                                  f"the image decodes to {pixels.shape[1]}x{pixels.shape[0]}")  # fmt: skip
    return pixels


def _without_object_names(message: str) -> str:
    """PIL names an in-memory file by its object: say nothing of it."""
    return re.sub(r" <_io\.BytesIO object at 0x[0-9a-f]+>", "", message)
