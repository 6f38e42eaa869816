"""Reading pickled PyTorch zip archives without running anything from them.

Checkpoints of the original TPH-YOLOv5 and YOLOv5 projects pickle whole module objects
(`models.yolo.Model`, `models.common.Conv`, `torch.nn.modules.conv.Conv2d`, ...). `read_archive` unpickles
such a file with `RestrictedUnpickler`, whose global lookup is an allowlist:

- module classes (any global under `models.` or `utils.`, and classes under `torch.nn.modules.`) become
  inert `LegacyObject` records that only keep the pickled attribute dict (`_parameters`, `_buffers`,
  `_modules`, `yaml`, `names`, ...); no code of those classes is imported or run;
- tensors and storages are rebuilt by this module's own functions from the archive's raw records;
- a few plain-data constructors are allowed (`collections.OrderedDict`, `set`, torch dtypes, `torch.Size`,
  paths as strings); numeric numpy arrays and scalars are rebuilt from raw bytes by `numpy_records`;
- every other global raises `ForbiddenGlobalError`, naming the global and the file, before anything
  from the file is called.

The archive is read with `zipfile`, so every record's CRC-32 is checked as it is read.
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import pathlib
import pickle
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import torch

from tphyolo.checkpoint.legacy import numpy_records, tensor_records
from tphyolo.checkpoint.legacy.errors import ForbiddenGlobalError, LegacyCheckpointError, MalformedRecordError


class LegacyObject:
    """An inert record of a pickled object whose class this project does not import.

    `legacy_class` is the pickled class name (e.g. "models.common.Conv"); the instance `__dict__` holds
    the pickled state as is. Constructor arguments (from a REDUCE opcode) are kept in `init_args`.
    """

    legacy_class: ClassVar[str] = "<unknown>"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.__dict__["init_args"] = (args, kwargs)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
            dict_state, slot_state = state
            for part in (dict_state, slot_state):
                if part is not None:
                    self.__setstate__(part)
            return
        if not isinstance(state, dict):
            raise MalformedRecordError(
                f"pickled {self.legacy_class} has state of type {type(state).__name__}, expected a dict"
            )
        # Dunder names would reach the unpickler's own protocol (an instance `__setstate__` is called on BUILD).
        bad = [k for k in state if not isinstance(k, str) or k.startswith("__")]
        if bad:
            raise MalformedRecordError(f"pickled {self.legacy_class} has disallowed attribute names {bad[:5]}")
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.legacy_class}>"


def _bytes_from_text(text: Any, encoding: Any) -> bytes:
    """Protocol-2 pickles spell bytes as `_codecs.encode(text, "latin1")`."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise MalformedRecordError(f"unexpected bytes record encode({type(text).__name__}, {encoding!r})")
    return text.encode("latin1")


def _path_as_text(*parts: Any) -> str:
    """Pickled pathlib paths come back as strings."""
    if not all(isinstance(p, str) for p in parts):
        raise MalformedRecordError(f"path parts must be strings, got {parts!r}")
    return str(pathlib.PurePosixPath(*parts))


def _allowed_globals() -> dict[str, Any]:
    allowed: dict[str, Any] = {
        "collections.OrderedDict": collections.OrderedDict,
        "builtins.set": set,
        "builtins.frozenset": frozenset,
        "builtins.complex": complex,
        "_codecs.encode": _bytes_from_text,
        "torch.Size": torch.Size,
        "torch._utils._rebuild_tensor": tensor_records.rebuild_tensor,
        "torch._utils._rebuild_tensor_v2": tensor_records.rebuild_tensor_v2,
        "torch._utils._rebuild_tensor_v3": tensor_records.rebuild_tensor_v3,
        "torch._utils._rebuild_parameter": tensor_records.rebuild_parameter,
        "torch._utils._rebuild_parameter_with_state": tensor_records.rebuild_parameter,
    }
    for name, dtype in tensor_records.DTYPES.items():
        allowed[f"torch.{name}"] = dtype
    for module in ("torch", "torch.storage"):
        for name in tensor_records.STORAGE_DTYPES:
            allowed[f"{module}.{name}"] = tensor_records.StorageType(name)
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        allowed[f"{module}._reconstruct"] = numpy_records.reconstruct
        allowed[f"{module}.scalar"] = numpy_records.scalar
    allowed["numpy.ndarray"] = numpy_records.NumpyArray
    allowed["numpy.dtype"] = numpy_records.NumpyDtype
    for cls in ("Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath"):
        allowed[f"pathlib.{cls}"] = _path_as_text
    return allowed


# A protocol-2 pickle of torch's legacy magic number 0x1950a86a20f9469cfc6c starts pre-1.6 files.
_PRE_ZIP_MAGIC = bytes.fromhex("80028a0a6cfc9c46f9206aa85019")

_RECORDED_PREFIXES = ("models.", "utils.")
_RECORDED_GLOBALS = frozenset({"argparse.Namespace"})


