"""Feature storage: one interface (``Feature.read(ids)``), many backends and wrappers.

- ``InMemoryFeature``: a tensor or numpy array (memory maps included),
- ``DiskFeature``: a ``.npy`` file read on demand (page cache or O_DIRECT),
- ``LMDBFeature``: rows in chunks in an LMDB environment (extra ``graphfeed[lmdb]``),
- ``CachedFeature``: a CPU cache (sieve, s3fifo, lru, clock) wrapping any feature,
- ``GPUCachedFeature``: the hottest rows of a host feature in GPU memory (degree, frequency, clock),
- ``PinnedFeature`` / ``pin_memory``: page-locked host memory for fast or zero-copy GPU reads,
- ``open_feature(path, backend, cache_size=...)``: build one by name.

Everything loads on first use: importing this package imports neither torch, numba nor lmdb.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".base": "Feature FeatureStore",
    ".memory": "InMemoryFeature",
    ".disk": "DiskFeature",
    ".lmdb_store": "LMDBFeature",
    ".cache": "CachedFeature",
    ".gpu_cache": "GPUCachedFeature",
    ".pinned": "PinnedFeature pin_memory",
    ".registry": "open_feature BACKENDS",
})


if TYPE_CHECKING:  # pragma: no cover
    from .base import Feature, FeatureStore
    from .memory import InMemoryFeature
    from .cache import CachedFeature
    from .gpu_cache import GPUCachedFeature
    from .disk import DiskFeature
    from .lmdb_store import LMDBFeature
    from .pinned import PinnedFeature, pin_memory
    from .registry import BACKENDS, open_feature
