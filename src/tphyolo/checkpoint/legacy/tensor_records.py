"""Tensors of a pickled PyTorch archive, rebuilt from its raw storage records.

torch pickles a tensor as `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)` whose
storage is a persistent record `('storage', <FloatStorage/HalfStorage/...>, key, location, numel)`. These
functions stand in for torch's own: they accept only this project's `Storage` (a flat tensor read from the
archive), views inside it, and no backward hooks, and they return plain CPU tensors (parameters included).
"""

from __future__ import annotations

from typing import Any

import torch

from tphyolo.checkpoint.legacy.errors import MalformedRecordError

# Storage class names of torch's pickled storages -> element dtype.
STORAGE_DTYPES: dict[str, torch.dtype] = {
    "DoubleStorage": torch.float64,
    "FloatStorage": torch.float32,
    "HalfStorage": torch.float16,
    "BFloat16Storage": torch.bfloat16,
    "ComplexDoubleStorage": torch.complex128,
    "ComplexFloatStorage": torch.complex64,
    "LongStorage": torch.int64,
    "IntStorage": torch.int32,
    "ShortStorage": torch.int16,
    "CharStorage": torch.int8,
    "ByteStorage": torch.uint8,
    "BoolStorage": torch.bool,
    "UntypedStorage": torch.uint8,
}

DTYPES: dict[str, torch.dtype] = {str(d).removeprefix("torch."): d for d in STORAGE_DTYPES.values()}


class StorageType:
    """Stands for a pickled storage class; carries only its element dtype."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = STORAGE_DTYPES[name]


class Storage:
    """A storage read from the archive: a flat tensor of its element dtype."""

    def __init__(self, flat: torch.Tensor) -> None:
        self.flat = flat


def read_storage(storage_type: StorageType, raw: bytes, numel: int) -> Storage:
    """The storage of `numel` elements held by the record bytes `raw` (CPU, a private copy)."""
    dtype = storage_type.dtype
    n_bytes = numel * dtype.itemsize
    if len(raw) < n_bytes:
        raise MalformedRecordError(f"storage record holds {len(raw)} bytes, expected {n_bytes} (truncated file?)")
    if numel == 0:
        return Storage(torch.empty(0, dtype=dtype))
    return Storage(torch.frombuffer(bytearray(raw[:n_bytes]), dtype=dtype))


def _check_int_tuple(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list, torch.Size)) or not all(type(v) is int for v in value):
        raise MalformedRecordError(f"tensor {what} must be a tuple of ints, got {value!r}")
    return tuple(value)


def _view(storage: Any, offset: Any, size: Any, stride: Any, dtype: torch.dtype | None = None) -> torch.Tensor:
    if not isinstance(storage, Storage) or type(offset) is not int:
        raise MalformedRecordError(f"malformed tensor record (storage {type(storage).__name__})")
    flat = storage.flat if dtype is None else storage.flat.view(torch.uint8).view(dtype)
    size, stride = _check_int_tuple(size, "size"), _check_int_tuple(stride, "stride")
    try:
        return flat.as_strided(size, stride, offset)
    except RuntimeError as error:  # a view reaching outside the storage, negative strides, ...
        raise MalformedRecordError(f"tensor view {size} / {stride} + {offset} does not fit its storage") from error


def _check_no_hooks(backward_hooks: Any) -> None:
    if backward_hooks:
        raise MalformedRecordError("pickled tensor carries backward hooks; refusing to attach them")


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any) -> torch.Tensor:
    return _view(storage, offset, size, stride)


def rebuild_tensor_v2(
    storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any, backward_hooks: Any, *_: Any
) -> torch.Tensor:
    _check_no_hooks(backward_hooks)
    return _view(storage, offset, size, stride)


def rebuild_tensor_v3(
    storage: Any,
    offset: Any,
    size: Any,
    stride: Any,
    requires_grad: Any,
    backward_hooks: Any,
    dtype: Any,
    *_: Any,
) -> torch.Tensor:
    _check_no_hooks(backward_hooks)
    if not isinstance(dtype, torch.dtype):
        raise MalformedRecordError(f"tensor dtype must be a torch.dtype, got {dtype!r}")
    return _view(storage, offset, size, stride, dtype)


def rebuild_parameter(data: Any, requires_grad: Any, backward_hooks: Any, *_: Any) -> torch.Tensor:
    """Parameters come back as plain tensors (any extra pickled parameter state is dropped)."""
    _check_no_hooks(backward_hooks)
    if not isinstance(data, torch.Tensor):
        raise MalformedRecordError(f"parameter data must be a tensor, got {type(data).__name__}")
    return data
