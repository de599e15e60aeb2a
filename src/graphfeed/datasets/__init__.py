"""Datasets: the on-disk format (``Dataset``, ``write_dataset``), ``open_dataset`` (a built-in
name or a folder), importers (``prepare``), validation, the data sizes and class balance. Names load lazily
so ``import graphfeed.datasets`` is cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".format": ("Dataset", "DatasetWriter", "write_dataset"),
    ".open": ("open_dataset",),
    ".schema": ("Metadata", "FORMAT_VERSION"),
    ".estimate": ("data_sizes", "DataSizes", "class_balance", "ClassBalance"),
    ".importers": ("IMPORTERS", "prepare"),
})


if TYPE_CHECKING:  # pragma: no cover
    from .estimate import ClassBalance, DataSizes, class_balance, data_sizes
    from .format import Dataset, DatasetWriter, write_dataset
    from .importers import IMPORTERS, prepare
    from .open import open_dataset
    from .schema import FORMAT_VERSION, Metadata
