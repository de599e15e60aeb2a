"""Layer-wise inference: exact evaluation with every neighbour, each layer computed once per node.

Sampled evaluation (:class:`graphfeed.trainer.evaluate.Evaluator`) recomputes the lower layers
of every evaluated node from its own sampled receptive field: with ``L`` layers and fanout ``f``
a seed costs about ``f ** L`` edges, and the hidden output of a node shared by many receptive
fields is computed again for each. Layer-wise inference (PyG's and DGL's offline inference)
computes layer ``i``'s output once for every node that layer ``i + 1`` needs, from its full
in-neighbourhood, then layer ``i + 1`` from those outputs: about ``L x (edges + nodes)`` of
work, and exact.

Which nodes: layer ``L - 1`` (the last) runs on the evaluated nodes; layer ``i`` on the
``L - 1 - i``-hop in-neighbourhood of those (:func:`needed_nodes`), which is every node on a
connected graph but can be far less for a small evaluated set.

Two ways to run a layer:

- **direct** (the reference models' layers: mean-aggregation ``SAGEConv``, the graph-normalised
  ``GCNConv`` of ``build_model("gcn", in_degrees=...)``, ``GATConv``; :func:`direct_layer`):
  a *source table* holds one row per input node of the layer, computed once per node in chunks
  of ``max_batch`` rows: the input itself or, when the layer's output is narrower than its
  input, the input already multiplied by the weight applied to the neighbours (SAGE's
  ``lin_l``, GCN's ``lin``; aggregation is linear, so ``W mean(x_u) == mean(W x_u)`` up to
  rounding; GAT always projects first, as ``GATConv`` does). Each batch of destinations then
  sums its in-edges' source rows as CSR rows taken straight from the graph's ``indptr`` /
  ``indices`` (:func:`csr_sum_rows` on the host, split over the evaluator's ``num_threads``;
  sparse x dense products on a GPU): no sampler, no per-edge copy of a row, and the narrower
  width. Batches are consecutive destinations holding at most ``max_batch_edges`` in-edges (a
  node with more comes alone) and ``max_batch`` nodes (:func:`edge_batches`). Layer 0 reads
  each input row once (and, when SAGE projects first, the destinations' rows again for its
  root weight ``lin_r``).
- **through blocks** (any other layer that qualifies): loaders sample each batch's full
  in-neighbourhood (fanout ``-1``) and run ``BlockGNN.layer`` on the block. Destinations are
  grouped by in-degree (powers of 4); each group's batch size keeps a batch under
  ``max_batch_edges`` in-edges (so at most about as many input rows) and ``max_batch``
  destinations (:func:`degree_groups`). The loaders are built on the first evaluation of a
  set of names and reused by the next ones.

Memory: layer 0 reads its input rows through the placed ``features["feat"]`` (RAM, disk,
LMDB, cached, GPU: any backend); a layer's source table and its output are float32 tensors held
on the device when each takes at most a quarter of its free memory, else in host memory (the
sums run where the source table is). A direct layer's source table is at most as
wide as the narrower of its input and output (GAT: its output plus two columns per head).

Ranks: each rank computes a strided share (``nodes[rank::world_size]``) of every layer's nodes
(and of every source table) and the shares are all-gathered in bounded chunks, so every rank
holds the whole layer before the next starts.

Exactness: a model qualifies when a destination's output depends only on its in-edges and its
sources' rows (``BlockGNN.layerwise_exact``: SAGE, GAT, and GCN normalised by the graph's
degrees); then the result equals sampled evaluation with fanouts ``-1`` up to float rounding.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from .._numba import kernel, prefetch
from ..errors import GraphfeedError
from .evaluate import (EVAL_MAX_BATCH_EDGES, features_as_float, gather_strided, unwrap,
                       with_fanouts)

#: most destination nodes in one layer-wise batch (and source-table rows in one chunk)
LAYERWISE_MAX_BATCH = 1 << 16
#: in-edges gathered at once while finding the in-neighbourhood of a node set
_HOP_CHUNK_EDGES = 1 << 24
#: source rows prefetched ahead by the CPU aggregation (as ``features._gather.PREFETCH_ROWS``)
_PREFETCH_EDGES = 8


def edge_batches(counts: np.ndarray, max_edges: int, max_rows: int) -> list:
    """``[(start, stop), ...]``: positions ``0 .. len(counts)`` cut into consecutive runs of at
    most ``max_rows`` whose ``counts`` (in-degrees) sum to at most ``max_edges``; a position
    whose count alone exceeds ``max_edges`` is a run of one. O(runs x log n)."""
    n = int(counts.shape[0])
    cum = np.cumsum(counts, dtype=np.int64)
    out, i = [], 0
    while i < n:
        base = int(cum[i - 1]) if i else 0
        j = int(np.searchsorted(cum, base + max_edges, side="right"))
        j = min(max(i + 1, j), i + max_rows, n)
        out.append((i, j))
        i = j
    return out


def _in_edges(indptr: np.ndarray, indices: np.ndarray, dst: np.ndarray, *aligned):
    """``(crow, col)``: the in-edges of ``dst`` (sorted distinct int64 ids) as CSR rows in
    ``dst``'s order: int64 ``crow`` ``(len(dst) + 1,)`` and the source ids ``col`` (``indices``'
    dtype). Consecutive ids are a slice of the graph (``col`` is a view, no copy). Each array of
    ``aligned`` (one entry per edge, as ``indices``: a typed graph's relation ids) is taken
    at the same positions and returned after ``col``."""
    k = int(dst.shape[0])
    if k and int(dst[-1]) - int(dst[0]) + 1 == k:
        a, b = int(dst[0]), int(dst[-1]) + 1
        lo, hi = int(indptr[a]), int(indptr[b])
        crow = np.asarray(indptr[a:b + 1], dtype=np.int64) - lo
        return (crow, indices[lo:hi], *(x[lo:hi] for x in aligned))
    starts = np.asarray(indptr[dst], dtype=np.int64)
    counts = np.asarray(indptr[dst + 1], dtype=np.int64) - starts
    crow = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(counts, out=crow[1:])
    pos = np.repeat(starts - crow[:-1], counts) + np.arange(int(crow[-1]), dtype=np.int64)
    return (crow, np.asarray(indices[pos]), *(np.asarray(x[pos]) for x in aligned))


def _in_neighbours(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, mask: np.ndarray,
                   chunk_edges: int = _HOP_CHUNK_EDGES) -> None:
    """Set ``mask[u]`` for every in-neighbour ``u`` of ``nodes`` (sorted distinct),
    ``chunk_edges`` edges at a time (memory O(chunk), whatever the degrees)."""
    starts = np.asarray(indptr[nodes], dtype=np.int64)
    counts = np.asarray(indptr[nodes + 1], dtype=np.int64) - starts
    for a, b in edge_batches(counts, chunk_edges, nodes.shape[0]):
        _, col = _in_edges(indptr, indices, nodes[a:b])
        mask[col] = True


def needed_nodes(graph, targets, num_layers: int) -> list:
    """``sets[i]``: the sorted int64 ids whose layer-``i`` output the evaluation of ``targets``
    needs: ``sets[-1]`` the targets, ``sets[i]`` ``sets[i + 1]`` and its in-neighbours."""
    n = int(graph.num_nodes)
    cur = np.unique(np.asarray(targets, dtype=np.int64))
    sets = [cur]
    indptr, indices = graph.indptr, graph.indices
    for _ in range(num_layers - 1):
        if cur.shape[0] < n:
            mask = np.zeros(n, dtype=bool)
            mask[cur] = True
            _in_neighbours(indptr, indices, cur, mask)
            cur = np.flatnonzero(mask).astype(np.int64)
        sets.append(cur)
    return sets[::-1]


def degree_groups(nodes: np.ndarray, in_degrees: np.ndarray, max_batch_edges: int,
                  max_batch: int = LAYERWISE_MAX_BATCH) -> list:
    """``[(ids, batch_size), ...]``: ``nodes`` grouped by in-degree (``<= 1``, ``<= 4``,
    ``<= 16``, ...), each with the batch size that keeps a batch within ``max_batch_edges``
    in-edges (at least one node) and ``max_batch`` nodes."""
    if nodes.shape[0] == 0:
        return []
    deg = np.asarray(in_degrees[nodes], dtype=np.int64)
    bucket = np.ceil(np.log2(np.maximum(deg, 1)) / 2).astype(np.int64)
    out = []
    for b in np.unique(bucket):
        ids = nodes[bucket == b]
        top = int(deg[bucket == b].max())
        out.append((ids, max(1, min(max_batch, max_batch_edges // max(1, top)))))
    return out


def supports_layerwise(model) -> bool:
    """Whether layer-wise inference computes exactly what ``model``'s forward does with every
    neighbour: a :class:`graphfeed.models.BlockGNN` whose layers qualify (module docstring)."""
    from ..models.gnn import BlockGNN

    net = unwrap(model)
    return isinstance(net, BlockGNN) and net.layerwise_exact


# ---------------------------------------------------------------------------- direct layers


class _RowMap:
    """Global id -> row of a table over ``nodes`` (sorted distinct; every id asked is one of
    them): the id itself when the table covers every node, the id less ``nodes[0]`` when
    ``nodes`` are consecutive (every node of one type of a typed graph), else through a dense
    int32 (int64 past 2^31 rows) map of ``nodes[-1] - nodes[0] + 1`` entries, O(1) a lookup.
    ``num_nodes`` is unused (kept for the callers' symmetry)."""

    def __init__(self, nodes: np.ndarray, num_nodes: int = 0):
        del num_nodes
        self.map, self.lo = None, int(nodes[0]) if nodes.shape[0] else 0
        k = int(nodes.shape[0])
        span = int(nodes[-1]) - self.lo + 1 if k else 0
        if span != k:
            dtype = np.int32 if k < 2 ** 31 else np.int64
            self.map = np.full(span, -1, dtype=dtype)
            self.map[nodes - self.lo] = np.arange(k, dtype=dtype)

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        if self.map is not None:
            return self.map[ids - self.lo] if self.lo else self.map[ids]
        return ids - self.lo if self.lo else ids


def _take(table, rows: np.ndarray):
    """``table[rows]`` for strictly increasing ``rows``: a view when they are consecutive (a
    batch of a table over every node), else one ``index_select``; on ``table``'s device."""
    import torch

    k = int(rows.shape[0])
    if k and int(rows[-1]) - int(rows[0]) + 1 == k:
        return table[int(rows[0]):int(rows[0]) + k]
    idx = torch.from_numpy(np.asarray(rows, dtype=np.int64)).to(table.device)
    return table.index_select(0, idx)


@dataclass
class _Edges:
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


@kernel
def csr_sum_rows(crow, col, values, table, out, start, end):
    """``out[v, k] += sum over e in [crow[v], crow[v + 1]) of values[e, k // c] *
    table[col[e], k]`` for the rows ``v`` in ``[start, end)`` and the columns ``k`` below
    ``out.shape[1]``, with ``c = out.shape[1] // values.shape[1]`` (one weight per edge and
    block of columns: GAT's heads); ``values`` of shape ``(0, 0)``: every weight 1. float32
    ``table`` and ``out``, ``out`` zeroed by the caller; reads only the rows ``col`` names."""
    d = out.shape[1]
    if d == 0:
        return
    weighted = values.shape[0] > 0
    heads = values.shape[1] if weighted else 1
    c = d // heads
    stop = crow[end]
    for v in range(start, end):
        for e in range(crow[v], crow[v + 1]):
            if e + _PREFETCH_EDGES < stop:
                ahead = table[col[e + _PREFETCH_EDGES]]
                prefetch(ahead, 0)
                prefetch(ahead, d - 1)
            u = col[e]
            if weighted:
                for h in range(heads):
                    w = values[e, h]
                    for k in range(h * c, (h + 1) * c):
                        out[v, k] += w * table[u, k]
            else:
                for k in range(d):
                    out[v, k] += table[u, k]


def _row_ranges(crow: np.ndarray, parts: int) -> list:
    """``[(start, stop), ...]``: the rows of a CSR cut into at most ``parts`` consecutive ranges
    of about equal edge counts (none empty)."""
    n = crow.shape[0] - 1
    cuts = np.searchsorted(crow, np.linspace(0, int(crow[-1]), parts + 1)[1:-1])
    bounds = np.unique(np.concatenate([[0], np.clip(cuts, 0, n), [n]]))
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


@dataclass(frozen=True)
class _Threads:
    """Where a host aggregation runs: ``parts`` row ranges on ``executor`` (the evaluator's
    threads; the kernel releases the GIL), or inline when ``executor`` is ``None``."""

    executor: Optional[object] = None
    parts: int = 1


def _aggregate(edges: _Edges, table, values=None, width: Optional[int] = None,
               threads: _Threads = _Threads()):
    """``out[v] = sum over v's in-edges e of values[e] * table[src_rows[e], :width]`` on
    ``table``'s device, float32 ``(n, width)`` there (``width`` default: the table's).
    ``values``: float32 ``(E,)``, or ``(E, H)`` for one weight per block of ``width // H``
    columns, or ``None`` (every weight 1). Reads only the rows the edges name: on the host
    :func:`csr_sum_rows` (row ranges split over ``threads``), elsewhere
    :func:`_sparse_sum_rows`."""
    import torch

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


def _sparse_sum_rows(edges: _Edges, table, values, width: int):
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

    def output(self, edges: _Edges, prepared, read_input: Callable):
        """The convolution's output ``(n, out)`` for the destinations of ``edges``, on the
        model's device; ``read_input(ids)`` gives layer inputs (sorted node ids)."""
        raise NotImplementedError


class _SageMeanLayer(_DirectLayer):
    """``SAGEConv`` with mean aggregation: ``lin_l(mean_u x_u) + lin_r(x_v)`` (then L2
    normalisation if the layer has it). Projects first (the source table holds ``x_u W_l^T``)
    when the output is narrower than the input; ``lin_r`` then reads the destinations' inputs
    again (``read_input``)."""

    def __init__(self, conv, in_width: int, threads: _Threads):
        self.conv, self.threads = conv, threads
        out = int(conv.lin_l.weight.shape[0])
        self.project = in_width > out
        self.width = out if self.project else in_width

    def source(self, x):
        import torch.nn.functional as F

        return F.linear(x, self.conv.lin_l.weight) if self.project else x

    def output(self, edges: _Edges, table, read_input: Callable):
        import torch
        import torch.nn.functional as F

        conv = self.conv
        dev = conv.lin_l.weight.device
        deg = torch.from_numpy(edges.degrees).to(dev).clamp_(min=1).to(torch.float32)
        out = _aggregate(edges, table, threads=self.threads).to(dev).div_(deg[:, None])
        if not self.project:
            out = conv.lin_l(out)
        elif conv.lin_l.bias is not None:
            out = out.add_(conv.lin_l.bias)
        if conv.root_weight:
            x_dst = read_input(edges.dst) if self.project else _take(table, edges.dst_rows)
            out = out.addmm_(x_dst.to(dev), conv.lin_r.weight.t())
        if conv.normalize:
            out = F.normalize(out, p=2.0, dim=-1)
        return out


class _GCNLayer(_DirectLayer):
    """The graph-normalised ``GCNConv`` (``models.gnn._GraphNormGCN``) with every in-edge:
    ``b + sum_u (x_u W) / sqrt((d_u + 1)(d_v + 1)) + (x_v W) / (d_v + 1)`` with the model's
    degrees ``d``. Aggregates at the narrower of the input and output widths."""

    def __init__(self, conv, in_degrees, in_width: int, threads: _Threads):
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

    def output(self, edges: _Edges, table, read_input: Callable):
        import torch

        conv = self.conv
        dev, tdev = conv.lin.weight.device, table.device
        deg, inv = self._deg, self._inv
        col = torch.from_numpy(np.ascontiguousarray(edges.col)).to(tdev).to(torch.int64)
        dst = torch.from_numpy(edges.dst).to(tdev)
        # the model's edge weight is (d_v / k_v) inv_u inv_v: k_v = d_v with every in-edge
        w = inv.index_select(0, col) * inv.index_select(0, dst)[edges.targets(tdev)]
        loop = (1.0 / (deg.index_select(0, dst) + 1))[:, None]
        out = _aggregate(edges, table, w, threads=self.threads)
        out = out.add_(_take(table, edges.dst_rows) * loop).to(dev)
        if not self.project:
            out = conv.lin(out)
        return out if conv.bias is None else out.add_(conv.bias)


class _GATLayer(_DirectLayer):
    """``GATConv`` with one weight for sources and destinations and neither edge features nor a
    residual: the source table holds ``lin(x)`` (heads x channels) and each row's two attention
    logits per head; a destination attends over its in-edges (and itself when the layer adds
    self-loops, after dropping existing ones, as ``GATConv`` does)."""

    def __init__(self, conv, threads: _Threads):
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

    def output(self, edges: _Edges, prepared, read_input: Callable):
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
                edges = _Edges(edges.dst, edges.dst_rows, crow, edges.col[keep],
                               edges.src_rows[keep])
        tgt = edges.targets(tdev)
        src = torch.from_numpy(np.asarray(edges.src_rows, dtype=np.int64)).to(tdev)
        dst_logit = _take(a_dst, edges.dst_rows)  # (n, heads)
        e = a_src.index_select(0, src).add_(dst_logit.index_select(0, tgt))
        e = F.leaky_relu(e, conv.negative_slope)  # (E, heads)
        if conv.add_self_loops:
            e_self = F.leaky_relu(_take(a_src, edges.dst_rows) + dst_logit, conv.negative_slope)
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
        out = _aggregate(edges, table, alpha, width=h * c, threads=self.threads).view(n, h, c)
        if conv.add_self_loops:
            own = _take(table, edges.dst_rows)[:, :h * c].reshape(n, h, c)
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


def direct_layer(net, i: int, in_width: int, threads: _Threads = _Threads()):
    """The direct computation of layer ``i`` of ``net`` (module docstring) given its input
    width, or ``None`` when the layer runs through blocks: only the reference models' exact
    classes (``BlockGNN`` with ``SAGEConv`` mean / ``GATConv``, the graph-normalised GCN) and
    configurations, so a subclass or an option this module does not reproduce keeps the
    model's own code."""
    from ..models.gnn import BlockGNN, _GraphNormGCN as GraphNormGCN

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


# ---------------------------------------------------------------------------- the evaluator


@dataclass
class _Plan:
    """What the evaluation of one tuple of set names reuses: ``sets[0]`` the input nodes of
    layer 0, ``sets[i + 1]`` the nodes whose layer-``i`` output is needed (sorted int64), and
    the loaders of the layers that run through blocks (built on first use)."""

    sets: list
    loaders: dict = field(default_factory=dict)

    def close(self) -> None:
        for loaders in self.loaders.values():
            for loader in loaders:
                loader.close()
        self.loaders = {}


class LayerwiseBase:
    """What every layer-wise evaluator shares (this module's, and the typed graphs' R-GCN one in
    :mod:`graphfeed.trainer.layerwise_typed`): the placed data, graph, node sets (name -> int64
    ids) and layer count it was made with, the device, this rank's place among
    ``world_size`` ranks, the bounds of a batch, the host aggregation threads (:meth:`_threads`),
    where a table goes (:meth:`_alloc`), and tables built in strided shares and gathered
    (:meth:`_table`, :meth:`_gathered`)."""

    def __init__(self, placed, graph, sets: dict, num_layers: int, *, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2,
                 max_batch_edges: int = EVAL_MAX_BATCH_EDGES,
                 max_batch: int = LAYERWISE_MAX_BATCH):
        import torch

        self.placed, self.graph = placed, graph
        self.num_layers = int(num_layers)
        self.sets = {k: np.asarray(v, dtype=np.int64).reshape(-1) for k, v in sets.items()}
        self.device = torch.device(placed.device)
        self.rank, self.world_size = rank, world_size
        self.num_threads = num_threads
        self.max_batch_edges, self.max_batch = int(max_batch_edges), int(max_batch)
        self._pool = None  # host aggregation threads (_threads)

    def _share(self, nodes: np.ndarray) -> np.ndarray:
        """This rank's strided share of ``nodes`` (all of them on one rank)."""
        return np.ascontiguousarray(nodes[self.rank::self.world_size])

    def _gathered(self, local, n: int):
        """Every rank's strided share of ``n`` rows (``local``: this rank's) in order, on every
        rank (``local`` itself on one rank)."""
        if self.world_size == 1:
            return local
        return gather_strided(local, n, self.world_size, alloc=self._alloc)

    def _table(self, nodes: np.ndarray, width: int, fill: Callable, pbar=None):
        """A float32 ``(len(nodes), width)`` table over ``nodes`` (where :meth:`_alloc` puts it),
        built by ``fill(ids, out)`` in chunks of at most ``max_batch`` rows of this rank's share
        (``ids`` sorted node ids, ``out`` their rows), every rank's share gathered."""
        share = self._share(nodes)
        local = self._alloc(share.shape[0], width)
        for s in range(0, share.shape[0], self.max_batch):
            ids = share[s:s + self.max_batch]
            fill(ids, local[s:s + ids.shape[0]])
            if pbar is not None:
                pbar.update(1)
        return self._gathered(local, nodes.shape[0])

    def _chunks(self, n: int) -> int:
        """How many chunks :meth:`_table` fills for ``n`` nodes on this rank."""
        k = len(range(self.rank, n, self.world_size))
        return -(-k // self.max_batch)

    def _threads(self) -> _Threads:
        """The evaluator's threads for host aggregations (``num_threads``; started on first
        use, stopped by :meth:`close`)."""
        if self.num_threads < 2:
            return _Threads()
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.num_threads,
                                            thread_name_prefix="graphfeed-layerwise")
        return _Threads(self._pool, self.num_threads)

    def _alloc(self, rows: int, dim: int):
        """A float32 ``(rows, dim)`` output on the device when it takes at most a quarter of its
        free memory, else on the host."""
        import torch

        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            if rows * dim * 4 * (self.world_size + 1) <= free // 4:
                return torch.empty((rows, dim), dtype=torch.float32, device=self.device)
        return torch.empty((rows, dim), dtype=torch.float32)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class LayerwiseEvaluator(LayerwiseBase):
    """Scores node sets by layer-wise inference (module docstring). Same calls as
    :class:`graphfeed.trainer.evaluate.Evaluator`: :meth:`evaluate` (every set from one pass
    over the layers), :meth:`logits` (one set), :meth:`close`.

    ``placed``: the run's ``PlacedData`` (its sampler, ``features["feat"]`` and ``["label"]``);
    ``graph``: the same graph as a host ``CSCGraph`` (in-degrees and in-neighbourhoods);
    ``sets``: name -> node ids; ``num_layers``: the model's. Every rank passes the whole sets.
    ``max_batch_edges`` / ``max_batch``: the bounds of one batch (:func:`edge_batches`,
    :func:`degree_groups`)."""

    def __init__(self, placed, graph, sets: dict, num_layers: int, *, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2, prefetch: int = 2,
                 labels: bool = True, max_batch_edges: int = EVAL_MAX_BATCH_EDGES,
                 max_batch: int = LAYERWISE_MAX_BATCH):
        import torch

        super().__init__(placed, graph, sets, num_layers, rank=rank, world_size=world_size,
                         num_threads=num_threads, max_batch_edges=max_batch_edges,
                         max_batch=max_batch)
        self.prefetch = prefetch
        self.labels = {}
        if labels:
            lab = placed.features["label"]
            for k, ids in self.sets.items():
                self.labels[k] = lab.read(torch.from_numpy(ids)).to(torch.long).reshape(-1).cpu()
        feat = placed.features["feat"]
        if feat.num_rows < int(graph.num_nodes):
            raise GraphfeedError(f"features['feat'] has {feat.num_rows} rows but the graph "
                                 f"{int(graph.num_nodes)} nodes")
        self._sampler = with_fanouts(placed.sampler, [-1])
        self._plans = {}  # names -> _Plan

    def _plan(self, names: tuple) -> _Plan:
        if names not in self._plans:
            targets = (np.concatenate([self.sets[k] for k in names]) if names
                       else np.zeros(0, np.int64))
            self._plans[names] = _Plan(needed_nodes(self.graph, targets, self.num_layers + 1))
        return self._plans[names]

    def logits(self, model, name: str, *, progress: bool = False, argmax: bool = False):
        """``(logits (n, C) float32, labels (n,) int64 or None)`` on CPU for set ``name`` in the
        order of its ids (``argmax=True``: ``(n, 1)`` predicted classes)."""
        return self.evaluate(model, (name,), progress=progress, argmax=argmax)[name]

    def evaluate(self, model, names: Optional[Sequence[str]] = None, *, progress: bool = False,
                 argmax: bool = False) -> dict:
        """name -> ``(logits, labels)`` as :meth:`logits` gives, for every set in ``names``
        (default: all), from one pass over the layers. Every rank must call it."""
        import torch

        names = tuple(self.sets) if names is None else tuple(names)
        net = unwrap(model)
        if net.num_layers != self.num_layers:
            raise GraphfeedError(f"the model has {net.num_layers} layers, the evaluator "
                                 f"{self.num_layers}")
        plan = self._plan(names)
        was_training = net.training
        net.eval()
        try:
            h = None
            with torch.no_grad():
                for i in range(self.num_layers):
                    width = h.shape[1] if h is not None else int(
                        np.prod(self.placed.features["feat"].row_shape, dtype=np.int64))
                    direct = direct_layer(net, i, width, self._threads())
                    if direct is None:
                        h = self._block_layer(net, i, plan, h, progress)
                    else:
                        h = self._direct_layer(net, i, direct, plan, h, progress)
        finally:
            net.train(was_training)
        out = {}
        last = torch.from_numpy(plan.sets[-1]).to(h.device)
        for k in names:
            rows = torch.searchsorted(last, torch.from_numpy(self.sets[k]).to(h.device))
            got = h[rows]
            got = got.argmax(-1, keepdim=True) if argmax else got
            out[k] = (got.cpu(), self.labels.get(k))
        return out

    def _direct_layer(self, net, i: int, layer, plan: _Plan, h_prev, progress: bool):
        """Layer ``i``'s output for ``plan.sets[i + 1]`` (rows in their order) from a source table
        over ``plan.sets[i]``, every rank's share gathered."""
        import torch

        from .._progress import bar

        n, w = int(self.graph.num_nodes), self.world_size
        src_nodes, nodes = plan.sets[i], plan.sets[i + 1]
        row_of = _RowMap(src_nodes, n)
        feat = self.placed.features["feat"]

        def read_input(ids):  # layer i's input rows of ids (node ids: feat has them, __init__)
            if i == 0:
                return features_as_float(feat.read(torch.from_numpy(ids), check=False)).to(
                    self.device)
            return _take(h_prev, row_of(ids)).to(self.device)

        def fill(ids, out):  # the source rows of ids; float32 features kept as they are are
            # read straight into the table
            if (i == 0 and not layer.project and feat.dtype == torch.float32
                    and feat.device == out.device):
                feat.read(torch.from_numpy(ids), out=out.view(ids.shape[0], *feat.row_shape),
                          check=False)
            else:
                out.copy_(layer.source(read_input(ids)))

        share = self._share(nodes)
        batches = edge_batches(np.asarray(self.graph.in_degrees[share], dtype=np.int64),
                               self.max_batch_edges, self.max_batch)
        build = i == 0 or layer.project
        chunks = self._chunks(src_nodes.shape[0]) if build else 0
        with bar(chunks + len(batches), f"eval layer {i}", enabled=progress) as pbar:
            if build:
                table = self._table(src_nodes, layer.width, fill, pbar)
            else:
                table = h_prev  # rows of src_nodes already
            table = layer.prepare(table)
            out = None
            indptr, indices = self.graph.indptr, self.graph.indices
            for a, b in batches:
                dst = share[a:b]
                crow, col = _in_edges(indptr, indices, dst)
                edges = _Edges(dst, row_of(dst), crow, col, row_of(col))
                y = layer.output(edges, table, read_input)
                y = net.finish_layer(i, y, lambda: read_input(dst)).float()
                if out is None:
                    out = self._alloc(share.shape[0], y.shape[1])
                out[a:b] = y.to(out.device)
                pbar.update(1)
        if out is None:  # no destinations on this rank
            out = None if w > 1 else torch.zeros((0, 0), dtype=torch.float32)
        return self._gathered(out, nodes.shape[0])

    def _block_layer(self, net, i: int, plan: _Plan, h_prev, progress: bool):
        """Layer ``i``'s output for ``plan.sets[i + 1]`` through sampled blocks (every
        in-neighbour), every rank's share gathered."""
        import torch

        from .._progress import bar
        from ..loader.dataloader import DataLoader
        from ..loader.item_sampler import ItemSampler

        n, w = int(self.graph.num_nodes), self.world_size
        nodes, prev_nodes = plan.sets[i + 1], plan.sets[i]
        share = nodes[self.rank::w]
        if i not in plan.loaders:
            groups = degree_groups(share, self.graph.in_degrees, self.max_batch_edges,
                                   self.max_batch)
            feats = {"feat": self.placed.features["feat"]} if i == 0 else None
            plan.loaders[i] = [DataLoader(ItemSampler(ids, bs, shuffle=False), self._sampler,
                                          node_features=feats, device=self.device,
                                          num_threads=self.num_threads, prefetch=self.prefetch)
                               for ids, bs in groups]
        loaders = plan.loaders[i]
        # global id -> row of the previous layer (identity when it covers every node)
        prev_index = None
        if h_prev is not None and prev_nodes.shape[0] < n:
            prev_index = torch.from_numpy(prev_nodes).to(h_prev.device)
        share_t = torch.from_numpy(share)
        local = None
        total = sum(len(ld) for ld in loaders)
        with bar(total, f"eval layer {i}", enabled=progress) as pbar:
            for loader in loaders:
                loader.set_epoch(0)
                for batch in loader:
                    block = batch.blocks[0]
                    if i == 0:
                        x = features_as_float(batch.x)
                    else:
                        src = block.src_nodes.to(h_prev.device)
                        rows = src if prev_index is None else torch.searchsorted(prev_index, src)
                        x = h_prev[rows].to(self.device, non_blocking=True)
                    y = net.layer(i, x, block).float()
                    if local is None:
                        local = self._alloc(share.shape[0], y.shape[1])
                    pos = torch.searchsorted(share_t, batch.seeds.cpu())
                    local[pos.to(local.device)] = y.to(local.device)
                    pbar.update(1)
        if w == 1:
            if local is None:  # nothing to compute: no rows
                local = torch.zeros((0, 0), dtype=torch.float32)
            return local
        return gather_strided(local, nodes.shape[0], w, alloc=self._alloc)

    def close(self) -> None:
        for plan in self._plans.values():
            plan.close()
        self._plans = {}
        super().close()
