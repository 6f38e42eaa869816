"""The service's inference: one Predictor, the same path as `tphyolo predict`, run on batches of decoded images
with each request's settings.

    engine = InferenceEngine(DetectorSpec(("best.pt",), inference=InferenceConfig(imgsz=640)), max_batch=8)
    rows = engine.detect(images, settings)  # per checked RequestImage: (n, 6) float32 x1, y1, x2, y2, score,
    # class, or the 422 RequestProblem of an image whose pixels do not decode
    rows = engine.detect_pixels(arrays, settings)  # the same, for decoded uint8 BGR images

The engine's `DetectorSpec` (weights as paths) is plain, picklable data: what a worker process needs to load the
engine on its own. The Predictor of other settings shares the loaded models (`Predictor.with_settings`); the last
few are kept, so that a request with the defaults or a recent combination loads nothing.

Inference streams: when every model runs on OpenVINO (a checkpoint on the CPU compiles to it by default), each
is switched to OpenVINO's throughput path (`OpenVINOBackend.use_streams`) and the engine runs as many `detect`
calls at once as OpenVINO has requests for it (`ModelInfo.streams`), decided once when it loads; other runtimes
run one at a time. The pixels, the pre- and post-processing are the same, so are the answers.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from tphyolo.cores import available_cores
from tphyolo.data.files.digest import update_with_file
from tphyolo.infer.backends.base import Backend
from tphyolo.infer.build import spec_device
from tphyolo.infer.spec import DetectorSpec
from tphyolo.predict.predictor import Predictor
from tphyolo.runtime.decisions import Decision
from tphyolo.serve.images import RequestImage, decode_request_image
from tphyolo.serve.options import Settings
from tphyolo.serve.problems import RequestProblem

# PyTorch threads of a CPU worker: all cores but one, which the server's event loop and the clients' side keep.
# On a 2-core Xeon shared with other jobs, a 640 px PyTorch forward of tph-yolov5n took 588 ms per image with 1
# thread and 5,236 ms with 2 (medians of 3, interleaved, load 11-14): an OpenMP thread that loses its core stalls
# every layer's barrier. OMP_NUM_THREADS, when set, wins. A compiled checkpoint (OpenVINO, the CPU default) runs
# on every core all the same (`compiled.load_compiled`), as it does not stall so: on a 2-core AMD EPYC, the README
# model's 640 px predict took 36 ms with 2 OpenVINO threads against 55 ms with 1 when quiet, and 1.01-1.02x the
# 1-thread time beside 1, 2 and 4 busy processes; in `bench serve` the service gave 16.8-20.5 against 11.2-12.5
# images/s at one caller, 16.9-20.0 against 12.2-14.9 at 16 (docs/performance.md, the service on an EPYC).
CORES_KEPT = 1
ONE_STREAM = Decision("1", "rule", "one forward at a time")
SETTINGS_KEPT = 16  # predictors of recent request settings kept (they share the models: a few objects each)
WARMUP_SIDE = 320  # side of the grey image of the warm-up passes
WARMUP_PASSES = 2


@dataclass(frozen=True)
class ModelInfo:
    """What is loaded, as `GET /v1/models` shows it: `name` (the weights' file names), `hash` (sha256 of their
    bytes, 16 hex digits), `names` (class names), `stride`, `imgsz`, `backend` (formats), `precision` (what the
    first model computes in: "fp32", "bf16" or "fp16", `ran_precision`),
    `device`, `classifier` (a crop classifier is loaded), `defaults` (the settings requests start from),
    `threads` (PyTorch's intra-op threads in the process that runs it), `streams` (how many batches run at once,
    and why: `inference_streams`)."""

    name: str
    hash: str
    names: tuple[str, ...]
    stride: int
    imgsz: int
    backend: str
    precision: str
    device: str
    classifier: bool
    defaults: Settings
    threads: int = 1
    streams: Decision = ONE_STREAM

    @property
    def stream_count(self) -> int:
        return int(self.streams.value)

    def as_json(self) -> dict:
        config = self.defaults.config
        slicing = self.defaults.slicing
        return {
            "name": self.name, "hash": self.hash, "classes": list(self.names), "stride": self.stride,
            "imgsz": self.imgsz, "backend": self.backend, "precision": self.precision, "device": self.device,
            "classifier": self.classifier, "threads": self.threads, "streams": self.stream_count,
            "defaults": {
                "conf": config.conf, "iou": config.iou, "max_det": config.max_det,
                "classes": None if config.classes is None else list(config.classes), "imgsz": config.imgsz,
                "augment": config.augment, "slice": None if slicing is None else slicing.size,
                "overlap": None if slicing is None else slicing.overlap, "classifier": self.defaults.classifier,
            },
        }  # fmt: skip


def worker_threads(*, usable_cores: int, environ: Mapping[str, str]) -> int | None:
    """PyTorch intra-op threads for a CPU worker process: None (leave PyTorch's choice) when OMP_NUM_THREADS
    is set, else all `usable_cores` but CORES_KEPT, at least 1."""
    if environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, usable_cores - CORES_KEPT)


def configure_worker_threads(spec: DetectorSpec) -> int:
    """Set this process's PyTorch threads for a worker of `spec` (`worker_threads`, on a CPU device only; call
    from the worker process's entry point); returns the threads it runs with."""
    if spec_device(spec).type == "cpu":
        threads = worker_threads(usable_cores=available_cores(), environ=os.environ)
        if threads is not None:
            torch.set_num_threads(threads)
    return torch.get_num_threads()


def ran_precision(backend: Backend) -> str:
    """The precision `backend` computes in, as its decisions name it ("fp32", "bf16", "fp16": what ran, not the
    dtype of its inputs); its input dtype for a backend loaded without decisions."""
    decisions = backend.decisions
    if "precision" in decisions:
        return decisions["precision"].value
    return {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}.get(str(backend.dtype).removeprefix("torch."),
                                                                         "fp32")  # fmt: skip


def inference_streams(backends: Sequence[Backend], *, alone_when: Callable[[], bool] = lambda: True) -> Decision:
    """How many forwards the models `backends` run at once: when every one runs on OpenVINO, each is switched to
    its throughput path (`use_streams`, where the backend `has_streams`) and the fewest
    requests any of them has is the number; else 1. Decided once, from the models and OpenVINO's own rule for
    this CPU (its THROUGHPUT hint), never from a timing; the why says whether a forward alone runs on every
    thread (`alone_on_latency`: one that finds no other running while `alone_when()`)."""
    if not all(b.has_streams for b in backends):
        formats = "+".join(sorted({b.format for b in backends}))
        return Decision("1", "rule", f"{formats}: one forward at a time (inference streams are OpenVINO's)")
    count = min(b.use_streams(alone_when) for b in backends)
    alone = ("a forward alone on every thread (its LATENCY compilation, the same answers bit for bit)"
             if all(b.alone_on_latency for b in backends) else "a forward alone on a stream too (the LATENCY "
             "compilation's answers differ in the last bit here)")  # fmt: skip
    why = f"OpenVINO's OPTIMAL_NUMBER_OF_INFER_REQUESTS under its THROUGHPUT hint; {alone}"
    return Decision(str(count), "rule", why)


def weights_hash(paths: Sequence[str]) -> str:
    """sha256 of the bytes of every file of `paths` (a folder: its files, by name), 16 hex digits."""
    digest = hashlib.sha256()
    for path in map(Path, paths):
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file():
                update_with_file(digest, file)
    return digest.hexdigest()[:16]


def _decoded(image: RequestImage) -> np.ndarray | RequestProblem:
    """The pixels of `image`, or the 422 RequestProblem of pixels that do not decode."""
    try:
        return decode_request_image(image)
    except RequestProblem as problem:
        return problem


class InferenceEngine:
    """A loaded model (or ensemble) that detects batches of images with per-request settings.

    spec: the detector, its weights paths (checkpoints or exported models; several form an ensemble) and its
    settings the defaults of every request. max_batch: images per forward pass (the predictor's `batch`). The
    images of one `detect` call are letterboxed and grouped by shape as `Predictor.predict_images` does, so that
    an answer does not depend on the batch it went in, beyond the float rounding of a batched convolution.
    `detect` decodes its images (a batch's at once, on as many threads as the process has cores) and may be
    called from `info.streams` threads at once (`inference_streams`)."""

    def __init__(self, spec: DetectorSpec, *, max_batch: int) -> None:
        self.predictor = Predictor.from_spec(replace(spec, inference=replace(spec.inference, batch=max_batch)))
        self.max_batch = self.predictor.config.batch  # at most a fixed-batch export's, unless asked (`from_model`)
        self.defaults = Settings(
            replace(self.predictor.config, batch=1), self.predictor.slicing, spec.classifier is not None
        )
        self._predictors: OrderedDict[Settings, object] = OrderedDict({self.defaults: self.predictor})
        self._lock = threading.Lock()  # over `_predictors` and `_batches`, which the streams' threads share
        self._batches = 0  # batches in `detect` (or a warm-up pass) now
        self._decoders = concurrent.futures.ThreadPoolExecutor(available_cores(), thread_name_prefix="tphyolo-decode")
        backends = self.predictor.backends
        self.info = ModelInfo(
            name="+".join(Path(w).name for w in spec.models), hash=weights_hash(spec.models),
            names=tuple(self.predictor.names), stride=max(b.stride for b in backends),
            imgsz=self.predictor.config.imgsz,
            backend="+".join(sorted({b.format for b in backends})),
            precision=ran_precision(backends[0]), device=str(self.predictor.device),
            classifier=spec.classifier is not None, defaults=self.defaults, threads=torch.get_num_threads(),
            streams=inference_streams(backends, alone_when=self._holds_one_batch),
        )  # fmt: skip

    def predictor_for(self, settings: Settings):
        """The Predictor of `settings` (sharing the loaded models)."""
        with self._lock:
            predictor = self._predictors.get(settings)
            if predictor is None:
                config = replace(settings.config, batch=self.max_batch)
                predictor = self.predictor.with_settings(config, slice=settings.slicing, classifier=settings.classifier)
                self._predictors[settings] = predictor
                while len(self._predictors) > SETTINGS_KEPT:
                    self._predictors.popitem(last=False)
            self._predictors.move_to_end(settings)
            return predictor

    def detect(self, images: Sequence[RequestImage], settings: Settings) -> list[np.ndarray | RequestProblem]:
        """Per checked image of a request, decoded here: its detections (`detect_pixels`), or the 422
        RequestProblem of pixels that do not decode (the other images are detected all the same)."""
        with self._batch():  # the images of a batch decode at once (OpenCV lets go of the GIL while it decodes)
            decoded = list(self._decoders.map(_decoded, images)) if len(images) > 1 else [_decoded(images[0])]
            pixels = [d for d in decoded if not isinstance(d, RequestProblem)]
            found = iter(self.detect_pixels(pixels, settings) if pixels else ())
            return [d if isinstance(d, RequestProblem) else next(found) for d in decoded]

    def close(self) -> None:
        """Let the decoding threads go (an engine is otherwise kept for its process's life)."""
        self._decoders.shutdown(wait=False, cancel_futures=True)

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        """Counts a batch in the engine while open (`_holds_one_batch`)."""
        with self._lock:
            self._batches += 1
        try:
            yield
        finally:
            with self._lock:
                self._batches -= 1

    def _holds_one_batch(self) -> bool:
        """Whether the engine is busy with one batch only: its forward may then run alone on every thread, as
        no other batch waits for a stream (`OpenVINOBackend.use_streams`)."""
        return self._batches <= 1

    def detect_pixels(self, images: Sequence[np.ndarray], settings: Settings) -> list[np.ndarray]:
        """Per uint8 BGR image: its detections (n, 6) float32 x1, y1, x2, y2 (original pixels), score, class id,
        by descending score."""
        results = self.predictor_for(settings).predict_images(list(images))
        return [
            np.concatenate([r.boxes.numpy(), r.scores.numpy()[:, None], r.labels.numpy()[:, None]], axis=1).astype(
                np.float32
            )
            for r in results
        ]

    def warm_up(self) -> float:
        """Run WARMUP_PASSES passes on a grey image (first-call costs: allocations, kernel choice); seconds taken."""
        start = time.perf_counter()
        image = np.full((WARMUP_SIDE, WARMUP_SIDE, 3), 114, np.uint8)
        for _ in range(WARMUP_PASSES):
            with self._batch():
                self.detect_pixels([image], self.defaults)
        return time.perf_counter() - start
