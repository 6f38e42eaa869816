"""What a resumable prediction run records of its inputs, and the check a resume makes against it, so that one
run folder never holds the outputs of two models or two source lists.

A run folder's SETTINGS_FILE holds the run's job (`tphyolo.runtime.run_dir.job_data`) beside that record, and a resume
must ask for the same results: `check_same_job` refuses a job that differs from the saved one in any setting but
those that only say where and how fast the run computes (`FREE_ON_RESUME`: the runtime, the device, the batch
size, the run folder's place, the resume folder itself) and the source text, whose resolved files the record
checks instead (a source gone is allowed). So thresholds, sizes, classes, TTA, slicing, the classifier, the
weights and the files written must all be the run's.

A run records (`run_fingerprint`) the SHA-256 of each weights file (of each file of a weights folder, such as an
OpenVINO IR) and the sources it resolved, each path made absolute: a resume from another working directory
(`--resume RUN_DIR` reads the run's flags with their paths made absolute) finds them under the same names.
`check_resumed` compares them with what a resume finds: changed weights or an added source is refused in one
line naming it; a source that is gone is returned, for the caller to name, and the run goes on with the rest. A
raster run also records its raster's size (`raster_fingerprint`): its journal counts rows of tiles by position,
so a raster that changed is refused too.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tphyolo.data.files.digest import update_with_file
from tphyolo.errors import InputError
from tphyolo.predict.sources import Stream, is_stream
from tphyolo.runtime.run_dir import JOB_KEY, differences, job_data, job_from_data

# What a resume may change (dotted names of a job's settings, each with what lies under it): where and how fast
# the run computes, and where its folder is; none of them changes what the run finds or writes.
FREE_ON_RESUME = ("inputs.source", "inputs.resume", "output", "detector.runtime", "detector.device",
                  "detector.inference.batch")  # fmt: skip


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        digest.update(str(file.relative_to(path) if path.is_dir() else "").encode())
        update_with_file(digest, file)
    return digest.hexdigest()


def weights_digests(weights: str | Sequence[str]) -> dict[str, str]:
    """Each weights entry (a path made absolute) -> the SHA-256 of its file (or folder's files); an entry that is
    not a path (a release name) -> itself."""
    entries = [weights] if isinstance(weights, (str, Path)) else list(weights)
    return {os.path.abspath(w) if Path(w).exists() else str(w): _sha256(Path(w)) if Path(w).exists() else str(w)
            for w in entries}  # fmt: skip


def source_list(files: Sequence[Path | Stream]) -> list[str]:
    """The resolved sources as text: absolute paths, stream URLs and webcam indices."""
    return [f.source if isinstance(f, Stream) else os.path.abspath(f) for f in files]


def _recorded_path(entry: object) -> str:
    """An entry of a run's record as `source_list` and `weights_digests` name it now: a relative path recorded
    by an earlier version is taken from the working directory, as that version resolved it."""
    text = str(entry)
    return text if is_stream(text) or not Path(text).exists() else os.path.abspath(text)


def run_fingerprint(weights: str | Sequence[str], files: Sequence[Path | Stream]) -> dict[str, Any]:
    """What a resume checks (module docstring): {"weights_sha256": {entry: digest}, "sources": [...]}."""
    return {"weights_sha256": weights_digests(weights), "sources": source_list(files)}


def check_resumed(
    saved: Mapping[str, Any], weights: str | Sequence[str], files: Sequence[Path | Stream], *, where: str
) -> list[str]:
    """The sources of the saved run (`saved`, read from `where`) that are gone. Raises ValueError naming `where`
    and what changed when a weights file differs from the run's or a source was added. A record without the
    fingerprint (an older run) is not checked."""
    recorded = saved.get("weights_sha256")
    if isinstance(recorded, Mapping):
        recorded = {_recorded_path(entry): digest for entry, digest in recorded.items()}
        for entry, digest in weights_digests(weights).items():
            if recorded.get(entry) != digest:
                raise InputError(
                    f"{where}: weights {entry} changed since the run began (SHA-256 {str(recorded.get(entry))[:12]} "
                    f"then, {digest[:12]} now); start a new run instead of resuming this one"
                )
    sources = saved.get("sources")
    if not isinstance(sources, list):
        return []
    now, then = source_list(files), {_recorded_path(s) for s in sources}
    added = [s for s in now if s not in then]
    if added:
        raise InputError(f"{where}: source {added[0]} was not among the run's sources ({len(added)} added); "
                         "start a new run for them")  # fmt: skip
    present = set(now)
    return [str(s) for s in sources if _recorded_path(s) not in present]


def raster_fingerprint(path: Path, *, width: int, height: int) -> dict[str, Any]:
    """What a raster run records of its raster beside `run_fingerprint` (its rows are journaled by position,
    so a resume must find the same raster): size in bytes and in pixels. Hashing gigabytes is left out."""
    return {"bytes": Path(path).stat().st_size, "width": int(width), "height": int(height)}


def check_raster_resumed(saved: Mapping[str, Any], path: Path, fingerprint: Mapping[str, Any], *, where: str) -> None:
    """Raises ValueError naming `where` when the raster `path` differs from the one the run recorded (a record
    without one, an older run, is not checked)."""
    recorded = saved.get("raster")
    if isinstance(recorded, Mapping) and dict(recorded) != dict(fingerprint):
        then = ", ".join(f"{k} {recorded.get(k)}" for k in fingerprint)
        now = ", ".join(f"{k} {v}" for k, v in fingerprint.items())
        raise InputError(f"{where}: raster {path} changed since the run began ({then} then; {now} now); "
                         "start a new run instead of resuming this one")  # fmt: skip


def check_same_job(saved: Mapping[str, Any], job: Any, *, where: str) -> None:
    """Raises InputError naming `where` when the job `saved` (a run folder's settings, read from `where`) holds
    differs from `job` in a setting that changes results (module docstring), naming each such setting with
    both values; also for settings written by an older version (command-line flags, no job)."""
    if JOB_KEY not in saved:
        raise InputError(f"{where}: written by an older tphyolo (its settings are command-line flags); "
                         f"'tphyolo predict --resume {Path(where).parent}' reads and converts it")  # fmt: skip
    then = job_data(job_from_data(type(job), saved[JOB_KEY], where=where))
    changed = [(name, old, new) for name, old, new in differences(then, job_data(job))
               if not any(name == free or name.startswith(f"{free}.") for free in FREE_ON_RESUME)]  # fmt: skip
    if changed:
        shown = "; ".join(f"{name} {old!r} then, {new!r} now" for name, old, new in changed)
        raise InputError(f"{where}: the run was made with other settings ({shown}); resume it with its own "
                         "(tphyolo predict --resume RUN_DIR) or start a new run")  # fmt: skip
