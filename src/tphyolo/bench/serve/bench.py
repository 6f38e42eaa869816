"""`tphyolo bench serve`: closed-loop load on the detection service, dynamic batching against `--max-batch 1`,
the service against the in-process Predictor, and where a request's time goes.

For each `max_batch` (the service's default and 1, each a `tphyolo serve` on 127.0.0.1, side by side; or one
server already running on this machine, `url`) and each concurrency C: C clients send the same image back to
back, `requests` in all (in `rounds` slices alternating between the servers, each at most `time_limit_s`),
each waiting for its answer before the next (closed loop); a progress line at least every few seconds.
Measured: throughput (images/s), latency p50/p99, answers by status, mean batch size (from /metrics), resident
memory of each server with its worker after the level, the service's own timings of each answer.

Rows (`tphyolo.bench.report.Row`), one baseline per row name:
- `serve batching` per C: ms per image (1000 / throughput) of the default max_batch against max_batch 1;
  memory: server + worker resident MiB of each;
- `serve p99` per C: p99 latency of the default max_batch against max_batch 1;
- `serve vs predict` per C and server: ms per image against `Predictor` in this process on the decoded image,
  one image at a time as `tphyolo predict` runs, under the worker's PyTorch threads (median of
  `baseline_repeats`; its time under PyTorch's default threads, what a script gets, is in `extra`);
- `serve vs predict+decode` per C and server: the same against that Predictor given the encoded image, decoding
  it as predict decodes a file (what a script pays per JPEG, and what the service must do too);
- `serve p50 vs predict+decode` per C and server: the median latency of an answer against that time;
- `serve stage` (no baseline): each step of a request in ms -- decode, letterbox, forward, NMS, encode timed in
  this process under the worker's threads (`tphyolo.bench.serve.stages`), and per C and server from the answers:
  queue (the wait for a batch), worker (its batch in the worker: decode, letterbox, forward, NMS), hop (the rest
  of the service's time: reading the body and its header, the event loop, the hop to the worker process and
  back), http
  (the client's latency beyond the service's time: HTTP, encoding and parsing the answer);
- `serve forward` (no baseline): the forward's ms per image at batch 1, 4 and 8 under the worker's threads,
  which says whether batching can pay on this machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tphyolo.bench.report import Row, significant
from tphyolo.bench.serve.load import LoadResult, Progress, ServerProcess, bench_image, check_loopback, closed_loop
from tphyolo.bench.serve.stages import STAGES, forward_per_image, stage_times, torch_threads
from tphyolo.bench.timing import time_call
from tphyolo.data.files.image_io import decode_image
from tphyolo.predict.predictor import Predictor

PROGRESS_EVERY_S = 10.0
FORWARD_BATCHES = (1, 4, 8)


@dataclass(frozen=True)
class ServeBenchSettings:
    """weights: what the servers load (paths); imgsz; concurrency levels; requests per level and server;
    max_batches: the servers started (None: the service's default); url: a running loopback server instead
    (one pass); image: a file (default: a generated 1280x720 scene); time_limit_s per slice of a level;
    rounds: slices per level and server, alternating between the servers.

    The defaults finish in about two minutes on a busy 2-core CPU with tph-yolov5n at 640 px (1 and 16
    callers, 48 requests each): 1,4,16,64 and 200 requests took over 150 s there without a line."""

    weights: tuple[str, ...]
    imgsz: int = 640
    concurrency: tuple[int, ...] = (1, 16)
    requests: int = 48
    max_batches: tuple[int | None, ...] = (None, 1)
    url: str | None = None
    image: str | None = None
    time_limit_s: float = 60.0
    rounds: int = 2
    baseline_repeats: int = 5
    server_flags: tuple[str, ...] = field(default=("--device", "cpu", "--timeout", "600"))  # no 504 under load


def predict_ms(predictor: Predictor, image: np.ndarray, repeats: int) -> float:
    """Median ms of `predictor` on `image`, one call per image (the baseline), after one warm-up call."""
    return time_call(lambda: predictor(image), device=predictor.device, warmup=1, repeats=repeats).median_ms


def predict_decoded_ms(predictor: Predictor, body: bytes, repeats: int) -> float:
    """Median ms of decoding the encoded image `body` as predict decodes a file, then `predictor` on it."""

    def call() -> object:
        return predictor(decode_image(body, "body")[0])

    return time_call(call, device=predictor.device, warmup=1, repeats=repeats).median_ms


@dataclass
class _Level:
    """What one server gave at one concurrency: the load merged over rounds, its memory after."""

    load: LoadResult | None = None
    memory_mb: float | None = None


def bench_serve(settings: ServeBenchSettings, *, log: Callable[[str], None] = print) -> list[Row]:
    """The rows of the module docstring. The servers run side by side (one idle while the other is loaded)
    and each level is measured in `rounds` alternating slices, so that a machine whose load drifts (other
    jobs) weighs on both alike."""
    import httpx

    body, image = bench_image(settings.image)
    log(f"timing the in-process Predictor ({settings.baseline_repeats + 1} images, one at a time)")
    predictor = Predictor(list(settings.weights), imgsz=settings.imgsz, device="cpu")
    baseline = predict_ms(predictor, image, settings.baseline_repeats)
    log(f"predict (in-process Predictor, one image at a time, PyTorch's default threads): {baseline:.1f} ms per image")
    levels: dict[tuple[int | None, int], _Level] = {}
    passes = [None] if settings.url is not None else list(settings.max_batches)
    with contextlib.ExitStack() as stack:
        servers: dict[int | None, ServerProcess | None] = {}
        urls: dict[int | None, str] = {}
        for max_batch in passes:
            if settings.url is not None:
                servers[max_batch], urls[max_batch] = None, check_loopback(settings.url)
                continue
            flags = ["--weights", *settings.weights, "--img", str(settings.imgsz), *settings.server_flags]
            flags += [] if max_batch is None else ["--max-batch", str(max_batch)]
            log(f"starting tphyolo serve --max-batch {max_batch or 'default'} (loads and warms the model)")
            servers[max_batch] = ServerProcess(flags)
            urls[max_batch] = stack.enter_context(servers[max_batch])
            log(f"server max_batch {max_batch or 'default'} ready at {urls[max_batch]}")
        for max_batch, url in urls.items():
            model = httpx.get(f"{url}/v1/models").json()["models"][0]
            said = "; ".join(f"{name} {d['value']} ({d['source']}: {d['why']})"
                             for name, d in model.get("decisions", {}).items())  # fmt: skip
            log(f"server max_batch {max_batch or 'default'} runs: {said or 'no decisions said'}")
        threads = int(model.get("threads", 1))
        log(f"timing each step in-process under the worker's {threads} thread(s)")
        with torch_threads(threads):
            baseline = {"worker threads": predict_ms(predictor, image, settings.baseline_repeats),
                        "with decoding": predict_decoded_ms(predictor, body, settings.baseline_repeats),
                        "default threads": baseline}  # fmt: skip
        log(f"predict under the worker's {threads} thread(s): {baseline['worker threads']:.1f} ms per image, "
            f"{baseline['with decoding']:.1f} ms with its decoding")
        stages = stage_times(predictor, body, threads=threads)
        forward = forward_per_image(predictor, image, batches=FORWARD_BATCHES, threads=threads)
        log(f"in-process, {threads} thread(s): " + ", ".join(f"{k} {v:.1f} ms" for k, v in stages.items()))
        log("forward per image: " + ", ".join(f"batch {b} {ms:.1f} ms" for b, ms in forward.items()))
        for concurrency in settings.concurrency:
            _load_level(settings, urls, concurrency, body, levels, log)
            for max_batch, server in servers.items():
                level = levels[(max_batch, concurrency)]
                level.memory_mb = None if server is None else server.memory_mb()
                result = level.load
                log(f"max_batch {max_batch or 'default'} concurrency {concurrency}: {result.throughput:.2f} "
                    f"images/s, p50 {result.percentile_ms(50)} ms, p99 {result.percentile_ms(99)} ms, "
                    f"mean batch {result.mean_batch}, statuses {dict(result.statuses)}")  # fmt: skip
    return _rows(levels, baseline, stages=stages, forward=forward, threads=threads)


def _load_level(settings: ServeBenchSettings, urls: dict, concurrency: int, body: bytes, levels: dict, log) -> None:
    """One concurrency level on every server: a warm-up, then `rounds` alternating slices, merged in `levels`."""
    share = max(settings.requests // settings.rounds, 1)
    load = [(body, "image/jpeg", {})] * share
    for url in urls.values():  # warm-up at this concurrency
        closed_loop(url, load[: max(concurrency, 4)], concurrency=concurrency, time_limit_s=settings.time_limit_s)
    for round_ in range(settings.rounds):
        for max_batch, url in urls.items():
            label = f"max_batch {max_batch or 'default'} c={concurrency} round {round_ + 1}/{settings.rounds}"
            progress = Progress(label, len(load), log=log, every_s=PROGRESS_EVERY_S)
            part = closed_loop(url, load, concurrency=concurrency, time_limit_s=settings.time_limit_s,
                               on_answer=progress)  # fmt: skip
            level = levels.setdefault((max_batch, concurrency), _Level())
            level.load = part if level.load is None else level.load.merged(part)


def _ms_per_image(result: LoadResult) -> float | None:
    return significant(1000 / result.throughput) if result.throughput else None


def _stage_rows(key: tuple[int | None, int], result: LoadResult) -> list[Row]:
    """queue, worker, hop and http of the answers of one server at one concurrency (medians, ms)."""
    max_batch, concurrency = key
    queue, worker, total = (result.stage_ms(name) for name in ("queue_ms", "inference_ms", "total_ms"))
    client = result.percentile_ms(50)
    if None in (queue, worker, total, client):
        return []
    parts = {"queue": queue, "worker": worker, "hop": max(total - queue - worker, 0.0),
             "http": max(client - total, 0.0)}  # fmt: skip
    where = f"c={concurrency} max_batch={max_batch or 'default'}"
    return [Row("serve stage", f"{name} {where}", significant(ms) if ms else 0.0) for name, ms in parts.items()]


def _rows(
    levels: dict[tuple[int | None, int], _Level],
    predict: dict[str, float],
    *,
    stages: dict[str, float],
    forward: dict[int, float],
    threads: int,
) -> list[Row]:
    rows = []
    for (max_batch, concurrency), level in levels.items():
        result = level.load
        plain = levels.get((1, concurrency))
        extra = {
            "throughput": significant(result.throughput), "p50_ms": result.percentile_ms(50),
            "p99_ms": result.percentile_ms(99), "mean_batch": result.mean_batch,
            "requests": sum(result.statuses.values()),
            "errors": {str(s): n for s, n in sorted(result.statuses.items()) if s != 200},
        }  # fmt: skip
        where = f"c={concurrency} max_batch={max_batch or 'default'}"
        extra["predict_ms_default_threads"] = significant(predict["default threads"])
        baseline, decoded = significant(predict["worker threads"]), significant(predict["with decoding"])
        rows.append(Row("serve vs predict", where, _ms_per_image(result), baseline, extra=extra))
        rows.append(Row("serve vs predict+decode", where, _ms_per_image(result), decoded))
        rows.append(Row("serve p50 vs predict+decode", where, result.percentile_ms(50), decoded))
        if max_batch != 1 and plain is not None and plain.load.throughput:
            config = f"c={concurrency} max_batch={max_batch or 'default'} vs 1"
            rows.append(Row("serve batching", config, _ms_per_image(result), _ms_per_image(plain.load),
                            ours_peak_mb=_mb(level.memory_mb), baseline_peak_mb=_mb(plain.memory_mb),
                            extra={"mean_batch": result.mean_batch}))  # fmt: skip
            rows.append(Row("serve p99", config, result.percentile_ms(99), plain.load.percentile_ms(99)))
    for name in STAGES:
        rows.append(Row("serve stage", f"{name} in-process", significant(stages[name]), extra={"threads": threads}))
    for key, level in levels.items():
        rows += _stage_rows(key, level.load)
    for batch, ms in forward.items():
        rows.append(Row("serve forward", f"batch {batch} per image", significant(ms), extra={"threads": threads}))
    return rows


def _mb(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
