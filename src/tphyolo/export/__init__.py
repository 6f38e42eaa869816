"""Deployment: export detection models to ONNX, OpenVINO IR, TorchScript, torch.export programs and TensorRT,
and run the exported files through small backends.

    from tphyolo.export import ExportConfig, ExportJob, load_backend, run_export
    run = run_export(ExportJob("best.pt", ExportConfig(formats=("onnx", "openvino"), dynamic=True)))
    run.ok, run.problems(), [result.path for result in run.results]
    backend = load_backend("best.onnx")              # chosen by suffix / folder
    out = backend.run(backend.prepare(images))       # (B, 3, H, W) uint8 -> (B, N, 5 + nc)

Exporters and runtimes come with the optional extra `pip install "tphyolo[export]"`; importing this package
does not import them.

Importing this package imports none of its modules; each name is imported from its module on first use.
"""

from tphyolo.imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "tphyolo.infer.backends": (
            "ExportedBackend",
            "exported_format",
            "load_backend",
        ),
        "tphyolo.export.config": ("ExportConfig", "ExportJob"),
        "tphyolo.export.formats": ("EXPORT_FORMATS", "FORMATS", "ExportFormat"),
        "tphyolo.export.exporter": (
            "ExportResult",
            "ExportRun",
            "export_checkpoint",
            "export_model",
            "run_export",
        ),
        "tphyolo.imports": (
            "INSTALL_HINT",
            "MissingExtraError",
        ),
        "tphyolo.infer.backends.metadata": ("ExportMetadata",),
    },
)
