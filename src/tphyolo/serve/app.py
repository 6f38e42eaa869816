"""The detection service as an ASGI app: `create_app(weights, ...)` (or `detector_app(spec)` for a
`DetectorSpec`) and its routes.

    app = create_app("best.pt", InferenceConfig(imgsz=640), serve=ServeConfig(max_batch=8))
    # uvicorn.run(app, host="127.0.0.1", port=8000), or `tphyolo serve --weights best.pt`

Routes:
- `POST /v1/detect`: images (a raw body, or multipart `file` parts) and options (query string or form fields,
  `tphyolo.serve.options`) -> detections in original pixels (`tphyolo.serve.answers`);
- `GET /v1/models`: what is loaded; `GET /healthz`: the process answers; `GET /readyz`: 200 once the model is
  loaded and warm (503 before, and while a crashed worker restarts); `GET /metrics`: Prometheus text;
  `GET /docs`: the OpenAPI page; `GET /`: a page to drop an image on and see its boxes.

The model runs in a worker process fed by the batcher (`tphyolo.serve.batcher`); it starts when the app starts
(the port answers /healthz meanwhile) and stops, after the requests queued are answered, when the app stops
(within `grace` seconds of the shutdown's start: a worker busy past it is ended). Images are checked from
their headers in a thread pool, off the event loop, and decoded by the worker (`tphyolo.serve.images`); a
request whose cost (`tphyolo.serve.cost`) passes the limits is refused before it is queued.
Every answer other than 200 is `{"error": LINE}` with its status (`tphyolo.serve.problems`), logged once.
(No `from __future__ import annotations` here: FastAPI reads the routes' annotations, `fastapi.Request`
imported when the app is made, as objects.)
"""

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from html import escape
from importlib import resources

from tphyolo.errors import describe_error
from tphyolo.imports import require
from tphyolo.infer.build import spec_device
from tphyolo.infer.config import InferenceConfig
from tphyolo.infer.spec import DetectorSpec
from tphyolo.runtime.decisions import Decision, describe
from tphyolo.serve.answers import coco_answer, image_answer
from tphyolo.serve.batcher import Batcher, too_many_images
from tphyolo.serve.config import ServeConfig
from tphyolo.serve.cost import check_cost
from tphyolo.serve.engine import ONE_STREAM, ModelInfo
from tphyolo.serve.images import check_request_image
from tphyolo.serve.metrics import SERVE_INSTALL_HINT, ServiceMetrics
from tphyolo.serve.options import answer_format, request_settings
from tphyolo.serve.problems import CLOSE, RequestProblem, unavailable
from tphyolo.serve.uploads import read_uploads
from tphyolo.serve.worker import InferenceWorker, InProcessWorker

LOGGER = logging.getLogger(__name__)
CLIENT_GONE = 499  # the status counted (and logged) for a client that left before its answer
ANSWER_MARGIN_S = 1.0  # of the grace, left for ending a busy worker and answering what is left (503)
CHECK_THREADS = 2  # images whose headers are read at once, off the event loop (the worker decodes their pixels)

# The page at `/` (`page.html`, a file of this package) with what the service runs written into it: the model's
# file names, backend, precision, device and image size, and its classes; while the model loads, a line saying so,
# and the page reloads itself every RELOAD_S seconds, at most RELOADS times, until it is ready.
PAGE = "page.html"
MODEL_MARK = "<!-- model -->"  # where page.html shows what is loaded
RELOAD_S = 2  # seconds between the reloads of a page opened while the model loads
RELOADS = 90  # at most this many: three minutes, as long as the serve tests wait for a start on 2 busy cores


def model_line(info: ModelInfo | None, *, failure: str | None = None) -> str:
    """The page's `<p id="model">` line: what is loaded (`info`), why nothing is (`failure`), or that it loads."""
    if info is not None:
        return (f'<p id="model">model <b>{escape(info.name)}</b> ({escape(info.backend)}, {escape(info.precision)} '
                f"on {escape(info.device)}, {info.imgsz} px), {len(info.names)} classes: "
                f"{escape(', '.join(info.names))}</p>")  # fmt: skip
    if failure is not None:
        return f'<p id="model" data-state="failed">the model did not load: {escape(failure)}</p>'
    return (f'<p id="model" data-state="loading" data-reload-s="{RELOAD_S}" data-reloads="{RELOADS}">the model is '
            "loading; this page reloads itself until it is ready</p>")  # fmt: skip


