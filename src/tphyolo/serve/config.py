"""How the detection service runs, as plain data: `ServeConfig`, whose fields are also `tphyolo serve`'s flags.

It imports no torch and no web framework: the command line derives its flags from it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.flags import AT_LEAST_ONE, NON_NEGATIVE, Bounds, check_field_types, flag

CPU_MAX_BATCH = 8  # images per forward pass unless --max-batch: on a CPU, a larger batch only adds latency
GPU_MAX_BATCH = 32  # ... and on a GPU, where batching is what fills it
PORT_BOUNDS = Bounds(0, 65535)  # 0: a free port the OS picks
POSITIVE = Bounds(0, low_open=True)


@dataclass(frozen=True)
class ServeConfig:
    """The service's settings (the model's are the predict flags: `InferenceConfig`, slicing, classifier).

    host, port: where to listen (127.0.0.1 unless told: the service is not exposed by default). max_batch:
    most images per forward pass (None: CPU_MAX_BATCH on a CPU, GPU_MAX_BATCH on a GPU); max_wait_ms: how long
    the first image of a batch waits for others of its shape. max_queue: images waiting at most; one more is
    answered 503 with Retry-After at once. timeout: seconds a request may take in all (else 504). max_body_mb:
    largest request body (else 413). grace: seconds SIGTERM/SIGINT leave requests in flight to finish.
    """

    host: str = flag("127.0.0.1", "--host", help="address to listen on")
    port: int = flag(8000, "--port", help="port to listen on (0: a free one)", bounds=PORT_BOUNDS)
    max_batch: int | None = flag(
        None,
        "--max-batch",
        help=f"most images per forward pass (default: {CPU_MAX_BATCH} on CPU, {GPU_MAX_BATCH} on GPU)",
        bounds=AT_LEAST_ONE,
    )
    max_wait_ms: float = flag(5.0, "--max-wait-ms", help="milliseconds a batch waits to fill", bounds=Bounds(0, 10_000))
    max_queue: int = flag(64, "--max-queue", help="images waiting at most (more: 503)", bounds=AT_LEAST_ONE)
    timeout: float = flag(30.0, "--timeout", help="seconds a request may take (more: 504)", bounds=POSITIVE)
    max_body_mb: float = flag(32.0, "--max-body-mb", help="largest request body, MB (more: 413)", bounds=POSITIVE)
    grace: float = flag(10.0, "--grace", help="seconds in-flight requests get on SIGTERM", bounds=NON_NEGATIVE)

    def __post_init__(self) -> None:
        """Raises ValueError naming the flag of a setting out of its bounds."""
        check_field_types(self)

    @property
    def max_body_bytes(self) -> int:
        return int(self.max_body_mb * 1_000_000)

    def batch_size(self, device_type: str) -> int:
        """`max_batch`, or the default of a device of `device_type` ("cpu", "cuda", ...)."""
        if self.max_batch is not None:
            return self.max_batch
        return CPU_MAX_BATCH if device_type == "cpu" else GPU_MAX_BATCH
