"""Checkpoints on the CPU run compiled to OpenVINO by default: checked against PyTorch, cached, reused, overridable,
and PyTorch with one line where openvino is missing (`tphyolo.infer.backends.compiled`)."""

import contextlib
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.helpers import model_cache_at, seeded_checkpoint

from tphyolo.infer.backends import OnnxRuntimeBackend, OpenVINOBackend, load_backend
from tphyolo.infer.backends.compiled import CACHE_ENV, cache_entry, load_compiled
from tphyolo.infer.backends.compiled_verdict import VERDICT
from tphyolo.infer.backends.parity import FP32_TOLERANCE, relative_error, sample_images
from tphyolo.infer.backends.pytorch import TorchBackend
from tphyolo.infer.config import InferenceConfig
from tphyolo.models import build_model
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.compiled_cache import LIMIT_ENV, write_marker
from tphyolo.runtime.config import RuntimeConfig

pytest.importorskip("openvino")

NAMES = ["car", "van", "bus"]
REPO_ROOT = Path(__file__).resolve().parents[2]


def not_the_probes(messages: list[str]) -> list[str]:
    """`messages` less the line saying what runs (`load_backends`)."""
    return [m for m in messages if not m.startswith("what runs: ")]


@contextlib.contextmanager
def notes() -> list[str]:
    """The messages the package logs (INFO and up) within the block."""
    messages: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = logging.getLogger("tphyolo")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def entries(cache: Path) -> list[Path]:
    """The entries of the compiled-model cache `cache` (its folders; the cache's marker is a file)."""
    return [path for path in cache.iterdir() if path.is_dir()]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return seeded_checkpoint(tmp_path_factory.mktemp("weights") / "tiny.pt", NAMES)


@pytest.fixture(scope="module")
def first_runs(checkpoint, tmp_path_factory):
    """A fresh cache, the default Predictor made twice on the checkpoint: (cache, [predictor, notes] per run)."""
    with model_cache_at(tmp_path_factory.mktemp("cache")) as cache:
        runs = []
        for _ in range(2):
            with notes() as messages:
                runs.append((Predictor(str(checkpoint), imgsz=128, device="cpu"), messages))
    return cache, runs


def test_the_default_runs_a_checkpoint_on_openvino_in_fp32_within_the_export_tolerance(first_runs, checkpoint):
    _, [(predictor, _), _] = first_runs
    (checkpoint_backend,) = predictor.backends
    backend = checkpoint_backend.compiled
    assert isinstance(backend, OpenVINOBackend) and checkpoint_backend.path == checkpoint
    assert backend.request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"
    torch_backend = TorchBackend.load(str(checkpoint), runtime=RuntimeConfig(), device=torch.device("cpu"))
    for shape in ((1, 128, 128), (2, 96, 160)):
        images = sample_images(*shape, seed=5)
        with torch.no_grad():
            error = relative_error(backend.run(images), torch_backend.run(images))
        assert error <= FP32_TOLERANCE


def test_the_compiled_model_is_cached_and_the_next_run_reuses_it(first_runs, checkpoint):
    cache, [(_, first), (second_predictor, second)] = first_runs
    assert [m for m in first if "compiled in" in m] and not [m for m in first if "reusing" in m]
    assert [m for m in second if "reusing" in m] and not [m for m in second if "compiled in" in m]
    assert isinstance(second_predictor.backends[0].compiled, OpenVINOBackend)
    (entry,) = entries(cache)
    assert entry.name.startswith("tiny-") and (entry / VERDICT).is_file()


def test_runtime_pytorch_keeps_pytorch_and_compiles_nothing(checkpoint, tmp_path):
    with model_cache_at(tmp_path / "cache"), notes() as messages:
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu", backend="pytorch")
    assert isinstance(predictor.backends[0], TorchBackend)
    assert not (tmp_path / "cache").exists() and not_the_probes(messages) == []
    assert predictor.decisions["runtime"].describe() == "pytorch (flag: --runtime pytorch)"


