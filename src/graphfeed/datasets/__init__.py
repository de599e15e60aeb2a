"""Datasets: the on-disk format (``Dataset``, ``write_dataset``), importers (``prepare``),
validation and the memory estimate. Names load lazily so ``import graphfeed.datasets`` is cheap."""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Dataset": ".format",
    "DatasetWriter": ".format",
    "write_dataset": ".format",
    "Metadata": ".schema",
    "FORMAT_VERSION": ".schema",
    "estimate_memory": ".estimate",
    "MemoryEstimate": ".estimate",
    "IMPORTERS": ".importers",
    "prepare": ".importers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'graphfeed.datasets' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
