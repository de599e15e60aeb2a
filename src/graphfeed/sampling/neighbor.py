"""Uniform neighbour sampling on CPU with numba kernels (``NeighborSampler``)."""

from __future__ import annotations

import threading
from concurrent.futures import Executor
from typing import Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from .._threads import ChunkPool, run_chunks
from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import batch_key, check_fanouts
from .base import Block, MiniBatch, Sampler

# Below this many destinations a layer is sampled on the calling thread even when
# num_threads > 1: handing work to a pool costs more than it saves.
_MIN_DST_PER_CHUNK = 2048


def _readonly_view(a: np.ndarray) -> np.ndarray:
    """A plain, C-contiguous, read-only ndarray view of ``a`` (memmaps included), so numba
    compiles one variant per dtype whether the graph was built in RAM or memory-mapped."""
    a = np.ascontiguousarray(np.asarray(a))
    v = a.view(np.ndarray)
    v.flags.writeable = False
    return v


def seeds_to_numpy(seeds, num_nodes: int) -> np.ndarray:
    """Seeds as a 1-D int64 numpy array (no copy when already one). Range and duplicate checks
    happen in the sampling kernel."""
    if isinstance(seeds, torch.Tensor):
        seeds = seeds.detach()
        if seeds.device.type != "cpu":
            seeds = seeds.cpu()
        seeds = seeds.numpy()
    a = np.asarray(seeds)
    if a.ndim != 1:
        raise GraphfeedError(f"seeds must be a 1-D array of node ids, got shape {a.shape}")
    if a.dtype.kind not in "iu":
        if a.size == 0:
            a = a.astype(np.int64)
        else:
            raise GraphfeedError(f"seeds must be integer node ids, got dtype {a.dtype}")
    if a.dtype.kind == "u" and a.size and int(a.max()) >= num_nodes:
        bad = int(a.max())
        raise GraphfeedError(f"seed id {bad} is out of range [0, {num_nodes})")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if not a.flags.writeable:  # e.g. a slice of a memory-mapped id file: keep one kernel variant
        a = a.copy()
    return a


class _MapPool:
    """Per-batch ``node -> local id`` maps (int32, ``-1`` = absent) of size ``num_nodes``.

    A map is clean (all ``-1``) whenever it is in the pool; a batch resets only the entries it
    touched. One map per batch in flight, so concurrent ``sample`` calls never share one.
    """

    def __init__(self, num_nodes: int):
        self._num_nodes = num_nodes
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def acquire(self) -> np.ndarray:
        with self._lock:
            if self._free:
                return self._free.pop()
        return np.full(self._num_nodes, -1, dtype=np.int32)

    def release(self, m: np.ndarray) -> None:
        with self._lock:
            self._free.append(m)


