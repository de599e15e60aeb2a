"""The loader: seed batches (``ItemSampler``) -> sampled, feature-joined, device-resident
mini-batches (``DataLoader``), overlapped with training by background threads.

Importing this package is cheap (no numba): names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_EXPORTS = {
    "ItemSampler": ".item_sampler",
    "SeedBatch": ".item_sampler",
    "DataLoader": ".dataloader",
    "GraphfeedWarning": ".base",
    "LoaderStats": ".base",
    "place": ".node_loader",
    "node_loader": ".node_loader",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'graphfeed.loader' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    from .base import GraphfeedWarning, LoaderStats
    from .dataloader import DataLoader
    from .item_sampler import ItemSampler, SeedBatch
    from .node_loader import node_loader, place
