"""The image sizes the package accepts, as plain numbers: the one place the reader's pixel limit and the
image-size policy of every command (`--img`) are set. Parsers read them without importing OpenCV."""

from __future__ import annotations

import math

from tphyolo.flags import Bounds

# The largest image any command decodes, in pixels (width x height as the header declares it): 2**27, e.g.
# 16384 x 8192 (a 384 MiB BGR array). Larger images are skipped or refused, naming the file.
MAX_IMAGE_PIXELS = 2**27
# Images with a side below this are refused by the scan (too small to hold an object).
MIN_IMAGE_SIDE = 10
# The largest image size (model input side) any command accepts: the side of the largest square image the
# reader decodes, down to a multiple of 64 (every stride divides it): 11584.
MAX_IMGSZ = math.isqrt(MAX_IMAGE_PIXELS) // 64 * 64
IMGSZ_BOUNDS = Bounds(1, MAX_IMGSZ)  # every --img flag
