"""Link prediction batches: seed edges -> negatives -> neighbourhoods of every endpoint.

:class:`LinkSampler` wraps any node :class:`~graphfeed.sampling.base.Sampler` (numba, torch,
Triton; it is not a fork of one) and turns a batch of seed pairs ``(2, P)`` into a
:class:`LinkMiniBatch`:

1. **negatives**: ``k`` per seed pair, the pair's source with a corrupted destination drawn
   uniformly from ``[0, num_nodes)``; ``exclude_positive=True`` never draws the pair's own
   destination (the draw is over the ``num_nodes - 1`` other nodes). ``negatives="uniform"``
   keys the draws by ``(seed, epoch, batch_index, pair position)``; ``"per_source"`` by
   ``(seed, epoch, source id)``, so every pair of one source ranks against the same candidates
   in every batch of an epoch (what ranking metrics want). A table of fixed negatives (a
   dataset's stored ones) replaces the draws.
2. **neighbourhoods**: the node sampler samples the union of every endpoint (seed pairs and
   negatives), in sorted id order.
3. **exclusion**: every sampled edge ``u -> v`` with ``(u, v)`` equal to a seed pair (and, with
   ``exclude="reverse"``, to a reversed seed pair, for graphs that were symmetrised) is removed
   from every block of the batch. The filter is by ``(src, dst)`` pair, not by edge id: it needs
   no edge ids from the node sampler and also removes parallel copies of a seed edge. It runs
   after sampling, so a destination whose sampled in-edges included a seed edge keeps one
   neighbour fewer than its fanout (as GraphBolt's ``exclude_seed_edges``); nodes reached only
   through a removed edge stay in ``src_nodes`` without that edge.

**Times** (a temporal node sampler, ``SamplingMethod("temporal")``): ``pair_times`` give each
seed pair a time (e.g. its edge's timestamp); a negative pair has its positive pair's time. An
endpoint is sampled once per batch, at the earliest time of the pairs it belongs to, so no pair
sees an edge later than its own time (a node of several pairs loses the edges between those
times for the later ones: the price of one neighbourhood per node and batch). Without
``pair_times`` the node sampler's default applies (the endpoints' node times).

Randomness is a pure function of the keys above (splitmix64 counters in torch ops), so a batch
is identical whatever the thread count and the same on CPU and CUDA for the negatives. Every
step is a few vectorised torch ops on the node sampler's device: no host sync per pair (one for
the endpoint union's size, one per block for the filter).
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import batch_key, mix64
from .base import Block, MiniBatch, Sampler

__all__ = ["LinkMiniBatch", "LinkSampler", "NEGATIVES", "EXCLUDE"]

#: how negatives are keyed (see the module docstring)
NEGATIVES = ("uniform", "per_source")
#: which sampled edges are removed: none, the seed pairs, or the seed pairs and their reverses
EXCLUDE = ("none", "self", "reverse")

_M64 = (1 << 64) - 1
_NEG_SALT = 0x4E45474154495645  # "NEGATIVE"
# pair keys ``src * num_nodes + dst`` must fit in int64
_MAX_NODES = 3_037_000_499


def _signed(x: int) -> int:
    x &= _M64
    return x - (1 << 64) if x >= 1 << 63 else x


_C1 = _signed(0xBF58476D1CE4E5B9)
_C2 = _signed(0x94D049BB133111EB)
_GOLDEN = _signed(0x9E3779B97F4A7C15)


def _lsr(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 ``z`` (torch's ``>>`` is arithmetic on signed ints)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def _mix(z: torch.Tensor) -> torch.Tensor:
    """splitmix64 of int64 ``z`` (products wrap modulo 2**64, as the numba kernels' uint64)."""
    z = z + _GOLDEN
    z = (z ^ _lsr(z, 30)) * _C1
    z = (z ^ _lsr(z, 27)) * _C2
    return z ^ _lsr(z, 31)


def _draw(key: int, counter: torch.Tensor, bound: int) -> torch.Tensor:
    """Uniform ints in ``[0, bound)``, one per ``counter`` entry, from ``(key, counter)`` only;
    modulo bias below ``bound / 2**63``."""
    h = _mix(_mix(counter) ^ _signed(key))
    return _lsr(h, 1) % bound


@dataclass
class LinkMiniBatch(MiniBatch):
    """A link-prediction batch: a ``MiniBatch`` over the endpoints of the pairs, plus the pairs.

    - ``seeds``: int64 ``(S,)`` the distinct endpoints of positives and negatives, sorted; the
      destinations of ``blocks[-1]`` (the encoder's outputs are rows of ``seeds``).
    - ``pairs``: int64 ``(2, P)`` the seed pairs in global ids (row 0 sources, row 1
      destinations); ``pair_index``: the same in local ids, positions in ``seeds``.
    - ``pair_labels``: float32 ``(P,)`` the seed pairs' labels (1 unless given).
    - ``neg_index``: int64 ``(2, P * k)`` the negative pairs in local ids; the negatives of seed
      pair ``i`` are columns ``i * k .. i * k + k - 1`` and share its source.
    - ``num_negatives``: ``k``.
    - ``pair_times``: the seed pairs' times ``(P,)`` when the batch was sampled with times,
      else ``None`` (a negative pair's time is its positive pair's).
    """

    pairs: Optional[torch.Tensor] = None
    pair_index: Optional[torch.Tensor] = None
    pair_labels: Optional[torch.Tensor] = None
    neg_index: Optional[torch.Tensor] = None
    num_negatives: int = 0
    pair_times: Optional[torch.Tensor] = None

    @property
    def num_pairs(self) -> int:
        return int(self.pair_index.shape[1])

    @property
    def edge_label_index(self) -> torch.Tensor:
        """int64 ``(2, P + P * k)``: the seed pairs, then the negatives (local ids)."""
        return torch.cat([self.pair_index, self.neg_index], dim=1)

    @property
    def edge_label(self) -> torch.Tensor:
        """float32 ``(P + P * k,)``: ``pair_labels``, then 0 for every negative."""
        zeros = torch.zeros(self.neg_index.shape[1], dtype=torch.float32,
                            device=self.pair_labels.device)
        return torch.cat([self.pair_labels, zeros])

    def to(self, device, non_blocking: bool = False) -> "LinkMiniBatch":
        base = super().to(device, non_blocking=non_blocking)
        return replace(
            base,
            pairs=self.pairs.to(device, non_blocking=non_blocking),
            pair_index=self.pair_index.to(device, non_blocking=non_blocking),
            pair_labels=self.pair_labels.to(device, non_blocking=non_blocking),
            neg_index=self.neg_index.to(device, non_blocking=non_blocking),
            pair_times=None if self.pair_times is None else
            self.pair_times.to(device, non_blocking=non_blocking),
        )

    def __repr__(self) -> str:
        return (f"LinkMiniBatch(pairs={self.num_pairs}, negatives={self.num_negatives} each, "
                f"seeds={self.seeds.shape[0]}, blocks={self.blocks}, "
                f"epoch={self.epoch}, batch_index={self.batch_index})")


def _as_pairs(pairs, name: str, num_nodes: int) -> torch.Tensor:
    """``pairs`` as an int64 ``(2, P)`` tensor with ids in ``[0, num_nodes)`` (one host check)."""
    if not isinstance(pairs, torch.Tensor):
        a = np.asarray(pairs)
        if a.size == 0 and a.dtype.kind not in "iu":
            a = a.astype(np.int64)
        pairs = torch.as_tensor(a)
    if pairs.dim() != 2 or pairs.shape[0] != 2:
        raise GraphfeedError(f"{name} must be a (2, P) array of (source, destination) node ids, "
                             f"got shape {tuple(pairs.shape)}")
    if pairs.dtype.is_floating_point or pairs.dtype.is_complex or pairs.dtype == torch.bool:
        raise GraphfeedError(f"{name} must hold integer node ids, got dtype {pairs.dtype}")
    pairs = pairs.to(torch.int64)
    if pairs.numel():
        bad = (pairs < 0) | (pairs >= num_nodes)
        if bool(bad.any()):
            r, c = (int(v) for v in torch.nonzero(bad)[0])
            raise GraphfeedError(f"{name}[{r}, {c}] = {int(pairs[r, c])} is out of range "
                                 f"[0, {num_nodes})")
    return pairs


class LinkSampler(Sampler):
    """Link-prediction sampling around any node sampler (see the module docstring).

    - ``sampler``: the node sampler (its graph, fanouts, device and seed are used as they are).
    - ``num_negatives``: ``k >= 0`` negatives per seed pair; ``negatives``: ``"uniform"`` or
      ``"per_source"``; ``exclude_positive``: a negative never equals its pair's destination
      (``num_nodes >= 2`` then).
    - ``exclude``: ``"self"`` (default) removes the seed pairs from every block, ``"reverse"``
      also their reverses (use it when the graph was symmetrised), ``"none"`` keeps them.
    - ``seed``: the base of the negatives' keys (``from_graph`` passes the node sampler's).
    - ``pairs``, ``pair_labels``, ``fixed_negatives``: a table the loader indexes: with a table,
      :meth:`sample` takes 1-D positions into it (what ``ItemSampler`` yields); without one, a
      ``(2, P)`` array of pairs. ``fixed_negatives``: int64 ``(P, k)`` negative destinations
      per pair (a dataset's stored ones) used instead of drawing. See :meth:`with_pairs`.
    - ``pair_times``: one time per pair of the table (temporal node samplers only; see the
      module docstring); without a table, :meth:`sample` takes ``pair_times=``.

    Cost per batch: O(P * k) for the negatives, the node sampler's cost on the endpoints, and
    O(sampled edges) for the filter (a comparison of local ids per edge, then a sorted
    membership test of the few edges between two endpoints).
    """

    def __init__(self, sampler: Sampler, *, num_negatives: int = 1, negatives: str = "uniform",
                 exclude_positive: bool = True, exclude: str = "self",
                 seed: int = 0, pairs=None, pair_labels=None,
                 fixed_negatives=None, pair_times=None):
        if not isinstance(sampler, Sampler) or isinstance(sampler, LinkSampler):
            raise GraphfeedError(f"sampler must be a node Sampler, got {type(sampler).__name__}")
        if negatives not in NEGATIVES:
            raise GraphfeedError(f"negatives must be one of {', '.join(NEGATIVES)}, got "
                                 f"{negatives!r}")
        if exclude not in EXCLUDE:
            raise GraphfeedError(f"exclude must be one of {', '.join(EXCLUDE)}, got {exclude!r}")
        n = sampler.num_nodes
        if n > _MAX_NODES:
            raise GraphfeedError(f"LinkSampler keys pairs as src * num_nodes + dst in int64: "
                                 f"at most {_MAX_NODES:,} nodes, the graph has {n:,}")
        self.sampler = sampler
        self.num_negatives = check_int("num_negatives", num_negatives, 0)
        self.negatives = negatives
        self.exclude_positive = bool(exclude_positive)
        if self.exclude_positive and self.num_negatives and n < 2:
            raise GraphfeedError(f"exclude_positive needs at least 2 nodes to draw from, the "
                                 f"graph has {n}")
        self.exclude = exclude
        self.seed = check_int("seed", seed, 0)
        self._pairs: Optional[torch.Tensor] = None
        self._labels: Optional[torch.Tensor] = None
        self._fixed: Optional[torch.Tensor] = None
        self._times: Optional[torch.Tensor] = None
        if pairs is not None:
            self._bind(pairs, pair_labels, fixed_negatives)
            if pair_times is not None:
                self._times = self._check_times(pair_times, int(self._pairs.shape[1]))
        elif pair_labels is not None or fixed_negatives is not None or pair_times is not None:
            raise GraphfeedError("pair_labels, fixed_negatives and pair_times describe a table "
                                 "of pairs: pass pairs= too")

    @classmethod
    def _from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], device: torch.device,
                    uva: bool, **kwargs) -> "LinkSampler":
        """``LinkSampler.from_graph(graph, fanouts, sampler=NeighborSampler, ...)``: the node
        sampler ``sampler`` (a ``Sampler`` class, e.g. ``SAMPLERS.get("torch")``) built with
        the common keywords and its own options; the link options (``num_negatives``,
        ``negatives``, ``exclude_positive``, ``exclude``, ``pairs``, ``pair_labels``,
        ``fixed_negatives``) go to the wrapper, with the same ``seed``."""
        inner_cls = kwargs.pop("sampler", None)
        if inner_cls is None:
            from .neighbor import NeighborSampler as inner_cls
        if not (isinstance(inner_cls, type) and issubclass(inner_cls, Sampler)):
            raise GraphfeedError(f"sampler must be a Sampler class, got {inner_cls!r}")
        link = {k: kwargs.pop(k) for k in ("num_negatives", "negatives", "exclude_positive",
                                           "exclude", "pairs", "pair_labels", "fixed_negatives",
                                           "pair_times")
                if k in kwargs}
        inner = inner_cls.from_graph(graph, fanouts, device=device, uva=uva, **kwargs)
        return cls(inner, seed=kwargs.get("seed", 0), **link)

    def _options(self) -> dict:
        return dict(num_negatives=self.num_negatives, negatives=self.negatives,
                    exclude_positive=self.exclude_positive, exclude=self.exclude,
                    seed=self.seed)

    def _bind(self, pairs, labels, fixed) -> None:
        dev = self.device
        p = _as_pairs(pairs, "pairs", self.num_nodes).to(dev)
        n_pairs = int(p.shape[1])
        if labels is None:
            lab = torch.ones(n_pairs, dtype=torch.float32, device=dev)
        else:
            lab = torch.as_tensor(np.asarray(labels.cpu() if isinstance(labels, torch.Tensor)
                                             else labels))
            if tuple(lab.shape) != (n_pairs,):
                raise GraphfeedError(f"pair_labels must hold one label per pair: shape "
                                     f"{tuple(lab.shape)} != ({n_pairs},)")
            lab = lab.to(device=dev, dtype=torch.float32)
        fx = None
        if fixed is not None:
            f = torch.as_tensor(np.asarray(fixed.cpu() if isinstance(fixed, torch.Tensor)
                                           else fixed))
            if f.dim() != 2 or f.shape[0] != n_pairs:
                raise GraphfeedError(f"fixed_negatives must be ({n_pairs}, k): one row of "
                                     f"negative destinations per pair, got shape "
                                     f"{tuple(f.shape)}")
            # the same id checks as pairs, on a (2, P * k) view of the sources and negatives
            flat = torch.stack([p[0].repeat_interleave(f.shape[1]).cpu(),
                                f.reshape(-1).to(torch.int64)])
            _as_pairs(flat, "fixed_negatives", self.num_nodes)
            fx = f.to(device=dev, dtype=torch.int64)
        self._pairs, self._labels, self._fixed = p, lab, fx

    def with_pairs(self, pairs, pair_labels=None, fixed_negatives=None,
                   pair_times=None) -> "LinkSampler":
        """The same sampler (node sampler shared) over a table of pairs: ``(2, P)`` ids
        checked once here; :meth:`sample` then takes positions into it. A
        ``fixed_negatives`` table fixes ``num_negatives`` to its width; ``pair_times`` (one
        per pair, temporal node samplers only) the times the pairs are sampled at."""
        opts = self._options()
        if fixed_negatives is not None:
            opts["num_negatives"] = int(np.shape(fixed_negatives)[1]) if np.ndim(
                fixed_negatives) == 2 else 0
        return LinkSampler(self.sampler, pairs=pairs, pair_labels=pair_labels,
                           fixed_negatives=fixed_negatives, pair_times=pair_times, **opts)

    def _check_times(self, times, n_pairs: int) -> torch.Tensor:
        """``times`` as a ``(n_pairs,)`` tensor on the sampler's device, for a temporal node
        sampler (the node sampler checks their dtype against the graph's times)."""
        method = getattr(self.sampler, "method", None)
        if method is None or method.kind != "temporal":
            desc = "uniform" if method is None else method.describe()
            raise GraphfeedError(f"pair_times need a temporal node sampler; this one samples "
                                 f"{desc}")
        t = times if isinstance(times, torch.Tensor) else torch.as_tensor(np.asarray(times))
        if tuple(t.shape) != (n_pairs,):
            raise GraphfeedError(f"pair_times must hold one time per pair: shape "
                                 f"{tuple(t.shape)} != ({n_pairs},)")
        if t.dtype == torch.bool or t.dtype.is_complex:
            raise GraphfeedError(f"pair_times must be numbers, got dtype {t.dtype}")
        if t.dtype.is_floating_point and t.numel() and not bool(torch.isfinite(t).all()):
            raise GraphfeedError("pair_times must be finite")
        return t.to(self.device)

    # ------------------------------------------------------------------ Sampler interface
    @property
    def num_nodes(self) -> int:
        """The node sampler's graph's nodes (pairs, negatives and blocks are ids below it)."""
        return self.sampler.num_nodes

    @property
    def fanouts(self) -> tuple[int, ...]:
        """The node sampler's fanouts (the blocks of every endpoint)."""
        return self.sampler.fanouts

    @property
    def device(self) -> torch.device:
        """The node sampler's device: pairs, negatives and blocks are created there."""
        return self.sampler.device

    @property
    def num_pairs(self) -> Optional[int]:
        """Pairs in the bound table (``None`` without one)."""
        return None if self._pairs is None else int(self._pairs.shape[1])

    def with_fanouts(self, fanouts: Sequence[int]) -> "LinkSampler":
        other = LinkSampler(self.sampler.with_fanouts(fanouts), **self._options())
        other._pairs, other._labels, other._fixed = self._pairs, self._labels, self._fixed
        other._times = self._times
        return other

    def close(self) -> None:
        self.sampler.close()

    def __repr__(self) -> str:
        table = "" if self._pairs is None else f", pairs={self.num_pairs}"
        return (f"LinkSampler({self.sampler!r}, num_negatives={self.num_negatives}, "
                f"negatives={self.negatives!r}, exclude={self.exclude!r}, "
                f"exclude_positive={self.exclude_positive}{table})")

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None, pair_labels=None,
               pair_times=None) -> LinkMiniBatch:
        """The :class:`LinkMiniBatch` of one batch: ``seeds`` are 1-D positions into the bound
        table of pairs, or (no table) a ``(2, P)`` array of pairs with optional
        ``pair_labels`` ``(P,)`` and ``pair_times`` ``(P,)`` (temporal node samplers). Pairs
        may repeat; their endpoints are sampled once, at their earliest pair's time."""
        dev = self.device
        fixed = None
        times = None
        if self._pairs is not None:
            pos = seeds if isinstance(seeds, torch.Tensor) else torch.as_tensor(np.asarray(seeds))
            if pos.dim() != 1 or pos.dtype.is_floating_point or pos.dtype == torch.bool:
                raise GraphfeedError(f"with a table of pairs, seeds are 1-D integer positions "
                                     f"into it, got shape {tuple(pos.shape)}, dtype {pos.dtype}")
            pos = pos.to(device=dev, dtype=torch.int64)
            n_tab = int(self._pairs.shape[1])
            if pos.numel() and bool(((pos < 0) | (pos >= n_tab)).any()):
                bad = int(pos[(pos < 0) | (pos >= n_tab)][0])
                raise GraphfeedError(f"pair position {bad} is out of range [0, {n_tab})")
            if pair_labels is not None or pair_times is not None:
                raise GraphfeedError("pair_labels and pair_times come from the bound table; "
                                     "pass them to with_pairs()")
            pairs, labels = self._pairs[:, pos], self._labels[pos]
            if self._fixed is not None:
                fixed = self._fixed[pos]
            if self._times is not None:
                times = self._times[pos]
        else:
            pairs = _as_pairs(seeds, "seeds", self.num_nodes).to(dev)
            if pair_labels is None:
                labels = torch.ones(pairs.shape[1], dtype=torch.float32, device=dev)
            else:
                labels = torch.as_tensor(pair_labels).to(device=dev, dtype=torch.float32)
                if tuple(labels.shape) != (pairs.shape[1],):
                    raise GraphfeedError(f"pair_labels must hold one label per pair: shape "
                                         f"{tuple(labels.shape)} != ({pairs.shape[1]},)")
            if pair_times is not None:
                times = self._check_times(pair_times, int(pairs.shape[1]))
        k = self.num_negatives if fixed is None else int(fixed.shape[1])
        neg_dst = fixed if fixed is not None else self.draw_negatives(pairs, epoch=epoch,
                                                                 batch_index=batch_index)
        ends = torch.cat([pairs.reshape(-1), neg_dst.reshape(-1)])
        if times is None:
            nodes = torch.unique(ends)
            mb = self.sampler.sample(nodes, epoch=epoch, batch_index=batch_index,
                                     executor=executor)
        else:  # every endpoint at the earliest time of its pairs (negatives: their pair's)
            nodes, inv = torch.unique(ends, return_inverse=True)
            t_end = torch.cat([times, times, times.repeat_interleave(k)])
            node_t = torch.full((int(nodes.shape[0]),), 0, dtype=times.dtype, device=dev)
            node_t = node_t.scatter_reduce(0, inv, t_end, reduce="amin", include_self=False)
            mb = self.sampler.sample(nodes, epoch=epoch, batch_index=batch_index,
                                     executor=executor, seed_times=node_t)
        # the node sampler keeps its seeds' order: local id of a node = its rank in ``nodes``
        pair_index = torch.searchsorted(nodes, pairs.contiguous())
        blocks = self._exclude(mb.blocks, pair_index, int(nodes.shape[0]))
        neg_src = pair_index[0].repeat_interleave(k)
        neg_index = torch.stack([neg_src, torch.searchsorted(nodes, neg_dst.reshape(-1))])
        return LinkMiniBatch(seeds=mb.seeds, blocks=blocks, epoch=int(epoch),
                             batch_index=int(batch_index), pairs=pairs, pair_index=pair_index,
                             pair_labels=labels, neg_index=neg_index, num_negatives=k,
                             pair_times=times)

    def draw_negatives(self, pairs: torch.Tensor, *, epoch: int = 0,
                  batch_index: int = 0) -> torch.Tensor:
        """int64 ``(P, k)`` negative destinations of int64 ``(2, P)`` ``pairs`` (on their
        device), drawn as :meth:`sample` draws them (see the module docstring for the keys);
        e.g. an evaluation's stable per-source candidates."""
        k, n = self.num_negatives, self.num_nodes
        n_pairs = int(pairs.shape[1])
        dev = pairs.device
        j = torch.arange(k, device=dev, dtype=torch.int64)
        if self.negatives == "uniform":
            key = mix64(batch_key(self.seed, epoch, batch_index, -2) ^ _NEG_SALT)
            base = torch.arange(n_pairs, device=dev, dtype=torch.int64) * k
        else:  # keyed by the source id: the same candidates in every batch of the epoch
            key = mix64(batch_key(self.seed, epoch, 0, -3) ^ _NEG_SALT)
            base = pairs[0] * k
        counter = base.unsqueeze(1) + j
        if not self.exclude_positive:
            return _draw(key, counter, n)
        r = _draw(key, counter, n - 1)  # one of the n - 1 other nodes
        return r + (r >= pairs[1].unsqueeze(1)).to(torch.int64)

    # ------------------------------------------------------------------ internals
    def _exclude(self, blocks: list[Block], pair_index: torch.Tensor,
                 num_seeds: int) -> list[Block]:
        """The blocks without the edges whose ``(src, dst)`` is a seed pair (or its reverse).

        Works in local ids: the node sampler's seeds (every endpoint) are local ids
        ``0..num_seeds-1`` in every block (destinations first, all the way down), so only edges
        between two of them can match; those few are tested against the sorted pair keys."""
        if self.exclude == "none" or pair_index.shape[1] == 0:
            return blocks
        s = num_seeds
        keys = pair_index[0] * s + pair_index[1]
        if self.exclude == "reverse":
            keys = torch.cat([keys, pair_index[1] * s + pair_index[0]])
        keys = torch.unique(keys)
        out = []
        for b in blocks:
            kept = _without_keys(b.edge_index, s, keys, b.edge_index.device.type == "cpu")
            if kept is None:
                out.append(b)
                continue
            kept_ei, keep = kept
            out.append(replace(
                b,
                edge_index=kept_ei,
                edge_ids=None if b.edge_ids is None else b.edge_ids[keep],
                edge_weight=None if b.edge_weight is None else b.edge_weight[keep],
            ))
        return out


