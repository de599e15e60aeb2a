"""Typed link-prediction batches: seed edges of one or several relations -> negatives within
the destination type -> heterogeneous neighbourhoods of every endpoint -> without the seed
edges.

:class:`HeteroLinkSampler` wraps a heterogeneous node sampler (``HeteroNeighborSampler`` on the
CPU, ``TorchHeteroSampler`` on any device) as :class:`~graphfeed.sampling.link.LinkSampler`
wraps a homogeneous one, and turns a batch of typed seed pairs (edge type -> ``(2, P_r)``
type-local ids) into a :class:`~graphfeed.sampling.hetero_link_batch.HeteroLinkMiniBatch`:

1. **negatives**: ``k`` per pair, the pair's source with a destination drawn uniformly from the
   nodes of the relation's *destination type* (type-local ids ``[0, n_d)``);
   ``exclude_positive=True`` never draws the pair's own destination. ``"uniform"`` keys the
   draws by ``(seed, epoch, batch_index, relation, position of the pair among the batch's
   pairs of that relation)``, ``"per_source"`` by ``(seed, epoch, relation, source id)``; a
   table of fixed negatives (a dataset's stored ones) replaces the draws.
2. **neighbourhoods**: the node sampler samples the union of every endpoint per type (global
   ids, sorted, so grouped by type).
3. **exclusion**: every sampled edge of relation ``r`` equal to a seed pair of ``r`` is removed
   from every block; with ``exclude="reverse"`` also every edge of the reverse relation
   ``reverse_edge_types[r]`` equal to a reversed seed pair (``writes`` <-> ``written_by``, or
   ``r`` itself for a symmetric relation). The filter is by batch-local ``(src, dst)`` per
   relation, as the homogeneous one (and shares its kernels): the seeds of type ``t`` are the
   first ``S_t`` sources and destinations of type ``t`` in every layer (destinations first per
   type), so only edges between two seeds can match.

Randomness is a pure function of the keys above and of the node sampler's own keys, so a batch
is identical whatever thread or thread count samples it.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import replace
from typing import Mapping, Optional

import numpy as np
import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ._common import batch_key, mix64
from .base import Sampler
from .hetero_link_batch import HeteroLinkMiniBatch
from .link import EXCLUDE, NEGATIVES, _NEG_SALT, _as_pairs, _draw, _without_keys

__all__ = ["HeteroLinkSampler"]

# one salt per relation id, so two relations' draws of one batch are independent
_REL_SALT = 0x52454C4154494F4E  # "RELATION"


class HeteroLinkSampler(Sampler):
    """Typed link-prediction sampling around a heterogeneous node sampler (see the module
    docstring).

    - ``sampler``: a ``HeteroNeighborSampler`` or ``TorchHeteroSampler`` (anything with a
      ``graph`` ``HeteroGraph``): graph, fanouts, device and seed are used as they are.
    - ``num_negatives`` ``k >= 0``, ``negatives`` ``"uniform"``/``"per_source"``,
      ``exclude_positive``: as ``LinkSampler``, within the destination type.
    - ``exclude``: ``"self"`` (default), ``"reverse"`` (also the reverse relation's reversed
      pairs; needs ``reverse_edge_types``), or ``"none"``.
    - ``reverse_edge_types``: edge type -> its reverse edge type (both triples, or relation
      names the graph resolves); e.g. ``graphfeed.datasets.hetero_link.reverse_edge_types``.
    - ``pairs``, ``pair_labels``, ``fixed_negatives``: a table, edge type -> ``(2, P_r)``
      type-local pairs (and ``(P_r,)`` labels, ``(P_r, k)`` negative destinations of the
      destination type, for every edge type or none); with a table, :meth:`sample` takes
      1-D positions into it, the pairs of the edge types in relation-id order concatenated
      (what ``ItemSampler`` yields). See :meth:`with_pairs`.
    """

    def __init__(self, sampler: Sampler, *, num_negatives: int = 1, negatives: str = "uniform",
                 exclude_positive: bool = True, exclude: str = "self",
                 reverse_edge_types: Optional[Mapping] = None, seed: int = 0, pairs=None,
                 pair_labels=None, fixed_negatives=None):
        from ..graph.hetero import HeteroGraph

        graph = getattr(sampler, "graph", None)
        if not isinstance(sampler, Sampler) or not isinstance(graph, HeteroGraph):
            raise GraphfeedError(f"sampler must be a heterogeneous node Sampler (with a "
                                 f"HeteroGraph), got {type(sampler).__name__}")
        if negatives not in NEGATIVES:
            raise GraphfeedError(f"negatives must be one of {', '.join(NEGATIVES)}, got "
                                 f"{negatives!r}")
        if exclude not in EXCLUDE:
            raise GraphfeedError(f"exclude must be one of {', '.join(EXCLUDE)}, got {exclude!r}")
        self.sampler = sampler
        self.graph = graph
        self.num_negatives = check_int("num_negatives", num_negatives, 0)
        self.negatives = negatives
        self.exclude_positive = bool(exclude_positive)
        self.exclude = exclude
        self.seed = check_int("seed", seed, 0)
        self.reverse_edge_types = self._reverse_map(reverse_edge_types)
        if exclude == "reverse" and not self.reverse_edge_types:
            raise GraphfeedError("exclude='reverse' needs reverse_edge_types (edge type -> its "
                                 "reverse edge type, e.g. from graphfeed.datasets.hetero_link."
                                 "reverse_edge_types(graph))")
        self._tab = None  # (relation ids (P,), pairs (2, P), labels (P,), fixed (P, k) or None)
        if pairs is not None:
            self._tab = self._bind(pairs, pair_labels, fixed_negatives)
        elif pair_labels is not None or fixed_negatives is not None:
            raise GraphfeedError("pair_labels and fixed_negatives describe a table of pairs: "
                                 "pass pairs= too")

    def _reverse_map(self, rev) -> dict:
        """relation id -> reverse relation id, checked: the reverse goes between the swapped
        node types."""
        g = self.graph
        out = {}
        for a, b in (rev or {}).items():
            ra, rb = g.edge_type_id(a), g.edge_type_id(b)
            ea, eb = g.edge_types[ra], g.edge_types[rb]
            if (ea[0], ea[2]) != (eb[2], eb[0]):
                raise GraphfeedError(f"reverse_edge_types: {eb} cannot be the reverse of {ea} "
                                     f"(its node types are not {ea[2]!r} -> {ea[0]!r})")
            out[ra] = rb
        return out

    def _options(self) -> dict:
        return dict(num_negatives=self.num_negatives, negatives=self.negatives,
                    exclude_positive=self.exclude_positive, exclude=self.exclude,
                    reverse_edge_types={self.graph.edge_types[a]: self.graph.edge_types[b]
                                        for a, b in self.reverse_edge_types.items()},
                    seed=self.seed)

    # ------------------------------------------------------------------ typed pairs
    def _typed(self, pairs, what: str) -> dict:
        """relation id -> int64 ``(2, P)`` type-local pairs checked against their types."""
        if not isinstance(pairs, Mapping):
            raise GraphfeedError(f"{what} must map edge types to (2, P) type-local pairs, got "
                                 f"{type(pairs).__name__}")
        g = self.graph
        out = {}
        for et, p in pairs.items():
            r = g.edge_type_id(et)
            s, _, d = g.edge_types[r]
            p = _as_pairs(p, f"{what}[{g.edge_types[r]}]", max(g.num_nodes_of(s),
                                                                  g.num_nodes_of(d)))
            for row, t in ((0, s), (1, d)):
                n_t = g.num_nodes_of(t)
                if p.numel() and int(p[row].max()) >= n_t:
                    raise GraphfeedError(f"{what}[{g.edge_types[r]}] row {row} holds id "
                                         f"{int(p[row].max())}, out of range [0, {n_t}) of node "
                                         f"type {t!r}")
            if self.exclude_positive and self.num_negatives and g.num_nodes_of(d) < 2:
                raise GraphfeedError(f"exclude_positive needs at least 2 nodes of type {d!r} to "
                                     f"draw negatives from, it has {g.num_nodes_of(d)}")
            out[r] = p.to(self.device)
        return out

    def _bind(self, pairs, labels, fixed):
        typed = self._typed(pairs, "pairs")
        g = self.graph
        rels = sorted(typed)
        dev = self.device

        def per_rel(given, what):
            if given is None:
                return None
            if not isinstance(given, Mapping):
                raise GraphfeedError(f"{what} must map edge types to arrays, got "
                                     f"{type(given).__name__}")
            by = {g.edge_type_id(k): v for k, v in given.items()}
            if sorted(by) != rels:
                raise GraphfeedError(f"{what} must have the edge types of pairs "
                                     f"{[g.edge_types[r] for r in rels]}, got "
                                     f"{[g.edge_types[r] for r in sorted(by)]}")
            return by

        lab_by, fix_by = per_rel(labels, "pair_labels"), per_rel(fixed, "fixed_negatives")
        rel_ids, labs, fixes = [], [], []
        for r in rels:
            n_r = int(typed[r].shape[1])
            rel_ids.append(torch.full((n_r,), r, dtype=torch.int64, device=dev))
            if lab_by is None:
                labs.append(torch.ones(n_r, dtype=torch.float32, device=dev))
            else:
                lab = torch.as_tensor(np.asarray(lab_by[r])).to(device=dev, dtype=torch.float32)
                if tuple(lab.shape) != (n_r,):
                    raise GraphfeedError(f"pair_labels[{g.edge_types[r]}] must hold one label "
                                         f"per pair: shape {tuple(lab.shape)} != ({n_r},)")
                labs.append(lab)
            if fix_by is not None:
                f = torch.as_tensor(np.asarray(fix_by[r]))
                n_d = g.num_nodes_of(g.edge_types[r][2])
                if f.dim() != 2 or f.shape[0] != n_r:
                    raise GraphfeedError(f"fixed_negatives[{g.edge_types[r]}] must be ({n_r}, k),"
                                         f" got shape {tuple(f.shape)}")
                if f.numel() and (int(f.min()) < 0 or int(f.max()) >= n_d):
                    bad = int(f.min()) if int(f.min()) < 0 else int(f.max())
                    raise GraphfeedError(f"fixed_negatives[{g.edge_types[r]}] holds id {bad}, out"
                                         f" of range [0, {n_d}) of node type "
                                         f"{g.edge_types[r][2]!r}")
                fixes.append(f.to(device=dev, dtype=torch.int64))
        if fixes and len({int(f.shape[1]) for f in fixes}) != 1:
            raise GraphfeedError(f"fixed_negatives must hold the same k for every edge type, got "
                                 f"{[int(f.shape[1]) for f in fixes]}")
        return (torch.cat(rel_ids), torch.cat([typed[r] for r in rels], dim=1), torch.cat(labs),
                torch.cat(fixes) if fixes else None)

    def with_pairs(self, pairs, pair_labels=None, fixed_negatives=None) -> "HeteroLinkSampler":
        """The same sampler (node sampler shared) over a table of typed pairs (checked once
        here); :meth:`sample` then takes positions into it. Fixed negatives fix
        ``num_negatives`` to their width."""
        opts = self._options()
        if fixed_negatives is not None:
            first = next(iter(fixed_negatives.values()), None)
            opts["num_negatives"] = int(np.shape(first)[1]) if np.ndim(first) == 2 else 0
        return HeteroLinkSampler(self.sampler, pairs=pairs, pair_labels=pair_labels,
                                 fixed_negatives=fixed_negatives, **opts)

    # ------------------------------------------------------------------ Sampler interface
    @property
    def device(self) -> torch.device:
        """The node sampler's device (the CPU for ``HeteroNeighborSampler``)."""
        return getattr(self.sampler, "device", torch.device("cpu"))

    @property
    def num_nodes(self) -> int:
        """Nodes of every type (global ids)."""
        return self.graph.num_nodes

    fanouts = property(lambda self: self.sampler.fanouts,
                       doc="The node sampler's per-layer fanouts.")

    @property
    def num_pairs(self) -> Optional[int]:
        """Pairs in the bound table (``None`` without one)."""
        return None if self._tab is None else int(self._tab[0].shape[0])

    def with_fanouts(self, fanouts) -> "HeteroLinkSampler":
        other = HeteroLinkSampler(self.sampler.with_fanouts(fanouts), **self._options())
        other._tab = self._tab
        return other

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self._options().items()
                         if k not in ("reverse_edge_types", "seed"))
        table = "" if self._tab is None else f", pairs={self.num_pairs}"
        return f"HeteroLinkSampler({self.sampler!r}, {opts}{table})"

    def close(self) -> None:
        self.sampler.close()

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None, pair_labels=None) -> HeteroLinkMiniBatch:
        """The :class:`HeteroLinkMiniBatch` of one batch: ``seeds`` are 1-D positions into the
        bound table, or (no table) edge type -> ``(2, P_r)`` type-local pairs with optional
        ``pair_labels`` (edge type -> ``(P_r,)``)."""
        g = self.graph
        dev = self.device
        fixed = {}
        if self._tab is not None:
            if pair_labels is not None:
                raise GraphfeedError("pair_labels come from the bound table; pass them to "
                                     "with_pairs()")
            rel_tab, pair_tab, lab_tab, fix_tab = self._tab
            pos = seeds if isinstance(seeds, torch.Tensor) else torch.as_tensor(np.asarray(seeds))
            if pos.dim() != 1 or pos.dtype.is_floating_point or pos.dtype == torch.bool:
                raise GraphfeedError(f"with a table of pairs, seeds are 1-D integer positions "
                                     f"into it, got shape {tuple(pos.shape)}, dtype {pos.dtype}")
            pos = pos.to(device=dev, dtype=torch.int64)
            n_tab = int(rel_tab.shape[0])
            if pos.numel() and bool(((pos < 0) | (pos >= n_tab)).any()):
                bad = int(pos[(pos < 0) | (pos >= n_tab)][0])
                raise GraphfeedError(f"pair position {bad} is out of range [0, {n_tab})")
            rel = rel_tab[pos]
            typed, labels = {}, {}
            for r in torch.unique(rel).tolist():
                sel = pos[rel == r]  # the batch's order within the relation
                typed[r], labels[r] = pair_tab[:, sel], lab_tab[sel]
                if fix_tab is not None:
                    fixed[r] = fix_tab[sel]
        else:
            typed = self._typed(seeds, "seeds")
            labels = {}
            for r, p in typed.items():
                et = g.edge_types[r]
                given = None if pair_labels is None else pair_labels.get(et)
                if given is None:
                    labels[r] = torch.ones(p.shape[1], dtype=torch.float32, device=dev)
                else:
                    labels[r] = torch.as_tensor(given).to(device=dev, dtype=torch.float32)
                    if tuple(labels[r].shape) != (p.shape[1],):
                        raise GraphfeedError(f"pair_labels[{et}] must hold one label per pair")
        k = self.num_negatives if not fixed else int(next(iter(fixed.values())).shape[1])
        off = torch.as_tensor(g.node_offsets, device=dev)
        negs, ends = {}, []
        for r, p in typed.items():
            s_t, d_t = (g.type_id(t) for t in (g.edge_types[r][0], g.edge_types[r][2]))
            negs[r] = fixed[r] if fixed else self.draw_negatives(
                g.edge_types[r], p, epoch=epoch, batch_index=batch_index)
            ends += [p[0] + off[s_t], p[1] + off[d_t], negs[r].reshape(-1) + off[d_t]]
        nodes = torch.unique(torch.cat(ends)) if ends else torch.zeros(0, dtype=torch.int64,
                                                                        device=dev)
        mb = self.sampler.sample(nodes, epoch=epoch, batch_index=batch_index, executor=executor)
        seed_dict = mb.seed_dict  # type-local ids, sorted (``nodes`` is)
        pair_index, neg_index = {}, {}
        for r, p in typed.items():
            s, _, d = g.edge_types[r]
            src = _rank(seed_dict[s], p[0])
            pair_index[r] = torch.stack([src, _rank(seed_dict[d], p[1])])
            neg_index[r] = torch.stack([src.repeat_interleave(k),
                                        _rank(seed_dict[d], negs[r].reshape(-1))])
        blocks = self._exclude(mb.blocks, pair_index, max(mb.num_seeds_dict.values(),
                                                          default=0))
        name = g.edge_types
        return HeteroLinkMiniBatch(
            seeds=mb.seeds, blocks=blocks, epoch=int(epoch), batch_index=int(batch_index),
            node_types=mb.node_types, node_offsets=mb.node_offsets,
            pairs={name[r]: p for r, p in typed.items()},
            pair_index={name[r]: v for r, v in pair_index.items()},
            pair_labels={name[r]: v for r, v in labels.items()},
            neg_index={name[r]: v for r, v in neg_index.items()}, num_negatives=k)

    def draw_negatives(self, edge_type, pairs: torch.Tensor, *, epoch: int = 0,
                       batch_index: int = 0) -> torch.Tensor:
        """int64 ``(P, k)`` negative destinations (type-local ids of the destination type) of
        int64 ``(2, P)`` type-local ``pairs`` of ``edge_type``, drawn as :meth:`sample` draws
        them; e.g. an evaluation's stable per-source candidates."""
        g = self.graph
        r = g.edge_type_id(edge_type)
        n = g.num_nodes_of(g.edge_types[r][2])
        k = self.num_negatives
        n_pairs = int(pairs.shape[1])
        dev = pairs.device
        j = torch.arange(k, device=dev, dtype=torch.int64)
        salt = _NEG_SALT ^ mix64(_REL_SALT + r)
        if self.negatives == "uniform":
            key = mix64(batch_key(self.seed, epoch, batch_index, -2) ^ salt)
            base = torch.arange(n_pairs, device=dev, dtype=torch.int64) * k
        else:
            key = mix64(batch_key(self.seed, epoch, 0, -3) ^ salt)
            base = pairs[0] * k
        counter = base.unsqueeze(1) + j
        if n == 0 or k == 0:
            return torch.zeros((n_pairs, k), dtype=torch.int64, device=dev)
        if not self.exclude_positive:
            return _draw(key, counter, n)
        r_ = _draw(key, counter, n - 1)  # one of the n - 1 other nodes of the type
        return r_ + (r_ >= pairs[1].unsqueeze(1)).to(torch.int64)

    # ------------------------------------------------------------------ internals
    def _exclude(self, blocks, pair_index: dict, s: int):
        """The blocks without the seed edges of each relation (and, with ``"reverse"``, the
        reversed seed edges of its reverse relation); batch-local keys ``u * s + v``, ``s``
        the largest number of seeds of one type."""
        if self.exclude == "none" or not pair_index or s == 0:
            return blocks
        keys = {}
        for r, pi in pair_index.items():
            keys.setdefault(r, []).append(pi[0] * s + pi[1])
            if self.exclude == "reverse" and r in self.reverse_edge_types:
                keys.setdefault(self.reverse_edge_types[r], []).append(pi[1] * s + pi[0])
        keys = {self.graph.edge_types[r]: torch.unique(torch.cat(v)) for r, v in keys.items()}
        out = []
        for b in blocks:
            eidx = dict(b.edge_index_dict)
            eids = None if b.edge_ids is None else dict(b.edge_ids)
            changed = False
            for et, kk in keys.items():
                ei = eidx[et]
                if ei.shape[1] == 0:
                    continue
                kept = _without_keys(ei, s, kk, ei.device.type == "cpu")
                if kept is None:
                    continue
                eidx[et], keep = kept
                if eids is not None:
                    eids[et] = eids[et][keep]
                changed = True
            out.append(replace(b, edge_index_dict=eidx, edge_ids=eids) if changed else b)
        return out


def _rank(sorted_ids: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Positions of ``ids`` in ``sorted_ids`` (every id is there): numpy on the CPU (no
    intra-op thread pool for a few thousand lookups), ``torch.searchsorted`` elsewhere."""
    if sorted_ids.device.type == "cpu":
        return torch.from_numpy(np.searchsorted(sorted_ids.numpy(), ids.numpy()))
    return torch.searchsorted(sorted_ids, ids.contiguous())
