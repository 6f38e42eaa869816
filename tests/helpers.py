"""What several test modules need: the error measure of the parity tests, the switch that turns a missing
shared fixture from a skip into a failure, the original weights of a reference fixture, and a snapshot of the
process state (environment and torch's global flags) that `conftest.py` restores after every test."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn

from tphyolo.checkpoint.format import save_checkpoint
from tphyolo.data.formats.visdrone import NAMES as VISDRONE_NAMES
from tphyolo.infer.backends.compiled import CACHE_ENV
from tphyolo.models import DetectionModel, build_model, convert_original_state_dict
from tphyolo.models.swin import DropPath

REQUIRE_FIXTURES_ENV = "TPHYOLO_REQUIRE_FIXTURES"


def relative_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    """Norm-wise relative error ||ours - ref|| / ||ref||, computed in float64."""
    return ((ours.double() - ref.double()).norm() / ref.double().norm()).item()


def fixtures_required() -> bool:
    """True when TPHYOLO_REQUIRE_FIXTURES is set to anything but "" or "0" (CI sets it to 1)."""
    return os.environ.get(REQUIRE_FIXTURES_ENV, "") not in ("", "0")


def require_path(path: Path, reason: str) -> Path:
    """`path` if it exists. Otherwise the calling test is skipped with `reason`, or fails with it when
    TPHYOLO_REQUIRE_FIXTURES is set: CI must not pass by skipping the tests that guard the numbers."""
    if path.exists():
        return path
    if fixtures_required():
        pytest.fail(f"{reason} ({REQUIRE_FIXTURES_ENV} is set)", pytrace=False)
    pytest.skip(reason)


def require_shared(path: Path, what: str) -> Path:
    """`path` of the shared folder if it exists; otherwise skipped, or failed in CI (`require_path`)."""
    return require_path(
        path, f"{what} not found at {path}; set TPHYOLO_SHARED to the folder that holds fixtures/ and data/"
    )


def parity_file(parity_dir: Path, name: str) -> Path:
    """One file of `shared/fixtures/parity`, through `require_shared`."""
    return require_shared(parity_dir / name, f"reference fixture {name}")


def load_parity(parity_dir: Path, name: str) -> dict:
    """A `.pt` reference file of `shared/fixtures/parity` (e.g. "yolov5n.parity.pt"), loaded weights_only."""
    return torch.load(parity_file(parity_dir, name), weights_only=True)


def original_weights(fixture: Mapping[str, Any], model: DetectionModel) -> dict[str, torch.Tensor]:
    """The fixture's float16 original-layout state dict as float32, converted to `model`'s names."""
    state = {k: v.float() if v.is_floating_point() else v for k, v in fixture["state_dict_fp16"].items()}
    return convert_original_state_dict(state, model)


def model_from_fixture(fixture: Mapping[str, Any]) -> tuple[DetectionModel, dict[str, torch.Tensor]]:
    """The fixture's architecture (its `model_yaml` text) with its weights loaded, and those weights, to
    reload after a train-mode forward has moved the BatchNorm running statistics."""
    model = build_model(fixture["model_yaml"])
    state = original_weights(fixture, model)
    model.load_state_dict(state)
    return model, state


def train_without_dropout(model: nn.Module) -> nn.Module:
    """`model` in train mode with every dropout and drop-path layer in eval mode, as the reference fixtures'
    train outputs and gradients were recorded."""
    model.train()
    for module in model.modules():
        if isinstance(module, nn.Dropout | DropPath):
            module.eval()
    return model


def exit_code(argv: Sequence[str]) -> int:
    """The exit code `tphyolo ARGV` ends with, run in this process: `main`'s return value, or the code of the
    SystemExit that argparse raises for a flag it refuses (a value outside the flag's bounds, an unknown choice)."""
    from tphyolo.cli import main

    try:
        return main(list(argv))
    except SystemExit as stop:
        return int(stop.code or 0)


@contextmanager
def constructions(cls: type) -> Iterator[list[None]]:
    """A list that gains one entry per instance of `cls` constructed while open: a measure of work done that
    does not depend on the machine's speed (e.g. "refused before any layer was built")."""
    original = cls.__init__
    made: list[None] = []

    def counting_init(self, *args, **kwargs):
        made.append(None)
        original(self, *args, **kwargs)

    cls.__init__ = counting_init
    try:
        yield made
    finally:
        cls.__init__ = original


def one_error_line(err: str, command: str) -> str:
    """The one error line of a command's stderr (progress bars aside); fails on a traceback or a second line."""
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith(f"tphyolo {command}: error: ")]
    assert len(lines) == 1, err
    return lines[0]


