"""graphfeed for PyG users: keep PyG's loaders and models, sample and read features with
graphfeed (no pyg-lib, no torch-sparse).

- :class:`GraphfeedSampler`: a ``torch_geometric.sampler.BaseSampler`` over graphfeed's
  samplers (node and link seeds, plain and typed graphs, every sampling method), for PyG's
  ``NodeLoader``/``LinkLoader`` (or ``NeighborLoader(neighbor_sampler=...)``);
- :class:`GraphfeedFeatureStore` / :class:`GraphfeedGraphStore`: PyG's remote-backend
  interfaces over graphfeed features (memory, disk, LMDB, cached) and graphs;
  :func:`from_dataset` builds both from a graphfeed dataset (``"tiny"``, a prepared folder).

Importing this package loads nothing; its names import PyG on first use (``graphfeed[pyg]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".sampler": "GraphfeedSampler graphfeed_fanouts",
    ".stores": "GraphfeedFeatureStore GraphfeedGraphStore from_dataset",
})

if TYPE_CHECKING:  # pragma: no cover
    from .sampler import GraphfeedSampler, graphfeed_fanouts
    from .stores import GraphfeedFeatureStore, GraphfeedGraphStore, from_dataset
