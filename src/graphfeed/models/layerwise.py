"""Layer-wise inference's math, beside the models it reproduces: a layer computed for whole
tables of nodes from CSR in-edges, exactly as the model's forward computes it on a block with
every neighbour.

:func:`layer_math` gives, for a model, what ``graphfeed.trainer.layerwise.LayerwiseEvaluator``
asks of it: the node types whose inputs layer 0 reads and how (:meth:`LayerMath.input_rows`),
then per layer a :class:`Layer`: the destination types it computes, the relations into each,
each relation's source table (the inputs themselves, or projected first) and the output of a
batch of destinations from its in-edges per relation. Two models have it:

- a ``BlockGNN`` (``models.gnn``) whose layers are the reference convolutions (the *direct*
  layers: mean ``SAGEConv``, the graph-normalised ``GCNConv``, ``GATConv``; :func:`direct_layer`)
  over an untyped graph: one node type and one relation, both ``None``; a layer without a direct
  form is ``None`` (the evaluator runs it through sampled blocks);
- graphfeed's ``HeteroRGCN`` (``models.rgcn``) over a typed graph: its own pieces
  (``input_rows``, ``relation_source``, ``layer_output``) per node type and relation.

The sums over in-edges (:func:`aggregate`) read only the rows the edges name: the numba kernel
:func:`._kernels.csr_sum_rows` on the host (row ranges over the evaluator's threads, GIL
released; imported when first summed, so importing this module loads no numba), sparse
x dense products on a GPU. Where a layer's output is narrower than its input, the source table
holds the input already multiplied by the neighbours' weight (aggregation is linear:
``W mean(x_u) == mean(W x_u)`` up to rounding).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

__all__ = ["Edges", "Layer", "LayerMath", "Threads", "aggregate", "direct_layer", "layer_math",
           "layerwise_refusal", "model_inputs", "take_rows", "unwrap"]


def take_rows(table, rows: np.ndarray):
    """``table[rows]`` for strictly increasing ``rows``: a view when they are consecutive (a
    batch of a table over every node), else one ``index_select``; on ``table``'s device."""
    import torch

    k = int(rows.shape[0])
    if k and int(rows[-1]) - int(rows[0]) + 1 == k:
        return table[int(rows[0]):int(rows[0]) + k]
    idx = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(table.device)
    return table.index_select(0, idx)



@dataclass
class Edges:
    """One batch of destinations and their in-edges as CSR rows (host arrays): ``dst`` int64
    global ids ``(n,)`` and ``dst_rows`` their rows in the source table; ``crow`` int64
    ``(n + 1,)``; ``col`` the sources' global ids ``(E,)`` and ``src_rows`` their rows."""

    dst: np.ndarray
    dst_rows: np.ndarray
    crow: np.ndarray
    col: np.ndarray
    src_rows: np.ndarray

    @property
    def degrees(self) -> np.ndarray:
        return np.diff(self.crow)

    def targets(self, device):
        """int64 ``(E,)`` on ``device``: each edge's destination position ``0 .. n - 1``."""
        import torch

        deg = torch.from_numpy(self.degrees).to(device)
        return torch.repeat_interleave(torch.arange(deg.shape[0], device=device), deg)



