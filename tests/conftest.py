"""Shared test settings: where the read-only reference files live, and process state restored after every test.

Without the shared folder the tests that need it are skipped; with TPHYOLO_REQUIRE_FIXTURES=1 (as in CI) they
fail instead (`tests.helpers.require_shared`).
"""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.helpers import process_state_restored, require_shared, visdrone_subset
from tphyolo.data.builtin.synthetic import generate_synthetic
from tphyolo.infer.backends.compiled import CACHE_ENV
from tphyolo.runtime import cpu_memory
from tphyolo.user_cache import user_cache_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = Path(os.environ.get("TPHYOLO_SHARED", REPO_ROOT.parent / "shared"))
PARITY_DIR = SHARED_DIR / "fixtures" / "parity"
VISDRONE_MINI_DIR = SHARED_DIR / "data" / "visdrone-mini"

if os.environ.get("PYTEST_XDIST_WORKER"):
    # `pytest -n N` runs N tests at once: one thread each (and in the processes they start), so that N workers
    # on N cores do not oversubscribe them. A test that needs more threads sets them (restored after it).
    torch.set_num_threads(1)
    os.environ["OMP_NUM_THREADS"] = "1"

# The suite, and every process it starts, sees a CPU without native bf16 (`tphyolo.runtime.cpu_isa` follows
# oneDNN's ISA cap), so that `--precision auto` is f32 without a bf16 check and the runtime probe times no bf16
# candidate, whatever the machine: outputs compared across processes stay exact. Tests of the bf16 paths give
# the CPU they need.
os.environ.setdefault("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_VNNI")


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder` with its size and modification time (nothing for a missing folder)."""
    found = {}
    for path in folder.rglob("*") if folder.is_dir() else []:
        try:
            if path.is_file():
                stat = path.stat()
                found[str(path.relative_to(folder))] = (stat.st_size, stat.st_mtime_ns)
        except OSError:  # removed while listed
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def _user_cache(tmp_path_factory) -> Iterator[Path]:
    """The user cache (`tphyolo.user_cache.user_cache_dir`: built-in sets, kept decisions, compiled models) in a
    folder of the session's, for the tests and every process they start; the real one must be as the session
    found it (a test that writes it fails the session)."""
    real = user_cache_dir()
    before = _tree(real)
    folder = tmp_path_factory.mktemp("user-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(folder))
        yield folder
    after = _tree(real)
    changed = sorted(name for name in set(before) | set(after) if before.get(name) != after.get(name))
    assert not changed, f"the test session wrote the real user cache {real}: {changed[:5]}"


@pytest.fixture(scope="session", autouse=True)
def _model_cache(_user_cache, tmp_path_factory) -> Iterator[Path]:
    """One cache of compiled checkpoints for the session (`tphyolo.infer.backends.compiled`), so that the many tests
    that predict with the same small checkpoint on the CPU compile it to OpenVINO once, and none reads or fills
    the user's cache. Tests of the cache itself give their own folder."""
    folder = tmp_path_factory.mktemp("compiled-models")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(autouse=True)
def _restore_process_state() -> Iterator[None]:
    """Every test leaves os.environ and torch's global flags (TF32, cuDNN, determinism, threads) as it found
    them, also when it called `configure_process` or set a variable that was unset before."""
    with process_state_restored():
        yield


@pytest.fixture(autouse=True)
def mallopt_calls(monkeypatch) -> list[tuple[int, int]]:
    """glibc's mallopt replaced by a recorder (the calls made, in order): `configure_process`, which CLI tests
    run in this process, would otherwise raise the session's malloc thresholds for good (nothing lowers them back
    to glibc's own, dynamic ones). `tests/runtime/test_cpu_memory.py` checks the real effect in child processes."""
    calls: list[tuple[int, int]] = []

    def record(param: int, value: int) -> int:
        calls.append((param, value))
        return 1

    monkeypatch.setattr(cpu_memory, "glibc_mallopt", lambda: record)
    return calls


@pytest.fixture(scope="session")
def parity_dir() -> Path:
    """The original implementation's reference outputs (`shared/fixtures/parity`)."""
    return require_shared(PARITY_DIR, "reference fixtures")


@pytest.fixture(scope="session")
def visdrone_mini() -> Path:
    """40 real VisDrone2019-DET images with their original annotations (`shared/data/visdrone-mini`)."""
    return require_shared(VISDRONE_MINI_DIR, "VisDrone sample data")


@pytest.fixture(scope="session")
def tiny_synthetic(tmp_path_factory) -> Path:
    """Training and inference tests: a data yaml of 8 training and 4 validation synthetic scenes at 256 px."""
    root = tmp_path_factory.mktemp("tiny-synthetic")
    return generate_synthetic(root, n_train=8, n_val=4, imgsz=256, seed=1)


@pytest.fixture(scope="module")
def data_yaml(visdrone_mini, tmp_path_factory):
    """Four VisDrone images with their annotations, copied so that the scan cache is written here."""
    return visdrone_subset(visdrone_mini, tmp_path_factory.mktemp("visdrone"), 4)
