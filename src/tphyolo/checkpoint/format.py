"""tphyolo checkpoints: state dicts plus the model yaml, saved atomically and loaded with `weights_only=True`.

A checkpoint file is `torch.save` of one dict of plain data (tensors, dicts, lists, str, int, float, bool,
None):

| key | meaning |
| --- | --- |
| `model` | state dict of the raw (trained) weights |
| `ema` | optional state dict of the exponential moving average of the weights |
| `model_yaml` | the dict the model was built from (`build_model(model_yaml)` rebuilds it) |
| `names`, `nc` | class names (index = class id) and their count |
| `optimizer`, `scaler`, `scheduler` | optional `state_dict()`s for resuming |
| `epoch`, `best_fitness`, `ema_updates`, `train_args`, `rng_state` | optional training progress and settings |
| `pending_gradients` | optional: gradients accumulated towards an optimiser step not yet taken, by parameter |
| `origin` | optional: where a converted checkpoint came from (file, original epoch, ...) |
| `format_version`, `tphyolo_version`, `date` | filled in by `save_checkpoint` |

Which weights are "the model": the EMA when the checkpoint has one, else `model` -- the rule of the original
YOLOv5 loader (`ckpt.get('ema') or ckpt['model']`). `Checkpoint.weights` and `Checkpoint.build_model()`
follow it; resuming uses `Checkpoint.model`, `Checkpoint.ema` and `Checkpoint.state`.

Checkpoints of the original TPH-YOLOv5/YOLOv5 code (pickled module objects) are recognised by
`load_checkpoint` and converted through `tphyolo.checkpoint.legacy` without running any code from the file.
"""

from __future__ import annotations

import collections
import contextlib
import datetime
import logging
import pickle
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import nn

from tphyolo._version import __version__
from tphyolo.checkpoint.errors import CheckpointError
from tphyolo.checkpoint.legacy import read_yolov5_checkpoint
from tphyolo.checkpoint.release import is_release_name, release_weights
from tphyolo.data.files.atomic import write_file_atomic
from tphyolo.models import build_model, convert_original_state_dict

LOGGER = logging.getLogger("tphyolo")
FORMAT_VERSION = 1
REQUIRED_KEYS = ("model", "model_yaml", "names", "nc")
RESUME_KEYS = (
    "optimizer",
    "scaler",
    "scheduler",
    "epoch",
    "best_fitness",
    "ema_updates",
    "train_args",
    "rng_state",
    "pending_gradients",
)
METADATA_KEYS = ("format_version", "tphyolo_version", "date", "origin")
KNOWN_KEYS = (*REQUIRED_KEYS, "ema", *RESUME_KEYS, *METADATA_KEYS)

_PLAIN_SCALARS = (str, int, float, bool, complex, type(None), torch.dtype, torch.Size, torch.device)


@dataclass(frozen=True)
class Checkpoint:
    """A loaded checkpoint.

    model: the raw weights (our key layout); ema: their EMA, or None.
    weights: what "the model" is -- `ema` when present, else `model`.
    model_yaml: the dict to build the model from; names: class names (index = class id).
    state: the resume entries present in the file (`RESUME_KEYS`: optimizer, scaler, scheduler, epoch, ...).
    metadata: `format_version`, `tphyolo_version`, `date` and, for converted files, `origin`.
    """

    path: Path
    model: dict[str, torch.Tensor]
    ema: dict[str, torch.Tensor] | None
    model_yaml: dict[str, Any]
    names: list[str]
    state: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def nc(self) -> int:
        return len(self.names)

    @property
    def weights(self) -> dict[str, torch.Tensor]:
        return self.ema if self.ema is not None else self.model

    def build_model(self) -> nn.Module:
        """The model built from `model_yaml` with `weights` loaded (strict), in eval mode, float32, on CPU.

        The head's anchors come from the weights, so the model no longer needs anchor fitting even when its
        yaml gives only an anchor count (loading them clears `anchors_need_fitting`).
        """
        model = build_model(self.model_yaml, names=self.names, origin=f"{self.path} (its model_yaml)")
        if (misfit := state_dict_misfit(model, self.weights)) is not None:
            raise CheckpointError(f"{self.path}: weights do not fit the model built from its model_yaml: {misfit}")
        model.load_state_dict(self.weights, strict=True)
        return model.eval()

    def payload(self) -> dict[str, Any]:
        """The dict `save_checkpoint` writes for this checkpoint (metadata other than `origin` is refreshed)."""
        payload = {"model": self.model, "model_yaml": self.model_yaml, "names": self.names, "nc": self.nc}
        if self.ema is not None:
            payload["ema"] = self.ema
        if "origin" in self.metadata:
            payload["origin"] = self.metadata["origin"]
        return {**payload, **self.state}


