"""A small client of the detection service, giving the `Results` that `Predictor` gives.

    client = Client("http://127.0.0.1:8000")
    result = client.detect("image.jpg", conf=0.3)   # or a uint8 BGR array (as OpenCV reads images)
    result.boxes, result.scores, result.labels, result.names

An array is sent as PNG (lossless), so the service sees its pixels exactly; a file is sent as its bytes, its
media type from its suffix. A non-200 answer raises ServiceError with the status and the service's one line.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np

from tphyolo.errors import InputError
from tphyolo.imports import require
from tphyolo.predict.results import Results
from tphyolo.serve.answers import results_from_answer
from tphyolo.serve.metrics import SERVE_INSTALL_HINT

_MEDIA_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp",
                ".tif": "image/tiff", ".tiff": "image/tiff"}  # fmt: skip


class ServiceError(RuntimeError):
    """A non-200 answer: `status` and the service's one-line `message`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


class Client:
    """The service at `url` (http://HOST:PORT); `timeout` seconds per request."""

    def __init__(self, url: str, *, timeout: float = 60.0) -> None:
        httpx = require("httpx", purpose="tphyolo.serve.Client", install=SERVE_INSTALL_HINT)
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout)
        self._names: tuple[str, ...] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The class names of the model served."""
        if self._names is None:
            self._names = tuple(self._get("/v1/models")["models"][0]["classes"])
        return self._names

    def _get(self, path: str) -> dict:
        response = self._http.get(path)
        if response.status_code != 200:
            raise ServiceError(response.status_code, response.json().get("error", response.text))
        return response.json()

    def detect(self, image: str | Path | np.ndarray, **options) -> Results:
        """The Results of one image: a file path or a uint8 BGR (H, W, 3) array; `options` as the service
        takes them (conf=0.3, classes=[0, 2], slice=640, ...). `path` is the file's, `image` the array's."""
        if isinstance(image, np.ndarray):
            if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
                raise InputError(f"expected a uint8 (H, W, 3) BGR image, got {image.dtype} {image.shape}")
            ok, encoded = cv2.imencode(".png", image)
            if not ok:
                raise InputError("cannot encode the image as PNG")
            data, media_type, path, kept = encoded.tobytes(), "image/png", None, image
        else:
            path = Path(image)
            media_type = _MEDIA_TYPES.get(path.suffix.lower())
            if media_type is None:
                raise InputError(f"{path}: the service takes {', '.join(sorted(set(_MEDIA_TYPES)))} files")
            data, kept = path.read_bytes(), None
        params = {k: ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v) for k, v in options.items()}
        response = self._http.post("/v1/detect", content=data, params=params, headers={"Content-Type": media_type})
        if response.status_code != 200:
            raise ServiceError(response.status_code, response.json().get("error", response.text))
        return results_from_answer(response.json()["images"][0], names=self.names, path=path, image=kept)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
