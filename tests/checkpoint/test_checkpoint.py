"""tphyolo checkpoints: round trip, atomic writes, clear errors, and conversion of original checkpoints."""

from __future__ import annotations

import collections
import io
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.helpers import load_parity, parity_file, relative_error

from tphyolo.checkpoint.format import (
    FORMAT_VERSION,
    CheckpointError,
    convert_checkpoint,
    load_checkpoint,
    save_checkpoint,
)
from tphyolo.checkpoint.legacy import ForbiddenGlobalError
from tphyolo.data.files.atomic import clear_stale
from tphyolo.models import build_model

NAMES = ["pedestrian", "car", "bus"]
TOLERANCE = 1e-4  # norm-wise relative error, as in the fixtures' README


@pytest.fixture(scope="module")
def tiny_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("yolov5n", names=NAMES).eval()


def _payload(model: torch.nn.Module, **extra: object) -> dict:
    return {"model": model.state_dict(), "model_yaml": model.yaml, "names": NAMES, "nc": len(NAMES), **extra}


def _shifted(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v + 0.01 if v.is_floating_point() else v.clone() for k, v in state.items()}


def test_round_trip_keeps_everything(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    optimizer = {"state": {0: {"momentum_buffer": torch.ones(2)}}, "param_groups": [{"lr": 0.1, "params": [0]}]}
    ema = _shifted(tiny_model.state_dict())
    resume = {
        "optimizer": optimizer,  # the shape of an optimizer state_dict()
        "epoch": 4,
        "best_fitness": 0.5,
        "ema_updates": 120,
        "train_args": {"imgsz": 640, "hyp": {"lr0": 0.01}},
        "rng_state": {"torch": torch.get_rng_state(), "numpy": [1, 2, 3]},
    }
    path = save_checkpoint(tmp_path / "last.pt", _payload(tiny_model, ema=ema, **resume))

    ckpt = load_checkpoint(path)
    assert ckpt.path == path and ckpt.names == NAMES and ckpt.nc == 3
    assert ckpt.model_yaml == tiny_model.yaml
    assert ckpt.weights is ckpt.ema  # the EMA is "the model" when present
    for key, tensor in tiny_model.state_dict().items():
        assert torch.equal(ckpt.model[key], tensor), key
        assert torch.equal(ckpt.ema[key], ema[key]), key
    assert ckpt.state["epoch"] == 4 and ckpt.state["ema_updates"] == 120
    assert ckpt.state["train_args"] == resume["train_args"]
    assert torch.equal(ckpt.state["rng_state"]["torch"], resume["rng_state"]["torch"])
    assert torch.equal(ckpt.state["optimizer"]["state"][0]["momentum_buffer"], torch.ones(2))
    assert ckpt.metadata["format_version"] == FORMAT_VERSION
    assert set(ckpt.metadata) == {"format_version", "tphyolo_version", "date"}

    rebuilt = ckpt.build_model()
    assert not rebuilt.training and rebuilt.names == NAMES
    for key, tensor in rebuilt.state_dict().items():
        assert torch.equal(tensor, ema[key]), key


def test_without_ema_the_raw_weights_are_the_model(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "best.pt", _payload(tiny_model, ema=None)))
    assert ckpt.ema is None and ckpt.weights is ckpt.model
    image = torch.rand(1, 3, 64, 96)
    with torch.no_grad():
        assert torch.equal(ckpt.build_model()(image), tiny_model(image))


def test_payload_saves_back_unchanged(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    first = load_checkpoint(save_checkpoint(tmp_path / "a.pt", _payload(tiny_model, epoch=2)))
    second = load_checkpoint(save_checkpoint(tmp_path / "b.pt", first.payload()))
    assert second.state == {"epoch": 2} and second.names == first.names
    assert all(torch.equal(second.model[k], v) for k, v in first.model.items())


def test_failed_write_leaves_old_file_and_no_temp(
    tmp_path: Path, tiny_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = save_checkpoint(tmp_path / "last.pt", _payload(tiny_model, epoch=1))

    def fail_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail_replace)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, _payload(tiny_model, epoch=2))
    monkeypatch.undo()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert load_checkpoint(path).state["epoch"] == 1


