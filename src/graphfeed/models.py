"""Reference models for ``graphfeed train``: GraphSAGE over sampled blocks, and an MLP baseline.

PyG is an optional extra (``graphfeed[pyg]``), imported when a model is built.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn
import torch.nn.functional as F

from .errors import MissingDependencyError
from .sampling.base import Block


def _sage_conv():
    try:
        from torch_geometric.nn import SAGEConv
    except ImportError:
        raise MissingDependencyError("torch_geometric", "pyg", "GraphSAGE (graphfeed train)") from None
    return SAGEConv


class GraphSAGE(nn.Module):
    """Mean-aggregation GraphSAGE, one ``SAGEConv`` per block (PyG's bipartite form)."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        SAGEConv = _sage_conv()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.convs = nn.ModuleList(SAGEConv(dims[i], dims[i + 1]) for i in range(num_layers))
        self.norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers - 1))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        assert len(blocks) == len(self.convs), "one block per layer"
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = conv((x, x[: block.num_dst]), block.edge_index)
            if i < len(self.convs) - 1:
                x = self.norms[i](x)
                x = F.relu(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x


class MLP(nn.Module):
    """The baseline: the same width and depth, but each node sees only its own features."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.lins):
            x = lin(x)
            if i < len(self.lins) - 1:
                x = F.relu(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x
