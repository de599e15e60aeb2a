"""Uniform neighbour sampling of a heterogeneous graph with vectorised torch ops
(``TorchHeteroSampler``), on whatever device the fused CSC lives on: the GPU path of
heterogeneous sampling. Registered as ``"torch-hetero"`` in ``graphfeed.sampling.SAMPLERS``.

One layer is a handful of whole-layer tensor ops: a work item per (relation, destination of its
destination type), each item's run of in-edges of its relation found by a vectorised binary
search on the per-edge relation ids (sorted within every neighbour range of the fused CSC), then
the homogeneous torch sampler's draws over those runs (``TorchNeighborSampler._subsample`` and
``_randint``) and its relabelling (``_relabel``) over every type at once (global ids are
distinct across types), split per type afterwards with a stable sort by type.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Optional

import numpy as np
import torch

from ..errors import GraphfeedError
from ..graph.hetero import HeteroGraph
from .base import MiniBatch, Sampler
from ._common import batch_key, check_batch_position, check_flag
from .hetero import (HeteroNeighborSampler, group_seeds, make_block, resolve_hetero_fanouts,
                     typed_options)
from .torch_sampler import TorchNeighborSampler, _relabel

__all__ = ["TorchHeteroSampler"]


class TorchHeteroSampler(Sampler):
    """Uniform per-relation neighbour sampling of a :class:`~graphfeed.graph.hetero.HeteroGraph`
    with torch ops only (no loop over nodes or relations), on the device of the graph tensors.

    - Inputs and outputs are ``HeteroNeighborSampler``'s: ``fanouts`` one list for every edge
      type or a dict per edge type (or ``num_neighbors`` in PyG's order); seeds global ids or a
      dict node type -> type-local ids (grouped by type in the batch); a
      :class:`MiniBatch` whose blocks give per edge type an ``edge_index`` in type-local
      ids, destinations first per node type, new sources of a type in order of first
      appearance (relation-major). Tensors are on :attr:`device`.
    - ``replace=False``: per destination and relation, ``min(fanout, degree)`` distinct in-edges,
      every subset equally likely; ``replace=True``: ``fanout`` i.i.d. uniform in-edges where the
      degree is positive; ``-1`` every in-edge, ``0`` (dict fanouts) none.
    - Randomness: one ``torch.Generator`` on the device per batch, seeded from ``(seed, epoch,
      batch_index)`` (the homogeneous torch sampler's rule): a batch is reproducible on one
      device type, whatever thread samples it, but the neighbours drawn differ from the numba
      ``HeteroNeighborSampler``'s.
    - Host syncs per layer: the per-relation edge counts, one (two above fanout 32) per distinct
      fanout value of the layer for the subset draws, the unique-source count and the per-type
      source counts. Not per node, and not per relation (one fanout list for every edge type is
      one value).
    - Seeds are grouped and checked on the host (they come from an item sampler there).
    - ``uva=True`` (CUDA only): samples from zero-copy CUDA views of the pinned fused CSC and
      relation ids, as the homogeneous torch sampler does.
    """

    def __init__(self, graph: HeteroGraph, fanouts=None, *, device="cpu", replace: bool = False,
                 seed: int = 0, uva: bool = False, return_edge_ids: bool = False,
                 num_neighbors=None):
        typed_options(self, graph, fanouts, num_neighbors, replace=replace, seed=seed,
                      return_edge_ids=return_edge_ids)
        self.uva = check_flag("uva", uva)
        dev = torch.device(device)
        # the homogeneous torch sampler over the fused CSC: device placement (or UVA views of
        # the pinned arrays) and the draws (_randint, _subsample) come from it
        self._base = TorchNeighborSampler._from_graph(graph.csc, [1], dev, self.uva,
                                                      replace=self.replace, seed=self.seed)
        self._etype = self._place(graph.edge_type, dev)
        rel_src, rel_dst = graph.relation_types
        self._rel_src = rel_src
        self._rel_dst = rel_dst
        self._offsets = torch.from_numpy(graph.node_offsets.copy()).to(self.device)
        self._offsets_cpu = torch.from_numpy(graph.node_offsets.copy())
        deg = np.diff(np.asarray(graph.csc.indptr))
        # a binary search over a run of at most max_degree edges ends in this many halvings
        self._search_steps = int(deg.max()).bit_length() if deg.size else 0

    def _place(self, a: np.ndarray, dev: torch.device) -> torch.Tensor:
        from .._pinning import torch_view

        t = torch_view(np.ascontiguousarray(a))
        if self.uva:
            from .._pinning import pin_tensor, uva_tensor

            host = pin_tensor(t.contiguous())
            self._base._host = self._base._host + (host,)  # kept alive with the CSC views
            return uva_tensor(host, dev)
        return t if dev.type == "cpu" else t.to(dev)

    @classmethod
    def from_graph(cls, graph, fanouts, *, device="cpu", replace: bool = False, seed: int = 0,
                   uva: bool = False, method=None, **options) -> "TorchHeteroSampler":
        """As :meth:`Sampler.from_graph`, for a ``HeteroGraph`` (uniform only)."""
        if method is not None and getattr(method, "kind", "uniform") != "uniform":
            raise GraphfeedError(f"TorchHeteroSampler samples uniformly; got method "
                                 f"{method.describe()}")
        options.pop("num_threads", None)  # the work is whole-layer tensor ops
        return cls(graph, fanouts, device=device, replace=replace, seed=seed, uva=uva, **options)

    def __repr__(self) -> str:
        return (f"TorchHeteroSampler(fanouts={self.fanouts_dict}, replace={self.replace}, "
                f"seed={self.seed}, device={self.device})")

    # ------------------------------------------------------------------ public
    @property
    def device(self) -> torch.device:
        """Where sampling runs and the batches are created (the graph tensors' device)."""
        return self._base.device

    # the numba sampler's views of the graph and the fanout table
    num_nodes = HeteroNeighborSampler.num_nodes
    fanouts = HeteroNeighborSampler.fanouts
    hetero = HeteroNeighborSampler.hetero
    fanouts_dict = HeteroNeighborSampler.fanouts_dict

    def with_fanouts(self, fanouts) -> "TorchHeteroSampler":
        """The same placed tensors (no second copy or pinning) with other fanouts."""
        other = object.__new__(TorchHeteroSampler)
        other.__dict__.update(self.__dict__)
        other._fanout_table = resolve_hetero_fanouts(self.graph, fanouts)
        return other

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        """The typed ``MiniBatch`` of one batch of distinct seeds (global ids or a dict of
        type-local ids), on :attr:`device`; ``executor`` is unused."""
        epoch, batch_index = check_batch_position(epoch, batch_index, executor)
        g = self.graph
        seeds_np, ptr = group_seeds(g, seeds)
        if seeds_np.size > 1:
            s = np.sort(seeds_np)
            rep = s[1:] == s[:-1]
            if rep.any():
                raise GraphfeedError(f"seed id {int(s[1:][rep][0])} appears twice; seeds must be "
                                     f"distinct")
        dst = torch.from_numpy(seeds_np).to(self.device)
        counts = np.diff(ptr).tolist()
        gen = torch.Generator(device=self.device)
        gen.manual_seed(batch_key(self.seed, epoch, batch_index) >> 1)
        seeds_t = dst
        blocks = []
        for layer in range(self._fanout_table.shape[0] - 1, -1, -1):
            block, dst, counts = self._sample_layer(dst, counts, self._fanout_table[layer], gen)
            blocks.append(block)
        blocks.reverse()
        return MiniBatch(seeds=seeds_t, blocks=blocks, epoch=int(epoch),
                         batch_index=int(batch_index), node_types=g.node_types,
                         node_offsets=self._offsets_cpu)

    # ------------------------------------------------------------------ internals
    def _runs(self, v: torch.Tensor, rel: torch.Tensor):
        """``(start, end)`` of the in-edges of relation ``rel[i]`` into ``v[i]``: two lower
        bounds per item in the sorted relation ids of ``v``'s neighbour range, searched all at
        once in a fixed number of halvings (no host sync)."""
        indptr = self._base.indptr
        lo0 = indptr[v]
        hi0 = indptr[v + 1]
        if self._etype.numel() == 0 or v.numel() == 0:
            return lo0, lo0
        lo = torch.cat([lo0, lo0])
        hi = torch.cat([hi0, hi0])
        target = torch.cat([rel, rel + 1])
        last = self._etype.numel() - 1
        for _ in range(self._search_steps):
            mid = (lo + hi) >> 1
            below = self._etype[mid.clamp(max=last)].to(torch.int64) < target
            open_ = lo < hi
            lo = torch.where(open_ & below, mid + 1, lo)
            hi = torch.where(open_ & ~below, mid, hi)
        n = v.numel()
        return lo[:n], lo[n:]

    def _sample_layer(self, dst: torch.Tensor, counts: list, fanouts: np.ndarray,
                      gen: torch.Generator):
        g = self.graph
        base = self._base
        dev = self.device
        T = g.num_node_types
        R = g.num_edge_types
        dst_ptr = np.zeros(T + 1, np.int64)
        np.cumsum(counts, out=dst_ptr[1:])
        # work items, relation-major: relation r's items are the destinations of its type
        # (built from slices and fills on the device: no host-to-device copies, which would
        # synchronise like a read-back)
        item_ptr = np.zeros(R + 1, np.int64)
        vs, js, rs, fs = [], [], [], []
        for r in range(R):
            t = int(self._rel_dst[r])
            n = int(counts[t]) if fanouts[r] != 0 else 0
            item_ptr[r + 1] = item_ptr[r] + n
            if n:
                vs.append(dst[dst_ptr[t]:dst_ptr[t + 1]])
                js.append(torch.arange(n, device=dev))
                rs.append(torch.full((n,), r, dtype=torch.int64, device=dev))
                fs.append(torch.full((n,), int(fanouts[r]), dtype=torch.int64, device=dev))
        n_items = int(item_ptr[-1])
        if n_items:
            item_j, item_f = torch.cat(js), torch.cat(fs)
            start, end = self._runs(torch.cat(vs), torch.cat(rs))
        else:
            start = end = item_j = item_f = torch.zeros(0, dtype=torch.int64, device=dev)
        deg = end - start
        if self.replace:
            cnt = torch.where((item_f < 0) | (deg == 0), deg, item_f)
        else:
            cnt = torch.where(item_f < 0, deg, torch.minimum(deg, item_f))
        csum = torch.cumsum(cnt, 0)
        # sync: each relation's edge count (the running count at each relation's first item)
        csum0 = torch.cat([torch.zeros(1, dtype=csum.dtype, device=dev), csum])
        edge_ptr = torch.cat([csum0[int(p):int(p) + 1] for p in item_ptr]).cpu().numpy()
        num_edges = int(edge_ptr[-1])
        offsets = csum - cnt
        item = torch.repeat_interleave(torch.arange(n_items, device=dev), cnt,
                                       output_size=num_edges)
        eids = (start - offsets)[item] + torch.arange(num_edges, device=dev)
        if self.replace:
            drawn = item_f[item] >= 0
            d = deg[item]
            eids = torch.where(drawn, start[item] + base._randint(d.clamp(min=1), gen), eids)
        else:
            # subset draws per distinct fanout value (one for a single fanout list)
            for f in sorted({int(x) for x in fanouts if x > 0}):
                rels = [r for r in range(R) if fanouts[r] == f and item_ptr[r + 1] > item_ptr[r]]
                if not rels:
                    continue
                if int(sum(item_ptr[r + 1] - item_ptr[r] for r in rels)) == n_items:
                    base._subsample(eids, start, deg, offsets, f, gen)
                    continue
                idx = torch.cat([torch.arange(int(item_ptr[r]), int(item_ptr[r + 1]), device=dev)
                                 for r in rels])
                base._subsample(eids, start[idx], deg[idx], offsets[idx], f, gen)
        src_global = base.indices[eids].to(torch.int64)
        cols = item_j[item]
        # one relabel over every type (global ids are distinct across types), then a stable
        # split by type: each type's destinations stay first and in order
        src_all, local = _relabel(dst, src_global)
        ty = torch.searchsorted(self._offsets, src_all, right=True) - 1
        type_counts = torch.bincount(ty, minlength=T)
        new_counts = type_counts.cpu().tolist()  # sync: per-type source counts
        perm = torch.argsort(ty, stable=True)
        type_start = torch.cumsum(type_counts, 0) - type_counts
        rank = torch.empty_like(perm)
        rank[perm] = torch.arange(perm.numel(), device=dev) - type_start[ty[perm]]
        rows = rank[local]
        nxt = src_all[perm]
        src_ptr = np.zeros(T + 1, np.int64)
        np.cumsum(new_counts, out=src_ptr[1:])
        block = make_block(g, nxt, src_ptr, counts, torch.stack([rows, cols]),
                           eids if self.return_edge_ids else None, edge_ptr)
        return block, nxt, new_counts
