"""Pickled numpy arrays and scalars, rebuilt from their raw bytes without numpy's unpickling code.

Original checkpoints hold a few numpy values (YOLOv5's `best_fitness` is a 1-element float64 array). A
pickle spells them as `numpy.dtype(spec, align, copy)` + BUILD(state), `_reconstruct(ndarray, shape, typecode)`
+ BUILD(state) and `scalar(dtype, raw bytes)`. These records accept only numeric dtypes (bool, int, uint,
float, complex) and build values with `np.frombuffer`, so no object arrays and no `__setstate__` of numpy
objects are involved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tphyolo.checkpoint.legacy.errors import MalformedRecordError

_NUMERIC_KINDS = "biufc"


class NumpyDtype:
    """Record of a pickled `numpy.dtype`; `resolve()` gives the numeric dtype with its byte order."""

    def __init__(self, spec: Any, align: Any = False, copy: Any = False) -> None:
        if not isinstance(spec, str):
            raise MalformedRecordError(f"numpy dtype spec must be a string, got {type(spec).__name__}")
        try:
            self._dtype = np.dtype(spec)
        except TypeError as error:
            raise MalformedRecordError(f"unknown numpy dtype {spec!r}") from error
        if self._dtype.kind not in _NUMERIC_KINDS:
            raise MalformedRecordError(f"numpy dtype {spec!r} is not numeric (object and structured arrays refused)")
        self._byteorder = "="

    def __setstate__(self, state: Any) -> None:
        # (version, byteorder, subarray, names, fields, elsize, alignment, flags) for numeric dtypes.
        if not (isinstance(state, tuple) and len(state) >= 5 and state[1] in ("<", ">", "|", "=")):
            raise MalformedRecordError(f"unexpected numpy dtype state {state!r:.80}")
        if any(part is not None for part in state[2:5]):
            raise MalformedRecordError("structured or sub-array numpy dtypes are refused")
        self._byteorder = state[1]

    def resolve(self) -> np.dtype:
        return self._dtype.newbyteorder(self._byteorder) if self._byteorder in "<>" else self._dtype


class NumpyArray:
    """Record of a pickled `numpy.ndarray`; `array` holds the value once the pickle's BUILD has run."""

    def __init__(self) -> None:
        self.array: np.ndarray | None = None

    def __setstate__(self, state: Any) -> None:
        if not (isinstance(state, tuple) and len(state) == 5):
            raise MalformedRecordError(f"unexpected numpy array state {state!r:.80}")
        _version, shape, dtype, fortran_order, raw = state
        if not isinstance(dtype, NumpyDtype) or not isinstance(raw, (bytes, bytearray)):
            raise MalformedRecordError("numpy array state must hold a numeric dtype and raw bytes")
        if not (isinstance(shape, tuple) and all(type(n) is int and n >= 0 for n in shape)):
            raise MalformedRecordError(f"numpy array shape must be a tuple of ints, got {shape!r:.80}")
        flat = np.frombuffer(bytes(raw), dtype=dtype.resolve())
        if flat.size != int(np.prod(shape)):
            raise MalformedRecordError(f"numpy array of shape {shape} holds {flat.size} values")
        self.array = flat.reshape(shape, order="F" if fortran_order else "C").copy()


def reconstruct(subtype: Any, shape: Any, typecode: Any) -> NumpyArray:
    """Stands for `numpy.core.multiarray._reconstruct`: an empty array record filled by the next BUILD."""
    if subtype is not NumpyArray:
        raise MalformedRecordError(f"numpy array subtype {subtype!r:.60} is refused")
    return NumpyArray()


def scalar(dtype: Any, raw: Any) -> int | float | complex | bool:
    """Stands for `numpy.core.multiarray.scalar`: the value as a Python number."""
    if not isinstance(dtype, NumpyDtype) or not isinstance(raw, (bytes, bytearray)):
        raise MalformedRecordError("numpy scalar must be a numeric dtype and raw bytes")
    values = np.frombuffer(bytes(raw), dtype=dtype.resolve())
    if values.size != 1:
        raise MalformedRecordError(f"numpy scalar holds {values.size} values")
    return values[0].item()
