"""The optional `export` extra: importing its packages, and the one-line error when one is missing.

Exporters and runtimes (onnx, onnxruntime, openvino, onnxslim) are not core dependencies; every use imports
them through `require`, at call time, so that `import tphyolo.export` works without them.
"""

from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = 'pip install "tphyolo[export]"'


class MissingExtraError(ImportError, ValueError):
    """An optional package is not installed. An ImportError by nature; also a ValueError, so that the command
    line reports it in one line (as it does bad input) instead of a traceback."""


def require(module: str, *, purpose: str, install: str = INSTALL_HINT) -> ModuleType:
    """The imported `module`, or MissingExtraError: "<purpose> needs the <package> package ...: <install>"."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        package = module.split(".")[0]
        raise MissingExtraError(
            f"{purpose} needs the {package} package, which is not installed: {install}", name=package
        ) from error
