"""The loader: seed batches (``ItemSampler``) -> sampled, feature-joined, device-resident
mini-batches (``DataLoader``), overlapped with training by background threads.

Importing this package is cheap (no numba): names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "ItemSampler": ".item_sampler",
    "SeedBatch": ".item_sampler",
    "DataLoader": ".dataloader",
    "GraphfeedWarning": ".base",
    "LoaderStats": ".base",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover
    from .base import GraphfeedWarning, LoaderStats
    from .dataloader import DataLoader
    from .item_sampler import ItemSampler, SeedBatch
