"""What a `POST /v1/detect` request carries: its image files and its options, read within the body limit.

- a raw body: one image, its media type the Content-Type header (415 otherwise);
- `multipart/form-data`: one or more parts named `file` (each an image; a part that says nothing of its type or
  application/octet-stream is taken by its bytes), other fields being options like the query string's.

The body is read up to `limit` bytes: a Content-Length above it is refused (413) before a byte is read, and a
body sent without one is refused as soon as it passes the limit; the connection is then closed, the rest
unread. Nothing is written to disk.
"""

from __future__ import annotations

from dataclasses import dataclass

from tphyolo.serve.images import check_media_type
from tphyolo.serve.problems import CLOSE, RequestProblem

MULTIPART = "multipart/form-data"
FILE_FIELD = "file"


@dataclass(frozen=True)
class Upload:
    """One image file of a request: `name` (the multipart file name, or "body"), its bytes."""

    name: str
    data: bytes


def _too_large(size: str, limit: int) -> RequestProblem:
    return RequestProblem(413, f"body: {size} bytes, over the limit of {limit:,} bytes (--max-body-mb)", headers=CLOSE)


async def read_body(request, limit: int) -> bytes:
    """The request's body (a starlette Request), at most `limit` bytes; 413 otherwise (see the module docstring)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(f"{int(declared):,}", limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(f"more than {limit:,}", limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_uploads(request, limit: int) -> tuple[list[Upload], dict[str, list[str]]]:
    """The image files of the request and the options of its form fields (name -> values). Raises
    RequestProblem: 413 (body too large), 415 (a media type that is not an image's), 422 (no file)."""
    from starlette.requests import Request

    body = await read_body(request, limit)
    content_type = request.headers.get("content-type", "")
    if not content_type.lower().startswith(MULTIPART):
        check_media_type(content_type, where="body")
        return [Upload("body", body)], {}

    async def replay():
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, replay).form()
    except Exception as error:  # noqa: BLE001 - python-multipart's parse errors have no common base
        raise RequestProblem(422, f"body: not a readable multipart form ({str(error).splitlines()[0]:.80})") from None
    uploads, options = [], {}
    for name, value in form.multi_items():
        if isinstance(value, str):
            options.setdefault(name, []).append(value)
        elif name != FILE_FIELD:
            raise RequestProblem(422, f"{name}: a file in an unknown field; send images as '{FILE_FIELD}'")
        else:
            where = value.filename or f"{FILE_FIELD} {len(uploads)}"
            check_media_type(value.content_type, where=where, untyped_ok=True)
            uploads.append(Upload(where, await value.read()))
    if not uploads:
        raise RequestProblem(422, f"body: a multipart form without a '{FILE_FIELD}' part")
    return uploads, options