def save_model_checkpoint(path: Path, model: DetectionModel, names: Sequence[str]) -> Path:
    """A weights-only checkpoint of `model` (no training state), as `tphyolo val/predict` read them."""
    payload = {"model": model.state_dict(), "model_yaml": model.yaml, "names": list(names), "nc": len(names)}
    return save_checkpoint(path, payload)


def seeded_checkpoint(path: Path, names: Sequence[str], *, config: str = "yolov5n") -> Path:
    """A weights-only checkpoint at `path` of `config` with `names`, its weights drawn after torch's seed 0."""
    torch.manual_seed(0)
    return save_model_checkpoint(path, build_model(config, names=list(names)).eval(), names)


@contextmanager
def model_cache_at(folder: Path) -> Iterator[Path]:
    """Compiled checkpoints kept in `folder` within the block (`tphyolo.infer.backends.compiled`)."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(folder)
    try:
        yield folder
    finally:
        os.environ.pop(CACHE_ENV) if before is None else os.environ.__setitem__(CACHE_ENV, before)


# Process state ---------------------------------------------------------------------------------------------

# torch >= 2.9 keeps TF32 settings per backend and operation (`fp32_precision`), and the older flags
# (`set_float32_matmul_precision`, `cuda.matmul.allow_tf32`, `cudnn.allow_tf32`) beside them: the older getters
# raise once the two disagree. A restore sets the older flags first, then the newer ones, parents before
# children (setting a parent rewrites its children).
_PRECISION_OWNERS = ("", "cudnn", "mkldnn", "cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul")
_PRECISION_OWNERS += ("mkldnn.conv", "mkldnn.rnn")
_NOT_RESTORED = frozenset({"PYTEST_CURRENT_TEST"})  # pytest rewrites it at every phase of a test


def _backend(path: str) -> Any:
    owner: Any = torch.backends
    for part in filter(None, path.split(".")):
        owner = getattr(owner, part)
    return owner


def _readable(getter: Callable[[], Any]) -> Any:
    """The flag's value, or None where torch refuses to read it (older and newer settings disagree)."""
    try:
        return getter()
    except RuntimeError:
        return None


@dataclass(frozen=True)
class ProcessState:
    """The environment, torch's process-wide flags and the SIGCHLD handler at one moment."""

    environ: dict[str, str]
    torch_flags: dict[str, Any]
    sigchld: Any = signal.SIG_DFL


def torch_flags() -> dict[str, Any]:
    """Torch's global flags that code under test may change: TF32 / float32 matmul precision, cuDNN
    benchmark and determinism, deterministic algorithms, and the intra-op thread count."""
    cudnn = torch.backends.cudnn
    flags: dict[str, Any] = {
        "cudnn.benchmark": cudnn.benchmark,
        "cudnn.deterministic": cudnn.deterministic,
        "deterministic_algorithms": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "num_threads": torch.get_num_threads(),
        "float32_matmul_precision": _readable(torch.get_float32_matmul_precision),
        "cuda.matmul.allow_tf32": _readable(lambda: torch.backends.cuda.matmul.allow_tf32),
        "cudnn.allow_tf32": _readable(lambda: cudnn.allow_tf32),
    }
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):
        flags.update({f"fp32_precision[{p}]": _backend(p).fp32_precision for p in _PRECISION_OWNERS})
    return flags


def _set_torch_flags(flags: Mapping[str, Any]) -> None:
    cudnn = torch.backends.cudnn
    cudnn.benchmark = flags["cudnn.benchmark"]
    cudnn.deterministic = flags["cudnn.deterministic"]
    enabled, warn_only = flags["deterministic_algorithms"]
    torch.use_deterministic_algorithms(enabled, warn_only=warn_only)
    if torch.get_num_threads() != flags["num_threads"]:
        torch.set_num_threads(flags["num_threads"])
    if flags["float32_matmul_precision"] is not None:
        torch.set_float32_matmul_precision(flags["float32_matmul_precision"])
    if flags["cuda.matmul.allow_tf32"] is not None:
        torch.backends.cuda.matmul.allow_tf32 = flags["cuda.matmul.allow_tf32"]
    if flags["cudnn.allow_tf32"] is not None:
        cudnn.allow_tf32 = flags["cudnn.allow_tf32"]
    for p in _PRECISION_OWNERS:
        key = f"fp32_precision[{p}]"
        if key in flags:
            _backend(p).fp32_precision = flags[key]


def process_state() -> ProcessState:
    environ = {k: v for k, v in os.environ.items() if k not in _NOT_RESTORED}
    return ProcessState(environ, torch_flags(), signal.getsignal(signal.SIGCHLD))


