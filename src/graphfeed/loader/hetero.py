"""Loading heterogeneous mini-batches: the per-type feature stage and ``HeteroDataLoader``.

``FetchHeteroFeatures`` extends the feature stage: after the fused features and labels (rows of
the global ``input_nodes`` / ``seeds``), it reads each node type's features at that type's
type-local ``input_nodes_dict[type]`` into ``minibatch.type_features[type][name]`` (pooled
buffers, the loader's executor for large reads), which ``minibatch.x_dict`` exposes to PyG
models.

A feature that lives on a GPU (``--mode cuda-cuda``: a copy in GPU memory; ``pinned-cuda``: a
UVA view of pinned host rows, as ``graphfeed.placement.apply`` places them) is read at
the batch's own id tensors, which a GPU sampler left on that device: no copy to the host, no
pooled host buffer. A feature on the CPU gets its ids on the CPU (``FetchFeatures._read``).
"""

from __future__ import annotations

from concurrent.futures import Executor
from functools import partial
from typing import Mapping, Optional

from ..errors import GraphfeedError
from ..features.base import Feature
from ..sampling.hetero import HeteroNeighborSampler
from ..sampling.hetero_batch import HeteroMiniBatch
from .buffers import BufferPool
from .dataloader import DataLoader
from .fetch import FetchFeatures, _count_take

__all__ = ["FetchHeteroFeatures", "HeteroDataLoader"]


def _type_features(sampler: HeteroNeighborSampler, type_features) -> dict:
    """``{type: {name: Feature}}`` checked against the sampler's graph: known types, one row per
    node of the type."""
    out = {}
    g = sampler.graph
    for t, feats in (type_features or {}).items():
        n = g.num_nodes_of(t)  # an unknown type is an error naming the graph's types
        if not isinstance(feats, Mapping):
            raise GraphfeedError(f"type_features[{t!r}] must map names to Features, got "
                                 f"{type(feats).__name__}")
        out[t] = {}
        for name, f in feats.items():
            if not isinstance(f, Feature):
                raise GraphfeedError(f"type_features[{t!r}][{name!r}] must be a graphfeed "
                                     f"Feature, got {type(f).__name__}")
            if f.num_rows < n:
                raise GraphfeedError(f"feature {name!r} of node type {t!r} has {f.num_rows} rows "
                                     f"but the type has {n} nodes: every node needs a row")
            out[t][str(name)] = f
    return out


class FetchHeteroFeatures(FetchFeatures):
    """The feature stage of a heterogeneous batch: the fused features and labels as
    ``FetchFeatures`` does, then every per-type feature at the type-local input ids."""

    def __init__(self, node_features, labels=None, *, type_features=None, reuse_buffers=True,
                 pin_memory=False, max_buffers=8, stats=None):
        super().__init__(node_features, labels, reuse_buffers=reuse_buffers,
                         pin_memory=pin_memory, max_buffers=max_buffers, stats=stats)
        self.type_features = dict(type_features or {})
        if reuse_buffers:
            for t, feats in self.type_features.items():
                for name, f in feats.items():
                    if f.device.type == "cpu":
                        self.pools[f"type:{t}:{name}"] = BufferPool(
                            f.row_shape, f.dtype, pin_memory=pin_memory,
                            max_buffers=max_buffers, on_take=partial(_count_take, self.stats))

    def __call__(self, mb, executor: Optional[Executor] = None):
        mb = super().__call__(mb, executor)
        if not self.type_features:
            return mb
        if not isinstance(mb, HeteroMiniBatch):
            raise TypeError(f"per-type features need a HeteroMiniBatch, got {type(mb).__name__}")
        with self.stats.timer("fetch_s"):
            ids = mb.input_nodes_dict
            for t, feats in self.type_features.items():
                mb.type_features[t] = {name: self._read(f"type:{t}:{name}", f, ids[t], executor)
                                       for name, f in feats.items()}
        return mb


class HeteroDataLoader(DataLoader):
    """A ``DataLoader`` over a :class:`~graphfeed.sampling.hetero.HeteroNeighborSampler`, with
    ``type_features`` (node type -> name -> ``Feature``, one row per node of the type) read into
    ``minibatch.type_features`` / ``x_dict``. ``labels`` (one row per global id) are read at the
    global seeds. Every other argument is the ``DataLoader``'s; ``device`` must be the CPU (move
    a batch with ``batch.to(device)``)."""

    def __init__(self, item_sampler, sampler, *, type_features=None, node_features=None,
                 labels: Optional[Feature] = None, device="cpu", num_threads: int = 2,
                 prefetch: int = 2, reuse_buffers: bool = True, num_workers=None):
        from ..sampling.torch_hetero import TorchHeteroSampler

        if not isinstance(sampler, (HeteroNeighborSampler, TorchHeteroSampler)):
            raise GraphfeedError(f"HeteroDataLoader needs a HeteroNeighborSampler or a "
                                 f"TorchHeteroSampler, got "
                                 f"{type(sampler).__name__}")
        super().__init__(item_sampler, sampler, node_features=node_features, labels=labels,
                         device=device, num_threads=num_threads, prefetch=prefetch,
                         reuse_buffers=reuse_buffers, num_workers=num_workers)
        if self.device.type != "cpu":
            raise GraphfeedError(f"HeteroDataLoader produces CPU batches; got device="
                                 f"{self.device} (call batch.to(device) in the loop)")
        self.type_features = _type_features(sampler, type_features)
        self._fetch = FetchHeteroFeatures(
            self.node_features, labels, type_features=self.type_features,
            reuse_buffers=self.reuse_buffers, max_buffers=self.num_threads + self.prefetch + 3,
            stats=self.stats)
