"""The per-batch steps: neighbour sampling and the feature join.

Each step is a callable over one batch (what a worker thread runs, or ``MapStage`` in the
caller's thread), given the loader's intra-batch executor. The sampler returns ids only;
``FetchFeatures`` is the one feature join, keyed by ``(node type, name)``: the rows of
``minibatch.input_nodes`` for every feature of the (fused) graph and the labels of
``minibatch.seeds``, and, for a typed batch, each node type's features at that type's
type-local ``input_nodes_dict[type]`` into ``minibatch.type_features[type][name]``.

A feature that lives on a GPU (a copy in GPU memory, or a UVA view of pinned host rows, as
``graphfeed.placement.apply`` places them) is read at the batch's own id tensors, which a GPU
sampler left on that device: no copy to the host, no pooled host buffer. A feature on the CPU
gets its ids on the CPU.
"""

from __future__ import annotations

from concurrent.futures import Executor
from functools import partial
from typing import Mapping, Optional

import torch

from ..features.base import Feature
from ..sampling.base import MiniBatch, Sampler
from .base import LoaderStats
from .buffers import BufferPool
from .item_sampler import SeedBatch

__all__ = ["SampleNeighbors", "FetchFeatures"]


class SampleNeighbors:
    """``SeedBatch -> MiniBatch`` (ids only) with ``sampler.sample(seeds, epoch=, batch_index=,
    executor=)``."""

    def __init__(self, sampler: Sampler, stats: Optional[LoaderStats] = None):
        self.sampler = sampler
        self.stats = stats if stats is not None else LoaderStats()

    def __call__(self, batch: SeedBatch, executor: Optional[Executor] = None) -> MiniBatch:
        with self.stats.timer("sample_s"):
            mb = self.sampler.sample(batch.seeds, epoch=batch.epoch, batch_index=batch.index,
                                     executor=executor)
        if not isinstance(mb, MiniBatch):
            raise TypeError(
                f"{type(self.sampler).__name__}.sample must return a MiniBatch, "
                f"got {type(mb).__name__}"
            )
        mb.epoch = batch.epoch
        mb.batch_index = batch.index
        return mb


def _count_take(stats: LoaderStats, reused: bool) -> None:
    # a function over the stats, not a bound method of FetchFeatures: a pool holding a method of
    # its owner is a reference cycle, which kept every dropped loader's buffers until the cycle
    # collector ran
    stats.add("buffers_reused" if reused else "buffers_allocated", 1)


class FetchFeatures:
    """Fills ``minibatch.node_features[name]`` (rows of ``input_nodes``), ``labels`` (rows of
    ``seeds``) and, for a typed batch, ``type_features[type][name]`` (rows of the type-local
    ``input_nodes_dict[type]``) in place.

    With ``reuse_buffers``, CPU features are read into buffers from a per-feature
    ``BufferPool`` (``feature.read(ids, out=buffer, check=False, executor=)``, the loader's
    executor running the chunks of a large read), which are reused only once
    no earlier batch references them; ``pin_memory`` makes those buffers pinned (the staging
    buffers of a CUDA copy). Features living on a GPU are read as they are (the CUDA caching
    allocator already recycles their memory).
    """

    def __init__(
        self,
        node_features: Mapping[str, Feature],
        labels: Optional[Feature] = None,
        *,
        type_features: Optional[Mapping] = None,
        reuse_buffers: bool = True,
        pin_memory: bool = False,
        max_buffers: int = 8,
        stats: Optional[LoaderStats] = None,
    ):
        self.node_features = dict(node_features)
        self.labels = labels
        self.type_features = {t: dict(f) for t, f in (type_features or {}).items()}
        self.stats = stats if stats is not None else LoaderStats()
        self.pools: dict[str, BufferPool] = {}
        if reuse_buffers:
            named = [(f"node:{k}", f) for k, f in self.node_features.items()]
            if labels is not None:
                named.append(("label", labels))
            named += [(f"type:{t}:{k}", f) for t, fs in self.type_features.items()
                      for k, f in fs.items()]
            for key, f in named:
                if f.device.type == "cpu":
                    self.pools[key] = BufferPool(
                        f.row_shape, f.dtype, pin_memory=pin_memory,
                        max_buffers=max_buffers, on_take=partial(_count_take, self.stats),
                    )

    def clear_buffers(self) -> None:
        """Let go of the pooled buffers (batches still holding one keep it alive); the next
        read allocates again."""
        for pool in self.pools.values():
            pool.clear()

    def _read(self, key: str, feature: Feature, ids: torch.Tensor,
              executor: Optional[Executor]) -> torch.Tensor:
        if ids.device != feature.device and feature.device.type == "cpu":
            ids = ids.cpu()  # a GPU sampler's ids for a CPU feature
        pool = self.pools.get(key)
        out = None if pool is None else pool.take(int(ids.shape[0]))
        return feature.read(ids, out=out, check=False, executor=executor)

    def __call__(self, mb: MiniBatch, executor: Optional[Executor] = None) -> MiniBatch:
        if not self.node_features and self.labels is None and not self.type_features:
            return mb
        if self.type_features and not mb.is_typed:
            raise TypeError("per-type features need the typed MiniBatch of a typed sampler")
        with self.stats.timer("fetch_s"):
            if self.node_features:
                ids = mb.input_nodes
                for name, f in self.node_features.items():
                    mb.node_features[name] = self._read(f"node:{name}", f, ids, executor)
            if self.labels is not None:
                mb.labels = self._read("label", self.labels, mb.seeds, executor)
            if self.type_features:
                ids = mb.input_nodes_dict
                for t, feats in self.type_features.items():
                    mb.type_features[t] = {name: self._read(f"type:{t}:{name}", f, ids[t],
                                                            executor)
                                           for name, f in feats.items()}
        return mb