def restore_process_state(saved: ProcessState) -> None:
    """Makes the environment equal to `saved.environ` (removing variables set since, putting back those
    removed or changed), sets torch's flags back where they differ and puts back the SIGCHLD handler.

    The handler matters: a multi-worker DataLoader installs torch's, which checks its workers whenever a child
    process ends. Left installed after the test that created it, it killed the process (SIGSEGV, no Python
    traceback) at the next child a later test started: a `bash -n` after the INT8, benchmark and
    torch.compile tests, in 3 of 3 two-worker runs and 3 of 4 single-process ones (the fourth under gdb),
    never with the handler put back."""
    for name in set(os.environ) - set(saved.environ) - _NOT_RESTORED:
        del os.environ[name]
    for name, value in saved.environ.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    if torch_flags() != saved.torch_flags:
        _set_torch_flags(saved.torch_flags)
    if signal.getsignal(signal.SIGCHLD) is not saved.sigchld and saved.sigchld is not None:
        signal.signal(signal.SIGCHLD, saved.sigchld)


@contextmanager
def process_state_restored() -> Iterator[ProcessState]:
    """Restores the environment and torch's global flags on exit, whatever the body changed."""
    saved = process_state()
    try:
        yield saved
    finally:
        restore_process_state(saved)



BLOCKS_SIZE = 64  # side of the block images of the INT8 tests
BLOCK_COLOURS = ((40, 40, 220), (220, 120, 30))  # BGR of the two classes, "red" and "blue"


def write_blocks(folder: Path, *, count: int, size: int, seed: int, grey: bool = False) -> None:
    """`count` images `size` px square in YOLO format under `folder` (images/, labels/): a noisy grey ground
    with one or two filled rectangles of the two classes, 1/5 to 1/2 of the side; `grey`: flat grey images
    without objects (a calibration set that tells a quantizer nothing)."""
    import cv2
    import numpy as np

    rng = np.random.default_rng(seed)
    (folder / "images").mkdir(parents=True)
    (folder / "labels").mkdir()
    for i in range(count):
        image = np.full((size, size, 3), 114, np.uint8)
        lines = []
        if not grey:
            image += rng.integers(0, 30, image.shape, dtype=np.uint8)
            for _ in range(int(rng.integers(1, 3))):
                cls = int(rng.integers(0, 2))
                w, h = (int(v) for v in rng.integers(size // 5, size // 2, 2))
                x, y = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
                cv2.rectangle(image, (x, y), (x + w - 1, y + h - 1), BLOCK_COLOURS[cls], -1)
                lines.append(f"{cls} {(x + w / 2) / size} {(y + h / 2) / size} {w / size} {h / size}\n")
        cv2.imwrite(str(folder / "images" / f"{i:03d}.png"), image)
        (folder / "labels" / f"{i:03d}.txt").write_text("".join(lines))


def visdrone_subset(visdrone_mini: Path, root: Path, count: int) -> Path:
    """The first `count` visdrone-mini images with their annotations, copied under `root` (so that scan caches
    are written there), and a data yaml naming them as both splits; returns the yaml's path."""
    for folder in ("images", "annotations"):
        (root / folder).mkdir()
    for image in sorted((visdrone_mini / "images").glob("*.jpg"))[:count]:
        shutil.copy(image, root / "images" / image.name)
        shutil.copy(visdrone_mini / "annotations" / f"{image.stem}.txt", root / "annotations" / f"{image.stem}.txt")
    path = root / "data.yaml"
    path.write_text(f"path: {root}\ntrain: images\nval: images\nnames: {list(VISDRONE_NAMES)}\n")
    return path


def weights_file_and_folder(root: Path) -> tuple[Path, Path]:
    """A weights file of three 1 MiB chunks and a tail (`root/a.pt`, whose sha256sum is 5bf6b968...0670) and a
    weights folder of two files (`root/model`: `x.bin` ten x's, `sub/y.bin` two y's), to pin what digests them."""
    weights, folder = root / "a.pt", root / "model"
    weights.write_bytes(bytes(range(256)) * (3 * 4096) + b"tail")
    (folder / "sub").mkdir(parents=True)
    (folder / "x.bin").write_bytes(b"x" * 10)
    (folder / "sub" / "y.bin").write_bytes(b"yy")
    return weights, folder


def benchmark_script(name: str) -> ModuleType:
    """The script or helper benchmarks/`name`.py, imported as the module `name` (a script's `main` does not
    run). benchmarks/ goes on the end of the import path, as it is at the front when a script runs, so a
    helper that scripts import beside them (`original_attention`) is one module for the scripts and the tests."""
    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    if folder not in sys.path:
        sys.path.append(folder)
    return importlib.import_module(name)
