"""Datasets: the on-disk format (``Dataset``, ``write_dataset``), ``open_dataset`` (a built-in
name or a folder), importers (``prepare``), validation and the memory estimate. Names load lazily
so ``import graphfeed.datasets`` is cheap."""

from __future__ import annotations

from .._lazy import lazy_exports

# submodule -> the names it exports
_MODULES = {
    ".format": ("Dataset", "DatasetWriter", "write_dataset"),
    ".open": ("open_dataset",),
    ".schema": ("Metadata", "FORMAT_VERSION"),
    ".estimate": ("estimate_memory", "MemoryEstimate", "class_balance", "ClassBalance"),
    ".importers": ("IMPORTERS", "prepare"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
