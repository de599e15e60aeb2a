"""Link prediction batches: seed edges -> negatives -> neighbourhoods of every endpoint.

:class:`LinkSampler` wraps any node :class:`~graphfeed.sampling.base.Sampler` (numba, torch,
Triton, and the typed ones; it is not a fork of one) and turns a batch of seed pairs into a
link :class:`~graphfeed.sampling.base.MiniBatch` (``links`` set). Pairs are keyed: by ``None``
on an untyped graph (one ``(2, P)`` array of global ids), by edge type on a typed graph (edge
type -> ``(2, P_r)`` type-local ids); the untyped graph is the one-key case of the typed one.

1. **negatives**: ``k`` per seed pair, the pair's source with a corrupted destination drawn
   uniformly from the nodes (of a typed pair: the nodes of its destination type);
   ``exclude_positive=True`` never draws the pair's own destination. ``negatives="uniform"``
   keys the draws by ``(seed, epoch, batch_index, pair position)`` (a typed pair: its position
   among the batch's pairs of its edge type, and the relation); ``"per_source"`` by ``(seed,
   epoch, source id)`` (and the relation), so every pair of one source ranks against the same
   candidates in every batch of an epoch. A table of fixed negatives (a dataset's stored ones)
   replaces the draws.
2. **neighbourhoods**: the node sampler samples the union of every endpoint (seed pairs and
   negatives), in sorted id order (global ids, so grouped by type).
3. **exclusion**: every sampled edge equal to a seed pair (and, with ``exclude="reverse"``, to
   a reversed seed pair: the same graph when it was symmetrised, or the reverse relation
   ``reverse_edge_types[r]`` of a typed one) is removed from every block of the batch. The
   filter is by batch-local ``(src, dst)`` pair, not by edge id: it needs no edge ids from the
   node sampler and also removes parallel copies of a seed edge. The endpoints are the first
   local ids of their type in every block (destinations first, all the way down), so only
   edges between two of them can match. It runs after sampling, so a destination whose
   sampled in-edges included a seed edge keeps one neighbour fewer than its fanout (as
   GraphBolt's ``exclude_seed_edges``).

**Times** (an untyped temporal node sampler, ``SamplingMethod("temporal")``): ``pair_times``
give each seed pair a time (e.g. its edge's timestamp); a negative pair has its positive
pair's time. An endpoint is sampled once per batch, at the earliest time of the pairs it
belongs to, so no pair sees an edge later than its own time. Without ``pair_times`` the node
sampler's default applies (the endpoints' node times).

Randomness is a pure function of the keys above (splitmix64 counters in torch ops), so a batch
is identical whatever the thread count and the same on CPU and CUDA for the negatives. Every
step is a few vectorised torch ops on the node sampler's device: no host sync per pair.
"""

from __future__ import annotations

from concurrent.futures import Executor
from dataclasses import replace
from typing import Mapping, Optional, Sequence

import numpy as np
import torch

from .._checks import check_int
from ..errors import GraphfeedError
from ..graph.csc import CSCGraph
from ._common import batch_key, mix64
from .base import MiniBatch, Sampler, SeedPairs

__all__ = ["LinkSampler", "NEGATIVES", "EXCLUDE"]

#: how negatives are keyed (see the module docstring)
NEGATIVES = ("uniform", "per_source")
#: which sampled edges are removed: none, the seed pairs, or the seed pairs and their reverses
EXCLUDE = ("none", "self", "reverse")

_M64 = (1 << 64) - 1
_NEG_SALT = 0x4E45474154495645  # "NEGATIVE"
# one salt per relation id, so two relations' draws of one batch are independent
_REL_SALT = 0x52454C4154494F4E  # "RELATION"
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


def _as_pairs(pairs, name: str, num_nodes: int) -> torch.Tensor:
    """``pairs`` as an int64 ``(2, P)`` tensor with ids in ``[0, num_nodes)`` (one host check)."""
    if not isinstance(pairs, torch.Tensor):
        a = np.asarray(pairs) if not isinstance(pairs, Mapping) else np.asarray(None)
        if a.dtype.kind == "O":
            raise GraphfeedError(f"{name} must be a (2, P) array of (source, destination) node "
                                 f"ids, got {type(pairs).__name__}")
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