def state_dict_misfit(model: nn.Module, weights: Mapping[str, torch.Tensor], *, shown: int = 3) -> str | None:
    """What keeps `weights` from loading into `model` strictly, in one line (the missing keys, the extra keys
    and the tensors of another shape, each counted with the first `shown` named), or None when they fit."""
    expected = model.state_dict()
    missing = [k for k in expected if k not in weights]
    extra = [k for k in weights if k not in expected]
    reshaped = [f"{k} {tuple(weights[k].shape)} for {tuple(v.shape)}"
                for k, v in expected.items() if k in weights and weights[k].shape != v.shape]  # fmt: skip
    parts = []
    for what, keys in (("missing", missing), ("unexpected", extra), ("of another shape", reshaped)):
        if keys:
            more = f", ... ({len(keys) - shown} more)" if len(keys) > shown else ""
            parts.append(f"{len(keys)} {what} ({', '.join(keys[:shown])}{more})")
    return "; ".join(parts) or None


def _check_plain(value: Any, where: str) -> None:
    """Raises TypeError at the first value `torch.load(weights_only=True)` could not read back.

    Types are matched exactly: subclasses (defaultdict, namedtuple, IntEnum, ...) pickle by class name.
    """
    if type(value) in _PLAIN_SCALARS or type(value) in (torch.Tensor, nn.Parameter):
        return
    if type(value) in (dict, collections.OrderedDict):
        for key, item in value.items():
            if type(key) not in (str, int):
                raise TypeError(f"{where}: dict key {key!r} is a {type(key).__name__}; use str or int keys")
            _check_plain(item, f"{where}[{key!r}]")
        return
    if type(value) in (list, tuple, set):
        for i, item in enumerate(value):
            _check_plain(item, f"{where}[{i}]")
        return
    raise TypeError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}; checkpoints hold only tensors and "
        "plain data (dict, list, tuple, str, int, float, bool, None): convert it (e.g. numpy -> tensor)"
    )


def _validate(payload: Mapping[str, Any], source: str) -> None:
    unknown = sorted(set(payload) - set(KNOWN_KEYS))
    if unknown:
        raise CheckpointError(f"{source}: unknown checkpoint keys {unknown}; known: {list(KNOWN_KEYS)}")
    missing = [k for k in REQUIRED_KEYS if k not in payload]
    if missing:
        raise CheckpointError(f"{source}: checkpoint lacks {missing}")
    for key in ("model", "ema"):
        weights = payload.get(key)
        if key == "ema" and weights is None:
            continue
        if not isinstance(weights, Mapping) or not all(isinstance(v, torch.Tensor) for v in weights.values()):
            raise CheckpointError(f"{source}: '{key}' must be a state dict of tensors")
        if (odd := next((k for k in weights if type(k) is not str), None)) is not None:
            raise CheckpointError(
                f"{source}: '{key}' must be a state dict with parameter names as keys, got the key {odd!r:.40} "
                f"({type(odd).__name__})"
            )
    if not isinstance(payload["model_yaml"], Mapping):
        raise CheckpointError(f"{source}: 'model_yaml' must be a dict, got {type(payload['model_yaml']).__name__}")
    names, nc = payload["names"], payload["nc"]
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise CheckpointError(f"{source}: 'names' must be a list of strings")
    yaml_nc = payload["model_yaml"].get("nc", nc)
    if type(nc) is not int or nc != len(names) or yaml_nc != nc:
        raise CheckpointError(
            f"{source}: class counts disagree: nc={nc!r}, {len(names)} names, model_yaml nc={yaml_nc!r}"
        )