def test_deterministic_runs_pytorch_fp32_nchw_and_says_why(checkpoint, tmp_path):
    with model_cache_at(tmp_path / "cache"), notes() as messages:
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu", runtime=RuntimeConfig(deterministic=True))
    (backend,) = predictor.backends
    assert isinstance(backend, TorchBackend) and not (tmp_path / "cache").exists()
    assert backend.runtime.channels_last is False and backend.runtime.amp == "off"
    ran = predictor.decisions
    assert [(ran[k].value, ran[k].source) for k in ("runtime", "precision", "layout")] == [
        ("pytorch", "deterministic"), ("fp32", "deterministic"), ("NCHW", "deterministic")]
    assert [m for m in messages if m.startswith("what runs: runtime pytorch (deterministic: --deterministic)")]
    with pytest.raises(ValueError, match="--deterministic runs fp32; it cannot be combined with --precision bf16"):
        Predictor(str(checkpoint), imgsz=128, device="cpu", runtime=RuntimeConfig(deterministic=True),
                  precision="bf16")  # fmt: skip


def test_modules_and_exported_files_run_as_they_are(first_runs):
    model = build_model("yolov5n", names=NAMES).eval()
    assert isinstance(Predictor(model, imgsz=128, device="cpu").backends[0], TorchBackend)
    cache, _ = first_runs
    (entry,) = entries(cache)
    exported = load_backend(entry / "model_openvino_model")  # the cached IR, read as any exported one
    assert exported.request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"


def test_bf16_is_used_only_when_asked(first_runs, checkpoint, caplog):
    """Asked for bf16, OpenVINO computes in bf16 where the CPU has it; elsewhere it keeps f32, and the backend,
    its decision and one warning say f32, never the bf16 that was asked for."""
    import openvino as ov

    cache, _ = first_runs
    native = "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES")
    with model_cache_at(cache), caplog.at_level(logging.WARNING, logger="tphyolo"):
        backend = load_compiled(checkpoint, precision="bf16")
    hint = backend.compiled.request.get_compiled_model().get_property("INFERENCE_PRECISION_HINT").to_string()
    assert hint == ("bf16" if native else "f32")
    decided = backend.decisions["precision"]
    assert (backend.compiled.precision, decided.value) == (("bf16", "bf16") if native else ("fp32", "fp32"))
    if not native:
        assert decided.source == "fallback" and "no bf16 instructions" in decided.why
        assert any("OpenVINO runs f32 here, not the bf16 asked for" in r.getMessage() for r in caplog.records)
    with pytest.raises(ValueError, match="--precision bf16 is a precision of --runtime openvino"):
        InferenceConfig(backend="pytorch", precision="bf16")


def test_a_compiled_checkpoint_runs_on_every_core_whatever_torchs_threads(first_runs, checkpoint):
    """OpenVINO's threads are the cores this process may use, as for an exported model, not PyTorch's intra-op
    threads: the serve worker lowers those to keep a core for the event loop (OpenMP stalls on a lost core),
    which OpenVINO does not need (measured in `tphyolo.serve.engine`)."""
    cache, _ = first_runs
    cores = len(os.sched_getaffinity(0))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        with model_cache_at(cache):
            backend = load_compiled(checkpoint)
            pinned = load_compiled(checkpoint, threads=1)
    finally:
        torch.set_num_threads(threads)

    def used(loaded) -> int:
        return int(loaded.compiled.request.get_compiled_model().get_property("INFERENCE_NUM_THREADS"))

    assert used(backend) == cores
    assert used(pinned) == 1


@pytest.mark.parametrize("damage", ["verdict", "weights"])
def test_a_damaged_cache_entry_is_compiled_again_with_one_line(first_runs, checkpoint, tmp_path, damage):
    cache, _ = first_runs
    (entry,) = entries(cache)
    copy = shutil.copytree(entry, tmp_path / "cache" / entry.name)
    if damage == "verdict":
        (copy / VERDICT).write_text("{not json")
    else:
        (copy / "model_openvino_model" / "model.bin").write_bytes(b"\0" * 64)
    with model_cache_at(tmp_path / "cache"), notes() as messages:
        backend = load_compiled(checkpoint)
    unreadable = [m for m in messages if "unreadable" in m]
    assert len(unreadable) == 1 and "compiling it again" in unreadable[0] and "\n" not in unreadable[0]
    assert [m for m in messages if "compiled in" in m]
    images = sample_images(1, 128, 128)
    reference = TorchBackend.load(str(checkpoint), runtime=RuntimeConfig(), device=torch.device("cpu"))
    with torch.no_grad():
        assert relative_error(backend.run(images), reference.run(images)) <= FP32_TOLERANCE