def _row_ranges(crow: np.ndarray, parts: int) -> list:
    """``[(start, stop), ...]``: the rows of a CSR cut into at most ``parts`` consecutive ranges
    of about equal edge counts (none empty)."""
    n = crow.shape[0] - 1
    cuts = np.searchsorted(crow, np.linspace(0, int(crow[-1]), parts + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True)
class Threads:
    """Where a host aggregation runs: ``parts`` row ranges on ``executor`` (the evaluator's
    threads; the kernel releases the GIL), or inline when ``executor`` is ``None``."""

    executor: Optional[object] = None
    parts: int = 1


def aggregate(edges: Edges, table, values=None, width: Optional[int] = None,
               threads: Threads = Threads()):
    """``out[v] = sum over v's in-edges e of values[e] * table[src_rows[e], :width]`` on
    ``table``'s device, float32 ``(n, width)`` there (``width`` default: the table's).
    ``values``: float32 ``(E,)``, or ``(E, H)`` for one weight per block of ``width // H``
    columns, or ``None`` (every weight 1). Reads only the rows the edges name: on the host
    ``_kernels.csr_sum_rows`` (row ranges split over ``threads``), elsewhere
    :func:`_sparse_sum_rows`."""
    import torch

    from ._kernels import csr_sum_rows

    width = table.shape[1] if width is None else int(width)
    if values is not None and values.dim() == 1:
        values = values[:, None]
    if table.device.type != "cpu":
        return _sparse_sum_rows(edges, table, values, width)
    assert table.dtype == torch.float32 and table.is_contiguous()
    n = edges.dst.shape[0]
    out = torch.zeros((n, width), dtype=torch.float32)
    w = np.zeros((0, 0), np.float32) if values is None else values.contiguous().numpy()
    args = (edges.crow, edges.src_rows, w, table.numpy(), out.numpy())
    ranges = _row_ranges(edges.crow, threads.parts) if n else []
    if threads.executor is None or len(ranges) < 2:
        csr_sum_rows(*args, 0, n)
    else:
        for f in [threads.executor.submit(csr_sum_rows, *args, a, b) for a, b in ranges]:
            f.result()
    return out


def _sparse_sum_rows(edges: Edges, table, values, width: int):
    """:func:`_aggregate` as CSR x dense products on ``table``'s device (one per block of
    columns that ``values`` ``(E, H)`` weighs, one in all when ``values`` is ``None``)."""
    import torch

    dev = table.device
    n = edges.dst.shape[0]
    if edges.src_rows.shape[0] == 0:  # no in-edge in the batch
        return torch.zeros((n, width), dtype=table.dtype, device=dev)
    col = torch.from_numpy(np.ascontiguousarray(edges.src_rows)).to(dev)
    crow = torch.from_numpy(edges.crow).to(dev)
    if col.dtype != crow.dtype:  # int32 sources (a graph slice): narrow the offsets
        assert int(edges.crow[-1]) < 2 ** 31
        crow = crow.to(col.dtype)
    heads = 1 if values is None else values.shape[1]
    c = width // heads
    parts = []
    for h in range(heads):
        vals = (torch.ones(col.shape[0], dtype=table.dtype, device=dev) if values is None
                else values[:, h].contiguous().to(dev))
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            a = torch.sparse_csr_tensor(crow, col, vals, size=(n, table.shape[0]),
                                        check_invariants=False)
        parts.append(a @ table[:, h * c:(h + 1) * c].contiguous())
    return parts[0] if heads == 1 else torch.cat(parts, dim=1)



class _DirectLayer:
    """One convolution computed from a source table (module docstring). ``project``: whether
    the table holds projected rows; ``width``: its row width."""

    project: bool
    width: int

    def source(self, x):
        """The source-table rows of input rows ``x`` (float32 ``(k, in_width)``)."""
        raise NotImplementedError

    def prepare(self, table):
        """What :meth:`output` reads, from the complete source table (once a layer)."""
        return table

    def output(self, edges: Edges, prepared, read_input: Callable):
        """The convolution's output ``(n, out)`` for the destinations of ``edges``, on the
        model's device; ``read_input(ids)`` gives layer inputs (sorted node ids)."""
        raise NotImplementedError


class _SageMeanLayer(_DirectLayer):
    """``SAGEConv`` with mean aggregation: ``lin_l(mean_u x_u) + lin_r(x_v)`` (then L2
    normalisation if the layer has it). Projects first (the source table holds ``x_u W_l^T``)
    when the output is narrower than the input; ``lin_r`` then reads the destinations' inputs
    again (``read_input``)."""

    def __init__(self, conv, in_width: int, threads: Threads):
        self.conv, self.threads = conv, threads
        out = int(conv.lin_l.weight.shape[0])
        self.project = in_width > out
        self.width = out if self.project else in_width

    def source(self, x):
        import torch.nn.functional as F

        return F.linear(x, self.conv.lin_l.weight) if self.project else x

    def output(self, edges: Edges, table, read_input: Callable):
        import torch
        import torch.nn.functional as F

        conv = self.conv
        dev = conv.lin_l.weight.device
        deg = torch.from_numpy(edges.degrees).to(dev).clamp_(min=1).to(torch.float32)
        out = aggregate(edges, table, threads=self.threads).to(dev).div_(deg[:, None])
        if not self.project:
            out = conv.lin_l(out)
        elif conv.lin_l.bias is not None:
            out = out.add_(conv.lin_l.bias)
        if conv.root_weight:
            x_dst = read_input(edges.dst) if self.project else take_rows(table, edges.dst_rows)
            out = out.addmm_(x_dst.to(dev), conv.lin_r.weight.t())
        if conv.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out


class _GCNLayer(_DirectLayer):
    """The graph-normalised ``GCNConv`` (``models.gnn._GraphNormGCN``) with every in-edge:
    ``b + sum_u (x_u W) / sqrt((d_u + 1)(d_v + 1)) + (x_v W) / (d_v + 1)`` with the model's
    degrees ``d``. Aggregates at the narrower of the input and output widths."""

    def __init__(self, conv, in_degrees, in_width: int, threads: Threads):
        self.conv, self.threads = conv, threads
        self.in_degrees = in_degrees  # float32 (num_nodes,), the model's buffer
        out = int(conv.lin.weight.shape[0])
        self.project = in_width > out
        self.width = out if self.project else in_width

    def source(self, x):
        return self.conv.lin(x) if self.project else x

    def prepare(self, table):
        self._deg = self.in_degrees.to(table.device)
        self._inv = (self._deg + 1).rsqrt()
        return table

    def output(self, edges: Edges, table, read_input: Callable):
        import torch

        conv = self.conv
        dev, tdev = conv.lin.weight.device, table.device
        deg, inv = self._deg, self._inv
        col = torch.from_numpy(np.ascontiguousarray(edges.col)).to(tdev).to(torch.int64)
        dst = torch.from_numpy(edges.dst).to(tdev)
        # the model's edge weight is (d_v / k_v) inv_u inv_v: k_v = d_v with every in-edge
        w = inv.index_select(0, col) * inv.index_select(0, dst)[edges.targets(tdev)]
        loop = (1.0 / (deg.index_select(0, dst) + 1))[:, None]
        out = aggregate(edges, table, w, threads=self.threads)
        out = out.add_(take_rows(table, edges.dst_rows) * loop).to(dev)
        if not self.project:
            out = conv.lin(out)
        return out if conv.bias is None else out.add_(conv.bias)


class _GATLayer(_DirectLayer):
    """``GATConv`` with one weight for sources and destinations and neither edge features nor a
    residual: the source table holds ``lin(x)`` (heads x channels) and each row's two attention
    logits per head; a destination attends over its in-edges (and itself when the layer adds
    self-loops, after dropping existing ones, as ``GATConv`` does)."""

    def __init__(self, conv, threads: Threads):
        self.conv, self.threads = conv, threads
        self.heads, self.channels = int(conv.heads), int(conv.out_channels)
        self.project = True
        self.width = self.heads * self.channels + 2 * self.heads

    def source(self, x):
        import torch

        conv, h, c = self.conv, self.heads, self.channels
        p = conv.lin(x)
        v = p.view(-1, h, c)
        return torch.cat([p, (v * conv.att_src).sum(-1), (v * conv.att_dst).sum(-1)], dim=1)

    def prepare(self, table):
        """The table, and its two logit columns as contiguous ``(rows, heads)`` tensors."""
        h, c = self.heads, self.channels
        return table, table[:, h * c:h * c + h].contiguous(), table[:, h * c + h:].contiguous()

    def output(self, edges: Edges, prepared, read_input: Callable):
        import torch
        import torch.nn.functional as F

        conv, h, c = self.conv, self.heads, self.channels
        table, a_src, a_dst = prepared
        tdev, dev = table.device, conv.lin.weight.device
        n = edges.dst.shape[0]
        if conv.add_self_loops:  # GATConv drops the graph's self-loops, then adds its own
            at = np.repeat(np.arange(n), edges.degrees)
            keep = edges.col != edges.dst[at]
            if not keep.all():
                crow = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(np.bincount(at[keep], minlength=n), out=crow[1:])
                edges = Edges(edges.dst, edges.dst_rows, crow, edges.col[keep],
                               edges.src_rows[keep])
        tgt = edges.targets(tdev)
        src = torch.from_numpy(np.asarray(edges.src_rows, dtype=np.int64)).to(tdev)
        dst_logit = take_rows(a_dst, edges.dst_rows)  # (n, heads)
        e = a_src.index_select(0, src).add_(dst_logit.index_select(0, tgt))
        e = F.leaky_relu(e, conv.negative_slope)  # (E, heads)
        if conv.add_self_loops:
            e_self = F.leaky_relu(take_rows(a_src, edges.dst_rows) + dst_logit, conv.negative_slope)
            top = e_self.clone()
        else:
            top = torch.full((n, h), float("-inf"), device=tdev)
        top.scatter_reduce_(0, tgt[:, None].expand(-1, h), e, "amax")
        ex = e.sub_(top.index_select(0, tgt)).exp_()
        total = torch.zeros((n, h), device=tdev).index_add_(0, tgt, ex)
        if conv.add_self_loops:
            ex_self = (e_self - top).exp_()
            total.add_(ex_self)
        total.add_(1e-16)  # torch_geometric.utils.softmax's guard
        alpha = ex.div_(total.index_select(0, tgt))
        out = aggregate(edges, table, alpha, width=h * c, threads=self.threads).view(n, h, c)
        if conv.add_self_loops:
            own = take_rows(table, edges.dst_rows)[:, :h * c].reshape(n, h, c)
            out = out.add_(own * (ex_self / total)[:, :, None])
        out = out.to(dev)
        out = out.reshape(n, h * c) if conv.concat else out.mean(dim=1)
        return out if conv.bias is None else out + conv.bias


def _has_forward_hooks(module) -> bool:
    """Whether forward (or PyG propagate / message / edge-update) hooks are registered on
    ``module``: a direct layer would skip them, so such a layer runs through blocks."""
    from torch.nn.modules import module as torch_module

    if (getattr(torch_module, "_global_forward_hooks", None)
            or getattr(torch_module, "_global_forward_pre_hooks", None)):
        return True
    return any(isinstance(v, dict) and v for k, v in vars(module).items()
               if k.endswith("hooks") and "forward" in k)


def direct_layer(net, i: int, in_width: int, threads: Threads = Threads()):
    """The direct computation of layer ``i`` of ``net`` (module docstring) given its input
    width, or ``None`` when the layer runs through blocks: only the reference models' exact
    classes (``BlockGNN`` with ``SAGEConv`` mean / ``GATConv``, the graph-normalised GCN) and
    configurations, so a subclass or an option this module does not reproduce keeps the
    model's own code."""
    from .gnn import BlockGNN, _GraphNormGCN as GraphNormGCN

    try:
        from torch_geometric.nn import GATConv, GCNConv, SAGEConv
        from torch_geometric.nn.aggr import MeanAggregation, SumAggregation
    except ImportError:
        return None
    conv = net.convs[i]
    if any(_has_forward_hooks(m) for m in conv.modules()) or getattr(conv, "_explain", None):
        return None
    if type(net) is BlockGNN:
        if (type(conv) is SAGEConv and not conv.project
                and type(conv.aggr_module) is MeanAggregation):
            return _SageMeanLayer(conv, in_width, threads)
        if (type(conv) is GATConv and getattr(conv, "lin", None) is not None
                and getattr(conv, "lin_edge", None) is None
                and getattr(conv, "res", None) is None
                and type(conv.aggr_module) is SumAggregation):
            return _GATLayer(conv, threads)
    elif type(net) is GraphNormGCN:
        if (type(conv) is GCNConv and not conv.normalize
                and type(conv.aggr_module) is SumAggregation):
            return _GCNLayer(conv, net.in_degrees, in_width, threads)
    return None




def unwrap(model):
    """The module inside a DistributedDataParallel wrapper, else ``model``."""
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


def model_inputs(model, batch):
    """What ``model`` takes first from ``batch``: the stored rows, any dtype, for a model
    that widens them itself (``reads_stored_rows``: the built-in GNNs and the link predictor
    over one); else ``batch.inputs`` (float32 rows, or a typed batch's ``x_dict``)."""
    if batch.is_typed or not getattr(unwrap(model), "reads_stored_rows", False):
        return batch.inputs
    return batch.x


def supports_layerwise(model) -> bool:
    """Whether layer-wise inference computes exactly what ``model``'s forward does with every
    neighbour (:func:`layerwise_refusal` is ``None``)."""
    return layerwise_refusal(model) is None


def layerwise_refusal(model) -> Optional[str]:
    """Why layer-wise inference would not compute what ``model``'s forward does with every
    neighbour (``None``: it would): graphfeed's own ``HeteroRGCN`` (not a subclass, whose
    forward may differ) without forward hooks, or a ``BlockGNN`` whose every layer depends only
    on its destinations' in-edges (``layerwise_exact``). A DDP wrapper is looked through."""
    from .gnn import BlockGNN
    from .rgcn import HeteroRGCN

    net = unwrap(model)
    if isinstance(net, HeteroRGCN):
        if type(net) is HeteroRGCN and not _has_forward_hooks(net):
            return None
        return f"{type(net).__name__} is not graphfeed's HeteroRGCN without forward hooks"
    if isinstance(net, BlockGNN) and net.layerwise_exact:
        return None
    return (f"model {type(net).__name__} is not a graphfeed BlockGNN whose every layer depends "
            f"only on its destinations' in-edges (layerwise_exact)")


# ---------------------------------------------------------------------------- per model
class Layer:
    """One layer of a model for whole tables (module docstring).

    - ``types``: the node types it computes outputs for; :meth:`relations` the relations into
      a type (in the order the model sums them), each from node type ``rel[0]`` (``None`` for
      an untyped graph's one relation);
    - :meth:`projects`: whether a relation's source table holds rows computed from the inputs
      (:meth:`source`, :attr:`width`) rather than the inputs themselves; :meth:`prepare` what
      :meth:`output` reads from a complete table;
    - :meth:`output`: a batch of destinations ``ids`` (sorted global ids) of one type from its
      in-edges per relation (``edges``: relation -> :class:`Edges`; ``tables``: relation ->
      prepared table) and ``read_input(ids)``, the layer's input rows of node ids (sorted).
    """

    types: tuple = (None,)

    def relations(self, t) -> tuple:
        return (None,)

    def projects(self, rel) -> bool:
        raise NotImplementedError

    def width(self, rel) -> int:
        raise NotImplementedError

    def source(self, rel, x):
        raise NotImplementedError

    def prepare(self, rel, table):
        return table

    def output(self, t, ids, edges: dict, tables: dict, read_input: Callable):
        raise NotImplementedError


class _Direct(Layer):
    """A ``BlockGNN`` layer computed directly (:func:`direct_layer`), then ended as the model
    ends a layer (``finish_layer``: residual, norm, activation)."""

    def __init__(self, net, i: int, layer):
        self.net, self.i, self.layer = net, i, layer

    def projects(self, rel) -> bool:
        return self.layer.project

    def width(self, rel) -> int:
        return self.layer.width

    def source(self, rel, x):
        return self.layer.source(x)

    def prepare(self, rel, table):
        return self.layer.prepare(table)

    def output(self, t, ids, edges: dict, tables: dict, read_input: Callable):
        y = self.layer.output(edges[None], tables[None], read_input)
        return self.net.finish_layer(self.i, y, lambda: read_input(ids)).float()


class _RGCNLayer(Layer):
    """Layer ``i`` of a ``HeteroRGCN``: per destination type, ``W_root x + sum over relations
    of W_r mean(h_src)`` (the mean of a relation without in-edges zero), from the model's own
    ``relation_source`` / ``layer_output``."""

    def __init__(self, net, i: int, threads: "Threads"):
        self.net, self.i, self.threads = net, i, threads
        self.types = tuple(net.layer_types(i))

    def relations(self, t) -> tuple:
        return tuple(self.net.layer_relations(self.i, t))

    def projects(self, rel) -> bool:
        return self.net.projects_first(self.i)

    def width(self, rel) -> int:
        return int(self.net.rel[self.i][self.net._key(rel)].out_features)

    def source(self, rel, x):
        return self.net.relation_source(self.i, rel, x)

    def output(self, t, ids, edges: dict, tables: dict, read_input: Callable):
        import torch

        x_dst = read_input(ids)
        means = {}
        for rel, e in edges.items():
            total = aggregate(e, tables[rel], threads=self.threads)
            deg = torch.from_numpy(e.degrees).to(total.device).clamp_(min=1)
            means[rel] = total.div_(deg.to(torch.float32)[:, None]).to(x_dst.device)
        return self.net.layer_output(self.i, t, x_dst, means,
                                     projected=self.projects(None)).float()


class LayerMath:
    """What layer-wise inference asks of a model (module docstring): ``num_layers``,
    ``input_types`` (the node types layer 0 reads), :meth:`input_rows` and :meth:`layer`."""

    def __init__(self, net, threads: "Threads"):
        from .rgcn import HeteroRGCN

        self.net, self.threads = net, threads
        self.typed = isinstance(net, HeteroRGCN)
        self.num_layers = int(net.num_layers)
        self.input_types = tuple(net.input_types) if self.typed else (None,)

    @property
    def input_width(self) -> Optional[int]:
        """The width of layer 0's input rows when the model computes them (the R-GCN's
        projections); ``None`` when they are the stored features themselves."""
        return int(self.net.hidden) if self.typed else None

    def reads_features(self, t) -> bool:
        """Whether layer 0's input rows of type ``t`` come from stored features (else from a
        learned vector)."""
        return t in self.net.proj if self.typed else True

    def input_rows(self, t, x=None, n: int = 0):
        """Layer 0's input rows of type ``t`` from its stored features ``x`` (any dtype), or
        ``n`` rows of the type's learned vector; untyped: ``x`` as float32."""
        if self.typed:
            return self.net.input_rows(t, x, n)
        from ..sampling.base import float_rows

        return float_rows(x)

    def layer(self, i: int, in_width: int) -> Optional[Layer]:
        """Layer ``i`` (its input ``in_width`` wide), or ``None`` to run it through blocks."""
        if self.typed:
            return _RGCNLayer(self.net, i, self.threads)
        direct = direct_layer(self.net, i, in_width, self.threads)
        return None if direct is None else _Direct(self.net, i, direct)


def layer_math(model, threads: "Threads" = None) -> LayerMath:
    """:class:`LayerMath` of ``model`` (a DDP wrapper looked through); a ``ValueError``
    naming why when layer-wise inference would not compute its forward
    (:func:`layerwise_refusal`)."""
    net = unwrap(model)
    why = layerwise_refusal(net)
    if why is not None:
        raise ValueError(f"layer-wise evaluation: {why}")
    return LayerMath(net, threads or Threads())
