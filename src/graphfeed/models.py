"""Reference models for ``graphfeed train`` (``--model sage|gcn|gat``) over sampled blocks, and
the MLP baseline.

Every model is called as ``model(x, blocks)``: ``x`` float ``(len(input_nodes), in_dim)``, one
``Block`` per layer, output ``(num_seeds, out_dim)`` logits. Layer ``i`` runs on ``blocks[i]``
through :func:`graphfeed.trainer.adapter.apply_conv`, so SAGEConv and GATConv get the bipartite
``(x_src, x_dst)`` pair and GCNConv runs on the block's union node set.

PyG is an optional extra (``graphfeed[pyg]``), imported when a model is built.
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import nn
import torch.nn.functional as F

from .errors import MissingDependencyError
from .sampling.base import Block

__all__ = ["BlockGNN", "GraphSAGE", "GCN", "GAT", "MLP", "build_model", "MODEL_NAMES"]

MODEL_NAMES = ("sage", "gcn", "gat")


def _pyg_nn():
    try:
        import torch_geometric.nn as pyg_nn
    except ImportError:
        raise MissingDependencyError("torch_geometric", "pyg", "graphfeed's GNN models") from None
    return pyg_nn


class BlockGNN(nn.Module):
    """``convs[i]`` on ``blocks[i]``, with ``norms[i]`` (or none), ``activation`` and dropout
    between layers."""

    def __init__(self, convs: Sequence[nn.Module], norms: Sequence[nn.Module] = (), *,
                 dropout: float = 0.5, activation: Callable = F.relu, input_dropout: bool = False):
        super().__init__()
        if not convs:
            raise ValueError("a GNN needs at least one layer")
        if norms and len(norms) != len(convs) - 1:
            raise ValueError(f"one norm between each two layers: {len(convs) - 1}, got {len(norms)}")
        self.convs = nn.ModuleList(convs)
        self.norms = nn.ModuleList(norms)
        self.dropout = dropout
        self.activation = activation
        self.input_dropout = input_dropout

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        from .trainer.adapter import apply_conv

        if len(blocks) != len(self.convs):
            raise ValueError(f"the model has {len(self.convs)} layers but the batch {len(blocks)} blocks")
        if self.input_dropout:
            x = F.dropout(x, p=self.dropout, training=self.training)
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = apply_conv(conv, x, block)
            if i < len(self.convs) - 1:
                if self.norms:
                    x = self.norms[i](x)
                x = self.activation(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x


def _dims(in_dim: int, hidden: int, out_dim: int, num_layers: int) -> list[int]:
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    return [in_dim] + [hidden] * (num_layers - 1) + [out_dim]


def GraphSAGE(in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5) -> BlockGNN:
    """Mean-aggregation GraphSAGE: bipartite ``SAGEConv`` per block, LayerNorm + ReLU + dropout
    between layers."""
    pyg = _pyg_nn()
    d = _dims(in_dim, hidden, out_dim, num_layers)
    convs = [pyg.SAGEConv(d[i], d[i + 1]) for i in range(num_layers)]
    norms = [nn.LayerNorm(hidden) for _ in range(num_layers - 1)]
    return BlockGNN(convs, norms, dropout=dropout)


def GCN(in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5) -> BlockGNN:
    """Kipf & Welling's GCN: ``GCNConv`` (self-loops, symmetric normalisation) on each block's
    union node set, ReLU and dropout (also on the input features) between layers."""
    pyg = _pyg_nn()
    d = _dims(in_dim, hidden, out_dim, num_layers)
    convs = [pyg.GCNConv(d[i], d[i + 1]) for i in range(num_layers)]
    return BlockGNN(convs, dropout=dropout, input_dropout=True)


def GAT(in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float = 0.5,
        heads: int = 8) -> BlockGNN:
    """Veličković et al.'s GAT: bipartite ``GATConv``; hidden layers concatenate ``heads`` heads
    of ``hidden // heads`` features, the output layer has one head; ELU and dropout between
    layers, dropout on the input features and on the attention coefficients."""
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    pyg = _pyg_nn()
    convs = []
    dim = in_dim
    for i in range(num_layers):
        last = i == num_layers - 1
        convs.append(pyg.GATConv(dim, out_dim if last else hidden // heads, heads=1 if last else heads,
                                 concat=not last, dropout=dropout))
        dim = hidden
    return BlockGNN(convs, dropout=dropout, activation=F.elu, input_dropout=True)


def build_model(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int, *,
                dropout: float = 0.5, heads: int = 8) -> BlockGNN:
    """The ``--model`` names: ``sage``, ``gcn``, ``gat``."""
    if name == "sage":
        return GraphSAGE(in_dim, hidden, out_dim, num_layers, dropout)
    if name == "gcn":
        return GCN(in_dim, hidden, out_dim, num_layers, dropout)
    if name == "gat":
        return GAT(in_dim, hidden, out_dim, num_layers, dropout, heads)
    raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")


def parameter_count(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int) -> int:
    """About how many parameters :func:`build_model` makes (an upper bound within a few
    percent), computed without allocating them."""
    d = _dims(in_dim, hidden, out_dim, num_layers)
    per_layer = 2 if name == "sage" else 1  # SAGEConv: a root and a neighbour weight
    total = sum(per_layer * d[i] * d[i + 1] + 4 * d[i + 1] for i in range(num_layers))
    return total + 2 * hidden * (num_layers - 1)


class MLP(nn.Module):
    """The baseline: the same width and depth, but each node sees only its own features."""

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5):
        super().__init__()
        dims = _dims(in_dim, hidden, out_dim, num_layers)
        self.lins = nn.ModuleList(nn.Linear(dims[i], dims[i + 1]) for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, lin in enumerate(self.lins):
            x = lin(x)
            if i < len(self.lins) - 1:
                x = F.relu(x)
                x = F.dropout(x, p=self.dropout, training=self.training)
        return x
