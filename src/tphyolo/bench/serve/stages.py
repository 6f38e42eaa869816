"""Where a request's time goes in the detection service, step by step, timed in this process.

    stages = stage_times(predictor, body, threads=1, repeats=5)
    # {"check": ms, "decode": ms, "letterbox": ms, "forward": ms, "nms": ms, "encode": ms}
    forward_per_image(predictor, image, batches=(1, 4, 8), threads=1)  # {batch: ms per image}

Each step is the function the service calls for it (`check_request_image`, the header read by the server;
`decode_request_image`, the pixels decoded by the worker; the predictor's letterbox and prepare, its backend's
forward, NMS at its settings, `image_answer` and the JSON text), on one image, under
`threads` PyTorch threads (the worker's), median of `repeats`; the process's thread count is restored after.
What the service adds -- the wait for a batch, the hop to its worker process and back, HTTP -- is measured
from its answers (`tphyolo.bench.serve.bench`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from tphyolo.bench.timing import time_call, time_calls
from tphyolo.infer.windows import image_windows, view_batches
from tphyolo.ops import non_max_suppression
from tphyolo.predict.predictor import Predictor
from tphyolo.serve.answers import image_answer
from tphyolo.serve.images import check_request_image, decode_request_image

STAGES = ("check", "decode", "letterbox", "forward", "nms", "encode")


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """PyTorch's intra-op threads set to `threads` while open, restored after."""
    kept = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(kept)


def _batches(predictor: Predictor, images: Sequence[np.ndarray]) -> list:
    windows = image_windows(list(images), predictor.slicing)
    return list(view_batches(list(images), windows, detector=predictor.detector, imgsz=predictor.config.imgsz,
                             batch=len(images)))  # fmt: skip


def stage_times(predictor: Predictor, body: bytes, *, threads: int, repeats: int = 5) -> dict[str, float]:
    """Median ms of each of STAGES for the JPEG (or PNG...) `body`, one image, through `predictor`'s model."""
    config, backend = predictor.config, predictor.backends[0]
    checked = check_request_image(body, where="body")
    image = decode_request_image(checked)
    with torch_threads(threads), torch.inference_mode():
        x = _batches(predictor, [image])[0].x
        backend.run(x)  # warm-up at this shape
        prediction = backend.run(x).float()
        rows = predictor.predict_images([image])[0]
        rows = np.concatenate([rows.boxes.numpy(), rows.scores.numpy()[:, None], rows.labels.numpy()[:, None]], 1)

        def nms() -> object:
            return non_max_suppression(
                prediction, conf_thres=config.conf, iou_thres=config.iou, classes=config.classes,
                agnostic=config.agnostic, max_det=config.max_det,
            )  # fmt: skip

        def encode() -> bytes:
            entry = image_answer(rows.astype(np.float32), names=predictor.names, shape=image.shape[:2], file=None)
            return json.dumps({"images": [entry]}).encode()

        calls = (lambda: check_request_image(body, where="body"), lambda: decode_request_image(checked),
                 lambda: _batches(predictor, [image]), lambda: backend.run(x), nms, encode)  # fmt: skip
        timings = [time_call(call, device=backend.device, warmup=0, repeats=repeats) for call in calls]
        return {stage: timing.median_ms for stage, timing in zip(STAGES, timings, strict=True)}


def forward_per_image(
    predictor: Predictor, image: np.ndarray, *, batches: Sequence[int], threads: int, repeats: int = 3
) -> dict[int, float]:
    """Median ms per image of the forward pass of `predictor`'s model on batches of `image`, per batch size;
    the sizes interleaved in every repeat, so that load drifting meanwhile weighs on each alike."""
    backend = predictor.backends[0]
    with torch_threads(threads), torch.inference_mode():
        inputs = [_batches(predictor, [image] * b)[0].x for b in batches]
        calls = [lambda x=x: backend.run(x) for x in inputs]
        timings = time_calls(calls, device=backend.device, warmup=1, repeats=repeats)
    return {b: timing.median_ms / b for b, timing in zip(batches, timings, strict=True)}
