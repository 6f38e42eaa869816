"""The compiled-checkpoint cache is not trusted blindly: a damaged entry is found by its hashes or its reference
output and compiled again; a bad cache file is a miss in one line; a cache that cannot be written means running
without it; eviction spares what tphyolo did not make (`tphyolo.infer.backends.compiled`)."""

import errno
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.helpers import seeded_checkpoint

from tphyolo.data.builtin.synthetic import split_scene
from tphyolo.infer.backends import OpenVINOBackend, compiled
from tphyolo.infer.backends.compiled import CACHE_ENV, cache_entry, load_compiled
from tphyolo.infer.backends.compiled_verdict import REFERENCE, VERDICT
from tphyolo.infer.backends.pytorch import TorchBackend
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.compiled_cache import LIMIT_ENV, MARKER, STALE_S, file_hashes, write_marker

pytest.importorskip("openvino")

NAMES = ["car", "van", "bus"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return seeded_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt", NAMES)


@pytest.fixture(scope="module")
def clean(checkpoint, tmp_path_factory):
    """(the entry compiled once into a cache of its own, the detections of a scene from it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("clean") / "cache"))
        found = detections(checkpoint)
        return cache_entry(checkpoint, runtime="openvino", fuse=True), found


def detections(checkpoint: Path) -> list[np.ndarray]:
    """The boxes, scores and labels the default Predictor finds in fp32 (at a low threshold) in a built-in scene:
    fp32, so that no bf16 check, timed on this machine, decides the precision."""
    scene = split_scene("val", 0, imgsz=320)[0]
    (found,) = Predictor(str(checkpoint), imgsz=128, device="cpu", conf=0.001, precision="fp32").predict_images([scene])
    return [np.asarray(found.boxes), np.asarray(found.scores), np.asarray(found.labels)]


def cache_with(entry: Path, folder: Path, monkeypatch) -> Path:
    """A cache at `folder` (marked as tphyolo's) holding a copy of `entry`, in use for the test; the copy."""
    monkeypatch.setenv(CACHE_ENV, str(folder))
    folder.mkdir()
    write_marker(folder, "cache")
    return Path(shutil.copytree(entry, folder / entry.name))


def open_ir(entry: Path) -> OpenVINOBackend:
    return OpenVINOBackend(entry / "model_openvino_model", device=torch.device("cpu"))


def lines(caplog) -> list[str]:
    """The package's lines, less the runtime probe's (a PyTorch model's layout)."""
    return [r.getMessage() for r in caplog.records if not r.getMessage().startswith("runtime probe (")]


def test_a_bit_flipped_model_is_found_and_compiled_again(clean, checkpoint, tmp_path, monkeypatch, caplog):
    """Before, an IR with a bit flipped in every 4 KiB (same size) was reused, and found nothing."""
    entry, expected = clean
    copy = cache_with(entry, tmp_path / "cache", monkeypatch)
    weights = copy / "model_openvino_model" / "model.bin"
    data = bytearray(weights.read_bytes())
    data[3::4096] = bytes(b ^ 0x40 for b in data[3::4096])  # an exponent bit of a float32 weight
    weights.write_bytes(bytes(data))
    damaged = open_ir(copy)
    images = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(damaged.run(images), open_ir(entry).run(images), atol=1e-3)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        found = detections(checkpoint)
    (line,) = [m for m in lines(caplog) if "unreadable" in m]
    assert line == (f"{checkpoint} on OpenVINO (fp32): the cached model in {copy} is unreadable "
                    "(model_openvino_model/model.bin differs from its SHA-256 in check.json); compiling it again")
    assert not [m for m in lines(caplog) if "reusing" in m]
    assert len(expected[0]) > 0 and all(np.array_equal(a, b) for a, b in zip(found, expected, strict=True))


def test_an_entry_whose_output_left_its_reference_is_compiled_again(clean, checkpoint, tmp_path, monkeypatch,
                                                                     caplog):  # fmt: skip
    """What the hashes cannot see (the runtime reads the same file differently) the reference output finds,
    once per process and entry."""
    entry, _ = clean
    copy = cache_with(entry, tmp_path / "cache", monkeypatch)
    reference = np.load(copy / REFERENCE)
    np.save(copy / REFERENCE, reference * 2)
    verdict = (copy / VERDICT).read_text()
    old, new = file_hashes(entry)[REFERENCE], file_hashes(copy)[REFERENCE]
    (copy / VERDICT).write_text(verdict.replace(old, new))  # the hashes agree with the changed file
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        assert load_compiled(checkpoint) is not None
    (line,) = [m for m in lines(caplog) if "unreadable" in m]
    assert "its output on the reference input is" in line and f"from PyTorch's kept in {REFERENCE}" in line
    assert np.array_equal(np.load(copy / REFERENCE), reference)  # compiled again: the true reference


@pytest.mark.parametrize("data", [b"[" * 100000, b"[]"])
def test_a_malformed_verdict_is_a_miss_in_one_line(clean, checkpoint, tmp_path, monkeypatch, caplog, data):
    """Before, a verdict nested 100,000 deep ended every run in RecursionError until deleted by hand."""
    entry, _ = clean
    copy = cache_with(entry, tmp_path / "cache", monkeypatch)
    (copy / VERDICT).write_bytes(data)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        assert load_compiled(checkpoint) is not None
    (line,) = [m for m in lines(caplog) if "unreadable" in m]
    assert line.endswith("; compiling it again") and "\n" not in line


def test_a_users_folder_in_the_cache_path_is_never_evicted(checkpoint, tmp_path, monkeypatch, caplog):
    """Before, with $TPHYOLO_MODEL_CACHE at a project, the first compile over the limit removed every folder of it
    holding a check.json."""
    project = tmp_path / "project"
    (project / "experiment").mkdir(parents=True)
    (project / "experiment" / "check.json").write_text("{}")
    os.utime(project / "experiment", (1e9, 1e9))
    monkeypatch.setenv(CACHE_ENV, str(project))
    monkeypatch.setenv(LIMIT_ENV, "0")
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        assert load_compiled(checkpoint) is not None
    assert (project / "experiment" / "check.json").is_file() and not (project / MARKER).exists()
    (line,) = [m for m in lines(caplog) if "not a folder tphyolo made" in m]
    assert line.startswith(f"compiled-model cache {project}: ")


def test_a_stale_staging_folder_goes_on_the_next_compile_a_fresh_one_stays(checkpoint, tmp_path, monkeypatch):
    """Before, a compile killed with -9 left its `.NAME.PID.tmp` until the same entry was written again."""
    cache = tmp_path / "cache"
    cache.mkdir()
    write_marker(cache, "cache")
    stale, fresh = cache / ".other-0123456789abcdef.4000001.tmp", cache / ".other-0123456789abcdef.4000002.tmp"
    for folder in (stale, fresh):
        (folder / "model_openvino_model").mkdir(parents=True)
    day_ago = time.time() - STALE_S - 60
    os.utime(stale, (day_ago, day_ago))
    monkeypatch.setenv(CACHE_ENV, str(cache))
    assert load_compiled(checkpoint) is not None
    assert not stale.exists() and fresh.exists()


@pytest.mark.parametrize("code", [errno.EROFS, errno.ENOSPC])
def test_a_cache_that_cannot_be_written_runs_uncached_and_says_which(checkpoint, tmp_path, monkeypatch, caplog,
                                                                     code):  # fmt: skip
    """Before, a read-only or full cache ended predict with exit 2 and an error naming a staging path. We run as
    root, where chmod does not stop writes: the fault is injected where the entry is written."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(cache))

    def refused(path):
        raise OSError(code, os.strerror(code), str(Path(path).parent / f".{Path(path).name}.123.tmp"))

    monkeypatch.setattr(compiled, "atomic_path", refused)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu", precision="fp32")
    assert isinstance(predictor.backends[0].compiled, OpenVINOBackend)
    assert len(predictor.predict_images([split_scene("val", 0, imgsz=320)[0]])) == 1
    (line,) = [m for m in lines(caplog) if "cannot write" in m]
    cause = {errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on device"}[code]
    assert line.endswith(f"cannot write the compiled-model cache {cache} ({cause}); compiling into a temporary "
                         "folder, not cached") and ".tmp" not in line  # fmt: skip
    scratch = predictor.backends[0].compiled.path
    assert scratch.exists() and not str(scratch).startswith(str(cache))
    caplog.clear()

    def no_temporary(**kwargs):
        raise OSError(code, os.strerror(code), "/tmp/tphyolo-compiled-x")

    monkeypatch.setattr(compiled.tempfile, "TemporaryDirectory", no_temporary)
    with caplog.at_level(logging.INFO, logger="tphyolo"):
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu", precision="fp32")
    assert isinstance(predictor.backends[0], TorchBackend)
    (line,) = [m for m in lines(caplog) if "temporary folder either" in m]
    assert line.endswith(f"cannot compile into a temporary folder either ({cause}): running PyTorch")
