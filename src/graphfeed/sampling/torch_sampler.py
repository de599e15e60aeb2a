"""Uniform neighbour sampling with vectorised torch ops, on whatever device the graph lives on.

``TorchNeighborSampler`` is the GPU sampler (CSC tensors in GPU memory, or GPU-visible views of
pinned host memory) and the plain pure-torch baseline that benchmarks compare the numba sampler
against. It has the semantics and invariants of ``NeighborSampler`` (same layer convention, same
block layout, destinations first and new sources in order of first appearance), but its own RNG
(a ``torch.Generator`` on the graph's device), so its samples differ from the numba sampler's.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Optional, Sequence

import numpy as np
import torch

from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import (batch_key, check_batch_position, check_fanouts, check_flag, check_method,
                      check_seed, labor_key, labor_rotation, resolve_fanouts)
from .base import Block, MiniBatch, Sampler
from .method import SamplingMethod, method_arrays, resolve_method

# Largest fanout drawn with a vectorised Floyd's algorithm (k rounds of O(k) comparisons per
# destination); larger fanouts sort one random key per candidate edge instead.
FLOYD_MAX_K = 32
_RAND_HIGH = 1 << 62


def _check_csc_tensors(indptr: torch.Tensor, indices: torch.Tensor) -> None:
    """What the gathers rely on, vectorised on the tensors' device (O(N + E)): ``indptr`` starts
    at 0, ends at ``len(indices)`` and never decreases; every index is in ``[0, num_nodes)``.
    Out-of-range gathers are an exception on CPU but a device-side assert on CUDA."""
    num_nodes = indptr.numel() - 1
    first, last = int(indptr[0]), int(indptr[-1])
    if first != 0 or last != indices.numel():
        raise GraphfeedError(
            f"indptr must start at 0 and end at the edge count {indices.numel()}, "
            f"got indptr[0]={first}, indptr[-1]={last}"
        )
    if num_nodes > 0:
        down = torch.nonzero(indptr[1:] < indptr[:-1])
        if down.numel():
            pos = int(down[0, 0])
            raise GraphfeedError(
                f"indptr decreases at position {pos} ({int(indptr[pos])} -> {int(indptr[pos + 1])})"
            )
    if indices.numel():
        bad = torch.nonzero((indices < 0) | (indices >= num_nodes))
        if bad.numel():
            pos = int(bad[0, 0])
            raise GraphfeedError(
                f"indices[{pos}] = {int(indices[pos])} is out of range [0, {num_nodes})"
            )


class TorchNeighborSampler(Sampler):
    """Uniform neighbour sampling of CSC tensors with torch ops only (no loop over nodes).

    - ``indptr``: int64 ``(num_nodes + 1,)``; ``indices``: int32 or int64 ``(num_edges,)``, on
      one device; all work happens on that device. The graph tensors are only read through
      indexing/gathers (``indptr[ids]``, ``indices[positions]``), so they may be zero-copy GPU
      views of pinned host memory.
    - ``fanouts``: as ``NeighborSampler`` (``fanouts[i]`` is the fanout of ``blocks[i]``; the
      seeds are ``blocks[-1]``'s destinations; ``-1`` takes every neighbour), or
      ``num_neighbors=`` in PyG's order (the seeds' hop first), not both.
    - ``replace=False``: ``min(fanout, in_degree)`` distinct in-edges per destination, every
      subset equally likely (vectorised Floyd's algorithm for ``fanout <= 32``, else one random
      key per candidate edge and a segmented sort). ``replace=True``: ``fanout`` i.i.d. uniform
      in-edges per destination with ``in_degree > 0``.
    - Randomness: a ``torch.Generator`` on the device, seeded from ``(seed, epoch,
      batch_index)``; reproducible on one device type, not equal to ``NeighborSampler``'s.
    - Host syncs: the seed checks and one per layer for each output size (edge count, number of
      destinations to subsample, unique node count).
    - Seeds must be distinct ids in ``[0, num_nodes)``; a duplicate or out-of-range id raises
      ``GraphfeedError``.
    - The constructor checks the CSC tensors in O(N + E) on their device (``indptr`` monotone
      from 0 to ``len(indices)``, indices in range) unless ``trusted=True``; :meth:`from_graph`
      trusts a ``CSCGraph``, which checked its arrays when it was built.
    - ``sample(..., executor=)`` is accepted for the ``Sampler`` interface and unused: the work
      is a few large tensor ops per layer, parallel inside torch (or on the GPU).
    - ``method``: a :class:`~graphfeed.sampling.SamplingMethod` with the semantics of
      ``NeighborSampler`` (weighted, LABOR with ``Block.edge_weight``, temporal with
      ``sample(..., seed_times=)``). The non-uniform kinds expand every in-edge of a layer's
      destinations (O(sum of their degrees) work and memory per layer, which suits a GPU):
      weighted draws exponential keys and keeps each destination's smallest (with
      replacement: searches the cumulative weights), LABOR hashes source ids exactly as the
      numba kernels do (so both samplers keep the same edges and weights for the same seed;
      ``variates="rotated"`` keeps the same arcs, found by testing every in-edge),
      temporal
      masks the late edges and sorts by a random key (``uniform``) or by time (``last``).
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        fanouts: Optional[Sequence[int]] = None,
        *,
        replace: bool = False,
        seed: int = 0,
        return_edge_ids: bool = False,
        trusted: bool = False,
        method: Optional[SamplingMethod] = None,
        num_neighbors: Optional[Sequence[int]] = None,
    ):
        if not isinstance(indptr, torch.Tensor) or not isinstance(indices, torch.Tensor):
            raise GraphfeedError("indptr and indices must be torch tensors")
        if indptr.dim() != 1 or indices.dim() != 1 or indptr.numel() < 1:
            raise GraphfeedError(
                f"indptr and indices must be 1-D (indptr non-empty), got shapes "
                f"{tuple(indptr.shape)} and {tuple(indices.shape)}"
            )
        if indptr.dtype != torch.int64 or indices.dtype not in (torch.int32, torch.int64):
            raise GraphfeedError(
                f"indptr must be int64 and indices int32/int64, got {indptr.dtype}, {indices.dtype}"
            )
        if indptr.device != indices.device:
            raise GraphfeedError(
                f"indptr and indices are on different devices: {indptr.device} != {indices.device}"
            )
        if not trusted:
            _check_csc_tensors(indptr, indices)
        self.indptr = indptr
        self.indices = indices
        self._fanouts = check_fanouts(resolve_fanouts(fanouts, num_neighbors,
                                                      "TorchNeighborSampler"))
        self.replace = check_flag("replace", replace)
        self.seed = check_seed(seed)
        self.return_edge_ids = check_flag("return_edge_ids", return_edge_ids)
        self.method = check_method(resolve_method(method), self.replace, "TorchNeighborSampler")
        self._marrays: dict = {}
        if not self.method.is_uniform:
            self._marrays = _method_tensors(self.method, indptr, indices, None)
        # pinned host tensors that UVA views in indptr/indices alias (from_graph(uva=True))
        self._host: tuple[torch.Tensor, ...] = ()

    @classmethod
    def _from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], device: torch.device,
                    uva: bool, **kwargs) -> "TorchNeighborSampler":
        """``uva=False``: over ``graph.tensors(device)`` (CPU: shares memory with the graph's
        arrays; another device: a copy cached by the graph, O(N + E) device memory).
        ``uva=True``: pins the graph's host arrays (``graph.pin_memory()``: in place where CUDA
        allows, else pinned copies the graph switches to) and samples from zero-copy CUDA views
        of them, reading over the bus only the entries it gathers; the sampler keeps the pinned
        tensors alive."""
        host: tuple[torch.Tensor, ...] = ()
        if uva:
            from .._pinning import uva_tensor

            host = tuple(t.contiguous() for t in graph.pin_memory().tensors("cpu"))
            indptr, indices = (uva_tensor(t, device) for t in host)
        else:
            indptr, indices = graph.tensors(device)
        # a CSCGraph checked its arrays when it was built: no second O(E) pass (over PCIe for
        # pinned-host views)
        method = resolve_method(kwargs.pop("method", None))
        sampler = cls(indptr, indices, fanouts, trusted=True, **kwargs)
        sampler.method = check_method(method, sampler.replace, "TorchNeighborSampler")
        if not method.is_uniform:
            sampler._marrays = _method_tensors(method, indptr, indices, graph)
        sampler._host = host
        return sampler

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.numel() - 1)

    @property
    def fanouts(self) -> tuple[int, ...]:
        return self._fanouts

    @property
    def device(self) -> torch.device:
        """The graph tensors' device, where sampling runs and the batches are created."""
        return self.indptr.device

    def with_fanouts(self, fanouts: Sequence[int]) -> "TorchNeighborSampler":
        # the same, already checked, tensors: no second O(E) pass (over PCIe for pinned views)
        other = TorchNeighborSampler(self.indptr, self.indices, fanouts, replace=self.replace,
                                     seed=self.seed, return_edge_ids=self.return_edge_ids,
                                     trusted=True)
        other._host = self._host
        other.method, other._marrays = self.method, self._marrays
        return other

    def __repr__(self) -> str:
        return (
            f"TorchNeighborSampler(fanouts={self.fanouts}, replace={self.replace}, "
            f"seed={self.seed}, device={self.device}, method={self.method.describe()!r})"
        )

    # ------------------------------------------------------------------ public
    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None, seed_times=None) -> MiniBatch:
        """Sample the blocks of one batch of seed ids; every output tensor is on ``self.device``
        (``executor`` is unused, see the class docstring). ``seed_times`` (temporal method
        only): one time per seed, default the seeds' node times."""
        epoch, batch_index = check_batch_position(epoch, batch_index, executor)
        seeds = self._check_seeds(seeds)
        kind = self.method.kind
        times = None
        if kind == "temporal":
            times = self._seed_times(seeds, seed_times)
        elif seed_times is not None:
            raise GraphfeedError(f"seed_times is for temporal sampling; this sampler's method is "
                                 f"{self.method.describe()}")
        gen = torch.Generator(device=self.device)
        gen.manual_seed(batch_key(self.seed, epoch, batch_index) >> 1)
        blocks = []
        dst = seeds
        for layer in range(len(self._fanouts) - 1, -1, -1):
            if kind == "uniform":
                block = self._sample_layer(dst, self._fanouts[layer], gen)
            else:
                nkey = labor_key(self.seed, epoch, batch_index, layer, self.method)
                block, times = self._sample_layer_method(dst, self._fanouts[layer], gen, nkey, times)
            blocks.append(block)
            dst = block.src_nodes
        blocks.reverse()
        return MiniBatch(seeds=seeds, blocks=blocks, epoch=int(epoch), batch_index=int(batch_index))

    # ------------------------------------------------------------------ internals
    def _seed_times(self, seeds: torch.Tensor, seed_times) -> torch.Tensor:
        nt = self._marrays.get("node_times")
        et = self._marrays.get("edge_times")
        dtype = (nt if nt is not None else et).dtype
        if seed_times is None:
            if nt is None:
                raise GraphfeedError(
                    "TorchNeighborSampler: temporal sampling over edge times only needs seed_times= "
                    "(one time per seed); the graph has no node times to default to")
            return nt[seeds]
        t = torch.as_tensor(np.asarray(seed_times.cpu() if isinstance(seed_times, torch.Tensor) else seed_times))
        if tuple(t.shape) != tuple(seeds.shape):
            raise GraphfeedError(f"seed_times must hold one time per seed: shape {tuple(t.shape)} != "
                                 f"{tuple(seeds.shape)}")
        if t.dtype.is_floating_point and not dtype.is_floating_point:
            raise GraphfeedError(f"seed_times are floats but the graph's times are {dtype}: pass "
                                 f"integer times")
        if t.dtype.is_floating_point and not bool(torch.isfinite(t).all()):
            raise GraphfeedError("seed_times must be finite")
        return t.to(device=self.device, dtype=dtype)


    def _sample_layer_method(self, dst: torch.Tensor, fanout: int, gen: torch.Generator,
                             node_key: int, dst_times):
        """One weighted / LABOR / temporal layer over every in-edge of ``dst`` (expanded)."""
        dev = self.device
        kind = self.method.kind
        n_dst = dst.numel()
        start = self.indptr[dst]
        deg = self.indptr[dst + 1] - start
        total = int(deg.sum()) if n_dst else 0
        seg = torch.repeat_interleave(torch.arange(n_dst, device=dev), deg, output_size=total)
        seg_start = torch.cumsum(deg, 0) - deg
        pos = start[seg] + torch.arange(total, device=dev) - seg_start[seg]  # edge positions
        src = self.indices[pos].to(torch.int64)
        ew = None
        if kind == "labor":
            every = deg <= fanout if fanout >= 0 else torch.ones_like(deg, dtype=torch.bool)
            if fanout < 0:
                keep = torch.ones(total, dtype=torch.bool, device=dev)
            else:
                d64 = deg.clamp(min=1).to(torch.float64)
                thr = (fanout / d64 * 4294967296.0).to(torch.int64)
                if self.method.variates == "rotated":  # the numba arcs, by their definition
                    bkey, shift = labor_rotation(self.seed, node_key)
                    r = (_labor_variate(src, bkey) + shift) & _M32
                else:
                    r = _labor_variate(src, node_key)
                keep = every[seg] | (r < thr[seg])
            eids = pos[keep]
            local_dst = seg[keep]
            w = torch.where(every, 1.0 / deg.clamp(min=1).to(torch.float64),
                            torch.full_like(deg, max(fanout, 1), dtype=torch.float64).reciprocal())
            ew = w.to(torch.float32)[local_dst]
        else:
            mt = self._marrays
            if kind == "weighted":
                w = mt["weights"][pos].to(torch.float64)
                ok = w > 0
            else:
                parts = []
                if "edge_times" in mt:
                    parts.append(mt["edge_times"][pos])
                if "node_times" in mt:
                    parts.append(mt["node_times"][src])
                tk = parts[0] if len(parts) == 1 else torch.maximum(parts[0], parts[1])
                lim = dst_times[seg]
                ok = tk < lim if self.method.strict else tk <= lim
            m = torch.zeros(n_dst, dtype=torch.int64, device=dev).index_add_(0, seg, ok.to(torch.int64))
            if self.replace and fanout >= 0:
                cnt = torch.where(m > 0, torch.full_like(m, fanout), torch.zeros_like(m))
            else:
                cnt = m if fanout < 0 else torch.clamp(m, max=fanout)
            num = int(cnt.sum()) if n_dst else 0
            local_dst = torch.repeat_interleave(torch.arange(n_dst, device=dev), cnt, output_size=num)
            if self.replace and fanout >= 0:
                if kind == "weighted":  # i.i.d. draws: search the per-destination cumulative weights
                    cw = torch.cumsum(torch.where(ok, w, torch.zeros_like(w)), 0)
                    base = torch.where(seg_start > 0, cw[(seg_start - 1).clamp(min=0)], torch.zeros_like(seg_start, dtype=cw.dtype))
                    tot = torch.zeros(n_dst, dtype=cw.dtype, device=dev).index_add_(0, seg, torch.where(ok, w, torch.zeros_like(w)))
                    u = torch.rand(num, generator=gen, device=dev, dtype=torch.float64)
                    target = base[local_dst] + u * tot[local_dst]
                    idx = torch.searchsorted(cw, target, right=True)
                    last_ok = seg_start + deg - 1  # rounding past the end: the last positive edge
                    idx = torch.minimum(idx, last_ok[local_dst])
                    bad = ~ok[idx]
                    if bool(bad.any()):  # only by rounding: step back to the previous positive edge
                        okpos = torch.where(ok, torch.arange(total, device=dev), torch.full((total,), -1, device=dev))
                        prev = torch.cummax(okpos, 0).values
                        idx = torch.where(bad, prev[idx], idx)
                else:  # uniform among the eligible edges, i.i.d.
                    order = torch.argsort((~ok).to(torch.int64) + 2 * seg, stable=True)  # eligible first
                    r = self._randint(m[local_dst].clamp(min=1), gen)
                    idx = order[seg_start[local_dst] + r]
                eids = pos[idx]
            else:
                if kind == "weighted":
                    u = torch.rand(total, generator=gen, device=dev, dtype=torch.float64).clamp(min=1e-300)
                    key = torch.where(ok, -torch.log(u) / w, torch.full_like(w, float("inf")))
                elif self.method.strategy == "last":  # most recent first; ties: the later edge
                    key = -(tk.to(torch.float64) if tk.dtype.is_floating_point else tk)
                    key = torch.where(ok, key, torch.full_like(key, torch.iinfo(torch.int64).max
                                                               if not key.dtype.is_floating_point else float("inf")))
                else:
                    key = torch.where(ok, torch.rand(total, generator=gen, device=dev, dtype=torch.float64),
                                      torch.full((total,), 2.0, dtype=torch.float64, device=dev))
                # sort by (segment, key, later position first): three stable sorts, last key first
                order = torch.arange(total - 1, -1, -1, device=dev)
                order = order[torch.argsort(key[order], stable=True)]
                order = order[torch.argsort(seg[order], stable=True)]
                rank = torch.arange(total, device=dev) - seg_start[seg]  # rank within the segment
                take = rank < cnt[seg]
                eids = pos[order[take]]
        src_global = self.indices[eids].to(torch.int64)
        src_nodes, local_src = _relabel(dst, src_global)
        src_times = None
        if kind == "temporal":
            big = (torch.finfo(dst_times.dtype).max if dst_times.dtype.is_floating_point
                   else torch.iinfo(dst_times.dtype).max)
            src_times = torch.full((src_nodes.numel(),), big, dtype=dst_times.dtype, device=dev)
            src_times[:n_dst] = dst_times
            src_times.scatter_reduce_(0, local_src, dst_times[local_dst], reduce="amin")
        block = Block(edge_index=torch.stack([local_src, local_dst]), src_nodes=src_nodes,
                      num_dst=n_dst, edge_ids=eids if self.return_edge_ids else None, edge_weight=ew)
        return block, src_times

    def _check_seeds(self, seeds) -> torch.Tensor:
        if not isinstance(seeds, torch.Tensor):
            a = np.asarray(seeds)
            if a.size == 0 and a.dtype.kind not in "iu":
                a = a.astype(np.int64)
            seeds = torch.as_tensor(a)
        if seeds.dim() != 1:
            raise GraphfeedError(f"seeds must be a 1-D tensor of node ids, got shape {tuple(seeds.shape)}")
        if seeds.dtype.is_floating_point or seeds.dtype.is_complex or seeds.dtype == torch.bool:
            raise GraphfeedError(f"seeds must be integer node ids, got dtype {seeds.dtype}")
        seeds = seeds.to(device=self.device, dtype=torch.int64)
        if seeds.numel() == 0:
            return seeds
        bad = (seeds < 0) | (seeds >= self.num_nodes)
        if bool(bad.any()):
            pos = int(torch.nonzero(bad)[0, 0])
            raise GraphfeedError(
                f"seed id {int(seeds[pos])} (position {pos}) is out of range [0, {self.num_nodes})"
            )
        uniq = torch.unique(seeds)
        if uniq.numel() != seeds.numel():
            s, _ = torch.sort(seeds)
            dup = int(s[1:][s[1:] == s[:-1]][0])
            where = torch.nonzero(seeds == dup)[:, 0].tolist()
            raise GraphfeedError(
                f"seed id {dup} appears twice (positions {where[0]} and {where[1]}); "
                "seeds must be distinct"
            )
        return seeds

    def _randint(self, high: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Uniform ints in ``[0, high)`` per element (``high >= 1``, int64); modulo bias below
        ``high / 2**62``."""
        r = torch.randint(0, _RAND_HIGH, high.shape, generator=gen, device=self.device)
        return torch.remainder(r, high)

    def _sample_layer(self, dst: torch.Tensor, fanout: int, gen: torch.Generator) -> Block:
        dev = self.device
        n_dst = dst.numel()
        start = self.indptr[dst]
        deg = self.indptr[dst + 1] - start
        if fanout < 0:
            cnt = deg
        elif self.replace:
            cnt = torch.where(deg > 0, torch.full_like(deg, fanout), torch.zeros_like(deg))
        else:
            cnt = torch.clamp(deg, max=fanout)
        csum = torch.cumsum(cnt, 0)
        num_edges = int(csum[-1]) if n_dst else 0
        offsets = csum - cnt  # exclusive prefix sum: each destination's first slot
        local_dst = torch.repeat_interleave(
            torch.arange(n_dst, device=dev), cnt, output_size=num_edges
        )
        if self.replace and fanout >= 0:
            eids = start[local_dst] + self._randint(deg[local_dst], gen)
        else:
            # every neighbour, in order: slot offsets[i] + r holds edge start[i] + r
            eids = (start - offsets)[local_dst] + torch.arange(num_edges, device=dev)
            if fanout >= 0:  # destinations with deg > fanout: a random subset instead
                self._subsample(eids, start, deg, offsets, fanout, gen)
        src_global = self.indices[eids].to(torch.int64)
        src_nodes, local_src = _relabel(dst, src_global)
        return Block(
            edge_index=torch.stack([local_src, local_dst]),
            src_nodes=src_nodes,
            num_dst=n_dst,
            edge_ids=eids if self.return_edge_ids else None,
        )

    def _subsample(self, eids, start, deg, offsets, k: int, gen: torch.Generator) -> None:
        """For every destination with ``deg > k``, write into its slots ``offsets[i] + [0, k)``
        of ``eids`` the edges ``start[i] + p`` for a uniform k-subset of positions ``p``."""
        dev = self.device
        sel = torch.nonzero(deg > k)[:, 0]
        m = sel.numel()
        if m == 0:
            return
        d = deg[sel]
        slots = offsets[sel].unsqueeze(1) + torch.arange(k, device=dev)
        if k <= FLOYD_MAX_K:
            # Floyd's algorithm, one round per output column, all destinations at once.
            chosen = torch.empty((m, k), dtype=torch.int64, device=dev)
            for it in range(k):
                j = d - k + it
                t = self._randint(j + 1, gen)
                if it:
                    seen = (chosen[:, :it] == t.unsqueeze(1)).any(1)
                    t = torch.where(seen, j, t)
                chosen[:, it] = t
        else:
            # One random key per candidate edge; the k smallest keys of each destination win.
            total = int(d.sum())
            seg = torch.repeat_interleave(torch.arange(m, device=dev), d, output_size=total)
            seg_start = torch.cumsum(d, 0) - d
            keys = torch.randint(0, _RAND_HIGH, (total,), generator=gen, device=dev)
            order = torch.argsort(keys, stable=True)
            order = order[torch.argsort(seg[order], stable=True)]  # by (segment, key)
            within = torch.arange(total, device=dev) - seg_start[seg]  # rank in sorted order
            keep = within < k
            cand = (torch.arange(total, device=dev) - seg_start[seg])[order]
            chosen = cand[keep].view(m, k)
        eids[slots.reshape(-1)] = (chosen + start[sel].unsqueeze(1)).reshape(-1)


def _relabel(dst: torch.Tensor, src_global: torch.Tensor):
    """Local ids: ``dst`` (distinct) keep ``0..len(dst)-1``; other nodes follow in order of first
    appearance in ``src_global``. Returns ``(src_nodes, local ids of src_global)``."""
    n_dst = dst.numel()
    allv = torch.cat([dst, src_global])
    uniq, inv = torch.unique(allv, return_inverse=True)
    first = torch.full((uniq.numel(),), allv.numel(), dtype=torch.int64, device=allv.device)
    first.scatter_reduce_(0, inv, torch.arange(allv.numel(), device=allv.device), reduce="amin")
    order = torch.argsort(first)
    new_id = torch.empty_like(order)
    new_id[order] = torch.arange(order.numel(), device=allv.device)
    return uniq[order], new_id[inv[n_dst:]]


# ---------------------------------------------------------------------- non-uniform methods
_M32 = 0xFFFFFFFF


def _labor_variate(t: torch.Tensor, node_key: int) -> torch.Tensor:
    """LABOR's 32-bit variates of node ids ``t`` (int64), bit for bit the numba kernels'
    ``labor_variate`` (products wrap in int64; the low 32 bits are exact)."""
    h = (((t ^ (t >> 32)) * 0x9E3779B1) + (node_key & _M32)) & _M32
    h = h ^ (h >> 16)
    h = (h * 0x85EBCA6B) & _M32
    h = h ^ (h >> 13)
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def _method_tensors(method: SamplingMethod, indptr: torch.Tensor, indices: torch.Tensor,
                    graph) -> dict:
    """The method's checked arrays as tensors on the graph tensors' device."""
    from types import SimpleNamespace

    if graph is None:  # built from tensors: the arrays come from method.arrays only
        graph = SimpleNamespace(num_nodes=int(indptr.numel() - 1), num_edges=int(indices.numel()),
                                weights=None)
    arr = method_arrays(method, graph, "TorchNeighborSampler")
    dev = indptr.device
    out = {}
    for name in ("weights", "node_times", "edge_times"):
        a = getattr(arr, name)
        if a is not None:
            out[name] = torch.from_numpy(np.array(a)).to(dev)
    return out
