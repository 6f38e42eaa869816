"""Request bodies -> images: what the service accepts, and the status of what it does not.

An image is decoded as every command decodes files (`tphyolo.data.files.image_io.decode_image`: EXIF
orientation applied, the declared size checked against MAX_IMAGE_PIXELS before any pixel is decoded), so that
the service sees the pixels `tphyolo predict` sees. The answers to what cannot be used:

- 415: a media type other than MEDIA_TYPES (a multipart part may also say application/octet-stream);
- 413: an image declaring more than MAX_IMAGE_PIXELS (a decompression bomb), naming the limit;
- 422: no bytes, bytes that do not decode, a JPEG cut short (predict fills it grey and warns; a service has
  nobody to warn, so it refuses it).
"""

from __future__ import annotations

import re

import numpy as np

from tphyolo.data.files.image_io import ImageError, ImageTooLargeError, decode_image
from tphyolo.data.files.image_limits import MAX_IMAGE_PIXELS
from tphyolo.serve.problems import RequestProblem

MEDIA_TYPES = ("image/jpeg", "image/png", "image/webp", "image/tiff")
_UNTYPED = ("application/octet-stream", "")  # a multipart part that does not say what it holds


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


def decode_request_image(data: bytes, *, where: str) -> np.ndarray:
    """The uint8 BGR (H, W, 3) image of `data` (`where`: how errors name it: "body", a multipart file name).
    Raises RequestProblem 413 or 422 (see the module docstring)."""
    if not data:
        raise RequestProblem(422, f"{where}: empty (0 bytes)")
    try:
        image, info = decode_image(data, where)
    except ImageTooLargeError as error:
        raise RequestProblem(413, f"{error} (the image pixel limit, MAX_IMAGE_PIXELS = {MAX_IMAGE_PIXELS:,})") from None
    except ImageError as error:  # PIL names an in-memory file by its object: say nothing of it
        raise RequestProblem(422, re.sub(r" <_io\.BytesIO object at 0x[0-9a-f]+>", "", str(error))) from None
    if info.partial is not None:
        raise RequestProblem(422, f"{where}: {info.partial.split(':')[0]}")
    return image
