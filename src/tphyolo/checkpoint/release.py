"""YOLOv5 v6.x release weights by name (`yolov5n.pt` ... `yolov5x.pt`): downloaded once into the user cache.

`--weights yolov5x.pt` with no such file in the working folder means the release file: it is looked up in
`<user cache>/weights/` and, when absent, downloaded there from `<base URL>/<name>` with a progress bar. The base
URL is `DEFAULT_ASSETS_URL` or the environment's `TPHYOLO_ASSETS_URL` (a mirror, or a local server on an
air-gapped site).

Integrity: a download counts only when it is complete (as many bytes as the server announced), matches the
sha256 in `RELEASE_SHA256` where the table has one for that name, and passes the caller's `check` (the loader
passes its own loading, through the restricted unpickler, which runs no code from the file); until then it is a
temporary file that is removed on failure, so the cache never holds a partial or foreign file. Without network
the error names the file, its URL and where to put it.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tphyolo.checkpoint.errors import CheckpointError
from tphyolo.data.files.digest import file_sha256
from tphyolo.errors import InputError
from tphyolo.models.build import builtin_model_names
from tphyolo.user_cache import user_cache_dir

DEFAULT_ASSETS_URL = "https://github.com/ultralytics/yolov5/releases/download/v6.2"
ASSETS_URL_ENV = "TPHYOLO_ASSETS_URL"
RELEASE_NAMES = tuple(f"yolov5{size}.pt" for size in "nsmlx")
# name -> sha256 of the release file. An entry is checked when present; names without one are checked for
# completeness and by loading them (module docstring).
RELEASE_SHA256: dict[str, str] = {}
TIMEOUT_S = 30
CHUNK = 1 << 20


class WeightsDownloadError(FileNotFoundError):
    """Release weights that are not in the cache and could not be fetched; the message says what to do."""


def missing_weights_message(weights: str | os.PathLike) -> str:
    """What to say for a `--weights` file that does not exist; for a built-in model name (`tph-yolov5n`), that
    it names an architecture (`--model` of `tphyolo train`) and where checkpoints come from."""
    name = Path(weights).name
    model = name[: -len(".pt")] if name.endswith(".pt") else name
    if model not in builtin_model_names() or Path(weights).parent != Path("."):
        return f"weights file {weights} does not exist"
    return (
        f"weights file {weights} does not exist; {model} names a model architecture, not weights: train one with "
        f"'tphyolo train --model {model}', or give a checkpoint: a run's runs/train/NAME/weights/best.pt, one of "
        "the original TPH-YOLOv5's VisDrone checkpoints (from that project's releases; they load as they are) or "
        f"a YOLOv5 release name ({', '.join(RELEASE_NAMES)}, downloaded)"
    )


def is_release_name(weights: str | os.PathLike) -> bool:
    """Whether `weights` is a bare release file name (`yolov5s.pt`, no folder) with no such local file."""
    path = Path(weights)
    return str(weights) in RELEASE_NAMES and path.name == str(weights) and not path.exists()


def cached_path(name: str, cache_dir: Path | None = None) -> Path:
    """Where release file `name` lives once downloaded."""
    return Path(cache_dir or user_cache_dir()) / "weights" / name


def assets_url(name: str) -> str:
    """The URL of release file `name`: the base URL (`TPHYOLO_ASSETS_URL` or the default) / name."""
    return f"{(os.environ.get(ASSETS_URL_ENV) or DEFAULT_ASSETS_URL).rstrip('/')}/{name}"


def release_weights(
    name: str,
    *,
    cache_dir: Path | None = None,
    progress: bool = True,
    check: Callable[[Path], None] | None = None,
) -> Path:
    """The local file of release weights `name` (one of RELEASE_NAMES), downloading it the first time; a
    download is kept only when `check(path)` raises no ValueError (the checkpoint loader passes its loading).

    Raises WeightsDownloadError (a FileNotFoundError) when it cannot be fetched, naming the URL and where to put
    the file; ValueError (a CheckpointError) when the downloaded file is incomplete, has the wrong sha256 or
    fails `check`."""
    if name not in RELEASE_NAMES:
        raise InputError(f"{name!r} is not a release weights name; known: {list(RELEASE_NAMES)}")
    final = cached_path(name, cache_dir)
    if final.is_file():
        return final
    url = assets_url(name)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{name}.{os.getpid()}.part")
    try:
        _download(url, tmp, name=name, progress=progress)
        _verify(tmp, name=name, url=url, check=check)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    return final


def _download(url: str, tmp: Path, *, name: str, progress: bool) -> None:
    from tqdm import tqdm

    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response, tmp.open("wb") as out:
            total = int(response.headers.get("Content-Length") or 0)
            with tqdm(total=total or None, unit="B", unit_scale=True, desc=f"downloading {name}",
                      disable=not progress) as bar:  # fmt: skip
                while chunk := response.read(CHUNK):
                    out.write(chunk)
                    bar.update(len(chunk))
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", None) or error
        raise WeightsDownloadError(
            f"{name}: not found locally and could not be downloaded from {url} ({reason}); download it there "
            f"and put it at {tmp.with_name(name)}, or give its path to --weights (a mirror: set {ASSETS_URL_ENV})"
        ) from error
    if total and tmp.stat().st_size != total:
        raise CheckpointError(f"{url}: download incomplete ({tmp.stat().st_size} of {total} bytes); try again")


def _verify(tmp: Path, *, name: str, url: str, check: Callable[[Path], None] | None) -> None:
    """Raises CheckpointError when `tmp` has another sha256 than RELEASE_SHA256 gives, or fails `check`."""
    expected = RELEASE_SHA256.get(name)
    if expected is not None:
        digest = file_sha256(tmp)
        if digest != expected:
            raise CheckpointError(f"{url}: sha256 {digest} is not the release file's {expected}")
    if check is None:
        return
    try:
        check(tmp)
    except (ValueError, FileNotFoundError) as error:
        raise CheckpointError(f"{url}: the download is not usable weights: {error}") from error
