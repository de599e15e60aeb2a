"""What a sampler returns: message-flow graphs (``Block``, or ``HeteroBlock`` per type)
stacked into one ``MiniBatch``, whose typed and link fields are optional: untyped or typed
graphs, node or link seeds, all one class.

The sampler returns ids only; a separate loader stage joins features and labels.
"""

from __future__ import annotations

import abc
import types
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Sequence

import torch

from ..errors import GraphfeedError
from ..graph.csc import CSCGraph


@dataclass
class Block:
    """One GNN layer's message-flow graph, in local ids.

    - ``edge_index``: int64 ``(2, E)``; row 0 indexes source nodes ``[0, num_src)``, row 1
      destination nodes ``[0, num_dst)`` (PyG's convention, messages flow row 0 -> row 1).
    - ``src_nodes``: int64 ``(num_src,)`` global ids of the source nodes. The destination nodes
      are the first ``num_dst`` source nodes: ``dst_nodes == src_nodes[:num_dst]``.
    - ``edge_ids``: optional int64 ``(E,)`` positions of the sampled edges in the graph's
      ``indices`` array (for edge features).
    - ``edge_weight``: optional float32 ``(E,)`` per-edge weights for the aggregation; LABOR
      sampling fills it with its importance weights (see ``graphfeed.sampling.SamplingMethod``).
    """

    edge_index: torch.Tensor
    src_nodes: torch.Tensor
    num_dst: int
    edge_ids: Optional[torch.Tensor] = None
    edge_weight: Optional[torch.Tensor] = None

    @property
    def num_src(self) -> int:
        return int(self.src_nodes.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.shape[1])

    @property
    def dst_nodes(self) -> torch.Tensor:
        return self.src_nodes[: self.num_dst]

    @property
    def size(self) -> tuple[int, int]:
        """``(num_src, num_dst)``, the ``size`` argument of PyG's bipartite message passing."""
        return (self.num_src, self.num_dst)

    def to(self, device, non_blocking: bool = False) -> "Block":
        return replace(
            self,
            edge_index=self.edge_index.to(device, non_blocking=non_blocking),
            src_nodes=self.src_nodes.to(device, non_blocking=non_blocking),
            edge_ids=None
            if self.edge_ids is None
            else self.edge_ids.to(device, non_blocking=non_blocking),
            edge_weight=None
            if self.edge_weight is None
            else self.edge_weight.to(device, non_blocking=non_blocking),
        )

    def __repr__(self) -> str:
        return f"Block(num_src={self.num_src}, num_dst={self.num_dst}, num_edges={self.num_edges})"


EdgeType = tuple[str, str, str]


def input_of(features: dict):
    """The input among named ``features``: its ``"feat"``, else its only one, else ``None``
    (a batch's ``x`` and each type's ``x_dict`` entry; a placement's input features)."""
    if "feat" in features:
        return features["feat"]
    return next(iter(features.values())) if len(features) == 1 else None


def float_rows(x: torch.Tensor) -> torch.Tensor:
    """Model input from stored features of any dtype (uint8, float16, bfloat16, ...): float32
    ``(rows, features)``. Exact for the 2-byte floats (float32 holds every float16 and bfloat16
    value), so storing features in half the bytes changes the model's input by the storage
    rounding only; ``--precision bf16-mixed`` lowers the arithmetic separately (autocast)."""
    return x.to(torch.float32).reshape(x.shape[0], -1)


def _to(d: dict, device, non_blocking: bool) -> dict:
    return {k: v.to(device, non_blocking=non_blocking) for k, v in d.items()}


