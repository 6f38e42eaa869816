"""The page at `/` (`page.html`, a file of this package) with what the service runs written into it: the
model's file names, backend, precision, device and image size, and its classes; while the model loads, a line
saying so, and the page reloads itself every RELOAD_S seconds, at most RELOADS times, until it is ready."""

from __future__ import annotations

from html import escape
from importlib import resources

from tphyolo.serve.engine import ModelInfo

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
