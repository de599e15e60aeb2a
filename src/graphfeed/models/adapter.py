"""Run PyG models on graphfeed mini-batches without glue.

A ``MiniBatch`` holds one ``Block`` per layer (``graphfeed.sampling.base``): ``blocks[i].edge_index``
(int64 ``(2, E_i)``, row 0 sources, row 1 destinations) in local ids, where the destinations are
the first ``num_dst`` sources. Consecutive blocks nest: ``blocks[i + 1].src_nodes`` is a prefix of
``blocks[i].src_nodes``, so every block's local ids are positions in one node list,
``n_id = batch.input_nodes`` (seeds first, then the nodes each hop adds). Three ways in:

1. **Per-layer** (models that take one ``edge_index`` per layer): :func:`to_adjs` gives the
   ``[(edge_index, e_id, size), ...]`` list of PyG's ``NeighborSampler`` (outermost layer first,
   ``size = (num_src, num_dst)``), so code written for it runs unchanged; :class:`LayerwiseModel`
   wraps such a model for :func:`graphfeed.train`. :func:`apply_conv` runs any PyG convolution on
   one block.
2. **Stock models** (``torch_geometric.nn.models.GraphSAGE`` / ``GCN`` / ``GAT``, or anything
   called as ``model(x, edge_index)``): :func:`to_data` gives a PyG ``Data`` shaped like
   ``NeighborLoader``'s output: ``x`` over ``n_id``, ONE ``edge_index`` over ``n_id`` in which each
   node's in-edges appear once (taken from the layer that first reaches the node, so seeds keep
   ``fanouts[-1]`` neighbours, hop-1 nodes ``fanouts[-2]``, ...; no duplicates), ordered by hop,
   with ``batch_size``, ``n_id``, ``num_sampled_nodes`` / ``num_sampled_edges`` per hop (PyG's
   ``trim_to_layer`` input) and ``y`` for the seeds. :class:`StockModel` wraps such a model:
   ``forward(x, blocks)`` returns the seeds' rows.
3. The reference models of :mod:`graphfeed.models.gnn` (``--model sage|gcn|gat``) use
   :func:`apply_conv`.

Bipartite input: a PyG convolution that declares ``x`` as ``Union[Tensor, PairTensor]`` (SAGEConv,
GraphConv, GATConv, GATv2Conv, GINConv, GINEConv, TransformerConv, ResGatedGraphConv, GENConv,
GeneralConv, FiLMConv, MFConv, LEConv, CGConv, NNConv, SplineConv, GMMConv, EdgeConv, ...) gets
``(x_src, x_dst)`` and returns only the ``num_dst`` destination rows. The others (GCNConv, ChebConv,
SGConv, GCN2Conv, APPNP, TAGConv, ARMAConv, ClusterGCNConv, ...) refuse a pair; for them
:func:`apply_conv` runs the layer on the union node set (the block's ``num_src`` sources, which
include the destinations as their prefix) over the block's edges and keeps the first ``num_dst``
rows. For GCNConv that normalises with in-block degrees (a source that is not a destination has
degree 1 from its self-loop), as any sampled GCN does.
"""

from __future__ import annotations

import inspect
from typing import Callable, NamedTuple, Optional, Sequence

import torch
from torch import nn

from ..errors import MissingDependencyError
from ..sampling.base import Block, MiniBatch

__all__ = [
    "Adj", "to_adjs", "accepts_bipartite", "apply_conv", "hop_edge_index", "to_data",
    "StockModel", "LayerwiseModel",
]


class Adj(NamedTuple):
    """One layer, as PyG's ``NeighborSampler`` yields it: ``edge_index`` (2, E) local ids,
    ``e_id`` (positions in the graph's edge array, or ``None``), ``size = (num_src, num_dst)``."""

    edge_index: torch.Tensor
    e_id: Optional[torch.Tensor]
    size: tuple


def _blocks(batch_or_blocks) -> Sequence[Block]:
    return batch_or_blocks.blocks if isinstance(batch_or_blocks, MiniBatch) else batch_or_blocks


def to_adjs(batch_or_blocks) -> list[Adj]:
    """Per-layer ``Adj`` tuples in the order a model applies them (``blocks[0]`` first)."""
    return [Adj(b.edge_index, b.edge_ids, b.size) for b in _blocks(batch_or_blocks)]


_BIPARTITE: dict[type, bool] = {}