def _untyped(given, what: str):
    """An untyped graph's array: given as it is, or as the one key ``None`` of a mapping."""
    if not isinstance(given, Mapping):
        return given
    if set(given) != {None}:
        raise GraphfeedError(f"{what} must be a (2, P) array for an untyped graph (or a mapping "
                             f"of the one key None to it), got the keys {list(given)}")
    return given[None]


def _rank(sorted_ids: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Positions of ``ids`` in ``sorted_ids`` (every id is there): numpy on the CPU (no
    intra-op thread pool for a few thousand lookups), ``torch.searchsorted`` elsewhere."""
    if sorted_ids.device.type == "cpu":
        return torch.from_numpy(np.searchsorted(sorted_ids.numpy(), ids.numpy()).astype(np.int64))
    return torch.searchsorted(sorted_ids, ids.contiguous())


class LinkSampler(Sampler):
    """Link-prediction sampling around any node sampler (see the module docstring).

    - ``sampler``: the node sampler, untyped or typed (its graph, fanouts, device and seed are
      used as they are).
    - ``num_negatives``: ``k >= 0`` negatives per seed pair; ``negatives``: ``"uniform"`` or
      ``"per_source"``; ``exclude_positive``: a negative never equals its pair's destination
      (two nodes at least to draw from, of the destination type).
    - ``exclude``: ``"self"`` (default) removes the seed pairs from every block, ``"reverse"``
      also their reverses (an untyped graph that was symmetrised; a typed one needs
      ``reverse_edge_types``: edge type -> its reverse edge type, e.g.
      ``graphfeed.datasets.hetero_link.reverse_edge_types``), ``"none"`` keeps them.
    - ``seed``: the base of the negatives' keys (``from_graph`` passes the node sampler's).
    - ``pairs``, ``pair_labels``, ``fixed_negatives``, ``pair_times``: a table the loader
      indexes (untyped: a ``(2, P)`` array of pairs, ``(P,)`` labels, ``(P, k)`` negative
      destinations, ``(P,)`` times; typed: the same per edge type in dicts, no times). With a
      table, :meth:`sample` takes 1-D positions into it (a typed table: the edge types' pairs in
      relation-id order, concatenated; what ``ItemSampler`` yields); without one, the pairs.
      See :meth:`with_pairs`. ``pair_times`` need an untyped temporal node sampler.

    Cost per batch: O(P * k) for the negatives, the node sampler's cost on the endpoints, and
    O(sampled edges) for the filter (a comparison of local ids per edge, then a sorted
    membership test of the few edges between two endpoints).
    """

    def __init__(self, sampler: Sampler, *, num_negatives: int = 1, negatives: str = "uniform",
                 exclude_positive: bool = True, exclude: str = "self",
                 reverse_edge_types: Optional[Mapping] = None, seed: int = 0, pairs=None,
                 pair_labels=None, fixed_negatives=None, pair_times=None):
        if not isinstance(sampler, Sampler) or isinstance(sampler, LinkSampler):
            raise GraphfeedError(f"sampler must be a node Sampler, got {type(sampler).__name__}")
        if negatives not in NEGATIVES:
            raise GraphfeedError(f"negatives must be one of {', '.join(NEGATIVES)}, got "
                                 f"{negatives!r}")
        if exclude not in EXCLUDE:
            raise GraphfeedError(f"exclude must be one of {', '.join(EXCLUDE)}, got {exclude!r}")
        self.sampler = sampler
        self.graph = sampler.hetero  # None: untyped, one key (None)
        n = sampler.num_nodes
        if self.graph is None and n > _MAX_NODES:
            raise GraphfeedError(f"LinkSampler keys pairs as src * num_nodes + dst in int64: "
                                 f"at most {_MAX_NODES:,} nodes, the graph has {n:,}")
        self.num_negatives = check_int("num_negatives", num_negatives, 0)
        self.negatives = negatives
        self.exclude_positive = bool(exclude_positive)
        if self.graph is None and self.exclude_positive and self.num_negatives and n < 2:
            raise GraphfeedError(f"exclude_positive needs at least 2 nodes to draw from, the "
                                 f"graph has {n}")
        self.exclude = exclude
        self.seed = check_int("seed", seed, 0)
        self.reverse_edge_types = self._reverse_map(reverse_edge_types)
        if exclude == "reverse" and self.graph is not None and not self.reverse_edge_types:
            raise GraphfeedError("exclude='reverse' needs reverse_edge_types (edge type -> its "
                                 "reverse edge type, e.g. from graphfeed.datasets.hetero_link."
                                 "reverse_edge_types(graph))")
        # the bound table: key -> (pairs (2, P), labels (P,), fixed (P, k) or None, times or
        # None), keys in relation-id order; positions run through them in that order
        self._tab: Optional[dict] = None
        if pairs is not None:
            self._tab = self._bind(pairs, pair_labels, fixed_negatives, pair_times)
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
                                           "pair_times", "reverse_edge_types")
                if k in kwargs}
        inner = inner_cls.from_graph(graph, fanouts, device=device, uva=uva, **kwargs)
        return cls(inner, seed=kwargs.get("seed", 0), **link)

    def _options(self) -> dict:
        rev = None
        if self.graph is not None:
            rev = {self.graph.edge_types[a]: self.graph.edge_types[b]
                   for a, b in self.reverse_edge_types.items()}
        return dict(num_negatives=self.num_negatives, negatives=self.negatives,
                    exclude_positive=self.exclude_positive, exclude=self.exclude,
                    reverse_edge_types=rev, seed=self.seed)

    # ------------------------------------------------------------------ keys
    def _reverse_map(self, rev) -> dict:
        """Typed: relation id -> reverse relation id, checked (the reverse goes between the
        swapped node types). Untyped: the graph is its own reverse."""
        g = self.graph
        if g is None:
            if rev and dict(rev) != {None: None}:
                raise GraphfeedError("reverse_edge_types are for a typed graph's relations; an "
                                     "untyped graph reverses within itself (exclude='reverse', "
                                     "or {None: None})")
            return {}
        out = {}
        for a, b in (rev or {}).items():
            ra, rb = g.edge_type_id(a), g.edge_type_id(b)
            ea, eb = g.edge_types[ra], g.edge_types[rb]
            if (ea[0], ea[2]) != (eb[2], eb[0]):
                raise GraphfeedError(f"reverse_edge_types: {eb} cannot be the reverse of {ea} "
                                     f"(its node types are not {ea[2]!r} -> {ea[0]!r})")
            out[ra] = rb
        return out

    def _name(self, key):
        """The public key of internal key ``key``: ``None``, or the relation's edge type."""
        return None if key is None else self.graph.edge_types[key]

    def _dst_nodes(self, key) -> int:
        """How many nodes a negative of ``key`` is drawn from."""
        if key is None:
            return self.sampler.num_nodes
        return self.graph.num_nodes_of(self.graph.edge_types[key][2])

    def _keyed(self, pairs, what: str) -> dict:
        """Internal key -> int64 ``(2, P)`` pairs on the sampler's device, checked: a ``(2, P)``
        array of an untyped graph (key ``None``), edge type -> type-local pairs of a typed
        one."""
        if self.graph is None:
            pairs = _untyped(pairs, what)
            return {None: _as_pairs(pairs, what, self.num_nodes).to(self.device)}
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
        return dict(sorted(out.items()))

    def _per_key(self, given, keys, what: str) -> Optional[dict]:
        """``given`` (an array of an untyped graph, edge type -> array of a typed one) by
        internal key, for exactly ``keys``; ``None`` when not given."""
        if given is None:
            return None
        if self.graph is None:
            return {None: _untyped(given, what)}
        if not isinstance(given, Mapping):
            raise GraphfeedError(f"{what} must map edge types to arrays, got "
                                 f"{type(given).__name__}")
        by = {self.graph.edge_type_id(k): v for k, v in given.items()}
        if sorted(by) != sorted(keys):
            names = self.graph.edge_types
            raise GraphfeedError(f"{what} must have the edge types of pairs "
                                 f"{[names[r] for r in sorted(keys)]}, got "
                                 f"{[names[r] for r in sorted(by)]}")
        return by

    def _labels(self, key, given, n: int) -> torch.Tensor:
        dev = self.device
        if given is None:
            return torch.ones(n, dtype=torch.float32, device=dev)
        lab = torch.as_tensor(np.asarray(given.cpu() if isinstance(given, torch.Tensor)
                                         else given))
        if tuple(lab.shape) != (n,):
            where = "" if key is None else f"[{self._name(key)}]"
            raise GraphfeedError(f"pair_labels{where} must hold one label per pair: shape "
                                 f"{tuple(lab.shape)} != ({n},)")
        return lab.to(device=dev, dtype=torch.float32)

    def _fixed(self, key, given, p: torch.Tensor) -> torch.Tensor:
        n = int(p.shape[1])
        f = torch.as_tensor(np.asarray(given.cpu() if isinstance(given, torch.Tensor)
                                       else given))
        where = "" if key is None else f"[{self._name(key)}]"
        if f.dim() != 2 or f.shape[0] != n:
            raise GraphfeedError(f"fixed_negatives{where} must be ({n}, k): one row of negative "
                                 f"destinations per pair, got shape {tuple(f.shape)}")
        m = self._dst_nodes(key)
        if key is None:  # the same id checks as pairs, on a (2, P * k) view
            _as_pairs(torch.stack([p[0].repeat_interleave(f.shape[1]).cpu(),
                                   f.reshape(-1).to(torch.int64)]), "fixed_negatives", m)
        elif f.numel() and (int(f.min()) < 0 or int(f.max()) >= m):
            bad = int(f.min()) if int(f.min()) < 0 else int(f.max())
            raise GraphfeedError(f"fixed_negatives{where} holds id {bad}, out of range [0, {m}) "
                                 f"of node type {self._name(key)[2]!r}")
        return f.to(device=self.device, dtype=torch.int64)

    def _bind(self, pairs, labels, fixed, times) -> dict:
        keyed = self._keyed(pairs, "pairs")
        lab_by = self._per_key(labels, keyed, "pair_labels")
        fix_by = self._per_key(fixed, keyed, "fixed_negatives")
        if times is not None and self.graph is not None:
            raise GraphfeedError("pair_times need an untyped temporal node sampler; typed graphs "
                                 "are sampled uniformly")
        tab = {}
        for k, p in keyed.items():
            n = int(p.shape[1])
            tab[k] = (p, self._labels(k, None if lab_by is None else lab_by[k], n),
                      None if fix_by is None else self._fixed(k, fix_by[k], p),
                      None if times is None else self._check_times(times, n))
        widths = {int(f.shape[1]) for _, _, f, _ in tab.values() if f is not None}
        if len(widths) > 1:
            raise GraphfeedError(f"fixed_negatives must hold the same k for every edge type, got "
                                 f"{sorted(widths)}")
        return tab

    def with_pairs(self, pairs, pair_labels=None, fixed_negatives=None,
                   pair_times=None) -> "LinkSampler":
        """The same sampler (node sampler shared) over a table of pairs (checked once here);
        :meth:`sample` then takes positions into it. A ``fixed_negatives`` table fixes
        ``num_negatives`` to its width; ``pair_times`` (one per pair, untyped temporal node
        samplers only) the times the pairs are sampled at."""
        opts = self._options()
        if fixed_negatives is not None:
            first = (next(iter(fixed_negatives.values()), None)
                     if isinstance(fixed_negatives, Mapping) else fixed_negatives)
            opts["num_negatives"] = int(np.shape(first)[1]) if np.ndim(first) == 2 else 0
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
    def hetero(self):
        return self.graph

    @property
    def num_pairs(self) -> Optional[int]:
        """Pairs in the bound table (``None`` without one)."""
        return None if self._tab is None else sum(int(t[0].shape[1]) for t in self._tab.values())

    def with_fanouts(self, fanouts: Sequence[int]) -> "LinkSampler":
        other = LinkSampler(self.sampler.with_fanouts(fanouts), **self._options())
        other._tab = self._tab
        return other

    def close(self) -> None:
        self.sampler.close()

    def __repr__(self) -> str:
        table = "" if self._tab is None else f", pairs={self.num_pairs}"
        return (f"LinkSampler({self.sampler!r}, num_negatives={self.num_negatives}, "
                f"negatives={self.negatives!r}, exclude={self.exclude!r}, "
                f"exclude_positive={self.exclude_positive}{table})")

    def _positions(self, seeds) -> dict:
        """The bound table's rows at positions ``seeds``: key -> (pairs, labels, fixed,
        times), each key's pairs in the batch's order."""
        pos = seeds if isinstance(seeds, torch.Tensor) else torch.as_tensor(np.asarray(seeds))
        if pos.dim() != 1 or pos.dtype.is_floating_point or pos.dtype == torch.bool:
            raise GraphfeedError(f"with a table of pairs, seeds are 1-D integer positions "
                                 f"into it, got shape {tuple(pos.shape)}, dtype {pos.dtype}")
        pos = pos.to(device=self.device, dtype=torch.int64)
        n_tab = self.num_pairs
        if pos.numel() and bool(((pos < 0) | (pos >= n_tab)).any()):
            bad = int(pos[(pos < 0) | (pos >= n_tab)][0])
            raise GraphfeedError(f"pair position {bad} is out of range [0, {n_tab})")
        if len(self._tab) == 1:
            (k, (p, lab, fx, tm)), = self._tab.items()
            return {k: (p[:, pos], lab[pos], None if fx is None else fx[pos],
                        None if tm is None else tm[pos])}
        out, start = {}, 0
        for k, (p, lab, fx, tm) in self._tab.items():
            n = int(p.shape[1])
            sel = pos[(pos >= start) & (pos < start + n)] - start
            if sel.numel():
                out[k] = (p[:, sel], lab[sel], None if fx is None else fx[sel], None)
            start += n
        return out

    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None, pair_labels=None,
               pair_times=None) -> MiniBatch:
        """The link ``MiniBatch`` of one batch: ``seeds`` are 1-D positions into the bound
        table of pairs, or (no table) the pairs (a ``(2, P)`` array untyped, edge type -> ``(2,
        P_r)`` type-local pairs typed) with optional ``pair_labels`` and ``pair_times`` (untyped
        temporal node samplers). Pairs may repeat; their endpoints are sampled once, at their
        earliest pair's time."""
        dev = self.device
        if self._tab is not None:
            if pair_labels is not None or pair_times is not None:
                raise GraphfeedError("pair_labels and pair_times come from the bound table; "
                                     "pass them to with_pairs()")
            rows = self._positions(seeds)
        else:
            keyed = self._keyed(seeds, "seeds")
            if pair_times is not None and self.graph is not None:
                raise GraphfeedError("pair_times need an untyped temporal node sampler")
            lab_by = {}  # an edge type left out of a typed batch's labels: all 1
            if pair_labels is not None:
                lab_by = ({None: pair_labels} if self.graph is None else
                          {self.graph.edge_type_id(et): v for et, v in pair_labels.items()})
            rows = {k: (p, self._labels(k, lab_by.get(k), int(p.shape[1])), None,
                        None if pair_times is None else self._check_times(pair_times,
                                                                          int(p.shape[1])))
                    for k, p in keyed.items()}
        fixed = [r[2] for r in rows.values() if r[2] is not None]
        k = self.num_negatives if not fixed else int(fixed[0].shape[1])
        negs = {key: (fx if fx is not None else self.draw_negatives(
                    p, edge_type=self._name(key), epoch=epoch, batch_index=batch_index))
                for key, (p, _, fx, _) in rows.items()}
        off = None if self.graph is None else torch.as_tensor(self.graph.node_offsets,
                                                              device=dev)

        def shift(key, row, ids):  # global ids of a key's source (row 0) or destination type
            if key is None:
                return ids
            t = self.graph.edge_types[key][0 if row == 0 else 2]
            return ids + off[self.graph.type_id(t)]

        ends = [x for key, (p, _, _, _) in rows.items()
                for x in (shift(key, 0, p[0]), shift(key, 1, p[1]),
                          shift(key, 1, negs[key].reshape(-1)))]
        if not ends:
            ends = [torch.zeros(0, dtype=torch.int64, device=dev)]
        times = rows[None][3] if None in rows else None
        if times is None:
            nodes = torch.unique(torch.cat(ends))
            mb = self.sampler.sample(nodes, epoch=epoch, batch_index=batch_index,
                                     executor=executor)
        else:  # every endpoint at the earliest time of its pairs (negatives: their pair's)
            nodes, inv = torch.unique(torch.cat(ends), return_inverse=True)
            t_end = torch.cat([times, times, times.repeat_interleave(k)])
            node_t = torch.full((int(nodes.shape[0]),), 0, dtype=times.dtype, device=dev)
            node_t = node_t.scatter_reduce(0, inv, t_end, reduce="amin", include_self=False)
            mb = self.sampler.sample(nodes, epoch=epoch, batch_index=batch_index,
                                     executor=executor, seed_times=node_t)

        # the node sampler keeps its seeds' order (per type): a node's local id is its rank
        def local(key, row, ids):
            if key is None:
                return _rank(nodes, ids)
            t = self.graph.edge_types[key][0 if row == 0 else 2]
            return _rank(mb.seed_dict[t], ids)

        links, index = {}, {}
        for key, (p, lab, _, tm) in rows.items():
            src = local(key, 0, p[0])
            index[key] = torch.stack([src, local(key, 1, p[1])])
            neg = torch.stack([src.repeat_interleave(k), local(key, 1, negs[key].reshape(-1))])
            links[self._name(key)] = SeedPairs(p, index[key], lab, neg, tm)
        s = (int(nodes.shape[0]) if self.graph is None
             else max(mb.num_seeds_dict.values(), default=0))
        blocks = self._exclude(mb.blocks, index, s)
        return replace(mb, blocks=blocks, epoch=int(epoch), batch_index=int(batch_index),
                       links=links, num_negatives=k)

    def draw_negatives(self, pairs: torch.Tensor, *, edge_type=None, epoch: int = 0,
                       batch_index: int = 0) -> torch.Tensor:
        """int64 ``(P, k)`` negative destinations of int64 ``(2, P)`` ``pairs`` (on their
        device; of a typed graph: type-local pairs of ``edge_type``, negatives of its
        destination type), drawn as :meth:`sample` draws them (see the module docstring for
        the keys); e.g. an evaluation's stable per-source candidates."""
        if (edge_type is None) != (self.graph is None):
            raise GraphfeedError("draw_negatives: an untyped graph's pairs take no edge_type, a "
                                 "typed graph's need theirs")
        key = None if edge_type is None else self.graph.edge_type_id(edge_type)
        salt = _NEG_SALT if key is None else _NEG_SALT ^ mix64(_REL_SALT + key)
        k, n = self.num_negatives, self._dst_nodes(key)
        n_pairs = int(pairs.shape[1])
        dev = pairs.device
        if key is not None and (n == 0 or k == 0):
            return torch.zeros((n_pairs, k), dtype=torch.int64, device=dev)
        j = torch.arange(k, device=dev, dtype=torch.int64)
        if self.negatives == "uniform":
            hkey = mix64(batch_key(self.seed, epoch, batch_index, -2) ^ salt)
            base = torch.arange(n_pairs, device=dev, dtype=torch.int64) * k
        else:  # keyed by the source id: the same candidates in every batch of the epoch
            hkey = mix64(batch_key(self.seed, epoch, 0, -3) ^ salt)
            base = pairs[0] * k
        counter = base.unsqueeze(1) + j
        if not self.exclude_positive:
            return _draw(hkey, counter, n)
        r = _draw(hkey, counter, n - 1)  # one of the n - 1 other nodes (of the type)
        return r + (r >= pairs[1].unsqueeze(1)).to(torch.int64)

    # ------------------------------------------------------------------ internals
    def _exclude(self, blocks: list, index: dict, s: int) -> list:
        """The blocks without the seed edges of each key (and, with ``"reverse"``, the reversed
        seed edges of its reverse: the graph itself untyped, the reverse relation typed); local
        keys ``u * s + v``, ``s`` the seeds (of the largest type)."""
        if self.exclude == "none" or s == 0 or not any(i.shape[1] for i in index.values()):
            return blocks
        keys: dict = {}
        for key, pi in index.items():
            keys.setdefault(key, []).append(pi[0] * s + pi[1])
            rev = key if key is None else self.reverse_edge_types.get(key)
            if self.exclude == "reverse" and (key is None or rev is not None):
                keys.setdefault(rev, []).append(pi[1] * s + pi[0])
        keys = {k: torch.unique(torch.cat(v)) for k, v in keys.items()}
        out = []
        for b in blocks:
            if self.graph is None:
                kept = _without_keys(b.edge_index, s, keys[None],
                                     b.edge_index.device.type == "cpu")
                if kept is None:
                    out.append(b)
                    continue
                kept_ei, keep = kept
                out.append(replace(
                    b, edge_index=kept_ei,
                    edge_ids=None if b.edge_ids is None else b.edge_ids[keep],
                    edge_weight=None if b.edge_weight is None else b.edge_weight[keep]))
                continue
            eidx = dict(b.edge_index_dict)
            eids = None if b.edge_ids is None else dict(b.edge_ids)
            changed = False
            for key, kk in keys.items():
                et = self.graph.edge_types[key]
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