def _without_keys(ei: torch.Tensor, s: int, keys: torch.Tensor, numba: bool):
    """``(kept edge_index, keep)`` (``keep`` indexes the kept edges' other arrays) without the
    edges between local ids below ``s`` whose ``src * s + dst`` is in the sorted ``keys``, or
    ``None`` when no edge is one. ``numba``: the CPU kernels (one counting pass, then a
    compacting one only when needed); else vectorised torch ops on ``ei``'s device."""
    if numba:
        from ._link_kernels import count_seed_pairs, drop_seed_pairs

        e_np, k_np = ei.numpy(), keys.numpy()
        n_drop = count_seed_pairs(e_np, s, k_np)
        if n_drop == 0:
            return None
        kept_ei, pos = drop_seed_pairs(e_np, s, k_np, n_drop)
        return torch.from_numpy(kept_ei), torch.from_numpy(pos)
    cand = torch.nonzero((ei[0] < s) & (ei[1] < s))[:, 0]
    k = ei[0, cand] * s + ei[1, cand]
    at = torch.searchsorted(keys, k).clamp_(max=keys.numel() - 1)
    drop = cand[keys[at] == k]
    if drop.numel() == 0:
        return None
    keep = torch.ones(ei.shape[1], dtype=torch.bool, device=ei.device)
    keep[drop] = False
    return ei[:, keep], keep
