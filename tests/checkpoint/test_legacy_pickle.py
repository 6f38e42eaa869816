"""The restricted unpickler: original checkpoints load as data, anything that would run code is refused."""

from __future__ import annotations

import builtins
import collections
import os
import pickle
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.helpers import load_parity, parity_file
from torch import nn

from tphyolo.checkpoint.legacy import (
    ForbiddenGlobalError,
    LegacyCheckpointError,
    LegacyObject,
    read_archive,
    read_yolov5_checkpoint,
    tensor_records,
)
from tphyolo.checkpoint.legacy.errors import MalformedRecordError

COCO = "official-yolov5n-coco.ckpt.pt"
TPH = "official-tph-yolov5-visdrone.ckpt.pt"


def _expected(parity_dir: Path, name: str) -> dict:
    return load_parity(parity_dir, name.replace(".pt", ".expected.pt"))


def test_yolov5n_checkpoint_reads_as_data(parity_dir: Path) -> None:
    ckpt = read_yolov5_checkpoint(parity_file(parity_dir, COCO))
    expected = _expected(parity_dir, COCO)
    assert ckpt.nc == expected["nc"] == 80
    assert ckpt.names == expected["names"]
    assert ckpt.weights == "model"  # the file's ema is None
    assert (ckpt.epoch, ckpt.best_fitness, ckpt.date) == (-1, None, "2022-01-01T00:00:00")
    assert ckpt.model_yaml["nc"] == 80 and len(ckpt.model_yaml["backbone"]) == 10
    # Same architecture as the yolov5n parity fixture: identical keys, order and shapes.
    reference = load_parity(parity_dir, "yolov5n.parity.pt")["state_dict_fp16"]
    assert list(ckpt.state_dict) == list(reference)
    assert all(ckpt.state_dict[k].shape == v.shape for k, v in reference.items())
    assert ckpt.state_dict["model.0.conv.weight"].dtype == torch.float16
    assert ckpt.state_dict["model.24.anchors"].shape == (3, 3, 2)
    assert ckpt.state_dict["model.24.anchors"][0, 0].tolist() == [1.25, 1.625]  # (10, 13) px / stride 8


def test_tph_checkpoint_reads_as_data(parity_dir: Path) -> None:
    ckpt = read_yolov5_checkpoint(parity_file(parity_dir, TPH))
    expected = _expected(parity_dir, TPH)
    assert ckpt.nc == expected["nc"] == 10
    assert ckpt.names == expected["names"]
    assert ckpt.model_yaml["anchors"] == 4  # anchors computed at build time, stored in the Detect buffer
    assert ckpt.state_dict["model.39.anchors"].shape == (4, 4, 2)  # 4 levels x 4 anchors x (w, h)
    assert len(ckpt.state_dict) == 501
    for part in ("q.weight", "k.weight", "v.weight", "ma.in_proj_weight", "ma.out_proj.bias", "fc2.weight"):
        assert f"model.8.m.tr.0.{part}" in ckpt.state_dict
    assert not any("num_batches_tracked" not in k and v.dtype != torch.float16 for k, v in ckpt.state_dict.items())


def test_module_objects_become_inert_records(parity_dir: Path) -> None:
    root = read_archive(parity_file(parity_dir, TPH))
    model = root["model"]
    assert isinstance(model, LegacyObject) and model.legacy_class == "models.yolo.Model"
    c3tr = model._modules["model"]._modules["8"]
    assert c3tr.legacy_class == "models.common.C3TR"
    attention = c3tr._modules["m"]._modules["tr"]._modules["0"]._modules["ma"]
    assert attention.legacy_class == "torch.nn.modules.activation.MultiheadAttention"
    assert not hasattr(model, "forward")


