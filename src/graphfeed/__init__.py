"""graphfeed: feeds large graphs to GNN training.

``import graphfeed`` is cheap and has no side effects: torch, numba kernels, LMDB,
torch.distributed and PyG load only when the names that need them are first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".errors": "GraphfeedError DatasetError MissingDependencyError",
    ".graph.csc": "CSCGraph",
    ".sampling.base": "Block MiniBatch Sampler",
    ".sampling.neighbor": "NeighborSampler",
    ".features.base": "Feature FeatureStore",
    ".features.memory": "InMemoryFeature",
    ".features.disk": "DiskFeature",
    ".features.lmdb_store": "LMDBFeature",
    ".features.cache": "CachedFeature",
    ".features.pinned": "PinnedFeature",
    ".features.registry": "open_feature",
    ".sampling.torch_sampler": "TorchNeighborSampler",
    ".placement.plan": "place node_loader DataPlan",
    ".training": "train TrainConfig",
    ".loader.item_sampler": "ItemSampler",
    ".loader.dataloader": "DataLoader",
    ".datasets.format": "Dataset",
    ".datasets.synthetic": "load_builtin",
}, eager=("__version__",))


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
