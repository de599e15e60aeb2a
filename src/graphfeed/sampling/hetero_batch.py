"""What the heterogeneous sampler returns: ``HeteroBlock`` layers stacked in a
``HeteroMiniBatch`` (a ``MiniBatch``, so the loader's stages and the device copy take it).

Ids come in two spaces: *global* ids of the fused graph (type ``t`` owns ``[offset[t],
offset[t + 1])``) and *type-local* ids (``global - offset[t]``), which index per-type feature
tables and PyG's ``x_dict`` rows. Every per-type dict holds every node type and every edge type
of the graph (empty tensors where the batch has none), so ``HeteroConv`` and ``to_hetero``
models find every key they were built with.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

import torch

from .base import MiniBatch

EdgeType = tuple[str, str, str]


def _to(d: dict, device, non_blocking: bool) -> dict:
    return {k: v.to(device, non_blocking=non_blocking) for k, v in d.items()}


@dataclass
class HeteroBlock:
    """One GNN layer's message-flow graph, per type, in type-local ids.

    - ``edge_index_dict``: edge type ``(s, rel, d)`` -> int64 ``(2, E_r)``: row 0 indexes the
      layer's sources of type ``s``, row 1 its destinations of type ``d`` (PyG convention).
    - ``src_nodes``: node type -> int64 type-local ids of the layer's sources of that type;
      its first ``num_dst[t]`` entries are the destinations of type ``t`` (destinations-first
      per node type).
    - ``edge_ids``: optional edge type -> int64 positions of the sampled edges in the fused
      graph's ``indices``.
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
class HeteroMiniBatch(MiniBatch):
    """A sampled heterogeneous mini-batch.

    - ``seeds``: int64 ``(B,)`` *global* ids of the output nodes, grouped by node type (the
      order within a type is the order given); labels (``labels``) follow this order.
    - ``blocks``: one :class:`HeteroBlock` per layer, ``blocks[-1]``'s destinations are the
      seeds, ``blocks[i].dst_nodes == blocks[i + 1].src_nodes`` per type.
    - ``node_offsets``: int64 ``(T + 1,)`` type offsets of the global ids; ``node_types``.
    - ``type_features``: node type -> name -> rows of ``input_nodes_dict[type]``, filled by the
      loader's per-type feature stage; ``x_dict`` is its ``"feat"`` (or only) feature per type.
    - ``node_features``: features of the fused graph (one row per global id) read at
      ``input_nodes`` (global ids), as for a homogeneous batch.
    """

    node_types: tuple = ()
    node_offsets: Optional[torch.Tensor] = None
    type_features: dict = field(default_factory=dict)

    # ---------------------------------------------------------------- ids
    @property
    def seed_dict(self) -> dict:
        """Node type -> type-local ids of its seeds (``blocks[-1].dst_nodes``)."""
        if self.blocks:
            return self.blocks[-1].dst_nodes
        return self._split_global(self.seeds)

    @property
    def num_seeds_dict(self) -> dict:
        return {t: int(v.shape[0]) for t, v in self.seed_dict.items()}

    @property
    def input_nodes_dict(self) -> dict:
        """Node type -> type-local ids whose features the first layer needs."""
        if self.blocks:
            return self.blocks[0].src_nodes
        return self._split_global(self.seeds)

    @property
    def input_nodes(self) -> torch.Tensor:
        """The global ids of ``input_nodes_dict``, types in order."""
        parts = [v + self.node_offsets[i].to(v.device)
                 for i, v in enumerate(self.input_nodes_dict[t] for t in self.node_types)]
        return torch.cat(parts) if parts else self.seeds

    def _split_global(self, ids: torch.Tensor) -> dict:
        off = self.node_offsets.to(ids.device)
        return {t: ids[(ids >= off[i]) & (ids < off[i + 1])] - off[i]
                for i, t in enumerate(self.node_types)}

    # ---------------------------------------------------------------- model inputs
    def edge_index_dict(self, layer: int) -> dict:
        """Layer ``layer``'s edge type -> ``edge_index`` (``blocks[layer].edge_index_dict``)."""
        return self.blocks[layer].edge_index_dict

    @property
    def x_dict(self) -> dict:
        """Node type -> input features: its ``"feat"`` feature, or its only one; types without
        features are left out."""
        out = {}
        for t, feats in self.type_features.items():
            if "feat" in feats:
                out[t] = feats["feat"]
            elif len(feats) == 1:
                out[t] = next(iter(feats.values()))
        return out

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_edges for b in self.blocks)

    def to(self, device, non_blocking: bool = False) -> "HeteroMiniBatch":
        out = super().to(device, non_blocking)
        out.type_features = {t: _to(f, device, non_blocking)
                             for t, f in self.type_features.items()}
        return out

    def __repr__(self) -> str:
        feats = {t: {k: tuple(v.shape) for k, v in f.items()}
                 for t, f in self.type_features.items()}
        return (f"HeteroMiniBatch(seeds={self.num_seeds_dict}, blocks={self.blocks}, "
                f"features={feats}, epoch={self.epoch}, batch_index={self.batch_index})")
