"""R-GCN over typed sampled layers (``HeteroMiniBatch`` blocks): the model of node
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

    def forward(self, x_dict: dict, blocks) -> torch.Tensor:
        first = blocks[0]
        h = {}
        for t in self.node_types:
            n = first.num_src[t]
            if t not in self.proj and t not in self.free:
                continue
            if t in self.proj:
                h[t] = F.relu(self.proj[t](x_dict[t].float().reshape(n, -1)))
            else:
                h[t] = self.free[t].expand(n, -1)
        for i, b in enumerate(blocks):
            out = {t: lin(h[t][: b.num_dst[t]]) for t, lin in self.root[i].items()}
            for et, ei in b.edge_index_dict.items():
                s, _, d = et
                if self._key(et) not in self.rel[i]:
                    continue
                n_dst = b.num_dst[d]
                src = h[s]
                agg = src.new_zeros((n_dst, src.shape[1]))
                agg.index_add_(0, ei[1], src.index_select(0, ei[0]))
                cnt = torch.bincount(ei[1], minlength=n_dst).clamp_(min=1).to(src.dtype)
                out[d] = out[d] + self.rel[i][self._key(et)](agg / cnt[:, None])
            if i < len(blocks) - 1:
                out = {t: F.dropout(F.relu(v), self.dropout, self.training)
                       for t, v in out.items()}
            h = out
        if isinstance(self.target, str):
            return h[self.target]
        return {t: h[t] for t in self.target}  # several output types: a dict
