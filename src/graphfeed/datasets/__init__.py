"""Datasets: the on-disk format (``Dataset``, ``write_dataset``), ``open_dataset`` (a built-in
name or a folder), importers (``prepare``), validation and the memory estimate. Names load lazily
so ``import graphfeed.datasets`` is cheap."""

from __future__ import annotations

from .._lazy import lazy_exports

# submodule -> the names it exports
# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".format": ("Dataset", "DatasetWriter", "write_dataset"),
    ".open": ("open_dataset",),
    ".schema": ("Metadata", "FORMAT_VERSION"),
    ".estimate": ("estimate_memory", "MemoryEstimate", "class_balance", "ClassBalance"),
    ".importers": ("IMPORTERS", "prepare"),
})
