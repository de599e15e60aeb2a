"""graphfeed: feeds large graphs to GNN training.

``import graphfeed`` is cheap and has no side effects: torch, numba kernels, LMDB,
torch.distributed and PyG load only when the names that need them are first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (imported on first attribute access)
_EXPORTS = {
    "GraphfeedError": ".errors",
    "DatasetError": ".errors",
    "MissingDependencyError": ".errors",
    "CSCGraph": ".graph.csc",
    "Block": ".sampling.base",
    "MiniBatch": ".sampling.base",
    "Sampler": ".sampling.base",
    "NeighborSampler": ".sampling.neighbor",
    "Feature": ".features.base",
    "FeatureStore": ".features.base",
    "InMemoryFeature": ".features.memory",
    "DiskFeature": ".features.disk",
    "LMDBFeature": ".features.lmdb_store",
    "CachedFeature": ".features.cache",
    "PinnedFeature": ".features.pinned",
    "open_feature": ".features.registry",
    "TorchNeighborSampler": ".sampling.torch_sampler",
    "place": ".placement.plan",
    "node_loader": ".placement.plan",
    "DataPlan": ".placement.plan",
    "train": ".training",
    "TrainConfig": ".training",
    "ItemSampler": ".loader.item_sampler",
    "DataLoader": ".loader.dataloader",
    "Dataset": ".datasets.format",
    "load_builtin": ".datasets.synthetic",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .datasets.format import Dataset
    from .datasets.synthetic import load_builtin
    from .errors import DatasetError, GraphfeedError, MissingDependencyError
    from .features.base import Feature, FeatureStore
    from .features.cache import CachedFeature
    from .features.disk import DiskFeature
    from .features.lmdb_store import LMDBFeature
    from .features.memory import InMemoryFeature
    from .features.pinned import PinnedFeature
    from .features.registry import open_feature
    from .placement.plan import DataPlan, node_loader, place
    from .sampling.torch_sampler import TorchNeighborSampler
    from .training import TrainConfig, train
    from .graph.csc import CSCGraph
    from .loader.dataloader import DataLoader
    from .loader.item_sampler import ItemSampler
    from .sampling.base import Block, MiniBatch, Sampler
    from .sampling.neighbor import NeighborSampler
