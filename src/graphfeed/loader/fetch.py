"""The per-batch steps: neighbour sampling and the feature join.

Each step is a callable over one batch (what a worker thread runs, or ``MapStage`` in the
caller's thread), given the loader's intra-batch executor. The sampler returns ids only;
``FetchFeatures`` reads the rows of ``minibatch.input_nodes`` for every node feature and the
labels of ``minibatch.seeds``.
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
    """Fills ``minibatch.node_features[name]`` (rows of ``input_nodes``) and ``labels`` (rows of
    ``seeds``) in place.

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
        reuse_buffers: bool = True,
        pin_memory: bool = False,
        max_buffers: int = 8,
        stats: Optional[LoaderStats] = None,
    ):
        self.node_features = dict(node_features)
        self.labels = labels
        self.stats = stats if stats is not None else LoaderStats()
        self.pools: dict[str, BufferPool] = {}
        if reuse_buffers:
            named = [(f"node:{k}", f) for k, f in self.node_features.items()]
            if labels is not None:
                named.append(("label", labels))
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
        if not self.node_features and self.labels is None:
            return mb
        with self.stats.timer("fetch_s"):
            if self.node_features:
                ids = mb.input_nodes
                for name, f in self.node_features.items():
                    mb.node_features[name] = self._read(f"node:{name}", f, ids, executor)
            if self.labels is not None:
                mb.labels = self._read("label", self.labels, mb.seeds, executor)
        return mb