def accepts_bipartite(conv: nn.Module) -> bool:
    """Whether ``conv.forward`` declares a ``(x_src, x_dst)`` pair for its first argument
    (``PairTensor`` / ``OptPairTensor`` in PyG's annotations). Cached per class."""
    cls = type(conv)
    if cls not in _BIPARTITE:
        try:
            params = list(inspect.signature(cls.forward).parameters.values())
        except (TypeError, ValueError):
            params = []
        ann = str(params[1].annotation) if len(params) > 1 else ""
        _BIPARTITE[cls] = any(t in ann for t in ("Tuple", "tuple", "PairTensor"))
    return _BIPARTITE[cls]


def apply_conv(conv: nn.Module, x: torch.Tensor, block: Block, *, bipartite: Optional[bool] = None,
               **kwargs) -> torch.Tensor:
    """``conv`` on one block: ``x`` holds the block's ``num_src`` source rows, the result its
    ``num_dst`` destination rows. ``bipartite=None`` asks :func:`accepts_bipartite`; ``False``
    forces the union-node-set path (see the module docstring)."""
    if x.shape[0] != block.num_src:
        raise ValueError(f"x has {x.shape[0]} rows but the block has {block.num_src} source nodes")
    if bipartite is None:
        bipartite = accepts_bipartite(conv)
    if bipartite:
        return conv((x, x[: block.num_dst]), block.edge_index, **kwargs)
    return conv(x, block.edge_index, **kwargs)[: block.num_dst]


def hop_edge_index(batch_or_blocks):
    """``(edge_index, num_sampled_nodes, num_sampled_edges)``: one edge set over ``n_id``, each
    destination's in-edges taken once from the first (outermost-from-the-seeds) block that samples
    it, ordered by hop; per-hop node and edge counts as PyG's ``NeighborLoader`` reports them."""
    blocks = list(_blocks(batch_or_blocks))
    if not blocks:
        raise ValueError("a mini-batch without blocks has no edges")
    parts, edges, nodes = [], [], [blocks[-1].num_dst]
    prev = 0  # destinations below this were taken from a later block
    for i in range(len(blocks) - 1, -1, -1):
        b = blocks[i]
        ei = b.edge_index
        if prev:
            ei = ei[:, ei[1] >= prev]
        parts.append(ei)
        edges.append(int(ei.shape[1]))
        nodes.append(b.num_src - b.num_dst)  # the sources this hop adds
        prev = b.num_dst
    return torch.cat(parts, dim=1), nodes, edges


def _data_cls():
    try:
        from torch_geometric.data import Data
    except ImportError:
        raise MissingDependencyError("torch_geometric", "pyg", "graphfeed's PyG adapter") from None
    return Data


def to_data(batch: MiniBatch, x: Optional[torch.Tensor] = None):
    """A ``torch_geometric.data.Data`` like ``NeighborLoader``'s for this batch (module docstring):
    ``x`` (``batch.x`` unless given, e.g. converted to float), ``edge_index``, ``n_id``,
    ``batch_size``, ``num_sampled_nodes``, ``num_sampled_edges``, ``y`` (the seeds' labels,
    ``batch_size`` rows; ``None`` without labels)."""
    edge_index, nodes, edges = hop_edge_index(batch)
    return _data_cls()(
        x=batch.x if x is None else x,
        edge_index=edge_index,
        y=batch.labels,
        n_id=batch.input_nodes,
        batch_size=int(batch.seeds.shape[0]),
        num_sampled_nodes=nodes,
        num_sampled_edges=edges,
    )


# ``trim_to_layer`` drops, before layer ``i``, the nodes of the ``i`` outermost hops and the edges
# into the hops that can no longer reach the seeds. A node that still matters keeps every
# in-edge, so a layer whose output at a node reads only that node's in-edges (mean, sum, max,
# attention: SAGEConv, GINConv, GATConv, PNAConv, EdgeConv) gives the seeds the same result.
# These modules read more than that, so trimming changes the seeds' output:
#: convolutions that normalise an edge by the degrees of both its ends (``gcn_norm`` and the
#: like): the outermost kept hop loses its in-edges, hence its degrees, hence the scale of every
#: message it sends (GCN on the ``tiny`` dataset: differences up to 2 and more); class name ->
#: the attribute that turns the normalisation on (``None``: always on)
_DEGREE_NORMALISED = {
    "GCNConv": "normalize", "GCN2Conv": "normalize", "TAGConv": "normalize",
    "APPNP": "normalize", "LGConv": "normalize", "FAConv": "normalize", "DNAConv": "normalize",
    "SGConv": None, "SSGConv": None, "ChebConv": None, "ARMAConv": None, "MixHopConv": None,
    "EGConv": None,
}
#: normalisations whose statistics run over every node they are given (PyG's ``LayerNorm`` in
#: its default ``mode="graph"``, ``GraphNorm``, ...): fewer nodes, other statistics; class
#: name -> ``(attribute, value)`` that selects that behaviour, or ``None``: always
_NODE_SET_NORMS = {
    "LayerNorm": ("mode", "graph"), "GraphNorm": None, "PairNorm": None,
    "MeanSubtractionNorm": None, "GraphSizeNorm": None,
}