def page_html(info: ModelInfo | None, *, failure: str | None = None) -> str:
    """page.html with `model_line` in place of its MODEL_MARK."""
    text = resources.files(__package__).joinpath(PAGE).read_text(encoding="utf-8")
    return text.replace(MODEL_MARK, model_line(info, failure=failure), 1)


class Service:
    """What the routes share: the spec of the model, the service settings, the batcher and its worker, the
    metrics. `start()` loads the model in the background; `stop()` answers what is queued, then stops."""

    def __init__(self, spec: DetectorSpec, settings: ServeConfig, *, in_process: bool = False, worker=None) -> None:
        """spec: the detector (its weights paths; its settings the defaults of every request). in_process: run
        the model in this process (`InProcessWorker`: a Ray Serve replica, which Ray supervises), not in a child
        process; worker: one of InferenceWorker's interface to use instead."""
        self.spec, self.settings = spec, settings
        self.max_batch, source, why = settings.batching(spec_device(spec).type)
        self.batching = Decision(str(self.max_batch), source, why)
        worker_kind = InProcessWorker if in_process else InferenceWorker
        self.worker = worker if worker is not None else worker_kind(spec, max_batch=self.max_batch)
        self.metrics = ServiceMetrics(queue_depth=lambda: self.batcher.depth, restarts=lambda: self.worker.restarts)
        self.batcher = Batcher(
            self.worker, max_batch=self.max_batch, max_wait_s=settings.max_wait_ms / 1000,
            max_queue=settings.max_queue, on_batch=self.metrics.observe_batch,
        )  # fmt: skip
        self.checker = concurrent.futures.ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="tphyolo-serve-check")
        self.failure: str | None = None  # why the model did not load
        self._stop_by: float | None = None  # when a busy worker is ended in a shutdown (monotonic seconds)
        self._ending: threading.Timer | None = None

    def start(self) -> None:
        def load() -> None:
            try:
                self.batcher.start()
                LOGGER.info("model %s loaded and warm; ready: %s", self.worker.info.name, self.describe_decisions())
            except Exception as error:  # noqa: BLE001 - any failure to load is the service's one-line failure
                self.failure = describe_error(error)
                LOGGER.error("%s", self.failure)

        threading.Thread(target=load, name="tphyolo-serve-load", daemon=True).start()

    def decisions(self) -> dict[str, Decision]:
        """How the loaded model is run: images per forward pass (`batching`) and batches at once (`streams`,
        the worker's `ModelInfo.streams`), each with its source and why; decided once, at start-up."""
        return {"batching": self.batching, "streams": getattr(self.worker.info, "streams", ONE_STREAM)}

    def describe_decisions(self) -> str:
        return describe(self.decisions())

    def begin_shutdown(self) -> None:
        """The shutdown starts now (the first call counts): what is queued is answered until ANSWER_MARGIN_S
        before the grace ends; then a worker still busy is ended and what is left answered 503, so that every
        request in flight has its answer before the server gives up on it."""
        if self._stop_by is not None:
            return
        grace = self.settings.grace
        self._stop_by = time.monotonic() + max(grace - min(ANSWER_MARGIN_S, grace / 2), 0.0)
        self._ending = threading.Timer(self._stop_by - time.monotonic(), self.batcher.stop, kwargs={"timeout": 0.0})
        self._ending.daemon = True
        self._ending.start()

    def stop(self) -> None:
        """Answer what is queued until the grace ends (`begin_shutdown`, else now), then stop the worker."""
        self.begin_shutdown()
        self.batcher.stop(timeout=max(self._stop_by - time.monotonic(), 0.0))
        self._ending.cancel()
        self.checker.shutdown(wait=False, cancel_futures=True)

    def check_ready(self) -> None:
        """Raises a 503 RequestProblem while no model is ready."""
        if self.failure is not None:
            raise unavailable(f"the model did not load: {self.failure}")
        if self.batcher.ready:
            return
        if self.worker.info is None:
            raise unavailable("the model is loading")
        if self.batcher.stuck:
            raise unavailable("the inference worker is busy with a batch past its deadline")
        raise unavailable("the inference worker restarts")

    async def detect(self, request) -> tuple:
        """The answer of a POST /v1/detect request (JSON data) and its status; RequestProblem otherwise."""
        arrived = time.monotonic()
        self.check_ready()
        try:  # a client sending its body slowly (slowloris) holds no more than the deadline, and its connection
            reading = read_uploads(request, self.settings.max_body_bytes)
            uploads, form_options = await asyncio.wait_for(reading, timeout=self.settings.timeout)
        except asyncio.TimeoutError:
            message = f"body not received within {self.settings.timeout:g} s (--timeout)"
            raise RequestProblem(408, message, headers=CLOSE) from None
        options: dict[str, list[str]] = {}
        for name, value in request.query_params.multi_items():
            options.setdefault(name, []).append(value)
        for name, values in form_options.items():
            options.setdefault(name, []).extend(values)
        kind = answer_format(options)
        info = self.worker.info
        settings = request_settings(
            {k: v for k, v in options.items() if k != "format"}, info.defaults,
            num_classes=len(info.names), has_classifier=info.classifier,
        )  # fmt: skip
        if len(uploads) > self.settings.max_queue:
            raise RequestProblem(413, too_many_images(len(uploads), self.settings.max_queue))
        images = await asyncio.get_running_loop().run_in_executor(self.checker, _check_all, uploads)
        check_cost(
            [image.shape for image in images], settings, models=len(self.spec.models),
            max_views=self.settings.max_views, max_candidates=self.settings.max_candidates, given=list(options),
        )  # fmt: skip
        deadline = arrived + self.settings.timeout
        futures = self.batcher.submit(images, settings, deadline=deadline)
        left = max(deadline - time.monotonic(), 0)
        answers = await _answers(futures, request, timeout=left, limit=self.settings.timeout)
        for answer in answers:
            self.metrics.queue_seconds.observe(answer.queue_s)
        if kind == "coco":
            return coco_answer([a.rows for a in answers]), 200
        entries = [
            image_answer(a.rows, names=info.names, shape=image.shape, file=None if u.name == "body" else u.name)
            for a, image, u in zip(answers, images, uploads, strict=True)
        ]
        timings = {
            "queue_ms": 1000 * max(a.queue_s for a in answers),
            "inference_ms": 1000 * max(a.inference_s for a in answers),
            "total_ms": 1000 * (time.monotonic() - arrived),
        }
        return {"model": {"name": info.name, "hash": info.hash}, "timings": timings, "images": entries}, 200


