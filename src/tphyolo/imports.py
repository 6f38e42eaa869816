"""Imports made later than import time: a package's public names on first use, and optional packages.

- `lazy_exports`: the public names of a package imported from their modules on first use (PEP 562), so that
  importing the package, or one light module of it, does not import torch:

      __getattr__, __dir__, __all__ = lazy_exports(__name__, {"tphyolo.metrics.ap": ("fitness", ...), ...})

- `require`: an optional package (of an extra such as `export`) imported at call time, or one line naming the
  extra to install. Exporters and runtimes (onnx, onnxruntime, openvino, onnxslim) are not core dependencies,
  so that `import tphyolo.export` works without them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

from tphyolo.errors import InputError


def lazy_exports(
    package: str, modules: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """The module-level `__getattr__`, `__dir__` and `__all__` of `package`, exporting each module's names."""
    module_of = {name: module for module, names in modules.items() for name in names}
    public = sorted(module_of)

    def __getattr__(name: str) -> Any:
        module = module_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return list(public)

    return __getattr__, __dir__, public


INSTALL_HINT = 'pip install "tphyolo[export]"'


class MissingExtraError(ImportError, InputError):
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
