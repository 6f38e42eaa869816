"""Public names of a package imported from their modules on first use (PEP 562), so that importing the package,
or one light module of it, does not import torch.

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"tphyolo.metrics.ap": ("fitness", ...), ...})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


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