def test_interrupted_serialization_leaves_no_file(
    tmp_path: Path, tiny_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail_midway(obj: object, file) -> None:  # noqa: ANN001
        file.write(b"PK\x03\x04 partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", fail_midway)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path / "last.pt", _payload(tiny_model))
    assert list(tmp_path.iterdir()) == []


def test_write_is_synced(tmp_path: Path, tiny_model: torch.nn.Module, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    save_checkpoint(tmp_path / "last.pt", _payload(tiny_model))
    assert len(synced) == 2  # the file, then the folder holding the rename


_KILLED_SAVE = """
import os, signal, sys
import torch
from tphyolo.checkpoint.format import atomic_torch_save

class KilledMidWrite:
    def __reduce__(self):
        os.kill(os.getpid(), signal.SIGKILL)

atomic_torch_save({"weights": torch.zeros(4096), "then": KilledMidWrite()}, sys.argv[1])
"""


@pytest.mark.skipif(os.name == "nt", reason="SIGKILL")
def test_the_temporary_of_a_killed_save_is_cleared_by_the_next_write(tmp_path: Path) -> None:
    # Before, checkpoints were written to mkstemp's `.last.pt.XXXX.tmp`, a name clear_stale does not know: a save
    # killed mid-write left it behind for good (only a resumed run's weights folder was swept).
    path = tmp_path / "last.pt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    child = subprocess.run([sys.executable, "-c", _KILLED_SAVE, str(path)], env=env, timeout=120, check=False)
    assert child.returncode == -signal.SIGKILL
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".last.")  # the killed save's temporary
    assert [p.name for p in clear_stale(path)] == left and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hyp": {}}, "unknown checkpoint keys \\['hyp'\\]"),
        ({"names": ["a", "b"]}, "class counts disagree"),
        ({"nc": 4}, "class counts disagree"),
        ({"model": {"w": np.zeros(2)}}, "state dict of tensors"),
    ],
)
def test_bad_payload_is_refused_before_writing(
    tmp_path: Path, tiny_model: torch.nn.Module, change: dict, message: str
) -> None:
    with pytest.raises(CheckpointError, match=message):
        save_checkpoint(tmp_path / "x.pt", {**_payload(tiny_model), **change})
    assert list(tmp_path.iterdir()) == []