def save_checkpoint(path: str | Path, payload: Mapping[str, Any]) -> Path:
    """Writes `payload` (keys in the module docstring) to `path` atomically; returns the path.

    `format_version`, `tphyolo_version` and `date` (UTC, ISO 8601) are filled in. The file is written to a
    temporary file in the same folder (`atomic_torch_save`), flushed and fsynced, then renamed over `path` and
    the folder fsynced: `path` holds either its old content or the complete new checkpoint, never a partial one.
    Raises CheckpointError (bad keys or counts) or TypeError (a value that is not plain data) before writing.
    """
    path = Path(path)
    payload = {
        **payload,
        "format_version": FORMAT_VERSION,
        "tphyolo_version": __version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    _validate(payload, str(path))
    _check_plain(payload, str(path))
    return atomic_torch_save(payload, path)


def atomic_torch_save(obj: Any, path: str | Path) -> Path:
    """`torch.save(obj)` to `path` atomically, as `tphyolo.data.files.atomic.write_file_atomic` writes: to a
    temporary file beside it (which `clear_stale` removes once its writer is gone), fsynced, renamed over `path`,
    the folder fsynced. `path` keeps its old content on any failure, and the temporary file is removed; an
    OSError (e.g. a full disk, which the serializer would report as a bare "unexpected pos") is raised naming
    `path`. Returns the path."""
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot save {path}: folder {path.parent} does not exist")

    def save(file: BinaryIO) -> None:
        writer = _RecordingWriter(file)
        try:
            torch.save(obj, writer)
        except RuntimeError:
            if writer.error is None:
                raise
            raise writer.error from None

    return write_file_atomic(path, save)


class _RecordingWriter:
    """A binary file for `torch.save` that keeps the OSError its writes raised: the serializer turns a failed
    write (a full disk) into `RuntimeError: unexpected pos ...`, and `error` says what happened."""

    def __init__(self, file: BinaryIO) -> None:
        self._file = file
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            return self._file.write(data)
        except OSError as error:
            self.error = self.error or error
            raise

    def flush(self) -> None:
        self._file.flush()


def remove_stale_temp_files(folder: str | Path) -> list[Path]:
    """Remove the temporary files an interrupted `save_checkpoint` left in `folder` (`.STEM.PID.tmp.pt`, as
    `tphyolo.data.files.atomic` names them; `.NAME.pt.*.tmp` from earlier versions); returns them. Call it only
    when no save into `folder` is under way."""
    stale = sorted({*Path(folder).glob(".*.*.tmp.pt"), *Path(folder).glob(".*.pt.*.tmp")})
    for path in stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return stale


def _verify_archive(path: Path) -> None:
    """Checks that `path` is a complete zip archive whose records match their CRC-32."""
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if info.CRC == 0 and info.file_size > 0:  # written with CRC computation disabled
                    continue
                with archive.open(info) as record:
                    while record.read(1 << 24):
                        pass
    except (zipfile.BadZipFile, OSError, EOFError) as error:
        raise CheckpointError(
            f"{path}: not a readable checkpoint ({error}); the file is truncated, corrupt or not a PyTorch file"
        ) from error


def _from_payload(path: Path, payload: Any) -> Checkpoint:
    if not isinstance(payload, dict) or "format_version" not in payload:
        keys = sorted(map(str, payload))[:20] if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(
            f"{path}: not a tphyolo checkpoint (no 'format_version'; found {keys}). A bare state dict cannot be "
            "loaded: the model yaml is needed too"
        )
    version = payload["format_version"]
    if type(version) is not int or version < 1:
        raise CheckpointError(
            f"{path}: malformed checkpoint: 'format_version' must be an integer >= 1, got {version!r:.40}"
        )
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"{path}: checkpoint format {version!r} is newer than this tphyolo ({__version__}) reads "
            f"(format {FORMAT_VERSION}); upgrade tphyolo"
        )
    _validate(payload, str(path))
    return Checkpoint(
        path=path,
        model=dict(payload["model"]),
        ema=dict(payload["ema"]) if payload.get("ema") is not None else None,
        model_yaml=dict(payload["model_yaml"]),
        names=list(payload["names"]),
        state={k: payload[k] for k in RESUME_KEYS if k in payload},
        metadata={k: payload[k] for k in METADATA_KEYS if k in payload},
    )