@pytest.fixture
def fake_original_modules(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A stand-in `models.yolo` module so that torch.save pickles classes under the original names."""
    package, module = types.ModuleType("models"), types.ModuleType("models.yolo")

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4))
            self.register_buffer("scratch", torch.zeros(2), persistent=False)
            self.register_buffer("anchors", torch.arange(6.0).view(1, 3, 2))
            self.yaml = {"nc": 2, "backbone": [], "head": []}
            self.names = {0: "car", 1: "van"}

    Model.__module__ = "models.yolo"
    Model.__qualname__ = "Model"
    module.Model = Model
    package.yolo = module
    monkeypatch.setitem(sys.modules, "models", package)
    monkeypatch.setitem(sys.modules, "models.yolo", module)
    return module


def test_prefers_ema_and_reproduces_state_dict(tmp_path: Path, fake_original_modules: types.ModuleType) -> None:
    torch.manual_seed(0)
    model, ema = fake_original_modules.Model(), fake_original_modules.Model()
    ema.model[1].running_mean.uniform_()
    path = tmp_path / "last.pt"
    ckpt = {"epoch": 7, "best_fitness": np.array([0.25]), "model": model.half(), "ema": ema.half(), "updates": 3}
    torch.save(ckpt, path)

    loaded = read_yolov5_checkpoint(path)
    assert loaded.weights == "ema"
    assert (loaded.epoch, loaded.best_fitness, loaded.names) == (7, 0.25, ["car", "van"])
    reference = ema.state_dict()
    assert list(loaded.state_dict) == list(reference)  # order kept, non-persistent 'scratch' left out
    for key, tensor in reference.items():
        assert torch.equal(loaded.state_dict[key], tensor), key


def test_pickle_protocol_4_is_read(tmp_path: Path, fake_original_modules: types.ModuleType) -> None:
    path = tmp_path / "p4.pt"
    torch.save({"model": fake_original_modules.Model(), "ema": None}, path, pickle_protocol=4)
    assert read_yolov5_checkpoint(path).weights == "model"


class _Payload:
    """Unpickling this calls `function(*args)`."""

    def __init__(self, function: object, *args: object) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple:
        return self.function, self.args


def _marker_command(marker: Path) -> str:
    return f"touch {marker}"


@pytest.mark.parametrize(
    ("make_payload", "global_name"),
    [
        (lambda m: _Payload(os.system, _marker_command(m)), os.system.__module__ + ".system"),
        (lambda m: _Payload(builtins.eval, f"open({str(m)!r}, 'w')"), "builtins.eval"),
        (lambda m: _Payload(builtins.exec, f"open({str(m)!r}, 'w')"), "builtins.exec"),
        (lambda m: _Payload(subprocess.Popen, ["touch", str(m)]), "subprocess.Popen"),
        (lambda m: _Payload(builtins.getattr, "text", "upper"), "builtins.getattr"),
    ],
    ids=["os.system", "eval", "exec", "Popen", "getattr"],
)
@pytest.mark.parametrize("protocol", [2, 4])
def test_code_running_globals_are_refused(tmp_path: Path, make_payload, global_name: str, protocol: int) -> None:
    marker = tmp_path / "MARKER"
    path = tmp_path / "evil.pt"
    torch.save({"epoch": 0, "model": make_payload(marker)}, path, pickle_protocol=protocol)

    with pytest.raises(ForbiddenGlobalError, match=global_name.replace(".", r"\.")) as error:
        read_archive(path)
    assert str(path) in str(error.value)
    assert not marker.exists()


def test_module_with_hook_function_is_refused(tmp_path: Path, fake_original_modules: types.ModuleType) -> None:
    model = fake_original_modules.Model()
    model.register_forward_hook(_marker_command)  # a module-level function: pickled by reference
    path = tmp_path / "hooked.pt"
    torch.save({"model": model}, path)
    with pytest.raises(ForbiddenGlobalError, match="_marker_command"):
        read_yolov5_checkpoint(path)


def test_plain_pickle_file_is_not_unpickled(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    path = tmp_path / "evil.pkl"
    path.write_bytes(pickle.dumps(_Payload(os.system, _marker_command(marker))))
    with pytest.raises(LegacyCheckpointError, match="not a readable PyTorch zip archive"):
        read_archive(path)
    assert not marker.exists()


def test_pre_zip_torch_format_is_named(tmp_path: Path) -> None:
    path = tmp_path / "old.pt"
    torch.save({"model": {}}, path, _use_new_zipfile_serialization=False)
    with pytest.raises(LegacyCheckpointError, match="pre-1.6"):
        read_archive(path)


def test_truncated_archive_is_reported(tmp_path: Path, parity_dir: Path) -> None:
    data = parity_file(parity_dir, COCO).read_bytes()
    path = tmp_path / "cut.pt"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(LegacyCheckpointError, match="truncated") as error:
        read_yolov5_checkpoint(path)
    assert str(path) in str(error.value)


def test_corrupt_tensor_record_is_reported(tmp_path: Path, parity_dir: Path) -> None:
    source = parity_file(parity_dir, COCO)
    original = source.read_bytes()
    with zipfile.ZipFile(source) as archive:
        first_weight = archive.read("official-yolov5n-coco.ckpt/data/0")
    data = bytearray(original)
    data[original.index(first_weight) + 5] ^= 0xFF  # records are stored uncompressed
    path = tmp_path / "flipped.pt"
    path.write_bytes(bytes(data))
    with pytest.raises(LegacyCheckpointError, match="CRC") as error:
        read_yolov5_checkpoint(path)
    assert str(path) in str(error.value)


def test_non_checkpoint_dict_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "weights.pt"
    torch.save({"conv.weight": torch.zeros(1)}, path)
    with pytest.raises(LegacyCheckpointError, match="expected a dict with 'model'"):
        read_yolov5_checkpoint(path)


def test_dunder_attributes_are_refused(tmp_path: Path, fake_original_modules: types.ModuleType) -> None:
    model = fake_original_modules.Model()
    model.__dict__["__setstate__"] = "shadow"  # would become the unpickler's hook for a later BUILD
    path = tmp_path / "dunder.pt"
    torch.save({"model": model}, path)
    with pytest.raises(LegacyCheckpointError, match="disallowed attribute names \\['__setstate__'\\]"):
        read_archive(path)


def test_compressed_records_are_refused(tmp_path: Path, parity_dir: Path) -> None:
    path, original = tmp_path / "deflated.pt", parity_file(parity_dir, COCO)
    with zipfile.ZipFile(original) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            target.writestr(info.filename, source.read(info))
    with pytest.raises(LegacyCheckpointError, match="is compressed"):
        read_archive(path)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(np.float64(0.75), 0.75), (np.array([[0.5]], dtype=">f4"), 0.5), (np.int64(3), 3.0)],
    ids=["scalar", "big-endian array", "int"],
)
def test_numpy_numbers_are_rebuilt(
    tmp_path: Path, fake_original_modules: types.ModuleType, value: object, expected: float
) -> None:
    path = tmp_path / "np.pt"
    torch.save({"model": fake_original_modules.Model(), "best_fitness": value}, path)
    assert read_yolov5_checkpoint(path).best_fitness == expected


@pytest.mark.parametrize(
    "value",
    [np.array([None, 1], dtype=object), np.zeros(1, dtype=[("a", "f4"), ("b", "O")])],
    ids=["object", "structured"],
)
def test_object_numpy_arrays_are_refused(tmp_path: Path, value: object) -> None:
    path = tmp_path / "np.pt"
    torch.save({"best_fitness": value}, path)
    with pytest.raises(LegacyCheckpointError, match="not numeric"):
        read_archive(path)


def test_tensor_records_stay_inside_their_storage() -> None:
    storage = tensor_records.Storage(torch.arange(6.0))
    view = tensor_records.rebuild_tensor_v2(storage, 2, (2, 2), (2, 1), False, collections.OrderedDict())
    assert view.tolist() == [[2.0, 3.0], [4.0, 5.0]]
    with pytest.raises(MalformedRecordError, match="does not fit its storage"):
        tensor_records.rebuild_tensor_v2(storage, 4, (3,), (1,), False, collections.OrderedDict())
    with pytest.raises(MalformedRecordError, match="backward hooks"):
        tensor_records.rebuild_tensor_v2(storage, 0, (1,), (1,), False, collections.OrderedDict(h=print))
    with pytest.raises(MalformedRecordError, match="truncated"):
        tensor_records.read_storage(tensor_records.StorageType("HalfStorage"), b"\x00" * 5, 3)
