"""The evaluation records a report is built from: `evaluation.json` in the run folder.

`tphyolo val --report` and `tphyolo eval --report DIR` write it; `tphyolo report RUN_DIR` reads it back and
rebuilds the report without the model. It is plain json:

    {"format": "tphyolo-evaluation", "version": 1,
     "protocol": "yolo" | "coco" | "visdrone", "max_det": int, "names": [class names],
     "settings": {name: value, ...},  # what the run was given (weights, data, thresholds, ...), shown as is
     "speed": {stage: ms per image},  # as the run measured it; {} when nothing was run
     "images": [{"path": image file (absolute, or relative to the run folder), "shape": [height, width] | null,
                 "box_format": "xyxy" | "xywh",         # how every box of the entry is written, in pixels
                 "dtypes": {"boxes" | "ignore" | "detections": "float32" | "float64" | ...},  # as the run held them
                 "classes": [int], "boxes": [[4 numbers]], "crowd": [bool],   # the objects
                 "ignore": [[4 numbers]],                                      # regions to ignore
                 "detections": [[4 numbers, score, class]]}, ...]}

Numbers are written as the tensors hold them and read back in their dtype (float32 and float64 values are
exact in json), so that scores computed from the file equal those of the run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tphyolo.data.files.atomic import write_text_atomic
from tphyolo.data.files.json_files import load_json_file
from tphyolo.errors import InputError
from tphyolo.metrics.protocol import ImageResult
from tphyolo.metrics.registry import PROTOCOLS

RECORDS_NAME = "evaluation.json"
FORMAT = "tphyolo-evaluation"
VERSION = 1
FLOAT_FIELDS = ("boxes", "ignore", "detections")
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}


@dataclass(frozen=True)
class Records:
    """What `evaluation.json` holds: the images' results and how the run scored them."""

    protocol: str
    max_det: int
    names: tuple[str, ...]
    settings: dict
    images: tuple[ImageResult, ...]
    speed: dict[str, float] = field(default_factory=dict)


def _image_entry(image: ImageResult) -> dict:
    return {
        "path": image.path,
        "shape": list(image.shape) if image.shape is not None else None,
        "box_format": image.box_format,
        "dtypes": {k: str(getattr(image, k).dtype).removeprefix("torch.") for k in FLOAT_FIELDS},
        "classes": image.classes.tolist(),
        "boxes": image.boxes.tolist(),
        "crowd": image.crowd_mask().tolist(),
        "ignore": image.ignore.reshape(-1, 4).tolist(),
        "detections": image.detections.reshape(-1, 6).tolist(),
    }


def save_records(save_dir: Path, records: Records) -> Path:
    """Write `save_dir/evaluation.json`; returns its path."""
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "protocol": records.protocol,
        "max_det": records.max_det,
        "names": list(records.names),
        "settings": records.settings,
        "speed": records.speed,
        "images": [_image_entry(image) for image in records.images],
    }
    path = Path(save_dir) / RECORDS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(payload))
    return path


def _tensor(value, columns: int | None, dtype: torch.dtype, where: str) -> torch.Tensor:
    try:
        tensor = torch.tensor(value, dtype=dtype)
    except (TypeError, ValueError, RuntimeError) as error:
        raise InputError(f"{where}: not a list of numbers ({error})") from None
    if columns is None:
        if tensor.dim() != 1:
            raise InputError(f"{where}: expected a flat list, got shape {tuple(tensor.shape)}")
        return tensor
    if tensor.numel() == 0:
        return tensor.reshape(0, columns)
    if tensor.dim() != 2 or tensor.shape[1] != columns:
        raise InputError(f"{where}: expected rows of {columns} numbers, got shape {tuple(tensor.shape)}")
    if dtype.is_floating_point and not torch.isfinite(tensor).all():
        raise InputError(f"{where}: holds NaN or infinite values")
    return tensor


