"""Deployment: export detection models to ONNX, OpenVINO IR, TorchScript and TensorRT, and run the exported
files through small backends.

    from tphyolo.export import ExportConfig, export_checkpoint, load_backend
    results = export_checkpoint("best.pt", ExportConfig(formats=("onnx", "openvino"), dynamic=True))
    backend = load_backend("best.onnx")              # chosen by suffix / folder
    out = backend.run(backend.prepare(images))       # (B, 3, H, W) uint8 -> (B, N, 5 + nc)

Exporters and runtimes come with the optional extra `pip install "tphyolo[export]"`; importing this package
does not import them.
"""

from tphyolo.export.backends import ExportedBackend, exported_format, load_backend
from tphyolo.export.exporter import EXPORT_FORMATS, ExportConfig, ExportResult, export_checkpoint, export_model
from tphyolo.export.extras import INSTALL_HINT, MissingExtraError
from tphyolo.export.metadata import ExportMetadata

__all__ = [
    "EXPORT_FORMATS",
    "INSTALL_HINT",
    "ExportConfig",
    "ExportMetadata",
    "ExportResult",
    "ExportedBackend",
    "MissingExtraError",
    "export_checkpoint",
    "export_model",
    "exported_format",
    "load_backend",
]