class NeighborSampler(Sampler):
    """Uniform neighbour sampling of a ``CSCGraph`` (in-neighbours), on CPU.

    Layer convention (as DGL/GraphBolt): ``fanouts[i]`` is the fanout of ``blocks[i]``. The
    seeds are the destinations of ``blocks[-1]`` and get ``fanouts[-1]`` neighbours each; the
    sources of ``blocks[-1]`` are the destinations of ``blocks[-2]``, sampled with
    ``fanouts[-2]``; and so on down to ``blocks[0]``, whose sources are ``input_nodes``.

    - ``fanouts``: ints ``>= 1``, or ``-1`` for every neighbour.
    - ``replace=False``: each destination gets ``min(fanout, in_degree)`` distinct in-edges, every
      subset of that size equally likely. ``replace=True``: exactly ``fanout`` i.i.d. uniform
      in-edges per destination with ``in_degree > 0`` (none otherwise); a fanout of ``-1`` takes
      every in-edge once in both modes.
    - Randomness derives only from ``(seed, epoch, batch_index, layer, destination position)``
      (splitmix64 counters, no RNG state), so a batch is identical whatever ``num_threads``, the
      Python thread that samples it, or the order batches are sampled in.
    - ``num_threads > 1`` splits a layer's destinations (layers of >= 2048 of them) into up to
      ``num_threads`` chunks (kernels release the GIL; the relabel pass stays on one thread).
      The chunks run on the ``executor`` passed to :meth:`sample` (a ``DataLoader`` passes its
      own, shared with feature reads), else on a pool of ``num_threads`` threads the sampler
      starts on first use and :meth:`close` stops. It helps a single sampling thread use idle
      cores; when the loader already samples several batches at once on as many Python threads
      as cores, keep ``num_threads=1``. Several Python threads may call :meth:`sample`
      concurrently on one sampler.
    - ``return_edge_ids``: fill ``Block.edge_ids`` with positions in ``graph.indices``.

    Cost: O(sum of sampled edges + destinations) per batch, no sorting; each batch in flight
    holds one int32 array of ``num_nodes`` entries (pooled, reused).
    Seeds must be distinct node ids in ``[0, num_nodes)`` (a duplicate is an error: it would
    make the destination ids, hence the source ids, non-unique).
    """

    def __init__(
        self,
        graph: CSCGraph,
        fanouts: Sequence[int],
        *,
        replace: bool = False,
        seed: int = 0,
        num_threads: int = 1,
        return_edge_ids: bool = False,
    ):
        if not isinstance(graph, CSCGraph):
            raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
        self.graph = graph
        self._fanouts = check_fanouts(fanouts)
        self.replace = bool(replace)
        self.seed = int(seed)
        self.num_threads = check_int("num_threads", num_threads, 1)
        self.return_edge_ids = bool(return_edge_ids)
        self._indptr = _readonly_view(graph.indptr)
        self._indices = _readonly_view(graph.indices)
        self._num_nodes = graph.num_nodes
        self._maps = _MapPool(self._num_nodes)
        self._pool = ChunkPool(self.num_threads, "graphfeed-sample")

    @classmethod
    def _from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], device: torch.device,
                    uva: bool, **kwargs) -> "NeighborSampler":
        # the numba kernels read the host arrays: nothing to place on a device
        if device.type != "cpu" or uva:
            raise GraphfeedError(
                f"NeighborSampler samples on the CPU (numba kernels); got device={device}, "
                f"uva={uva}: use the 'torch' sampler for a GPU"
            )
        return cls(graph, fanouts, **kwargs)

    def __repr__(self) -> str:
        return (
            f"NeighborSampler(fanouts={self.fanouts}, replace={self.replace}, seed={self.seed}, "
            f"num_threads={self.num_threads})"
        )

    # ------------------------------------------------------------------ public
    @property
    def num_nodes(self) -> int:
        return self._num_nodes

    @property
    def fanouts(self) -> tuple[int, ...]:
        return self._fanouts

    def with_fanouts(self, fanouts: Sequence[int]) -> "NeighborSampler":
        return NeighborSampler(self.graph, fanouts, replace=self.replace, seed=self.seed,
                               num_threads=self.num_threads, return_edge_ids=self.return_edge_ids)

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        """Sample the blocks of one batch of seed node ids (1-D ints, distinct, in range);
        ``executor`` runs the chunks of large layers (see the class docstring)."""
        from . import _kernels as K

        seeds_np = seeds_to_numpy(seeds, self._num_nodes)
        node_map = self._maps.acquire()
        clean = True
        try:
            code, pos = K.insert_seeds(seeds_np, node_map, self._num_nodes)
            if code == 1:
                raise GraphfeedError(
                    f"seed id {int(seeds_np[pos])} (position {pos}) is out of range "
                    f"[0, {self._num_nodes})"
                )
            if code == 2:
                first = int(np.flatnonzero(seeds_np[:pos] == seeds_np[pos])[0])
                raise GraphfeedError(
                    f"seed id {int(seeds_np[pos])} appears twice (positions {first} and {pos}); "
                    "seeds must be distinct"
                )
            clean = False
            blocks = []
            dst = seeds_np
            for layer in range(len(self._fanouts) - 1, -1, -1):
                key = np.uint64(batch_key(self.seed, epoch, batch_index, layer))
                edge_index, eids, src = self._sample_layer(
                    dst, self._fanouts[layer], key, node_map, executor)
                blocks.append(
                    Block(
                        edge_index=torch.from_numpy(edge_index),
                        src_nodes=torch.from_numpy(src),
                        num_dst=int(dst.shape[0]),
                        edge_ids=torch.from_numpy(eids) if self.return_edge_ids else None,
                    )
                )
                dst = src
            K.reset_map(node_map, dst)  # the last layer's sources hold every touched node
            clean = True
        finally:
            if clean:  # a map left dirty by an interrupted batch is dropped, not reused
                self._maps.release(node_map)
        blocks.reverse()
        return MiniBatch(
            seeds=torch.from_numpy(seeds_np),
            blocks=blocks,
            epoch=int(epoch),
            batch_index=int(batch_index),
        )

    def close(self) -> None:
        """Stop the sampler's own chunk pool (if one was started); a later :meth:`sample`
        starts it again."""
        self._pool.close()

    # ------------------------------------------------------------------ internals
    def _sample_layer(self, dst: np.ndarray, fanout: int, key, node_map: np.ndarray,
                      executor: Optional[Executor]):
        from . import _kernels as K

        n_dst = int(dst.shape[0])
        want = self.return_edge_ids
        parts = min(self.num_threads, n_dst // _MIN_DST_PER_CHUNK)
        if parts <= 1:
            return K.sample_layer(
                self._indptr, self._indices, dst, fanout, self.replace, key, node_map, want
            )
        if executor is None:
            executor = self._pool.get()
        # two passes over the same chunks: count each destination's edges, then fill them in
        # at the prefix-summed offsets (every destination's draws derive from its position)
        offsets = np.zeros(n_dst + 1, dtype=np.int64)
        starts = np.empty(n_dst, dtype=np.int64)
        degs = np.empty(n_dst, dtype=np.int64)
        indptr, indices, replace = self._indptr, self._indices, self.replace

        def count(a: int, b: int) -> None:
            K.count_layer(indptr, dst, a, b, fanout, replace, offsets, starts, degs)

        run_chunks(count, n_dst, parts, executor)
        np.cumsum(offsets, out=offsets)
        num_edges = int(offsets[-1])
        edge_index = np.empty((2, num_edges), dtype=np.int64)
        eids = np.empty(num_edges if want else 0, dtype=np.int64)

        def fill(a: int, b: int) -> None:
            K.fill_layer(indices, starts, degs, a, b, fanout, replace, key, offsets, edge_index,
                         eids, want)

        run_chunks(fill, n_dst, parts, executor)
        src = np.empty(n_dst + num_edges, dtype=np.int64)
        src[:n_dst] = dst
        n_src = K.relabel_layer(edge_index, node_map, src, n_dst)
        return edge_index, eids, src[:n_src]