def _pyg_class(module: nn.Module) -> Optional[str]:
    """The name of ``module``'s class when it is one of PyG's (a user subclass counts too)."""
    for cls in type(module).__mro__:
        if cls.__module__.startswith("torch_geometric."):
            return cls.__name__
    return None


def _trim_changes(module: nn.Module) -> Optional[str]:
    """Why trimming changes ``module``'s output whatever its mode, or ``None``."""
    name = _pyg_class(module)
    if name in _DEGREE_NORMALISED:
        attr = _DEGREE_NORMALISED[name]
        if attr is None or getattr(module, attr, True):
            return ("normalises each edge by the degrees of both its ends, and trimming removes "
                    "the in-edges of the outermost hop it keeps")
    if name in _NODE_SET_NORMS:
        sel = _NODE_SET_NORMS[name]
        if sel is None or getattr(module, sel[0], None) == sel[1]:
            return "normalises over every node it is given, and trimming gives it fewer"
    return None


def _batch_statistics(module: nn.Module) -> bool:
    """Batch and instance norms: statistics of the nodes given while training (or always,
    without running statistics); in evaluation with running statistics they are per node."""
    from torch.nn.modules.batchnorm import _BatchNorm
    from torch.nn.modules.instancenorm import _InstanceNorm

    return isinstance(module, (_BatchNorm, _InstanceNorm)) and (
        module.training or not module.track_running_stats)


class StockModel(nn.Module):
    """Wraps a model called as ``model(x, edge_index)`` (PyG's ``BasicGNN`` family and most user
    models) so it takes ``(x, blocks)`` like graphfeed's models: it builds :func:`hop_edge_index`
    and returns the seeds' rows. ``trim=True`` also passes ``num_sampled_nodes_per_hop`` /
    ``num_sampled_edges_per_hop`` (``BasicGNN``'s ``trim_to_layer``: each layer skips the hops it
    cannot reach the seeds from; same output, less work).

    Same output only for layers that read nothing but a node's in-edges (SAGEConv, GINConv,
    GATConv, PNAConv, ...). ``trim=True`` is refused (``ValueError``) for a model holding a
    layer whose result trimming changes: a graph-normalised convolution (``GCNConv`` with
    ``normalize=True``, and the other ``gcn_norm`` users: PyG's ``GCN`` among them) or a
    normalisation over all nodes (PyG's ``LayerNorm`` in ``mode="graph"``, ``GraphNorm``, ...);
    and a batch or instance norm that uses the batch's statistics (training, or no running
    statistics) fails the forward pass. Use ``trim=False`` for those."""

    def __init__(self, model: nn.Module, *, trim: bool = False):
        super().__init__()
        self.model = model
        self.trim = bool(trim)
        if self.trim:
            for path, m in model.named_modules():
                why = _trim_changes(m)
                if why is not None:
                    raise ValueError(_trim_refusal(path, m, why))

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        edge_index, nodes, edges = hop_edge_index(blocks)
        if self.trim:
            for path, m in self.model.named_modules():
                if _batch_statistics(m):
                    raise ValueError(_trim_refusal(
                        path, m, "normalises with the statistics of the nodes it is given "
                                 "(training, or no running statistics), and trimming gives it "
                                 "fewer"))
            out = self.model(x, edge_index, num_sampled_nodes_per_hop=nodes,
                             num_sampled_edges_per_hop=edges)
        else:
            out = self.model(x, edge_index)
        return out[: blocks[-1].num_dst]


class LayerwiseModel(nn.Module):
    """Wraps a model called as ``model(x, adjs)`` with PyG ``NeighborSampler``-style per-layer
    ``adjs`` (:func:`to_adjs`) so it takes ``(x, blocks)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        return self.model(x, to_adjs(blocks))


def _trim_refusal(path: str, module: nn.Module, why: str) -> str:
    return (f"StockModel(trim=True): {path or 'the model'} ({type(module).__name__}) {why}, so "
            f"the seeds' output would change; use trim=False (the same model on the whole "
            f"sampled subgraph)")


#: what ``graphfeed.train(cfg, model=...)`` accepts: ``factory(in_dim, num_classes)`` returning
#: a module called as ``module(x, blocks)``
ModelFactory = Callable[[int, int], nn.Module]