def _image(entry: object, where: str) -> ImageResult:
    if not isinstance(entry, Mapping):
        raise InputError(f"{where}: must be a mapping, got {type(entry).__name__}")
    missing = [k for k in ("path", "classes", "boxes", "ignore", "detections") if k not in entry]
    if missing:
        raise InputError(f"{where}: lacks {missing}")
    box_format = entry.get("box_format", "xyxy")
    if box_format not in ("xyxy", "xywh"):
        raise InputError(f"{where}: box_format must be 'xyxy' or 'xywh', got {box_format!r:.40}")
    shape = entry.get("shape")
    if shape is not None and not (isinstance(shape, list) and len(shape) == 2 and all(type(v) is int for v in shape)):
        raise InputError(f"{where}: shape must be [height, width] or null, got {shape!r:.40}")
    dtypes = entry.get("dtypes", {})
    if not isinstance(dtypes, Mapping) or any(v not in DTYPES for v in dtypes.values()):
        raise InputError(f"{where}: dtypes must map {list(FLOAT_FIELDS)} to one of {list(DTYPES)}")
    dtype = {k: DTYPES[dtypes.get(k, "float32")] for k in FLOAT_FIELDS}
    classes = _tensor(entry["classes"], None, torch.int64, f"{where}.classes")
    boxes = _tensor(entry["boxes"], 4, dtype["boxes"], f"{where}.boxes")
    crowd = _tensor(entry.get("crowd", [False] * len(classes)), None, torch.bool, f"{where}.crowd")
    if not len(boxes) == len(classes) == len(crowd):
        raise InputError(f"{where}: {len(classes)} classes, {len(boxes)} boxes and {len(crowd)} crowd flags")
    return ImageResult(
        path=str(entry["path"]),
        shape=tuple(shape) if shape is not None else None,
        detections=_tensor(entry["detections"], 6, dtype["detections"], f"{where}.detections"),
        classes=classes,
        boxes=boxes,
        ignore=_tensor(entry["ignore"], 4, dtype["ignore"], f"{where}.ignore"),
        crowd=crowd,
        box_format=box_format,
    )


def load_records(run_dir: Path) -> Records:
    """Read `run_dir/evaluation.json`. Raises FileNotFoundError when it is missing, ValueError naming the file
    and the entry for anything malformed."""
    path = Path(run_dir) / RECORDS_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no evaluation records; write them with 'tphyolo val --report' or 'tphyolo eval --report DIR'"
        )
    data = load_json_file(path, what="evaluation records")  # bounded: a file nested 100,000 deep is one line
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f'{path}: not a tphyolo evaluation file (no "format": "{FORMAT}")')
    if data.get("version") != VERSION:
        raise InputError(f"{path}: version {data.get('version')!r:.20} is not {VERSION}")
    names, images = data.get("names"), data.get("images")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names) or not names:
        raise InputError(f"{path}: 'names' must be a non-empty list of class names")
    if not isinstance(images, list):
        raise InputError(f"{path}: 'images' must be a list")
    max_det = data.get("max_det")
    if type(max_det) is not int or max_det < 1:
        raise InputError(f"{path}: 'max_det' must be a positive whole number, got {max_det!r:.20}")
    settings = data.get("settings", {})
    if not isinstance(settings, dict):
        raise InputError(f"{path}: 'settings' must be a mapping")
    if data.get("protocol") not in PROTOCOLS:
        raise InputError(f"{path}: 'protocol' must be one of {list(PROTOCOLS)}, got {data.get('protocol')!r:.40}")
    speed = data.get("speed", {})
    if not isinstance(speed, dict) or not all(type(v) in (int, float) for v in speed.values()):
        raise InputError(f"{path}: 'speed' must map stages to milliseconds")
    return Records(
        speed={str(k): float(v) for k, v in speed.items()},
        protocol=str(data.get("protocol")),
        max_det=max_det,
        names=tuple(names),
        settings=settings,
        images=tuple(_image(entry, f"{path}: images[{i}]") for i, entry in enumerate(images)),
    )


def plain_settings(settings: Mapping[str, object]) -> dict:
    """`settings` with every value json can hold kept as is and any other written as its str()."""
    out = {}
    for key, value in settings.items():
        if isinstance(value, (str, int, float, bool)) or value is None:
            out[str(key)] = value
        elif isinstance(value, Sequence) and all(isinstance(v, (str, int, float, bool)) for v in value):
            out[str(key)] = list(value)
        else:
            out[str(key)] = str(value)
    return out