def _is_recorded_class(module: str, name: str) -> bool:
    """Globals that become `LegacyObject` records: the original project's classes and torch.nn modules."""
    if not name.isidentifier():
        return False
    if f"{module}.{name}" in _RECORDED_GLOBALS:
        return True
    if module in ("models", "utils") or module.startswith(_RECORDED_PREFIXES):
        return True
    return module.startswith("torch.nn.modules.") and name[:1].isupper()


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickles one `data.pkl` of a torch zip archive; see the module docstring for what it allows.

    `read_record(name)` returns the bytes of the archive record `data/<name>` (a tensor storage).
    """

    def __init__(self, file: io.BufferedIOBase, *, source: str, read_record: Callable[[str], bytes]) -> None:
        super().__init__(file)
        self._source = source
        self._read_record = read_record
        self._allowed = _allowed_globals()
        self._record_classes: dict[str, type[LegacyObject]] = {}
        self._storages: dict[str, tensor_records.Storage] = {}

    def find_class(self, module: str, name: str) -> Any:
        # Python 2 spellings written by protocol <= 2 pickles (`__builtin__.set`, `commands.Popen`).
        module, name = _compat_pickle.NAME_MAPPING.get((module, name), (module, name))
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        qualname = f"{module}.{name}"
        if qualname in self._allowed:
            return self._allowed[qualname]
        if _is_recorded_class(module, name):
            if qualname not in self._record_classes:
                self._record_classes[qualname] = type(name, (LegacyObject,), {"legacy_class": qualname})
            return self._record_classes[qualname]
        raise ForbiddenGlobalError(
            f"{self._source}: refusing to load global {qualname!r}: loading it could run code. Only module "
            "classes (models.*, utils.*, torch.nn.modules.*), tensors and plain data are accepted"
        )

    def persistent_load(self, pid: Any) -> tensor_records.Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise LegacyCheckpointError(f"{self._source}: unsupported persistent record {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        well_formed = type(numel) is int and numel >= 0 and isinstance(key, str)
        if not (well_formed and isinstance(storage_type, tensor_records.StorageType)):
            raise LegacyCheckpointError(f"{self._source}: malformed storage record {pid!r:.80}")
        if key not in self._storages:
            self._storages[key] = tensor_records.read_storage(storage_type, self._read_record(key), numel)
        return self._storages[key]


def _read_member(archive: zipfile.ZipFile, name: str, source: str) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise LegacyCheckpointError(f"{source}: archive has no record {name!r}") from None
    if info.compress_type != zipfile.ZIP_STORED:  # torch.save never compresses; refuse zip bombs
        raise LegacyCheckpointError(f"{source}: record {name!r} is compressed, which torch.save never writes")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise LegacyCheckpointError(f"{source}: corrupt record {name!r} ({error})") from error


def read_archive(path: str | Path) -> Any:
    """Unpickles the torch zip archive at `path` with `RestrictedUnpickler`; returns the pickled object.

    Module objects come back as `LegacyObject` records and tensors as CPU tensors in their stored dtype.
    Raises `ForbiddenGlobalError` for a disallowed global and `LegacyCheckpointError` for a file that is
    not a readable torch zip archive; both name the file.
    """
    source = str(path)
    with open(path, "rb") as file:
        if file.read(len(_PRE_ZIP_MAGIC)) == _PRE_ZIP_MAGIC:
            raise LegacyCheckpointError(
                f"{source}: saved in PyTorch's pre-1.6 (non-zip) format, which is not supported; "
                "re-save it with torch.save under PyTorch >= 1.6 where its original code is installed"
            )
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise LegacyCheckpointError(
            f"{source}: not a readable PyTorch zip archive ({error}); the file may be truncated or corrupt"
        ) from error
    with archive:
        pickles = [n for n in archive.namelist() if n.endswith("data.pkl") and n.count("/") <= 1]
        if len(pickles) != 1:
            raise LegacyCheckpointError(f"{source}: expected one data.pkl in the archive, found {pickles}")
        prefix = pickles[0].removesuffix("data.pkl")
        byteorder = prefix + "byteorder"
        if byteorder in archive.namelist():
            order = _read_member(archive, byteorder, source).decode(errors="replace")
            if order != sys.byteorder:
                raise LegacyCheckpointError(f"{source}: stored as {order}-endian, this machine is {sys.byteorder}")
        unpickler = RestrictedUnpickler(
            io.BytesIO(_read_member(archive, pickles[0], source)),
            source=source,
            read_record=lambda key: _read_member(archive, f"{prefix}data/{key}", source),
        )
        try:
            return unpickler.load()
        except LegacyCheckpointError:
            raise
        except MalformedRecordError as error:
            raise LegacyCheckpointError(f"{source}: {error}") from error
        except Exception as error:  # any failure inside the pickle stream means a corrupt file
            raise LegacyCheckpointError(f"{source}: corrupt pickle ({type(error).__name__}: {error})") from error