@dataclass
class HeteroBlock:
    """One GNN layer's message-flow graph of a typed graph, per type, in type-local ids.

    - ``edge_index_dict``: edge type ``(s, rel, d)`` -> int64 ``(2, E_r)``: row 0 indexes the
      layer's sources of type ``s``, row 1 its destinations of type ``d`` (PyG convention).
    - ``src_nodes``: node type -> int64 type-local ids of the layer's sources of that type;
      its first ``num_dst[t]`` entries are the destinations of type ``t`` (destinations-first
      per node type).
    - ``edge_ids``: optional edge type -> int64 positions of the sampled edges in the fused
      graph's ``indices``.

    Every dict holds every node type and edge type of the graph (empty tensors where the batch
    has none), so ``HeteroConv`` and ``to_hetero`` models find every key they were built with.
    """

    edge_index_dict: dict
    src_nodes: dict
    num_dst: dict
    edge_ids: Optional[dict] = None

    @property
    def dst_nodes(self) -> dict:
        return {t: v[: self.num_dst[t]] for t, v in self.src_nodes.items()}

    @property
    def num_src(self) -> dict:
        return {t: int(v.shape[0]) for t, v in self.src_nodes.items()}

    @property
    def num_edges(self) -> int:
        return sum(int(e.shape[1]) for e in self.edge_index_dict.values())

    def size(self, edge_type: EdgeType) -> tuple[int, int]:
        """``(num_src of the source type, num_dst of the destination type)`` of one edge type."""
        s, _, d = edge_type
        return int(self.src_nodes[s].shape[0]), int(self.num_dst[d])

    def to(self, device, non_blocking: bool = False) -> "HeteroBlock":
        return replace(
            self,
            edge_index_dict=_to(self.edge_index_dict, device, non_blocking),
            src_nodes=_to(self.src_nodes, device, non_blocking),
            edge_ids=None if self.edge_ids is None else _to(self.edge_ids, device, non_blocking),
        )

    def __repr__(self) -> str:
        return (f"HeteroBlock(num_src={self.num_src}, num_dst={self.num_dst}, "
                f"num_edges={self.num_edges})")


@dataclass
class SeedPairs:
    """A link batch's seed pairs of one key (an edge type, or ``None`` for an untyped graph).

    - ``pairs``: int64 ``(2, P)`` the pairs as given: global ids of an untyped graph, type-local
      ids of the edge type's source (row 0) and destination (row 1) types;
    - ``index``: the same in batch-local ids: positions among the batch's seeds (of the type);
    - ``labels``: float32 ``(P,)`` (1 unless given);
    - ``neg_index``: int64 ``(2, P * k)`` the negatives in batch-local ids; pair ``i``'s are
      columns ``i * k .. i * k + k - 1`` and share its source;
    - ``times``: ``(P,)`` the pairs' times when the batch was sampled with times, else ``None``.
    """

    pairs: torch.Tensor
    index: torch.Tensor
    labels: torch.Tensor
    neg_index: torch.Tensor
    times: Optional[torch.Tensor] = None

    @property
    def num_pairs(self) -> int:
        return int(self.index.shape[1])

    def to(self, device, non_blocking: bool = False) -> "SeedPairs":
        return SeedPairs(*(None if t is None else t.to(device, non_blocking=non_blocking)
                           for t in (self.pairs, self.index, self.labels, self.neg_index,
                                     self.times)))