async def _answers(futures, request, *, timeout: float, limit: float) -> list:
    """The results of `futures` (`Batcher.submit`'s, for `request`, whose body is read) within `timeout` seconds;
    RequestProblem otherwise: 504 past the deadline (`limit`, the --timeout), CLIENT_GONE once the client has
    disconnected. Past either, or when this call is cancelled, the futures are cancelled: the images still
    queued leave the queue (`Batcher`), and nobody computes them."""
    waiting = asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
    leaving = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait((waiting, leaving), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
        waiting.cancel()  # nothing once answered
    if waiting in done:
        return waiting.result()
    if leaving in done:
        raise RequestProblem(CLIENT_GONE, "the client disconnected before its answer; its images left the queue")
    raise RequestProblem(504, f"no answer within the deadline of {limit:g} s (--timeout)")


async def _disconnected(request) -> None:
    """Returns once the client of `request` (a starlette Request whose body is read) has disconnected: the ASGI
    server then answers `receive` with http.disconnect, and until then waits."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _check_all(uploads) -> list:
    return [check_request_image(upload.data, where=upload.name) for upload in uploads]


def create_app(
    weights: str | os.PathLike | Sequence[str | os.PathLike],
    config: InferenceConfig | None = None,
    *,
    serve: ServeConfig | None = None,
    **settings,
):
    """The FastAPI app serving `weights` (a checkpoint or exported model path, or several: an ensemble) with
    the default inference settings `config` and `settings`, Predictor's keywords (`slice`, `model_weights`,
    `classifier`, `classifier_weight`, `runtime`, `device`, InferenceConfig fields: `DetectorSpec.from_keywords`),
    and the service settings `serve` (ServeConfig). Raises MissingExtraError naming the `serve` extra when FastAPI
    is not installed."""
    return detector_app(DetectorSpec.from_keywords(weights, config, **settings), serve)


def detector_app(spec: DetectorSpec, serve: ServeConfig | None = None):
    """The FastAPI app serving the detector `spec` (its weights paths; its settings the defaults of every
    request) with the service settings `serve`; as `create_app`."""
    require("fastapi", purpose="tphyolo serve", install=SERVE_INSTALL_HINT)
    return build_app(Service(spec, serve or ServeConfig()))


def build_app(service: Service, *, lifespan: bool = True):
    """The FastAPI app of `service` (its routes, module docstring); with `lifespan`, the app starts the service
    when it starts and stops it when it stops (else the caller does: a Ray Serve replica)."""
    fastapi = require("fastapi", purpose="tphyolo serve", install=SERVE_INSTALL_HINT)
    from fastapi.responses import HTMLResponse, JSONResponse, Response
    from starlette.requests import ClientDisconnect

    @contextlib.asynccontextmanager
    async def lifespan_of_service(app):
        service.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, service.stop)

    app = fastapi.FastAPI(title="tphyolo detection service", lifespan=lifespan_of_service if lifespan else None)
    app.state.service = service

    def problem(request, error: RequestProblem) -> JSONResponse:
        LOGGER.warning("%s %s -> %d: %s", request.method, request.url.path, error.status, error.message)
        return JSONResponse({"error": error.message}, status_code=error.status, headers=error.headers)

    @app.post("/v1/detect", summary="detect objects in images")
    async def detect(request: fastapi.Request):
        """Images as the raw body (image/jpeg, image/png, image/webp, image/tiff) or multipart `file` parts;
        options conf, iou, max_det, classes, imgsz, augment, slice, overlap, classifier, format=json|coco
        in the query string or form fields. See docs/serving.md."""
        arrived = time.monotonic()
        try:
            data, status = await service.detect(request)
            response = JSONResponse(data, status_code=status)
        except RequestProblem as error:
            response = problem(request, error)
        except ClientDisconnect:  # nobody to answer: counted as nginx counts it, logged once
            response = problem(request, RequestProblem(CLIENT_GONE, "the client disconnected before sending its body"))
        except Exception as error:  # noqa: BLE001 - one line and a 500, never a traceback in an answer
            response = problem(request, RequestProblem(500, f"internal error: {describe_error(error)}"))
        service.metrics.observe_request(response.status_code, time.monotonic() - arrived)
        return response

    @app.get("/v1/models", summary="what is loaded")
    async def models(request: fastapi.Request):
        try:
            service.check_ready()
        except RequestProblem as error:
            return problem(request, error)
        info = service.worker.info
        decisions = {name: decision.as_dict() for name, decision in service.decisions().items()}
        return {"models": [info.as_json() | {"max_batch": service.max_batch, "decisions": decisions}]}

    @app.get("/healthz", summary="the process answers")
    async def healthz():
        """Alive; with the inference worker's process id (null while none runs), how often it restarted and
        whether it is ready (as /readyz, for this process: behind Ray's proxy, for the replica that answers)."""
        worker = {"pid": service.worker.pid, "restarts": service.worker.restarts, "ready": service.batcher.ready}
        return {"status": "ok", "worker": worker}

    @app.get("/readyz", summary="the model is loaded and warm")
    async def readyz(request: fastapi.Request):
        try:
            service.check_ready()
        except RequestProblem as error:
            return JSONResponse({"error": error.message}, status_code=error.status, headers=error.headers)
        return {"status": "ready"}

    @app.get("/metrics", summary="Prometheus metrics")
    async def metrics():
        text, content_type = service.metrics.text()
        return Response(text, media_type=content_type)

    @app.get("/", summary="a page to try the service", response_class=HTMLResponse)
    async def page():
        return HTMLResponse(page_html(service.worker.info, failure=service.failure))

    return app
