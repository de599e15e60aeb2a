"""Lazy package exports: a package names what it exports and from which submodule, and the
submodule is imported on first attribute access (PEP 562). Keeps ``import graphfeed`` and its
subpackages cheap: numba, lmdb, torch.distributed and PyG load only when used."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, object],
                 eager: tuple = ()) -> tuple[Callable, Callable, list]:
    """``__getattr__, __dir__, __all__`` for ``package``; ``exports`` maps a relative module to
    the names it defines, space-separated (``{".dataloader": "DataLoader"}``); ``eager`` names
    defined in the package itself join ``__all__``. A resolved name is cached on the package, so
    later lookups skip ``__getattr__``."""
    names = sorted([*eager, *(n for v in exports.values() for n in _split(v))])
    exports = {name: mod for mod, ns in exports.items() for name in _split(ns)}

    def __getattr__(name: str):
        mod = exports.get(name)
        if mod is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(mod, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__, names


def _split(names) -> list:
    return names.split() if isinstance(names, str) else list(names)

