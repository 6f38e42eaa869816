"""The service on Ray Serve: the same app (routes, options, answers, batching) in each of N replicas.

    serve_on_ray(spec, ServeConfig(port=8000), RayConfig(ray=True, replicas=2))   # until SIGTERM/SIGINT

Each replica is a Ray actor holding a `Service` whose model runs in the replica's own process
(`InProcessWorker`: Ray supervises and restarts replicas) behind the same batcher as the plain server, so a
replica batches images of one settings-and-shape bucket exactly as `tphyolo serve` does, and answers the same.
A replica is created once its model is loaded and warm, so that Ray sends it nothing before. Ray's HTTP proxy
listens on `host:port` and spreads requests over the replicas; a replica forwards each
request to its FastAPI app as ASGI. Ray is started locally unless `address` names a cluster to join; only what
was started here is shut down.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

from tphyolo.imports import require
from tphyolo.infer.spec import DetectorSpec
from tphyolo.serve.app import Service, build_app
from tphyolo.serve.config import RayConfig, ServeConfig
from tphyolo.serve.metrics import SERVE_INSTALL_HINT

DEPLOYMENT = "tphyolo-detect"
READY_POLL_S = 0.2


class DetectionReplica:
    """One replica: the service's app with its model in this process (module docstring)."""

    def __init__(self, spec: DetectorSpec, settings: ServeConfig) -> None:
        """Returns once the model is loaded and warm (or failed to load: then unhealthy), since Ray sends
        requests to a replica once its constructor returns: a replica added by autoscaling would otherwise
        answer 503 to its share of the load until its model is ready."""
        self.service = Service(spec, settings, in_process=True)
        self.app = build_app(self.service, lifespan=False)
        self.service.start()
        while not self.service.batcher.ready and self.service.failure is None:
            time.sleep(READY_POLL_S)

    async def __call__(self, request):
        """The app's answer to `request` (a starlette Request from Ray's proxy)."""
        from starlette.responses import Response

        messages: list[dict] = []

        async def send(message: dict) -> None:
            messages.append(message)

        await self.app(request.scope, request.receive, send)
        start = next(m for m in messages if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in start.get("headers", [])}
        headers.pop("content-length", None)
        return Response(body, status_code=start["status"], headers=headers)

    def check_health(self) -> None:
        """Ray's health check: a replica whose model failed to load, or whose model is busy with a batch past
        its deadline (work in this process cannot be ended otherwise), is unhealthy: Ray replaces it."""
        if self.service.failure is not None:
            raise RuntimeError(self.service.failure)
        if self.service.batcher.stuck:
            raise RuntimeError("the model is busy with a batch past its deadline")


def deployment_options(cluster: RayConfig, *, autoscaling: dict | None = None) -> dict:
    """`serve.deployment` options of `cluster`: replicas (or autoscaling, with the `autoscaling` keys of Ray
    Serve's autoscaling_config beyond the bounds: target_ongoing_requests, upscale_delay_s, ...) and each
    replica's resources."""
    options: dict = {
        "name": DEPLOYMENT,
        "ray_actor_options": {"num_cpus": cluster.cpus_per_replica, "num_gpus": cluster.gpus_per_replica},
    }
    if cluster.min_replicas is not None:
        options["autoscaling_config"] = {
            "min_replicas": cluster.min_replicas, "max_replicas": cluster.max_replicas,
            "initial_replicas": cluster.replicas, **(autoscaling or {}),
        }  # fmt: skip
    else:
        options["num_replicas"] = cluster.replicas
    return options


def serve_on_ray(
    spec: DetectorSpec,
    settings: ServeConfig,
    cluster: RayConfig,
    *,
    on_listening: Callable[[str, int], None] | None = None,
    stop: threading.Event | None = None,
    autoscaling: dict | None = None,
) -> None:
    """Deploy DetectionReplica on Ray Serve at `settings.host:settings.port` and serve until SIGTERM/SIGINT
    (in the main thread) or `stop` is set; then delete the deployment (and Ray, when started here).
    `on_listening(host, port)` is called once every replica is ready; `autoscaling`: see `deployment_options`."""
    ray = require("ray", purpose="tphyolo serve --ray", install=SERVE_INSTALL_HINT)
    serve = require("ray.serve", purpose="tphyolo serve --ray", install=SERVE_INSTALL_HINT)
    started = not ray.is_initialized()
    if started:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    stop = stop or threading.Event()
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        serve.start(http_options={"host": settings.host, "port": settings.port})
        options = deployment_options(cluster, autoscaling=autoscaling)
        app = serve.deployment(DetectionReplica, **options).bind(spec, settings)
        serve.run(app, name=DEPLOYMENT, route_prefix="/", blocking=False)
        _wait_ready(settings, stop)
        if on_listening is not None and not stop.is_set():
            on_listening(settings.host, settings.port)
        stop.wait()
    finally:
        serve.delete(DEPLOYMENT)
        serve.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if started:
            ray.shutdown()


def _wait_ready(settings: ServeConfig, stop: threading.Event) -> None:
    """Until the proxy answers /readyz with 200 (a replica with its model warm) or `stop` is set."""
    import httpx

    url = f"http://{settings.host}:{settings.port}/readyz"
    while not stop.is_set():
        try:
            if httpx.get(url, timeout=10).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(READY_POLL_S)
