"""The input a set of backends takes: any stride multiple, or the one shape of fixed-size exports.

A fixed-size export (exported without `--dynamic`) runs one image size and at most its own batch. Whoever
feeds it letterboxes every image to that size, padding the whole way (no minimum rectangle), as YOLOv5 does for
fixed-shape backends; prediction and validation then just work on images of any shape. What cannot work is
refused before any image is read: fixed-size exports of different sizes in one ensemble, and a batch larger
than a file's.
"""

from __future__ import annotations

from collections.abc import Sequence

from tphyolo.flags import setting_name
from tphyolo.infer.backends.pytorch import Backend
from tphyolo.infer.config import InferenceConfig


def fixed_input_shape(backends: Sequence[Backend], config: InferenceConfig) -> tuple[int, int] | None:
    """The (h, w) every input of `backends` must have, or None when they all take any stride multiple.
    Raises ValueError when two fixed-size exports disagree on their size, or when `config.batch` is larger
    than a fixed-size export's batch."""
    fixed = [b for b in backends if getattr(b, "fixed_shape", None) is not None]  # optional: absent means any
    shapes = sorted({tuple(b.fixed_shape) for b in fixed})
    if len(shapes) > 1:
        raise ValueError(f"fixed-size exports of different input sizes {shapes} cannot run together; "
                         "export them at one size or with --dynamic")  # fmt: skip
    for backend in fixed:
        if getattr(backend, "max_batch", None) is not None and config.batch > backend.max_batch:
            name = getattr(backend, "path", type(backend).__name__)
            raise ValueError(
                f"{name}: exported for batch {backend.max_batch}, but {setting_name(config, 'batch')} is "
                f"{config.batch}; give {setting_name(config, 'batch')} {backend.max_batch} or export with --dynamic"
            )
    return shapes[0] if shapes else None
