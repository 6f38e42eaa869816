"""Running the service: uvicorn on the app, with graceful shutdown.

    run_server(app, ServeConfig(host="127.0.0.1", port=8000, grace=10))
    run_serve(ServeJob(ServedModels(weights=("best.pt",))), runtime=RuntimeConfig(device="cpu"))

SIGTERM or SIGINT stop the listener (new connections are refused), give the requests in flight up to `grace`
seconds to be answered, then stop the app (its queue answered, its worker stopped): the process ends within
the grace and the second or two it takes to end a busy worker. One log line per error request (the app's), no
access log. The socket is bound before the model loads: an address that is not this machine's or a port in
use raises UsageError naming --host or --port. When the model does not load, the server stops and
`run_server` raises ValueError with the worker's one-line reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

from tphyolo.errors import InputError, UsageError
from tphyolo.imports import require
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.serve.app import create_app, engine_spec
from tphyolo.serve.config import ServeConfig, ServeJob
from tphyolo.serve.metrics import SERVE_INSTALL_HINT
from tphyolo.serve.ray_app import serve_on_ray

_POLL_S = 0.05


def run_server(
    app,
    settings: ServeConfig,
    *,
    on_listening: Callable[[str, int], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve `app` (from `create_app`) on `settings.host:settings.port` until SIGTERM/SIGINT or `stop` is set
    (which shuts down as SIGTERM does; for a server run in a thread, where signals do not reach it); see the
    module docstring. `on_listening(host, port)` is called once the socket listens (port 0: the one the OS
    picked)."""
    uvicorn = require("uvicorn", purpose="tphyolo serve", install=SERVE_INSTALL_HINT)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, timeout_graceful_shutdown=settings.grace, access_log=False,
        log_level="warning", lifespan="on",
    )  # fmt: skip
    server = uvicorn.Server(config)
    service = app.state.service
    listener = listening_socket(settings.host, settings.port)

    async def serve() -> None:
        task = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not task.done():
            await asyncio.sleep(_POLL_S)
        if server.started and on_listening is not None:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            on_listening(host, port)
        while not task.done():
            if service.failure is not None or (stop is not None and stop.is_set()):
                server.should_exit = True
            if server.should_exit:  # a signal, `stop` or a failure: the grace starts now
                service.begin_shutdown()
            await asyncio.sleep(_POLL_S)
        await task

    try:
        with _signals_end_quietly():
            asyncio.run(serve())
    finally:
        listener.close()
    if service.failure is not None:
        raise InputError(service.failure)


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to `host:port` and listening. Raises UsageError naming --host (an address that is
    not one of this machine's) or --port (in use, or not allowed)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise UsageError(f"--host {host}: not an address to listen on ({describe_cause(error)})") from None
    listener = socket.socket(family, kind, proto)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        listener.close()
        if error.errno == errno.EADDRNOTAVAIL:
            raise UsageError(f"--host {host}: not an address of this machine ({describe_cause(error)})") from None
        raise UsageError(f"--port {port}: cannot listen on {host}:{port} ({describe_cause(error)})") from None
    listener.setblocking(False)
    return listener


def describe_cause(error: Exception) -> str:
    """The reason of a socket error, lower case, without its number."""
    return (getattr(error, "strerror", None) or str(error)).lower()


@contextlib.contextmanager
def _signals_end_quietly() -> Iterator[None]:
    """While open (in the main thread): SIGTERM and SIGINT do nothing but what uvicorn does with them (a
    graceful shutdown). uvicorn raises the signal again once it has shut down, for the handler it found; with
    this one, the command then ends normally (exit 0) instead of being killed by it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {sig: signal.signal(sig, lambda number, frame: None) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def run_serve(
    job: ServeJob,
    *,
    runtime: RuntimeConfig | None = None,
    device: str | None = None,
    on_listening: Callable[[str, int], None] | None = None,
    stop: threading.Event | None = None,
) -> None:
    """Serve `job` on `runtime` and `device` (defaults: Predictor's) until SIGTERM/SIGINT (in the main thread) or
    `stop` is set: on Ray Serve when `job.cluster.ray` (`tphyolo.serve.ray_app`), else with uvicorn in this
    process (`run_server`); `on_listening(host, port)` is called once it listens. Without `job.serve.max_batch`
    the batch is the device's default, at most a fixed-batch export's (the models settle it)."""
    inference = job.inference
    if job.serve.max_batch is None:
        inference = replace(inference, from_model=(*inference.from_model, "batch"))
    engine = {
        "slice": job.slice, "model_weights": job.models.model_weights, "classifier": job.classifier,
        "classifier_weight": job.classifier_weight, "runtime": runtime, "device": device,
    }  # fmt: skip
    if job.cluster.ray:
        spec = engine_spec(job.models.weights, inference, **engine)
        serve_on_ray(spec, job.serve, job.cluster, on_listening=on_listening, stop=stop)
        return
    run_server(create_app(job.models.weights, inference, serve=job.serve, **engine), job.serve,
               on_listening=on_listening, stop=stop)  # fmt: skip
