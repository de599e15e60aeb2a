"""Lazy package exports: a package names what it exports and from which submodule, and the
submodule is imported on first attribute access (PEP 562). Keeps ``import graphfeed`` and its
subpackages cheap: numba, lmdb, torch.distributed and PyG load only when used."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable, Callable]:
    """``__getattr__, __dir__`` for ``package``; ``exports`` maps a name to the relative module
    that defines it (``{"DataLoader": ".dataloader"}``). A resolved name is cached on the
    package, so later lookups skip ``__getattr__``."""

    def __getattr__(name: str):
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(mod, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