def test_missing_folder_is_named(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    with pytest.raises(FileNotFoundError, match="folder .*missing does not exist"):
        save_checkpoint(tmp_path / "missing" / "last.pt", _payload(tiny_model))


def test_non_plain_value_is_named(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    state = np.random.default_rng(0).bit_generator.state["state"]["state"]
    rng_state = {"numpy": ("PCG64", np.array([state], dtype=object))}
    with pytest.raises(TypeError, match=r"\['rng_state'\]\['numpy'\]\[1\] is a numpy.ndarray"):
        save_checkpoint(tmp_path / "x.pt", _payload(tiny_model, rng_state=rng_state))


def test_non_plain_container_is_named(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    train_args = {"counts": collections.defaultdict(int)}
    with pytest.raises(TypeError, match=r"\['train_args'\]\['counts'\] is a collections.defaultdict"):
        save_checkpoint(tmp_path / "x.pt", _payload(tiny_model, train_args=train_args))


def test_weights_that_do_not_fit_the_yaml(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    payload = _payload(tiny_model)
    payload["model_yaml"] = {**tiny_model.yaml, "width_multiple": 0.5}
    ckpt = load_checkpoint(save_checkpoint(tmp_path / "x.pt", payload))
    misfit = r"weights do not fit the model built from its model_yaml: \d+ of another shape \(model\.\d"
    with pytest.raises(CheckpointError, match=misfit):
        ckpt.build_model()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory, tiny_model: torch.nn.Module) -> bytes:
    path = tmp_path_factory.mktemp("saved") / "last.pt"
    return save_checkpoint(path, _payload(tiny_model)).read_bytes()


def test_truncated_file_is_reported(tmp_path: Path, saved: bytes) -> None:
    path = tmp_path / "cut.pt"
    path.write_bytes(saved[: len(saved) * 2 // 3])
    with pytest.raises(CheckpointError, match="truncated") as error:
        load_checkpoint(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize("content", [b"", os.urandom(4096)], ids=["empty", "random"])
def test_foreign_bytes_are_reported(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "noise.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointError, match="not a readable checkpoint") as error:
        load_checkpoint(path)
    assert str(path) in str(error.value)


def test_corrupt_weights_are_reported(tmp_path: Path, saved: bytes) -> None:
    with zipfile.ZipFile(io.BytesIO(saved)) as archive:
        largest = max(archive.infolist(), key=lambda info: info.file_size)  # the largest weight tensor
        record = archive.read(largest)
    data = bytearray(saved)
    data[saved.index(record) + len(record) // 2] ^= 0x01  # records are stored uncompressed
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="CRC") as error:
        load_checkpoint(path)
    assert str(path) in str(error.value)


def test_zip_that_is_not_a_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "notes.pt"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(CheckpointError, match="unreadable checkpoint") as error:
        load_checkpoint(path)
    assert str(path) in str(error.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing.pt"):
        load_checkpoint(tmp_path / "nothing.pt")


def test_bare_state_dict_is_not_a_checkpoint(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    path = tmp_path / "weights.pt"
    torch.save(tiny_model.state_dict(), path)
    with pytest.raises(CheckpointError, match="not a tphyolo checkpoint"):
        load_checkpoint(path)


def test_newer_format_is_refused(tmp_path: Path, tiny_model: torch.nn.Module) -> None:
    path = tmp_path / "future.pt"
    torch.save({**_payload(tiny_model), "format_version": FORMAT_VERSION + 1}, path)
    with pytest.raises(CheckpointError, match="newer than this tphyolo"):
        load_checkpoint(path)


class _RunsCommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return os.system, (f"touch {self.marker}",)


def test_hostile_pickle_is_refused_and_not_run(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    path = tmp_path / "evil.pt"
    torch.save({"model": _RunsCommand(marker), "format_version": 1}, path)
    with pytest.raises(ForbiddenGlobalError, match=r"refusing to load global '(posix|nt)\.system'") as error:
        load_checkpoint(path)
    assert str(path) in str(error.value)
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "nc"), [("official-yolov5n-coco.ckpt.pt", 80), ("official-tph-yolov5-visdrone.ckpt.pt", 10)]
)
def test_original_checkpoints_convert_with_parity(tmp_path: Path, parity_dir: Path, name: str, nc: int) -> None:
    expected = load_parity(parity_dir, name.replace(".pt", ".expected.pt"))
    ckpt = load_checkpoint(parity_file(parity_dir, name))
    assert ckpt.nc == expected["nc"] == nc and ckpt.names == expected["names"]
    assert ckpt.model_yaml["nc"] == nc and ckpt.ema is None and ckpt.state == {}
    assert ckpt.metadata["origin"] == {
        "format": "yolov5-pickle",
        "file": name,
        "weights": "model",
        "epoch": -1,
        "best_fitness": None,
        "date": "2022-01-01T00:00:00",
    }
    assert all(v.dtype == torch.float32 for v in ckpt.model.values() if v.is_floating_point())
    model = ckpt.build_model()
    assert not model.anchors_need_fitting  # the TPH yaml gives only an anchor count; the weights hold them
    with torch.no_grad():
        out = model(expected["input"])
    assert out.shape == expected["eval_out"].shape
    assert relative_error(out, expected["eval_out"]) < TOLERANCE

    converted = load_checkpoint(convert_checkpoint(parity_file(parity_dir, name), tmp_path / "converted.pt"))
    assert converted.metadata["origin"] == ckpt.metadata["origin"]
    assert converted.metadata["format_version"] == FORMAT_VERSION
    with torch.no_grad():
        assert torch.equal(converted.build_model()(expected["input"]), out)
