"""Uniform neighbour sampling of a heterogeneous graph on CPU (``HeteroNeighborSampler``).

One fused CSC (``graphfeed.graph.hetero.HeteroGraph``) and numba kernels that reuse the
homogeneous per-destination sampler on each destination's run of in-edges of one relation
(``_hetero_kernels``). Registered as ``"hetero"`` in ``graphfeed.sampling.SAMPLERS``.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Mapping, Optional

import numpy as np
import torch

from ..errors import GraphfeedError
from ..graph.hetero import HeteroGraph
from .._checks import check_int
from ._common import (batch_key, check_batch_position, check_fanouts, check_flag, check_seed,
                      resolve_fanouts)
from .base import HeteroBlock, MiniBatch, Sampler
from ._cpu_common import MapPool, choose_node_map, readonly_view, seeds_to_numpy

__all__ = ["HeteroNeighborSampler", "group_seeds", "make_block", "resolve_hetero_fanouts"]


def resolve_hetero_fanouts(graph: HeteroGraph, fanouts) -> np.ndarray:
    """Fanouts as an int64 ``(num_layers, num_edge_types)`` array.

    ``fanouts``: one list for every edge type (``[15, 10]``), or a dict edge type -> list (keys
    are ``(src, rel, dst)`` triples or relation names naming one triple), every list of the same
    length; an edge type left out of the dict is not sampled (fanout 0). Entries are ``>= 1``,
    ``-1`` (every in-edge) or, in a dict, ``0`` (not sampled in that layer)."""
    num_rel = graph.num_edge_types
    if isinstance(fanouts, Mapping):
        if not fanouts:
            raise GraphfeedError("fanouts: the dict names no edge type")
        lists = {}
        for key, fl in fanouts.items():
            r = graph.edge_type_id(key)
            if r in lists:
                raise GraphfeedError(f"fanouts: edge type {graph.edge_types[r]} is given twice")
            if isinstance(fl, (str, bytes)) or not hasattr(fl, "__len__"):
                raise GraphfeedError(f"fanouts[{key!r}] must be a list with one entry per layer, "
                                     f"got {fl!r}")
            vals = [0 if f == 0 and not isinstance(f, bool) else f for f in fl]
            nonzero = [f for f in vals if f != 0]
            check_fanouts(nonzero or [1], name=f"fanouts[{key!r}]")
            lists[r] = vals
        lengths = {len(v) for v in lists.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise GraphfeedError(f"fanouts: every edge type needs the same number (>= 1) of "
                                 f"layers, got lengths {sorted(lengths)}")
        layers = lengths.pop()
        out = np.zeros((layers, num_rel), dtype=np.int64)
        for r, vals in lists.items():
            out[:, r] = [int(v) for v in vals]
        return out
    flat = check_fanouts(fanouts)
    return np.repeat(np.asarray(flat, dtype=np.int64)[:, None], num_rel, axis=1)


def group_seeds(g: HeteroGraph, seeds) -> tuple[np.ndarray, np.ndarray]:
    """``(global ids grouped by type, per-type pointers (T + 1,))`` of ``seeds`` (global ids
    or a dict node type -> type-local ids of ``g``), checked to be in range (not for repeats)."""
    offsets = g.node_offsets
    T = g.num_node_types
    if isinstance(seeds, Mapping):
        parts = [np.zeros(0, np.int64)] * T
        for t, ids in seeds.items():
            ti = g.type_id(t)
            n_t = g.num_nodes_of(t)
            a = seeds_to_numpy(ids, n_t)
            if a.size and (int(a.min()) < 0 or int(a.max()) >= n_t):
                bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
                raise GraphfeedError(f"seed id {bad} of node type {t!r} is out of range "
                                     f"[0, {n_t})")
            parts[ti] = a + offsets[ti]
        ptr = np.zeros(T + 1, np.int64)
        np.cumsum([p.shape[0] for p in parts], out=ptr[1:])
        return np.ascontiguousarray(np.concatenate(parts)), ptr
    a = seeds_to_numpy(seeds, g.num_nodes)
    if a.size and (int(a.min()) < 0 or int(a.max()) >= g.num_nodes):
        bad = int(a.min()) if int(a.min()) < 0 else int(a.max())
        raise GraphfeedError(f"seed id {bad} is out of range [0, {g.num_nodes})")
    types = np.searchsorted(offsets, a, side="right") - 1
    ptr = np.zeros(T + 1, np.int64)
    np.cumsum(np.bincount(types, minlength=T), out=ptr[1:])
    if a.size > 1 and (np.diff(types) < 0).any():
        a = a[np.argsort(types, kind="stable")]
    return np.ascontiguousarray(a), ptr


def typed_options(sampler, graph, fanouts, num_neighbors, *, replace, seed,
                  return_edge_ids) -> None:
    """The options every typed sampler checks and keeps: ``graph`` a ``HeteroGraph``, the
    per-relation fanout table, ``replace``, ``seed``, ``return_edge_ids``."""
    who = type(sampler).__name__
    if not isinstance(graph, HeteroGraph):
        raise GraphfeedError(f"{who} needs a HeteroGraph, got {type(graph).__name__}")
    sampler.graph = graph
    sampler._fanout_table = resolve_hetero_fanouts(
        graph, resolve_fanouts(fanouts, num_neighbors, who))
    sampler.replace = check_flag("replace", replace)
    sampler.seed = check_seed(seed)
    sampler.return_edge_ids = check_flag("return_edge_ids", return_edge_ids)


class HeteroNeighborSampler(Sampler):
    """Uniform neighbour sampling of a :class:`~graphfeed.graph.hetero.HeteroGraph`, per edge
    type, on CPU.

    - ``fanouts``: one list for all edge types or a dict per edge type (see
      :func:`resolve_hetero_fanouts`); ``fanouts[i]`` belongs to ``blocks[i]`` as in the
      homogeneous sampler (``num_neighbors=`` instead: PyG's order, every list reversed): each
      destination gets up to ``fanout`` in-edges *of each relation*
      into its type.
    - ``replace``, ``seed``, ``return_edge_ids``: as ``NeighborSampler``. Without replacement a
      destination's sample of one relation is uniform over the k-subsets of its in-edges of
      that relation (the homogeneous kernels' exact samplers).
    - Seeds: 1-D *global* ids (any mix of types), or a dict node type -> type-local ids. The
      batch's seeds come out grouped by type (stable within a type).
    - Randomness derives only from ``(seed, epoch, batch_index, layer, relation, destination
      type-local position)``: a batch is identical whatever thread samples it.

    - ``node_map``: as ``NeighborSampler``'s (``"auto"``: an int32 map of ``num_nodes``
      entries per batch in flight up to 32M nodes, a hash table sized by the batch above;
      ``"dense"`` / ``"hash"`` force one). The batches are the same either way.

    A batch runs on the calling thread (the loader samples several batches at once on its
    threads); cost O(sampled edges + destinations x relations x log(degree)).
    """

    def __init__(self, graph: HeteroGraph, fanouts=None, *, replace: bool = False, seed: int = 0,
                 return_edge_ids: bool = False, num_threads: int = 1, num_neighbors=None,
                 node_map: str = "auto"):
        typed_options(self, graph, fanouts, num_neighbors, replace=replace, seed=seed,
                      return_edge_ids=return_edge_ids)
        # accepted for the common options; a batch runs on one thread
        self.num_threads = check_int("num_threads", num_threads, 1)
        self._indptr = readonly_view(graph.csc.indptr)
        self._indices = readonly_view(graph.csc.indices)
        self._etype = readonly_view(graph.edge_type)
        rel_src, rel_dst = graph.relation_types
        self._rel_src = readonly_view(rel_src)
        self._rel_dst = readonly_view(rel_dst)
        self._offsets = graph.node_offsets
        self._offsets_t = torch.from_numpy(graph.node_offsets.copy())
        self.node_map = choose_node_map(graph.num_nodes, node_map)
        self._maps = MapPool(graph.num_nodes, self.node_map)

    @classmethod
    def from_graph(cls, graph, fanouts, *, device="cpu", replace: bool = False, seed: int = 0,
                   uva: bool = False, method=None, **options) -> "HeteroNeighborSampler":
        """As :meth:`Sampler.from_graph`, for a ``HeteroGraph`` (CPU only, uniform only; the GPU
        path is ``"torch-hetero"``, :class:`~graphfeed.sampling.torch_hetero.TorchHeteroSampler`,
        which imports this module, so this one does not dispatch to it)."""
        if not isinstance(graph, HeteroGraph):
            raise GraphfeedError(f"the 'hetero' sampler needs a HeteroGraph, got "
                                 f"{type(graph).__name__}")
        device = torch.device(device)
        if device.type != "cpu" or uva:
            raise GraphfeedError(f"HeteroNeighborSampler samples on the CPU (numba kernels); got "
                                 f"device={device}, uva={uva}: use the 'torch-hetero' sampler "
                                 f"(TorchHeteroSampler) on a GPU")
        if method is not None and getattr(method, "kind", "uniform") != "uniform":
            raise GraphfeedError(f"HeteroNeighborSampler samples uniformly; got method "
                                 f"{method.describe()}")
        return cls(graph, fanouts, replace=replace, seed=seed, **options)

    def __repr__(self) -> str:
        return (f"HeteroNeighborSampler(fanouts={self.fanouts_dict}, replace={self.replace}, "
                f"seed={self.seed})")

    # ------------------------------------------------------------------ public
    @property
    def num_nodes(self) -> int:
        return self.graph.num_nodes

    @property
    def hetero(self) -> HeteroGraph:
        """The typed graph sampled (its batches are typed ``MiniBatch``es)."""
        return self.graph

    @property
    def fanouts(self) -> tuple[int, ...]:
        """Per layer, the largest fanout over the edge types (``-1`` if one takes every
        neighbour); :attr:`fanouts_dict` has them all."""
        t = self._fanout_table
        return tuple(-1 if (row < 0).any() else int(row.max()) for row in t)

    @property
    def fanouts_dict(self) -> dict:
        """Edge type -> list of per-layer fanouts (0: not sampled)."""
        return {et: [int(x) for x in self._fanout_table[:, r]]
                for r, et in enumerate(self.graph.edge_types)}

    def with_fanouts(self, fanouts) -> "HeteroNeighborSampler":
        return HeteroNeighborSampler(self.graph, fanouts, replace=self.replace, seed=self.seed,
                                     return_edge_ids=self.return_edge_ids,
                                     node_map=self.node_map)

    def group_seeds(self, seeds) -> tuple[np.ndarray, np.ndarray]:
        """``(global ids grouped by type, per-type pointers (T + 1,))`` of ``seeds`` (global ids
        or a dict node type -> type-local ids), checked to be in range."""
        return group_seeds(self.graph, seeds)

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        """The typed ``MiniBatch`` of one batch of distinct seeds (global ids or a dict of
        type-local ids); ``executor`` is unused (a batch runs on the calling thread)."""
        from . import _hetero_kernels as HK

        epoch, batch_index = check_batch_position(epoch, batch_index, executor)
        g = self.graph
        dst, dst_ptr = self.group_seeds(seeds)
        hashed = self.node_map == "hash"
        with self._maps.lease() as box:  # box[0]: the node map (a grown hash table replaces it)
            if hashed:
                bad, box[0] = HK.insert_typed_seeds_hash(dst, dst_ptr, box[0])
            else:
                bad = HK.insert_typed_seeds(dst, dst_ptr, box[0])
            if bad >= 0:
                raise GraphfeedError(f"seed id {int(dst[bad])} appears twice; seeds must be "
                                     f"distinct")
            box.clean = False  # the map holds the seeds from here
            seeds_np = dst
            blocks = []
            for layer in range(self._fanout_table.shape[0] - 1, -1, -1):
                key = np.uint64(batch_key(self.seed, epoch, batch_index, layer))
                args = (self._indptr, self._indices, self._etype, dst, dst_ptr, self._rel_src,
                        self._rel_dst, self._fanout_table[layer], self.replace, key, box[0],
                        self.return_edge_ids)
                if hashed:
                    ei, eids, eptr, src, src_ptr, box[0] = HK.sample_hetero_layer_hash(*args)
                else:
                    ei, eids, eptr, src, src_ptr = HK.sample_hetero_layer(*args)
                blocks.append(self._block(ei, eids, eptr, src, src_ptr, dst_ptr))
                dst, dst_ptr = src, src_ptr
            self._maps.reset(box, dst)  # the last layer's sources hold every touched node
        blocks.reverse()
        return MiniBatch(
            seeds=torch.from_numpy(seeds_np), blocks=blocks, epoch=int(epoch),
            batch_index=int(batch_index), node_types=g.node_types,
            node_offsets=self._offsets_t)

    def _block(self, ei, eids, eptr, src, src_ptr, dst_ptr) -> HeteroBlock:
        # each relation's edge_index is a view of its columns
        return make_block(self.graph, torch.from_numpy(src), src_ptr, np.diff(dst_ptr),
                          torch.from_numpy(ei),
                          torch.from_numpy(eids) if self.return_edge_ids else None, eptr)


def make_block(g: HeteroGraph, src, src_ptr, dst_counts, edge_index, eids,
               edge_ptr) -> HeteroBlock:
    """A layer's ``HeteroBlock`` from its flat outputs (tensors on any device): ``src`` the global
    ids of the sources grouped by type (``src_ptr``, type ``t``'s destinations first,
    ``dst_counts[t]`` of them), ``edge_index`` (2, E) type-local ids with relation ``r``'s
    columns at ``[edge_ptr[r], edge_ptr[r + 1])``, ``eids`` their positions (or ``None``)."""
    src_nodes, num_dst = {}, {}
    for t, name in enumerate(g.node_types):
        a, b = int(src_ptr[t]), int(src_ptr[t + 1])
        src_nodes[name] = src[a:b] - int(g.node_offsets[t])
        num_dst[name] = int(dst_counts[t])
    eidx, edge_ids = {}, ({} if eids is not None else None)
    for r, et in enumerate(g.edge_types):
        a, b = int(edge_ptr[r]), int(edge_ptr[r + 1])
        eidx[et] = edge_index[:, a:b]
        if edge_ids is not None:
            edge_ids[et] = eids[a:b]
    return HeteroBlock(eidx, src_nodes, num_dst, edge_ids)
