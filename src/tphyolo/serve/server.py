"""Running the service: uvicorn on the app, with graceful shutdown.

    run_server(app, ServeConfig(host="127.0.0.1", port=8000, grace=10))
    run_serve(ServeJob(DetectorSpec(("best.pt",))), runtime=RuntimeConfig(device="cpu"))

SIGTERM or SIGINT stop the listener (new connections are refused), give the requests in flight up to `grace`
seconds to be answered, then stop the app (its queue answered, its worker stopped): the process ends within
the grace and the second or two it takes to end a busy worker. One log line per error request (the app's), no
access log. The socket is bound before the model loads: an address that is not this machine's or a port in
use raises UsageError naming --host or --port. When the model does not load, the server stops and
`run_server` raises ValueError with the worker's one-line reason.

Connections are bounded in time, so that slow or trickling clients cannot pile up: a request's head within
`header_timeout` seconds of the connection's opening or of its first byte, its body within `timeout` (the
app's), each answered 408 and closed past it; an idle connection lasts `keep_alive` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace

from tphyolo.errors import InputError, UsageError
from tphyolo.imports import require
from tphyolo.runtime.config import RuntimeConfig
from tphyolo.runtime.console import NO_EVENTS, RunEvents
from tphyolo.serve.app import detector_app
from tphyolo.serve.config import ServeConfig, ServeJob
from tphyolo.serve.metrics import SERVE_INSTALL_HINT
from tphyolo.serve.ray_app import serve_on_ray

LOGGER = logging.getLogger(__name__)
_POLL_S = 0.05
MAX_HEAD_BYTES = 16 * 1024  # a request's line and headers at most (h11's default; larger: 400, closed)


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
        log_level="warning", lifespan="on", http=head_timed_protocol(settings.header_timeout),
        timeout_keep_alive=settings.keep_alive, h11_max_incomplete_event_size=MAX_HEAD_BYTES,
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


def head_timed_protocol(header_timeout: float) -> type:
    """uvicorn's h11 protocol, which also answers 408 and closes a connection that has not sent the whole head of a
    request (its line and headers) within `header_timeout` seconds of its opening, or of the first byte of a later
    request on it (as nginx's client_header_timeout). uvicorn bounds the idle wait between requests
    (timeout_keep_alive) and the head's size (MAX_HEAD_BYTES), not the time a head takes to trickle in; the
    body's time is the app's (--timeout)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    message = f"request head not received within {header_timeout:g} s (--header-timeout)"
    body = json.dumps({"error": message}).encode()
    answer = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
              b"content-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip

    class HeadTimedProtocol(H11Protocol):
        _head_timer = None  # runs from a head's start until the timeout; None between requests

        def _waiting_for_a_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._head_timer = self.loop.call_later(header_timeout, self._head_overdue)

        def data_received(self, data: bytes) -> None:
            if self._head_timer is None and self._waiting_for_a_head():  # a later request begins
                self._head_timer = self.loop.call_later(header_timeout, self._head_overdue)
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()  # idle from now: timeout_keep_alive's
            self._forget_the_head()

        def connection_lost(self, exc) -> None:
            self._forget_the_head()
            super().connection_lost(exc)

        def _forget_the_head(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_overdue(self) -> None:
            self._head_timer = None
            if self._waiting_for_a_head() and not self.transport.is_closing():
                LOGGER.warning("a connection from %s -> 408: %s", self.client, message)
                self.transport.write(answer)
                self.transport.close()

    return HeadTimedProtocol


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
    events: RunEvents = NO_EVENTS,
    stop: threading.Event | None = None,
) -> None:
    """Serve `job` on `runtime` (default: the detector spec's) and the spec's device until SIGTERM/SIGINT (in the
    main thread) or `stop` is set: on Ray Serve when `job.cluster.ray` (`tphyolo.serve.ray_app`), else with
    uvicorn in this process (`run_server`); `events.listening(host, port)` (`RunEvents`) is called once it
    listens. Without `job.serve.max_batch` the batch is the device's default, at most a fixed-batch export's (the
    models settle it)."""
    spec, inference = job.detector, job.detector.inference
    if job.serve.max_batch is None:
        inference = replace(inference, from_model=(*inference.from_model, "batch"))
    spec = replace(spec, inference=inference, runtime=runtime or spec.runtime)
    if job.cluster.ray:
        serve_on_ray(spec, job.serve, job.cluster, on_listening=events.listening, stop=stop)
        return
    run_server(detector_app(spec, job.serve), job.serve, on_listening=events.listening, stop=stop)
