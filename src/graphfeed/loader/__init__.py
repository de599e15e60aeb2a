"""The loader: seed batches (``ItemSampler``) -> sampled, feature-joined, device-resident
mini-batches (``DataLoader``), overlapped with training by background threads.

Importing this package is cheap (no numba): names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".item_sampler": "ItemSampler SeedBatch",
    ".dataloader": "DataLoader",
    ".base": "GraphfeedWarning LoaderStats",
})


if TYPE_CHECKING:  # pragma: no cover
    from .base import GraphfeedWarning, LoaderStats
    from .dataloader import DataLoader
    from .item_sampler import ItemSampler, SeedBatch
