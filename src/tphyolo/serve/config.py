"""How the detection service runs, as plain data: `ServeConfig` and `RayConfig`, whose fields are also `tphyolo
serve`'s flags, and `ServeJob`, one run of the command (`tphyolo.serve.server.run_serve`): the detector served
and those settings.

It imports no torch and no web framework: the command line derives its flags from it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tphyolo.errors import InputError
from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, Bounds, check_field_types, flag
from tphyolo.infer.spec import DetectorSpec

# Images per forward pass unless --max-batch (the rule, `ServeConfig.batching`). Dynamic batching pays only where
# the forward runs at least BATCH_GAIN times faster per image at its batch size than one image at a time: on a
# 2-core AMD EPYC (OpenVINO, the CPU default) it ran 1.09x faster per image at batch 8, and the service gave 0.90x
# the images/s of --max-batch 1 (`tphyolo bench serve`, its "serve forward" rows); so on a CPU images run one per
# forward, several at once across OpenVINO's inference streams. On a GPU batching is what fills it.
BATCH_GAIN = 1.1
CPU_MAX_BATCH = 1
GPU_MAX_BATCH = 32
PORT_BOUNDS = Bounds(0, 65535)  # 0: a free port the OS picks
POSITIVE = Bounds(0, low_open=True)
# What one request may cost (tphyolo.serve.cost). A 3840x2160 frame sliced at 640 px with overlap 0.2 (32
# windows and the whole image) with the 8-pass TTA is 264 passes and 132,000 boxes at max_det 500: the limits
# hold it with room; a dense scene of 10^5 boxes merges in about 14 s on this project's loaded 2-core CPU (the
# 30 s default timeout), and a 320x180 image in 64 px windows at overlap 0.9 (924 passes) is refused.
MAX_VIEWS = 512
MAX_CANDIDATES = 200_000
CANDIDATES_HELP = "most boxes merged per image: its model passes x max_det (more: 422)"
# How long a connection may take (a slow or trickling client holds a socket and a file descriptor meanwhile).
# A request head is at most 16 KiB (h11's limit, `server.MAX_HEAD_BYTES`): a 16 kbit/s link sends it in 8 s, and
# a real client in one packet; nginx allows 60 s (its client_header_timeout). An idle connection between two
# requests is kept uvicorn's default (its timeout_keep_alive). A body is read within --timeout.
HEADER_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 5.0
HEADER_TIMEOUT_HELP = "seconds a connection may take to send a request's headers (more: 408, closed)"


@dataclass(frozen=True)
class ServeConfig:
    """The service's settings (the model's are the detector's flags: `tphyolo.commands.options.detector`).

    host, port: where to listen (127.0.0.1 unless told: the service is not exposed by default). max_batch:
    most images per forward pass (None: the rule, `batching`: 1 on a CPU, GPU_MAX_BATCH on a GPU); max_wait_ms: how long
    the first image of a batch waits for others of its shape. max_queue: images waiting at most; one more is
    answered 503 with Retry-After at once. timeout: seconds a request may take in all (else 504; its body not
    read by then: 408, the connection closed). max_body_mb: largest request body (else 413). grace: seconds
    SIGTERM/SIGINT leave requests in flight to finish. header_timeout: seconds a connection has, from its
    opening or a later request's first byte, to send that request's whole head (else 408, closed); keep_alive:
    seconds an idle connection is kept open for its next request.
    """

    host: str = flag("127.0.0.1", "--host", help="address to listen on")
    port: int = flag(8000, "--port", help="port to listen on (0: a free one)", bounds=PORT_BOUNDS)
    max_batch: int | None = flag(
        None,
        "--max-batch",
        help=f"most images per forward pass (default: {CPU_MAX_BATCH} on CPU, across the inference streams; "
        f"{GPU_MAX_BATCH} on GPU)",
        bounds=AT_LEAST_ONE,
    )
    max_wait_ms: float = flag(5.0, "--max-wait-ms", help="milliseconds a batch waits to fill", bounds=Bounds(0, 10_000))
    max_queue: int = flag(64, "--max-queue", help="images waiting at most (more: 503)", bounds=AT_LEAST_ONE)
    timeout: float = flag(30.0, "--timeout", help="seconds a request may take (more: 504)", bounds=POSITIVE)
    max_body_mb: float = flag(32.0, "--max-body-mb", help="largest request body, MB (more: 413)", bounds=POSITIVE)
    max_views: int = flag(MAX_VIEWS, "--max-views", help="most model passes a request (more: 422)", bounds=AT_LEAST_ONE)
    max_candidates: int = flag(MAX_CANDIDATES, "--max-candidates", help=CANDIDATES_HELP, bounds=AT_LEAST_ONE)
    grace: float = flag(10.0, "--grace", help="seconds in-flight requests get on SIGTERM", bounds=NON_NEGATIVE)
    header_timeout: float = flag(HEADER_TIMEOUT_S, "--header-timeout", help=HEADER_TIMEOUT_HELP, bounds=POSITIVE)
    keep_alive: float = flag(KEEP_ALIVE_S, "--keep-alive", help="seconds an idle connection lasts", bounds=POSITIVE)

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag of a setting out of its bounds."""
        check_field_types(self)

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1_000_000)

    def batch_size(self, device_type: str) -> int:
        """`max_batch`, or the default of a device of `device_type` ("cpu", "cuda", ...)."""
        return self.batching(device_type)[0]

    def batching(self, device_type: str) -> tuple[int, str, str]:
        """(images per forward pass, where that comes from: "flag" or "rule", why) on a device of `device_type`;
        the same whatever the machine's load (nothing is timed)."""
        if self.max_batch is not None:
            return self.max_batch, "flag", f"--max-batch {self.max_batch}"
        if device_type == "cpu":
            why = (f"a CPU: one image per forward, across the inference streams (batching must gain {BATCH_GAIN}x "
                   "per image; the forward gained 1.09x at batch 8 on a 2-core EPYC)")  # fmt: skip
            return CPU_MAX_BATCH, "rule", why
        return GPU_MAX_BATCH, "rule", f"{device_type}: dynamic batching fills it"