def _from_original(path: Path, map_location: str | torch.device) -> Checkpoint:
    """Converts an original TPH-YOLOv5/YOLOv5 checkpoint; its optimizer state is dropped (other layout)."""
    original = read_yolov5_checkpoint(path)
    model = build_model(original.model_yaml, origin=f"{path} (its model yaml)")
    state_dict = {k: v.float() if v.is_floating_point() else v for k, v in original.state_dict.items()}
    try:
        weights = convert_original_state_dict(state_dict, model)
    except (KeyError, ValueError, RuntimeError) as error:
        raise CheckpointError(f"{path}: original weights do not fit the model of its yaml: {error}") from error
    origin = {
        "format": "yolov5-pickle",
        "file": path.name,
        "weights": original.weights,
        "epoch": original.epoch,
        "best_fitness": original.best_fitness,
        "date": original.date,
    }
    return Checkpoint(
        path=path,
        model={k: v.to(map_location) for k, v in weights.items()},
        ema=None,
        model_yaml=dict(original.model_yaml),
        names=list(original.names),
        metadata={"origin": origin},
    )


def load_checkpoint(path: str | Path, *, map_location: str | torch.device = "cpu") -> Checkpoint:
    """Loads a tphyolo checkpoint, or converts an original TPH-YOLOv5/YOLOv5 one, without running its code.

    tphyolo files are read with `torch.load(weights_only=True)`. A file that needs other globals is handed to
    the restricted legacy unpickler, which accepts original checkpoints and refuses anything else by name
    (`tphyolo.checkpoint.legacy.ForbiddenGlobalError`). Converted checkpoints carry no optimizer state and
    `metadata['origin']` says where they came from. A bare YOLOv5 release name with no such local file
    (`yolov5s.pt`) is the release file, downloaded once (`tphyolo.checkpoint.release`). Raises FileNotFoundError,
    or CheckpointError / LegacyCheckpointError (both ValueError) naming the file for truncated, corrupt or
    foreign files.
    """
    path = release_weights(str(path), check=_check_loads) if is_release_name(path) else Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path}: a folder, not a checkpoint file; give its .pt file (e.g. weights/best.pt)")
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    _verify_archive(path)
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, OSError) as error:
        raise CheckpointError(f"{path}: unreadable checkpoint ({type(error).__name__}: {error})") from error
    except (pickle.UnpicklingError, TypeError, ValueError, AttributeError, IndexError, KeyError):
        # Globals beyond plain data (an original checkpoint, or a hostile file), or records that torch's own
        # rebuild functions choke on (a crafted file): the restricted unpickler reads it or names what is wrong.
        return _from_original(path, map_location)
    checkpoint = _from_payload(path, payload)
    _warn_non_finite(checkpoint)
    return checkpoint


def _check_loads(path: Path) -> None:
    """Raises ValueError naming `path` when it does not load as a checkpoint (a download's last check)."""
    load_checkpoint(path)


def _warn_non_finite(checkpoint: Checkpoint) -> None:
    """Logs a warning naming the file and the first tensors of "the model" (`weights`) holding NaN or inf:
    such a model loads and runs, but detects nothing useful."""
    bad = [k for k, v in checkpoint.weights.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if bad:
        LOGGER.warning(
            "%s: %d weight tensor(s) hold NaN or inf (%s%s); the model's outputs will be meaningless",
            checkpoint.path, len(bad), ", ".join(bad[:3]), ", ..." if len(bad) > 3 else "",
        )  # fmt: skip


def convert_checkpoint(src: str | Path, dst: str | Path) -> Path:
    """Writes any checkpoint `load_checkpoint` reads (tphyolo or original) to `dst` in the tphyolo format, after
    checking that its model builds and its weights fit (CheckpointError naming `src` otherwise); `dst`'s
    folder is created."""
    checkpoint = load_checkpoint(src)
    checkpoint.build_model()
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(dst, checkpoint.payload())
