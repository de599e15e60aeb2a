"""Datasets: the on-disk format (``Dataset``, ``write_dataset``), importers (``prepare``),
validation and the memory estimate. Names load lazily so ``import graphfeed.datasets`` is cheap."""

from __future__ import annotations

from .._lazy import lazy_exports


_EXPORTS = {
    "Dataset": ".format",
    "DatasetWriter": ".format",
    "write_dataset": ".format",
    "Metadata": ".schema",
    "FORMAT_VERSION": ".schema",
    "estimate_memory": ".estimate",
    "MemoryEstimate": ".estimate",
    "class_balance": ".estimate",
    "ClassBalance": ".estimate",
    "IMPORTERS": ".importers",
    "prepare": ".importers",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