@dataclass
class MiniBatch:
    """A sampled mini-batch, of any graph and any task: typed and link fields are optional.

    - ``seeds``: int64 ``(B,)`` global ids of the output nodes (of a typed graph: grouped by
      node type, the order within a type as given; ``labels`` follow this order).
    - ``blocks``: one ``Block`` (untyped) or ``HeteroBlock`` (typed) per GNN layer, in the order
      the model applies them: ``blocks[0]`` consumes the input features, ``blocks[-1]``'s
      destinations are the seeds; ``blocks[i].dst_nodes == blocks[i + 1].src_nodes``.
    - ``input_nodes``: the global ids whose features the first layer needs.
    - ``node_features``: filled by the loader's feature stage, name -> rows of ``input_nodes``;
      ``labels``: filled by the loader, rows of ``seeds``.
    - ``epoch``, ``batch_index``: where the batch came from (its randomness derives from them).

    Typed (``node_offsets`` set, ``is_typed``): global ids of the fused graph, type ``t``
    owning ``[node_offsets[t], node_offsets[t + 1])``; *type-local* ids (``global -
    offset[t]``) index per-type features. ``node_types``; ``type_features``: node type -> name
    -> rows of ``input_nodes_dict[type]``, filled by the loader; ``x_dict`` its ``"feat"`` (or
    only) feature per type; ``seed_dict`` / ``input_nodes_dict``: type-local ids per type.

    Link prediction (``links`` set, ``is_link``): the seeds are the distinct endpoints of every
    positive and negative pair, sorted; ``links``: key -> :class:`SeedPairs` (the key ``None``
    for an untyped graph, an edge type for a typed one; only the edge types with pairs in the
    batch); ``num_negatives``: ``k`` per pair. ``pairs``, ``pair_index``, ``pair_labels``,
    ``neg_index``, ``pair_times``, ``edge_label_index`` and ``edge_label`` are the one key's
    tensors of an untyped batch, and edge type -> tensor of a typed one.
    """

    seeds: torch.Tensor
    blocks: list
    node_features: dict = field(default_factory=dict)
    labels: Optional[torch.Tensor] = None
    epoch: int = 0
    batch_index: int = 0
    node_types: tuple = ()
    node_offsets: Optional[torch.Tensor] = None
    type_features: dict = field(default_factory=dict)
    links: Optional[dict] = None
    num_negatives: int = 0

    @property
    def is_typed(self) -> bool:
        return self.node_offsets is not None

    @property
    def is_link(self) -> bool:
        return self.links is not None

    # ---------------------------------------------------------------- ids
    @property
    def input_nodes(self) -> torch.Tensor:
        if self.is_typed:  # the global ids of input_nodes_dict, types in order
            parts = [v + self.node_offsets[i].to(v.device)
                     for i, v in enumerate(self.input_nodes_dict[t] for t in self.node_types)]
            return torch.cat(parts) if parts else self.seeds
        return self.blocks[0].src_nodes if self.blocks else self.seeds

    @property
    def seed_dict(self) -> dict:
        """Typed: node type -> type-local ids of its seeds (``blocks[-1].dst_nodes``)."""
        if self.blocks:
            return self.blocks[-1].dst_nodes
        return self._split_global(self.seeds)

    @property
    def num_seeds_dict(self) -> dict:
        return {t: int(v.shape[0]) for t, v in self.seed_dict.items()}

    @property
    def input_nodes_dict(self) -> dict:
        """Typed: node type -> type-local ids whose features the first layer needs."""
        if self.blocks:
            return self.blocks[0].src_nodes
        return self._split_global(self.seeds)

    def _split_global(self, ids: torch.Tensor) -> dict:
        off = self.node_offsets.to(ids.device)
        return {t: ids[(ids >= off[i]) & (ids < off[i + 1])] - off[i]
                for i, t in enumerate(self.node_types)}

    # ---------------------------------------------------------------- model inputs
    @property
    def x(self) -> Optional[torch.Tensor]:
        """The input features: the ``"feat"`` feature, or the only one when there is one."""
        return input_of(self.node_features)

    @property
    def x_dict(self) -> dict:
        """Typed: node type -> input features, its ``"feat"`` feature or its only one; types
        without features are left out."""
        rows = {t: input_of(feats) for t, feats in self.type_features.items()}
        return {t: x for t, x in rows.items() if x is not None}

    @property
    def inputs(self):
        """What a model's forward takes first: typed, :attr:`x_dict`; else :attr:`x` as float32
        ``(rows, features)`` (any stored dtype widened exactly: float32 holds every float16
        and bfloat16 value)."""
        if self.is_typed:
            return self.x_dict
        x = self.x
        return None if x is None else float_rows(x)

    def edge_index_dict(self, layer: int) -> dict:
        """Typed: layer ``layer``'s edge type -> ``edge_index``."""
        return self.blocks[layer].edge_index_dict

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_edges for b in self.blocks)

    # ---------------------------------------------------------------- link prediction
    def _per_key(self, get):
        if self.links is None:
            return None
        if not self.is_typed:
            return get(self.links[None])
        return {k: get(v) for k, v in self.links.items()}

    pairs = property(lambda self: self._per_key(lambda p: p.pairs),
                     doc="Link: the seed pairs as given (see the class docstring).")
    pair_index = property(lambda self: self._per_key(lambda p: p.index),
                          doc="Link: the seed pairs in batch-local ids.")
    pair_labels = property(lambda self: self._per_key(lambda p: p.labels),
                           doc="Link: the seed pairs' labels.")
    neg_index = property(lambda self: self._per_key(lambda p: p.neg_index),
                         doc="Link: the negatives in batch-local ids.")
    pair_times = property(lambda self: self._per_key(lambda p: p.times),
                          doc="Link: the pairs' times (``None`` when sampled without).")

    @property
    def num_pairs_dict(self) -> dict:
        return {k: p.num_pairs for k, p in (self.links or {}).items()}

    @property
    def num_pairs(self) -> int:
        return sum(self.num_pairs_dict.values())

    @property
    def edge_label_index_dict(self) -> dict:
        """Link: key -> int64 ``(2, P + P * k)``: the pairs, then their negatives
        (batch-local ids)."""
        return {k: torch.cat([p.index, p.neg_index], dim=1) for k, p in self.links.items()}

    @property
    def edge_label_dict(self) -> dict:
        """Link: key -> float32 ``(P + P * k,)``: the pair labels, then 0 per negative."""
        return {k: torch.cat([p.labels, p.labels.new_zeros(p.neg_index.shape[1])])
                for k, p in self.links.items()}

    @property
    def edge_label_index(self):
        return self._per_key(lambda p: torch.cat([p.index, p.neg_index], dim=1))

    @property
    def edge_label(self):
        return self._per_key(lambda p: torch.cat([p.labels,
                                                  p.labels.new_zeros(p.neg_index.shape[1])]))

    # ---------------------------------------------------------------- moving
    def to(self, device, non_blocking: bool = False) -> "MiniBatch":
        return replace(
            self,
            seeds=self.seeds.to(device, non_blocking=non_blocking),
            blocks=[b.to(device, non_blocking=non_blocking) for b in self.blocks],
            node_features=_to(self.node_features, device, non_blocking),
            labels=None if self.labels is None else self.labels.to(
                device, non_blocking=non_blocking),
            node_offsets=self.node_offsets,
            type_features={t: _to(f, device, non_blocking)
                           for t, f in self.type_features.items()},
            links=None if self.links is None else {
                k: p.to(device, non_blocking) for k, p in self.links.items()},
        )

    def __repr__(self) -> str:
        what = []
        if self.is_link:
            what.append(f"pairs={self.num_pairs_dict if self.is_typed else self.num_pairs}, "
                        f"negatives={self.num_negatives} each")
        if self.is_typed:
            feats = {t: {k: tuple(v.shape) for k, v in f.items()}
                     for t, f in self.type_features.items()}
            what.append(f"seeds={self.num_seeds_dict}, blocks={self.blocks}, features={feats}")
        else:
            feats = {k: tuple(v.shape) for k, v in self.node_features.items()}
            what.append(f"seeds={self.seeds.shape[0]}, blocks={self.blocks}, "
                        f"input_nodes={self.input_nodes.shape[0]}, features={feats}")
        return (f"MiniBatch({', '.join(what)}, epoch={self.epoch}, "
                f"batch_index={self.batch_index})")


