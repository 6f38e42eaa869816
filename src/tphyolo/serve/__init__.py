"""The detection service: `tphyolo serve`, an HTTP API over the same inference path as `tphyolo predict`.

    from tphyolo.serve import Client, create_app
    app = create_app("best.pt")                        # an ASGI app (FastAPI), for uvicorn or any ASGI server
    Client("http://127.0.0.1:8000").detect("a.jpg")    # Results, as Predictor gives them

Needs the `serve` extra (`pip install "tphyolo[serve]"`). See docs/serving.md.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.serve.app": ("create_app", "detector_app"),
        "tphyolo.serve.client": ("Client", "ServiceError"),
        "tphyolo.serve.config": ("ServeConfig", "ServeJob"),
        "tphyolo.serve.server": ("run_serve", "run_server"),
    },
)
