"""Uniform neighbour sampling keyed by GLOBAL node id, on a whole graph (the reference) or over
parts (``dist.DistNeighborSampler``): one sample loop, two ways to get a layer's edges.

``NeighborSampler`` keys a destination's random numbers by its *position* in the batch, which
depends on the order the layer's nodes were discovered. Across parts that order is not shared,
so here a destination's numbers derive from ``(batch key, its key)``, the key being its id in the
source dataset: a node gets the same neighbours in a batch whichever part samples it. The
sampled edges are then relabelled exactly as ``NeighborSampler`` does (first appearance in
destination order), so the blocks are equal whenever the edges are.
"""

from __future__ import annotations

import abc
from concurrent.futures import Executor
from typing import Optional, Sequence

import numpy as np
import torch

from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ..sampling._common import batch_key, check_fanouts
from ..sampling.base import Block, MiniBatch, Sampler
from ..sampling._cpu_common import MapPool, choose_node_map, readonly_view, seeds_to_numpy


def sample_keyed(indptr, indices, rows_of, keys, fanout: int, replace: bool, key):
    """Sample rows ``rows_of`` of a CSC (``indptr``/``indices``) keyed by ``keys``: returns
    ``(offsets (n + 1,) int64, sources (E,) int64)``, destination ``i``'s sources at
    ``offsets[i]:offsets[i+1]`` as stored in ``indices``."""
    from . import _kernels as K

    n = rows_of.shape[0]
    offsets = np.empty(n + 1, np.int64)
    starts = np.empty(n, np.int64)
    degs = np.empty(n, np.int64)
    K.count_keyed(indptr, rows_of, fanout, replace, offsets, starts, degs)
    e = int(offsets[-1])
    rows = np.empty(e, np.int64)
    scratch = np.empty(e, np.int64)
    K.fill_keyed(indices, starts, degs, keys, fanout, replace, np.uint64(key), offsets, rows,
                 scratch)
    return offsets, rows


class KeyedSamplerBase(Sampler):
    """The sample loop shared by the keyed samplers; a subclass provides :meth:`_layer_edges`.

    Randomness derives from ``(seed, epoch, batch_index, layer, the destination's key)``."""

    def __init__(self, num_nodes: int, fanouts: Sequence[int], *, replace: bool, seed: int,
                 node_map: str = "auto"):
        self._num_nodes = int(num_nodes)
        self._fanouts = check_fanouts(fanouts)
        self.replace = bool(replace)
        self.seed = int(seed)
        # a batch's global -> local ids: dense up to 32M (global) nodes, sized by the batch
        # above (NeighborSampler's node_map; the same batches either way)
        self.node_map = choose_node_map(self._num_nodes, node_map)
        self._maps = MapPool(self._num_nodes, self.node_map)

    num_nodes = property(lambda self: self._num_nodes, doc="Nodes of the whole graph.")
    fanouts = property(lambda self: self._fanouts, doc="``fanouts[i]`` belongs to ``blocks[i]``.")

    def _key_index(self, batch_index: int) -> int:
        """The batch index the randomness is keyed by (``DistNeighborSampler``: a global one)."""
        return int(batch_index)

    @abc.abstractmethod
    def _layer_edges(self, dst: np.ndarray, fanout: int, key: int):
        """``(offsets, sources)`` of destinations ``dst`` (global ids) as :func:`sample_keyed`."""

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        from . import _kernels as K

        seeds_np = seeds_to_numpy(seeds, self._num_nodes)
        with self._maps.lease() as box:  # box[0]: the node map (a grown hash table replaces it)
            code, pos = self._maps.insert_seeds(box, seeds_np)
            if code:
                what = "is out of range" if code == 1 else "appears twice (seeds must be distinct)"
                raise GraphfeedError(f"seed id {int(seeds_np[pos])} at position {pos} {what}; "
                                     f"nodes are [0, {self._num_nodes})")
            box.clean = False  # the map holds the seeds from here
            blocks = []
            dst = seeds_np
            for layer in range(len(self._fanouts) - 1, -1, -1):
                key = batch_key(self.seed, epoch, self._key_index(batch_index), layer)
                offsets, rows = self._layer_edges(dst, self._fanouts[layer], key)
                n = int(dst.shape[0])
                edge_index = np.empty((2, rows.shape[0]), np.int64)
                edge_index[0] = rows
                K.fill_cols(offsets, edge_index[1])
                src = np.empty(n + rows.shape[0], np.int64)
                src[:n] = dst
                n_src = self._maps.relabel(box, edge_index, src, n)
                src = src[:n_src]
                blocks.append(Block(edge_index=torch.from_numpy(edge_index),
                                    src_nodes=torch.from_numpy(src), num_dst=n))
                dst = src
            self._maps.reset(box, dst)
        blocks.reverse()
        return MiniBatch(seeds=torch.from_numpy(seeds_np), blocks=blocks, epoch=int(epoch),
                         batch_index=int(batch_index))


class KeyedNeighborSampler(KeyedSamplerBase):
    """Uniform neighbour sampling of a whole ``CSCGraph`` keyed by node id (``keys[v]``, default
    ``v``): the single-process reference of ``DistNeighborSampler``, which yields the same
    batches (in its relabelled ids) for the same seed, whatever the number of parts.

    Same conventions as ``NeighborSampler`` (fanouts per block, ``replace``, distinct seeds);
    uniform only, one thread per batch. O(sampled edges + destinations) per batch."""

    def __init__(self, graph: CSCGraph, fanouts: Sequence[int], *, replace: bool = False,
                 seed: int = 0, keys: Optional[np.ndarray] = None, node_map: str = "auto"):
        if not isinstance(graph, CSCGraph):
            raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
        super().__init__(graph.num_nodes, fanouts, replace=replace, seed=seed,
                         node_map=node_map)
        self.graph = graph
        self._indptr = readonly_view(graph.indptr)
        self._indices = readonly_view(graph.indices)
        if keys is not None:
            keys = np.ascontiguousarray(keys, dtype=np.int64)
            if keys.shape != (graph.num_nodes,):
                raise GraphfeedError(f"keys must hold one int per node ({graph.num_nodes}), "
                                     f"got shape {keys.shape}")
        self._keys = keys

    @classmethod
    def _from_graph(cls, graph, fanouts, device, uva, **kwargs) -> "KeyedNeighborSampler":
        if device.type != "cpu" or uva:
            raise GraphfeedError(f"KeyedNeighborSampler samples on the CPU; got device={device}")
        return cls(graph, fanouts, **kwargs)

    def with_fanouts(self, fanouts: Sequence[int]) -> "KeyedNeighborSampler":
        return KeyedNeighborSampler(self.graph, fanouts, replace=self.replace, seed=self.seed,
                                    keys=self._keys, node_map=self.node_map)

    def _layer_edges(self, dst, fanout, key):
        keys = dst if self._keys is None else self._keys[dst]
        return sample_keyed(self._indptr, self._indices, dst, keys, fanout, self.replace, key)

    def __repr__(self) -> str:
        return (f"KeyedNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, "
                f"seed={self.seed})")


__all__ = ["KeyedNeighborSampler", "KeyedSamplerBase", "sample_keyed"]