@dataclass(frozen=True)
class RayConfig:
    """Where and how the service runs on Ray Serve (`tphyolo serve --ray`): `address` of a cluster to join
    ("auto", HOST:PORT; None: a local Ray started for it), `replicas`, `gpus_per_replica` and
    `cpus_per_replica` (each replica holds one model), and autoscaling between `min_replicas` and
    `max_replicas` when both are given."""

    ray: bool = flag(False, "--ray", help="run on Ray Serve (the same app in each replica)")
    address: str | None = flag(None, "--address", help="Ray cluster to join: auto or HOST:PORT (default: local)")
    replicas: int = flag(1, "--replicas", help="replicas (each loads the model)", bounds=AT_LEAST_ONE)
    gpus_per_replica: float = flag(0.0, "--gpus-per-replica", help="GPUs each replica takes", bounds=NON_NEGATIVE)
    cpus_per_replica: float = flag(1.0, "--cpus-per-replica", help="CPUs each replica takes", bounds=POSITIVE)
    min_replicas: int | None = flag(None, "--min-replicas", help="autoscaling: fewest replicas", bounds=AT_LEAST_ONE)
    max_replicas: int | None = flag(None, "--max-replicas", help="autoscaling: most replicas", bounds=AT_LEAST_ONE)

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag of a setting out of bounds, or used without --ray."""
        check_field_types(self)
        if (self.min_replicas is None) != (self.max_replicas is None):
            raise InputError("--min-replicas and --max-replicas set autoscaling up together; give both or neither")
        if self.min_replicas is not None and not self.min_replicas <= self.replicas <= self.max_replicas:
            raise InputError(
                f"--replicas {self.replicas} must lie in [--min-replicas {self.min_replicas}, "
                f"--max-replicas {self.max_replicas}]"
            )
        if not self.ray and (self.address is not None or self.replicas != 1 or self.gpus_per_replica or
                             self.min_replicas is not None):  # fmt: skip
            raise InputError("--address, --replicas, --gpus-per-replica and --min/--max-replicas need --ray")


@dataclass(frozen=True)
class ServeJob:
    """One run of `tphyolo serve`: the `detector` served (`DetectorSpec`: weights paths, and the settings requests
    start from: inference, slicing, crop classifier; a request may override them, `tphyolo.serve.options`; its
    runtime and device are the run's unless it names them), the service's settings (`serve`) and, with
    `cluster.ray`, Ray Serve's."""

    detector: DetectorSpec
    serve: ServeConfig = field(default_factory=ServeConfig)
    cluster: RayConfig = field(default_factory=RayConfig)
