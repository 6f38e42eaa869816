"""tphyolo: the TPH-YOLOv5 family for small-object detection in drone imagery, on PyTorch 2.x.

Importing this package changes no global state: process-wide settings are applied only by
`tphyolo.runtime.configure_process`, which the command-line entry points call.
"""

__version__ = "0.1.0"
