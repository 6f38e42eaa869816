"""Reading checkpoints of the original TPH-YOLOv5 / YOLOv5 code, which pickle whole module objects.

Nothing from such a file is executed: `unpickler` rebuilds only tensors and plain data and records module
objects as inert `LegacyObject`s; `yolov5` turns that record into the model yaml, weights and class names.
"""

from tphyolo.checkpoint.legacy.errors import ForbiddenGlobalError, LegacyCheckpointError
from tphyolo.checkpoint.legacy.unpickler import LegacyObject, read_archive
from tphyolo.checkpoint.legacy.yolov5 import YOLOv5Checkpoint, read_yolov5_checkpoint

__all__ = [
    "ForbiddenGlobalError",
    "LegacyCheckpointError",
    "LegacyObject",
    "YOLOv5Checkpoint",
    "read_archive",
    "read_yolov5_checkpoint",
]