def test_a_model_found_off_pytorch_runs_pytorch_with_one_line(first_runs, checkpoint, tmp_path):
    cache, _ = first_runs
    (entry,) = entries(cache)
    copy = shutil.copytree(entry, tmp_path / "cache" / entry.name)
    (copy / VERDICT).write_text((copy / VERDICT).read_text().replace('"ok": true', '"ok": false'))
    with model_cache_at(tmp_path / "cache"), notes() as messages:
        assert cache_entry(checkpoint, runtime="openvino", fuse=True) == copy
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu")
    assert isinstance(predictor.backends[0], TorchBackend)
    messages = not_the_probes(messages)
    assert len(messages) == 1 and "running PyTorch" in messages[0]
    assert predictor.decisions["runtime"].source == "fallback"


@pytest.mark.slow
def test_runtime_onnxruntime_compiles_to_onnx_within_the_export_tolerance(checkpoint, tmp_path):
    pytest.importorskip("onnxruntime")
    with model_cache_at(tmp_path / "cache"):
        predictor = Predictor(str(checkpoint), imgsz=128, device="cpu", backend="onnxruntime")
    backend = predictor.backends[0].compiled
    assert isinstance(backend, OnnxRuntimeBackend)
    images = sample_images(2, 96, 128)
    reference = TorchBackend.load(str(checkpoint), runtime=RuntimeConfig(), device=torch.device("cpu"))
    with torch.no_grad():
        assert relative_error(backend.run(images), reference.run(images)) <= FP32_TOLERANCE


@pytest.mark.slow
def test_without_openvino_the_default_runs_pytorch_with_one_line(checkpoint, tmp_path):
    """A process where `import openvino` fails (its sys.modules entry is None) falls back; --runtime openvino there
    is an error in one line."""
    program = (
        "import sys; sys.modules['openvino'] = None\n"
        "from tphyolo.predict.predictor import Predictor\n"
        f"p = Predictor({str(checkpoint)!r}, imgsz=64, device='cpu')\n"
        "print(type(p.backends[0]).__name__)\n"
        "try:\n"
        f"    Predictor({str(checkpoint)!r}, imgsz=64, device='cpu', backend='openvino')\n"
        "except ImportError as error:\n"
        "    print('refused:', error)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src"), CACHE_ENV: str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0] == "TorchBackend"
    assert out[1].startswith("refused: --runtime openvino needs the openvino package")
    lines = [line for line in done.stderr.splitlines() if "openvino" in line]
    assert len(lines) == 1 and lines[0].startswith("openvino is not installed: running PyTorch")
    assert not (tmp_path / "cache").exists()


def test_a_compile_evicts_the_least_recently_used_entries_past_the_limit(first_runs, checkpoint, tmp_path,
                                                                        monkeypatch):  # fmt: skip
    cache, _ = first_runs
    (entry,) = entries(cache)
    copy = shutil.copytree(entry, tmp_path / "cache" / entry.name)
    (copy / VERDICT).write_text("{not json")  # compiled again, then the cache is bounded
    write_marker(tmp_path / "cache", "cache")  # a cache tphyolo made
    stale = tmp_path / "cache" / "old-0123456789abcdef"
    stale.mkdir()
    write_marker(stale, "entry")
    os.utime(stale, (1e9, 1e9))
    monkeypatch.setenv(LIMIT_ENV, "0")  # nothing but the entry in use fits
    with model_cache_at(tmp_path / "cache"), notes() as messages:
        assert load_compiled(checkpoint) is not None
    assert not stale.exists() and (copy / VERDICT).is_file()
    (line,) = [m for m in messages if "least recently used" in m]
    assert line.endswith("removed 1 least recently used (0 MB): old-0123456789abcdef")
    os.utime(copy, (1e9, 1e9))
    with model_cache_at(tmp_path / "cache"):
        load_compiled(checkpoint)  # a reuse marks the entry as used
    assert copy.stat().st_mtime > 1e9
