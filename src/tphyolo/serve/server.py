"""Running the service: uvicorn on the app, with graceful shutdown.

    run_server(app, ServeConfig(host="127.0.0.1", port=8000, grace=10))

SIGTERM or SIGINT stop the listener (new connections are refused), give the requests in flight up to `grace`
seconds to be answered, then stop the app (its queue answered, its worker stopped). One log line per error
request (the app's), no access log.
"""

from __future__ import annotations

from tphyolo.imports import require
from tphyolo.serve.config import ServeConfig
from tphyolo.serve.metrics import SERVE_INSTALL_HINT


def run_server(app, settings: ServeConfig, *, on_listening=None) -> None:
    """Serve `app` on `settings.host:settings.port` until SIGTERM/SIGINT (see the module docstring);
    `on_listening(host, port)` is called once the socket listens (port 0: the port the OS picked)."""
    uvicorn = require("uvicorn", purpose="tphyolo serve", install=SERVE_INSTALL_HINT)
    config = uvicorn.Config(
        app, host=settings.host, port=settings.port, timeout_graceful_shutdown=settings.grace, access_log=False,
        log_level="warning", lifespan="on",
    )  # fmt: skip
    server = uvicorn.Server(config)
    if on_listening is None:
        server.run()
        return

    import asyncio

    async def serve() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.02)
        if server.started:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            on_listening(host, port)
        await task

    asyncio.run(serve())
