"""The verdict of a compiled cache entry (`tphyolo.infer.backends.compiled`), and the checks that an entry
found in the cache is still the one the verdict speaks of.

`check.json` holds what the parity check found (ok, its relative error and tolerance, seconds, the weights and
the size they were trained at) and the evidence to check the entry again: the SHA-256 of each file the entry
holds (the model's, the marker and the reference output, `compiled_cache.file_hashes`), and a reference input,
regenerated from its seed and shape (`parity.sample_images`), with PyTorch fp32's output on it (REFERENCE, a
`.npy` read without pickle). `read_verdict` checks the hashes on every use: a bit flipped in the model's
weights, a file truncated, replaced or missing, is found before the model runs. `check_reference` runs the
compiled model on the reference input once per process per entry and asks for PyTorch's output within
FP32_TOLERANCE: what the hashes cannot see (a runtime upgraded in place reading the same file differently).
Either failing raises ValueError naming what did not match; the caller compiles the entry again.

What it costs, measured for tph-yolov5n (a 9.5 MB entry) on a 2-core Intel Xeon loaded to a load average of 5
to 6: the hashes 11 to 18 ms on every reuse, the reference check 50 ms once per process, against 0.6 to 0.9 s
for the whole reuse (hashing the checkpoint for the key, OpenVINO's compile of the IR).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from tphyolo.data.files.bounded_json import read_json_bounded
from tphyolo.data.files.image_limits import IMGSZ_BOUNDS
from tphyolo.errors import InputError
from tphyolo.infer.backends.base import ExportedBackend
from tphyolo.infer.backends.parity import FP32_TOLERANCE, TEST_SEED, relative_error, sample_images
from tphyolo.runtime.compiled_cache import VERDICT, check_files, file_hashes

REFERENCE = "reference.npy"  # PyTorch fp32's output (1, N, 5 + nc) on the reference input
SCHEMA = 3  # bump when the cache's content changes meaning (2: the training size; 3: hashes and the reference)
_VERIFIED: set[tuple[str, str]] = set()  # (entry, its hashes) whose reference output matched in this process


def write_verdict(folder: Path, *, reference: tuple[torch.Tensor, torch.Tensor], **found: Any) -> dict[str, Any]:
    """Write the verdict of the entry being made in `folder`: `found` (ok, relative_error, ...), the reference
    (images made by `sample_images(n, h, w, seed=TEST_SEED)` and PyTorch's output on them, kept as REFERENCE)
    and the SHA-256 of every file in `folder` then. Returns the verdict."""
    images, output = reference
    np.save(folder / REFERENCE, output.detach().float().cpu().numpy(), allow_pickle=False)
    verdict = {**found, "files": file_hashes(folder), "reference": {"seed": TEST_SEED, "shape": list(images.shape)},
               "schema": SCHEMA}  # fmt: skip
    (folder / VERDICT).write_text(json.dumps(verdict, indent=1))
    return verdict


def read_verdict(entry: Path, *, model: str) -> dict[str, Any]:
    """The verdict of `entry`, whose model is the file or folder `model` inside it, after checking that every
    file of the model and the reference are hashed and that each file hashed has its hash. Raises ValueError
    (a CacheFileError for the verdict file itself) naming what did not match."""
    verdict = read_json_bounded(entry / VERDICT)
    if not isinstance(verdict, dict) or verdict.get("schema") != SCHEMA or not isinstance(verdict.get("ok"), bool):
        raise InputError(f"{VERDICT} is not this tphyolo's verdict")
    if not isinstance(verdict.get("relative_error"), float | int):
        raise InputError(f"{VERDICT} holds no relative error")
    own = verdict.get("own_imgsz", "missing")
    if own is not None and (type(own) is not int or own not in IMGSZ_BOUNDS):
        raise InputError(f"{VERDICT} holds no training size (own_imgsz {own!r:.40})")
    files, reference = verdict.get("files"), verdict.get("reference")
    shape = reference.get("shape") if isinstance(reference, dict) else None
    if not (isinstance(shape, list) and len(shape) == 4 and shape[1] == 3 and type(reference.get("seed")) is int
            and all(type(d) is int and 0 < d <= 4096 for d in shape)):  # fmt: skip
        raise InputError(f"{VERDICT} holds no reference input (seed and shape)")
    root = entry / model
    present = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    listed = files if isinstance(files, dict) else {}
    unhashed = [p for p in [*present, entry / REFERENCE] if p.relative_to(entry).as_posix() not in listed]
    if not present or unhashed:
        raise InputError(f"{VERDICT} does not hash {(unhashed or [root])[0].relative_to(entry)}")
    check_files(entry, files)
    return verdict


def check_reference(open_fp32: Callable[[], ExportedBackend], entry: Path,
                    verdict: dict[str, Any]) -> ExportedBackend | None:  # fmt: skip
    """Check, once per process for `entry` as `verdict` hashes it, that its model in fp32 (`open_fp32()`) gives
    PyTorch's output on the reference input within FP32_TOLERANCE. Returns the model it opened, None when the
    entry was checked before. Raises ValueError saying by how much it was not within."""
    key = (str(entry), json.dumps(verdict["files"], sort_keys=True))
    if key in _VERIFIED:
        return None
    backend = open_fp32()
    n, _, h, w = verdict["reference"]["shape"]
    images = sample_images(n, h, w, seed=verdict["reference"]["seed"])
    expected = torch.from_numpy(np.load(entry / REFERENCE, allow_pickle=False))
    with torch.no_grad():
        error = relative_error(backend.run(images), expected)
    if not error <= FP32_TOLERANCE:
        raise InputError(f"its output on the reference input is {error:.1e} from PyTorch's kept in {REFERENCE} "
                         f"(tolerance {FP32_TOLERANCE:.0e})")  # fmt: skip
    _VERIFIED.add(key)
    return backend
