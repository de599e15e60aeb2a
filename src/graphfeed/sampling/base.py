"""What a sampler returns: message-flow graphs (``Block``) stacked into a ``MiniBatch``.

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


@dataclass
class MiniBatch:
    """A sampled mini-batch.

    - ``seeds``: int64 ``(B,)`` global ids of the output nodes.
    - ``blocks``: one ``Block`` per GNN layer, in the order the model applies them:
      ``blocks[0]`` consumes the input features, ``blocks[-1]``'s destinations are the seeds.
      ``blocks[i].dst_nodes == blocks[i + 1].src_nodes`` for consecutive layers.
    - ``input_nodes``: the global ids whose features the first layer needs (``blocks[0].src_nodes``).
    - ``node_features``: filled by the loader's feature stage, name -> ``(len(input_nodes), ...)``.
    - ``labels``: filled by the loader, ``(B,)``.
    - ``epoch``, ``batch_index``: where the batch came from (its randomness derives from them).
    """

    seeds: torch.Tensor
    blocks: list[Block]
    node_features: dict[str, torch.Tensor] = field(default_factory=dict)
    labels: Optional[torch.Tensor] = None
    epoch: int = 0
    batch_index: int = 0

    @property
    def input_nodes(self) -> torch.Tensor:
        return self.blocks[0].src_nodes if self.blocks else self.seeds

    @property
    def x(self) -> Optional[torch.Tensor]:
        """The input features: the ``"feat"`` feature, or the only one when there is one."""
        if "feat" in self.node_features:
            return self.node_features["feat"]
        if len(self.node_features) == 1:
            return next(iter(self.node_features.values()))
        return None

    @property
    def num_layers(self) -> int:
        return len(self.blocks)

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_edges for b in self.blocks)

    def to(self, device, non_blocking: bool = False) -> "MiniBatch":
        return replace(
            self,
            seeds=self.seeds.to(device, non_blocking=non_blocking),
            blocks=[b.to(device, non_blocking=non_blocking) for b in self.blocks],
            node_features={
                k: v.to(device, non_blocking=non_blocking) for k, v in self.node_features.items()
            },
            labels=None
            if self.labels is None
            else self.labels.to(device, non_blocking=non_blocking),
        )

    def __repr__(self) -> str:
        feats = {k: tuple(v.shape) for k, v in self.node_features.items()}
        return (
            f"MiniBatch(seeds={self.seeds.shape[0]}, blocks={self.blocks}, "
            f"input_nodes={self.input_nodes.shape[0]}, features={feats}, "
            f"epoch={self.epoch}, batch_index={self.batch_index})"
        )


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