class Sampler(abc.ABC):
    """Turns a batch of seed ids into a ``MiniBatch`` of ids (no features).

    What the loader relies on, and all it relies on: :attr:`num_nodes`, :attr:`device`,
    :attr:`fanouts`, :meth:`sample`, :meth:`with_fanouts` and :meth:`close`. Every
    implementation is built from a ``CSCGraph`` the same way, :meth:`from_graph` (its hook is
    ``_from_graph``), and registered by name in ``graphfeed.sampling.SAMPLERS``.

    Randomness must derive only from ``(seed, epoch, batch_index)`` so that a batch is the same
    whatever the thread count, the order batches are produced in, or the run.
    """

    @classmethod
    def from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], *, device="cpu",
                   replace: bool = False, seed: int = 0, uva: bool = False,
                   **options) -> "Sampler":
        """A sampler of ``graph`` (its in-neighbours) that samples on ``device``.

        - ``fanouts``: one entry per GNN layer, ``>= 1`` or ``-1`` (every neighbour).
        - ``replace``: draw neighbours with replacement; ``seed``: the base of the counters every
          batch's randomness derives from (with ``epoch`` and ``batch_index``).
        - ``uva=True``: sample on a CUDA ``device`` from zero-copy views of the graph's pinned
          host arrays (``graph.pin_memory()``) instead of a copy in GPU memory.
        - ``options``: keywords of the implementation (``NeighborSampler``: ``num_threads``,
          ``return_edge_ids``; ``TorchNeighborSampler``: ``return_edge_ids``), and ``method``:
          a ``graphfeed.sampling.SamplingMethod`` (``None``: uniform); a sampler that does not
          support the method's kind raises ``GraphfeedError`` naming itself and the kind.

        A sampler that cannot sample on ``device`` (or with ``uva``) raises ``GraphfeedError``.
        """
        if not isinstance(graph, CSCGraph):
            raise GraphfeedError(f"graph must be a CSCGraph, got {type(graph).__name__}")
        device = torch.device(device)
        if uva and device.type != "cuda":
            raise GraphfeedError(
                f"uva=True samples from CUDA views of pinned host memory: device must be a CUDA "
                f"device, got {device}"
            )
        return cls._from_graph(graph, fanouts, device, bool(uva), replace=replace, seed=seed,
                               **options)

    @classmethod
    def _from_graph(cls, graph: CSCGraph, fanouts: Sequence[int], device: torch.device,
                    uva: bool, **kwargs) -> "Sampler":
        """Hook of :meth:`from_graph`: ``graph`` is a ``CSCGraph``, ``device`` a
        ``torch.device`` (CUDA when ``uva``); ``kwargs`` hold ``replace``, ``seed`` and the
        options."""
        raise NotImplementedError(f"{cls.__name__} cannot be built from a graph")

    @property
    @abc.abstractmethod
    def num_nodes(self) -> int:
        """Nodes of the sampled graph: every id in a ``MiniBatch`` is in ``[0, num_nodes)``."""

    @property
    @abc.abstractmethod
    def fanouts(self) -> tuple[int, ...]:
        """``fanouts[i]`` is the fanout of ``blocks[i]``; ``-1`` takes every neighbour."""

    @property
    def device(self) -> torch.device:
        """Where the ``MiniBatch`` tensors are created (CPU unless the sampler says otherwise)."""
        return torch.device("cpu")

    @property
    def hetero(self):
        """The typed graph (``graphfeed.graph.HeteroGraph``) of a sampler of node and edge
        types, whose batches are typed; ``None`` for an untyped one."""
        return None

    @abc.abstractmethod
    def sample(self, seeds, *, epoch: int = 0, batch_index: int = 0,
               executor: Optional[Executor] = None) -> MiniBatch:
        """The ``MiniBatch`` of one batch of distinct seed ids (1-D integers).

        ``executor``: where to run the chunks of a batch split for intra-batch parallelism (the
        loader's, shared with feature reads); the chunks are leaf tasks that never submit
        more. ``None``: the sampler's own arrangement (serial, or a pool it owns). Samplers
        with a temporal method also take ``seed_times=`` (one time per seed)."""

    @property
    def needs_tables(self) -> bool:
        """Whether :meth:`prepare` builds per-graph tables (derived from the graph and the
        sampling method, O(E)) that ``graphfeed.distributed.share_prepared`` holds once per
        machine. ``False`` here; a sampler that says ``True`` also has the ``method``, ``seed``
        and ``graph`` that the shared tables' manifest is checked against."""
        return False

    def prepare(self, share: Optional[Callable[[Callable[[], dict], dict], dict]] = None):
        """Build the per-graph tables now rather than on the first batch; returns them, a
        read-only name -> array mapping. ``share(build, inputs) -> tables`` takes the build
        over (``NeighborSampler.prepare`` documents it). Here: nothing to build, an empty
        mapping."""
        return types.MappingProxyType({})

    def with_fanouts(self, fanouts: Sequence[int]) -> "Sampler":
        """The same sampler (graph, seed, replacement, options) with other fanouts, sharing the
        graph's arrays; e.g. evaluation with all neighbours. Samplers that cannot raise
        ``NotImplementedError``."""
        raise NotImplementedError(f"{type(self).__name__} cannot change its fanouts")

    def close(self) -> None:
        """Release what the sampler holds (thread pools); idempotent. The sampler stays usable:
        resources are created again on demand."""
