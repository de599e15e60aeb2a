"""R-GCN over typed sampled layers (typed ``MiniBatch`` blocks): the model of node
classification and link prediction on heterogeneous datasets."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["HeteroRGCN", "hetero_in_dim", "typed_in_dims"]


def hetero_in_dim(dataset) -> int:
    """The widest per-type ``feat`` (what the model's input projections read); 1 when no type
    has features."""
    dims = [int(np.prod(f["feat"].row_shape) or 1) for f in dataset.type_features.values()
            if "feat" in f]
    return max(dims, default=1)


def typed_in_dims(type_features: dict) -> dict:
    """Node type -> the width of its ``feat`` (types without one are left out: the model
    learns an input vector for them)."""
    return {t: int(np.prod(f["feat"].row_shape) or 1) for t, f in type_features.items()
            if "feat" in f}


class HeteroRGCN(nn.Module):
    """R-GCN with mean aggregation over sampled layers: per layer, every destination of
    type ``t`` gets ``W_root[t] h_t + sum over relations r into t of W_r mean(h_src)``.

    ``in_dims``: node type -> input feature size (types left out get a learned input
    vector); outputs the logits of the ``target`` type's seeds (``target`` a tuple of types:
    a dict type -> outputs of its seeds, as typed link prediction uses). Every parameter takes part
    in every step: only the types and relations on a path of ``num_layers`` relations to the
    target get parameters (empty relations add zeros), and the last layer computes only the
    target type."""

    def __init__(self, node_types, edge_types, in_dims: dict, hidden: int, out_dim: int,
                 num_layers: int, target: str, dropout: float = 0.5):
        super().__init__()
        self.node_types, self.edge_types = tuple(node_types), tuple(edge_types)
        self.target, self.dropout, self.hidden = target, dropout, hidden
        # the types whose layer-i outputs lead to the target (the last layer computes only the
        # target's): a parameter off every path would get no gradient, which DDP refuses
        needed = [set() for _ in range(num_layers + 1)]
        needed[num_layers] = {target} if isinstance(target, str) else set(target)
        for i in range(num_layers, 0, -1):
            needed[i - 1] = needed[i] | {s for s, _, d in edge_types if d in needed[i]}
        inputs = needed[0]
        self.proj = nn.ModuleDict({t: nn.Linear(in_dims[t], hidden) for t in node_types
                                   if t in in_dims and t in inputs})
        self.free = nn.ParameterDict({t: nn.Parameter(torch.zeros(hidden)) for t in node_types
                                      if t not in in_dims and t in inputs})
        dims = [hidden] * num_layers + [out_dim]

        def types(i):
            return [t for t in node_types if t in needed[i + 1]]

        self.root = nn.ModuleList(
            nn.ModuleDict({t: nn.Linear(dims[i], dims[i + 1]) for t in types(i)})
            for i in range(num_layers))
        self.rel = nn.ModuleList(
            nn.ModuleDict({self._key(et): nn.Linear(dims[i], dims[i + 1], bias=False)
                           for et in edge_types if et[2] in types(i)})
            for i in range(num_layers))

    @staticmethod
    def _key(et) -> str:
        return "__".join(et)

    # ---------------------------------------------------------------- one layer at a time
    # forward() is made of these, and the layer-wise evaluator of typed graphs
    # (graphfeed.trainer.layerwise) calls them on whole-graph tables: one definition of
    # the model's math for both.
    @property
    def num_layers(self) -> int:
        return len(self.root)

    @property
    def input_types(self) -> tuple:
        """The node types whose input rows layer 0 reads (those on a path to the target), in
        ``node_types`` order."""
        return tuple(t for t in self.node_types if t in self.proj or t in self.free)

    def layer_types(self, i: int) -> tuple:
        """The node types layer ``i`` computes outputs for (the last layer: the target's)."""
        return tuple(self.root[i].keys())

    def layer_relations(self, i: int, t: str) -> tuple:
        """The edge types whose means layer ``i`` adds into type ``t``, in ``edge_types``
        order (the order of a block's ``edge_index_dict``, so the sums round alike)."""
        return tuple(et for et in self.edge_types
                     if et[2] == t and self._key(et) in self.rel[i])

    def input_rows(self, t: str, x=None, n: int = 0) -> torch.Tensor:
        """Layer 0's input rows of type ``t``: ``relu(proj[t](x))`` for a type with features
        (``x`` its ``(n, ...)`` features, any dtype), else its learned vector ``n`` times."""
        if t in self.proj:  # the width spelled out: a batch may hold no node of the type
            lin = self.proj[t]
            return F.relu(lin(x.float().reshape(x.shape[0], lin.in_features)))
        return self.free[t].expand(n, -1)

    def projects_first(self, i: int) -> bool:
        """Whether layer ``i`` is cheaper with each relation's weight applied to the source
        rows before the mean (``W_r mean(h) == mean(W_r h)``: aggregation is linear): where
        its output is narrower than its input."""
        lin = self.root[i][next(iter(self.root[i]))]
        return lin.out_features < lin.in_features

    def relation_source(self, i: int, et, h: torch.Tensor) -> torch.Tensor:
        """The rows layer ``i`` averages over relation ``et``'s in-edges, from source rows
        ``h``: ``W_r h`` where the layer projects first (:meth:`projects_first`), else ``h``."""
        return self.rel[i][self._key(et)](h) if self.projects_first(i) else h

    def layer_output(self, i: int, t: str, x_dst: torch.Tensor, means: dict,
                     projected: bool = False) -> torch.Tensor:
        """Layer ``i``'s output for destinations of type ``t``: ``W_root[t] x_dst`` plus, for
        each relation ``et`` of ``means`` (its means over each destination's in-edges of that
        relation, zero rows where it has none; in the order given), ``W_r mean`` (``mean``
        itself when ``projected``: already ``W_r``-projected rows, :meth:`relation_source`);
        below the last layer ReLU and dropout (active only in training)."""
        out = self.root[i][t](x_dst)
        for et, m in means.items():
            out = out + (m if projected else self.rel[i][self._key(et)](m))
        if i < self.num_layers - 1:
            out = F.dropout(F.relu(out), self.dropout, self.training)
        return out

    def forward(self, x_dict: dict, blocks) -> torch.Tensor:
        first = blocks[0]
        h = {t: self.input_rows(t, x_dict.get(t), first.num_src[t]) for t in self.input_types}
        for i, b in enumerate(blocks):
            means = {t: {} for t in self.root[i]}
            for et, ei in b.edge_index_dict.items():
                s, _, d = et
                if self._key(et) not in self.rel[i]:
                    continue
                n_dst = b.num_dst[d]
                src = h[s]
                agg = src.new_zeros((n_dst, src.shape[1]))
                agg.index_add_(0, ei[1], src.index_select(0, ei[0]))
                cnt = torch.bincount(ei[1], minlength=n_dst).clamp_(min=1).to(src.dtype)
                means[d][et] = agg / cnt[:, None]
            h = {t: self.layer_output(i, t, h[t][: b.num_dst[t]], means[t]) for t in self.root[i]}
        if isinstance(self.target, str):
            return h[self.target]
        return {t: h[t] for t in self.target}  # several output types: a dict
