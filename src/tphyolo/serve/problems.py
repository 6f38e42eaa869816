"""What a request did wrong, or why the service cannot answer it now: an HTTP status and one line.

Every answer that is not a 200 carries `{"error": LINE}`, LINE naming what is wrong (the option, the limit,
the file of a multipart request); the service logs the same line once. No answer carries a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping

RETRY_AFTER_S = 1  # what a 503 asks a client to wait, seconds
# The header of an answer given before the request's body was all read (too large, too slow): the server closes
# the connection after it, instead of reading (and waiting for) the rest.
CLOSE = {"Connection": "close"}


class RequestProblem(Exception):
    """An answer other than 200: `status`, one line `message`, extra `headers` (Retry-After for a 503)."""

    def __init__(self, status: int, message: str, *, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, dict(headers or {})

    def __reduce__(self):  # noqa: ANN204 - pickled whole: the worker process answers an image with one
        return type(self), (self.status, self.message), {"headers": self.headers}


def bad_option(name: str, problem: str) -> RequestProblem:
    """422 naming the request option `name`."""
    return RequestProblem(422, f"{name}: {problem}")


def unavailable(message: str) -> RequestProblem:
    """503 with Retry-After: the service cannot take the request now (queue full, worker restarting, stopping)."""
    return RequestProblem(503, message, headers={"Retry-After": str(RETRY_AFTER_S)})
