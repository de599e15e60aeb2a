"""Layer-wise inference of the R-GCN on typed graphs: exact evaluation with every neighbour, each
layer computed once per node that needs it.

The homogeneous evaluator (:mod:`graphfeed.trainer.layerwise`, whose module docstring explains
the method) over a ``graphfeed.graph.HeteroGraph``, for ``graphfeed.models.HeteroRGCN``. The
model's own pieces compute (``HeteroRGCN.input_rows``, ``relation_source``, ``layer_output``,
the ones its ``forward`` is made of); this module only decides which rows, in which batches,
and where the tables live, through the homogeneous evaluator's helpers (:func:`needed_nodes`,
:func:`edge_batches`, the CSR sums of :func:`~graphfeed.trainer.layerwise._aggregate`,
:class:`~graphfeed.trainer.layerwise.LayerwiseBase` for threads, placement and ranks).

- **Which nodes**: global ids of the fused graph, so :func:`needed_nodes` over its CSC gives
  the nodes whose layer-``i`` output is needed; those of type ``t`` form type ``t``'s table of
  layer ``i``. Every in-edge of a destination of a type the model computes is a relation the
  model has a weight for (it gives parameters to exactly the types on a path to the target), so
  these sets only hold types the model computes at that layer.
- **Layer 0's input**: ``relu(proj[t](x))`` for a type with features, read through the placed
  per-type ``features[t]["feat"]`` (RAM, disk, LMDB, GPU: any backend) at type-local ids, in
  chunks; the learned vector for a featureless type. One table per input type.
- **A layer**: for every type ``t`` it computes, destinations in batches of consecutive ids
  holding at most ``max_batch_edges`` in-edges (all relations together) and ``max_batch`` rows;
  a batch's in-edges come from the fused CSC, where each destination's in-edges are grouped by
  relation, and are split into one CSR per relation into ``t``; each relation's sum runs over
  its source type's table (:func:`csr_sum_rows` over the evaluator's threads on the host, a
  sparse product on a GPU), divided by the in-degree within the relation (no edge: a zero
  mean, as ``forward``'s). Where the layer's output is narrower than its input (the last layer
  of node classification) each relation's source table holds ``W_r h`` instead
  (``HeteroRGCN.projects_first``). ReLU between layers, dropout off, as ``forward`` in eval
  mode.
- **Memory**: a table (per type and layer, and per relation where it projects first) is float32
  on the device when it takes at most a quarter of its free memory, else on the host. A
  featureless type's input table repeats its vector (``nodes x hidden`` floats, as large as the
  type's layer-0 output).
- **Ranks**: each rank computes a strided share of every table and of every type's
  destinations; the shares are all-gathered, as for homogeneous graphs.

Exact: equal to the model's ``forward`` on blocks sampled with every fanout ``-1`` up to float
rounding (tested, including a featureless type, relations without edges into some
destinations, several ranks).
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import GraphfeedError
from .evaluate import EVAL_MAX_BATCH_EDGES, features_as_float, unwrap
from .layerwise import (LAYERWISE_MAX_BATCH, LayerwiseBase, _aggregate, _Edges, _has_forward_hooks,
                        _in_edges, _RowMap, _take, edge_batches, needed_nodes)

__all__ = ["TypedLayerwiseEvaluator", "supports_typed_layerwise"]


def supports_typed_layerwise(model) -> bool:
    """Whether layer-wise inference computes what ``model``'s forward does with every
    neighbour: graphfeed's own ``HeteroRGCN`` (not a subclass, whose forward may differ) without
    forward hooks on it (layer-wise inference does not call its forward)."""
    from ..models.rgcn import HeteroRGCN

    net = unwrap(model)
    return type(net) is HeteroRGCN and not _has_forward_hooks(net)


def _input_feature(feats: dict):
    """The feature of a type the model reads (``MiniBatch.x_dict``'s choice): its
    ``"feat"``, else its only one, else ``None``."""
    if "feat" in feats:
        return feats["feat"]
    return next(iter(feats.values())) if len(feats) == 1 else None


def split_relations(crow: np.ndarray, rel: np.ndarray, relations: Sequence[int]) -> list:
    """One ``(crow, positions)`` per relation id of ``relations``: the CSR rows of a batch's
    in-edges (``crow`` over the batch's destinations, ``rel`` each edge's relation id) of that
    relation alone, ``positions`` the edges' positions in the batch. Order within a row is
    kept (the fused graph sorts a destination's in-edges by relation)."""
    n = crow.shape[0] - 1
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(crow))
    out = []
    for r in relations:
        pos = np.flatnonzero(rel == r)
        c = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(row[pos], minlength=n), out=c[1:])
        out.append((c, pos))
    return out


class TypedLayerwiseEvaluator(LayerwiseBase):
    """Scores node sets of a typed graph by layer-wise inference of a ``HeteroRGCN`` (module
    docstring). Same calls as :class:`graphfeed.trainer.layerwise.LayerwiseEvaluator`:
    :meth:`evaluate` (every set from one pass over the layers), :meth:`logits`, :meth:`close`.

    ``placed``: the run's ``TypedPlaced`` (per-type ``features``, ``labels`` over global ids,
    ``device``); ``graph``: the ``HeteroGraph`` the model passes messages over (the host one);
    ``sets``: name -> global node ids, of the model's output types; ``num_layers``: the
    model's. Every rank passes the whole sets. A set's rows come back in the order of its ids;
    every output type of a set must have the same width."""

    def __init__(self, placed, graph, sets: dict, num_layers: int, *, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2, labels: bool = True,
                 max_batch_edges: int = EVAL_MAX_BATCH_EDGES,
                 max_batch: int = LAYERWISE_MAX_BATCH):
        import torch

        super().__init__(placed, graph, sets, num_layers, rank=rank, world_size=world_size,
                         num_threads=num_threads, max_batch_edges=max_batch_edges,
                         max_batch=max_batch)
        n = int(graph.num_nodes)
        for k, ids in self.sets.items():
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise GraphfeedError(f"set {k!r}: node ids must be in [0, {n}) (global ids of "
                                     f"the typed graph)")
        self.labels = {}
        if labels:
            if placed.labels is None:
                raise GraphfeedError("the placed data holds no labels: pass labels=False")
            for k, ids in self.sets.items():
                self.labels[k] = placed.labels.read(torch.from_numpy(ids)).to(
                    torch.long).reshape(-1).cpu()
        self._sets = {}  # names -> the needed global ids per layer (needed_nodes)

    def _needed(self, names: tuple) -> list:
        if names not in self._sets:
            targets = (np.concatenate([self.sets[k] for k in names]) if names
                       else np.zeros(0, np.int64))
            self._sets[names] = needed_nodes(self.graph.csc, targets, self.num_layers + 1)
        return self._sets[names]

    def _by_type(self, nodes: np.ndarray) -> dict:
        """Node type -> the sorted global ids of ``nodes`` (sorted) of that type (types with
        none left out)."""
        off = self.graph.node_offsets
        cut = np.searchsorted(nodes, off)
        return {t: nodes[cut[j]:cut[j + 1]] for j, t in enumerate(self.graph.node_types)
                if cut[j + 1] > cut[j]}

    def logits(self, model, name: str, *, progress: bool = False, argmax: bool = False):
        """``(logits (n, C) float32, labels (n,) int64 or None)`` on CPU for set ``name`` in the
        order of its ids (``argmax=True``: ``(n, 1)`` predicted classes)."""
        return self.evaluate(model, (name,), progress=progress, argmax=argmax)[name]

    def evaluate(self, model, names: Optional[Sequence[str]] = None, *, progress: bool = False,
                 argmax: bool = False) -> dict:
        """name -> ``(rows, labels)`` as :meth:`logits` gives, for every set in ``names``
        (default: all), from one pass over the layers. Every rank must call it. ``model``: the
        ``HeteroRGCN`` (a DDP wrapper is unwrapped)."""
        import torch

        names = tuple(self.sets) if names is None else tuple(names)
        net = unwrap(model)
        if not supports_typed_layerwise(net):
            raise GraphfeedError(f"typed layer-wise evaluation runs graphfeed's HeteroRGCN, got "
                                 f"{type(net).__name__}")
        if net.num_layers != self.num_layers:
            raise GraphfeedError(f"the model has {net.num_layers} layers, the evaluator "
                                 f"{self.num_layers}")
        g = self.graph
        if tuple(net.node_types) != tuple(g.node_types) or tuple(net.edge_types) != tuple(
                g.edge_types):
            raise GraphfeedError(f"the model's node and edge types ({list(net.node_types)}, "
                                 f"{list(net.edge_types)}) are not the graph's "
                                 f"({list(g.node_types)}, {list(g.edge_types)})")
        sets = self._needed(names)
        outputs = net.layer_types(self.num_layers - 1)
        last = self._by_type(sets[-1])
        for t in last:
            if t not in outputs:
                raise GraphfeedError(f"the sets {list(names)} hold nodes of type {t!r}, which the "
                                     f"model does not output (its outputs: {list(outputs)})")
        widths = {int(net.root[self.num_layers - 1][t].out_features) for t in last}
        if len(widths) > 1:
            raise GraphfeedError(f"the sets {list(names)} span output types of different widths "
                                 f"{sorted(widths)}: evaluate them separately")
        width = widths.pop() if widths else 0
        was_training = net.training
        net.eval()
        try:
            with torch.no_grad():
                h = self._inputs(net, self._by_type(sets[0]), progress)
                for i in range(self.num_layers):
                    h = self._layer(net, i, self._by_type(sets[i]), self._by_type(sets[i + 1]),
                                    h, progress)
        finally:
            net.train(was_training)
        out = {}
        for k in names:
            ids = self.sets[k]
            got = (torch.zeros((ids.shape[0], 1), dtype=torch.long) if argmax
                   else torch.zeros((ids.shape[0], width), dtype=torch.float32))
            types = self.graph.node_type_ids(ids)
            for j, t in enumerate(self.graph.node_types):
                sel = np.flatnonzero(types == j)
                if not sel.size:
                    continue
                rows = torch.from_numpy(np.searchsorted(last[t], ids[sel]))
                y = h[t].index_select(0, rows.to(h[t].device))
                got[torch.from_numpy(sel)] = (y.argmax(-1, keepdim=True) if argmax else y).cpu()
            out[k] = (got, self.labels.get(k))
        return out

    def _inputs(self, net, nodes: dict, progress: bool) -> dict:
        """Node type -> layer 0's input rows (``HeteroRGCN.input_rows``) of its ``nodes[t]``,
        every rank's share gathered."""
        import torch

        from .._progress import bar

        off = {t: int(self.graph.node_offsets[j]) for j, t in enumerate(self.graph.node_types)}
        width = int(net.hidden)
        h = {}
        todo = [t for t in net.input_types if t in nodes]
        with bar(sum(self._chunks(nodes[t].shape[0]) for t in todo), "eval inputs",
                 enabled=progress) as pbar:
            for t in todo:
                feat = (_input_feature(self.placed.features.get(t, {})) if t in net.proj
                        else None)
                if t in net.proj and feat is None:
                    raise GraphfeedError(f"node type {t!r}: the model projects its features, "
                                         f"and the placed data holds none")

                def fill(ids, out, t=t, feat=feat):
                    if feat is None:
                        out.copy_(net.input_rows(t, n=ids.shape[0]))
                        return
                    x = feat.read(torch.from_numpy(ids - off[t]), check=False)
                    out.copy_(net.input_rows(t, features_as_float(x).to(self.device)))

                h[t] = self._table(nodes[t], width, fill, pbar)
        return h

    def _layer(self, net, i: int, src: dict, dst: dict, h: dict, progress: bool) -> dict:
        """Layer ``i``'s output (node type -> rows of ``dst[t]``) from its input ``h`` (node
        type -> rows of ``src[t]``), every rank's share gathered."""
        import torch

        from .._progress import bar

        g = self.graph
        indptr, indices, etype = g.csc.indptr, g.csc.indices, g.edge_type
        rel_id = {et: r for r, et in enumerate(g.edge_types)}
        types = [t for t in net.layer_types(i) if t in dst]
        for t in dst:
            assert t in net.layer_types(i), (i, t)  # the needed sets follow the model's types
        row_of = {t: _RowMap(ids) for t, ids in src.items()}
        project = net.projects_first(i)
        # the tables each relation averages over: the inputs, or W_r times them
        rels = {t: net.layer_relations(i, t) for t in types}
        tables = {}
        for t in types:
            for et in rels[t]:
                s = et[0]
                if s not in src or et in tables:
                    continue  # no source of that type needed: no edge of et reaches dst
                tables[et] = h[s] if not project else None
        shares = {t: self._share(dst[t]) for t in types}
        batches = {t: edge_batches(np.asarray(g.csc.in_degrees[shares[t]], dtype=np.int64),
                                   self.max_batch_edges, self.max_batch) for t in types}
        chunks = sum(self._chunks(src[et[0]].shape[0]) for et, v in tables.items() if v is None)
        total = chunks + sum(len(b) for b in batches.values())
        threads = self._threads()
        out = {}
        with bar(total, f"eval layer {i}", enabled=progress) as pbar:
            for et in [e for e, v in tables.items() if v is None]:
                s = et[0]
                width = int(net.rel[i][net._key(et)].out_features)

                def fill(ids, rows, et=et, s=s):
                    x = _take(h[s], row_of[s](ids)).to(self.device)
                    rows.copy_(net.relation_source(i, et, x))

                tables[et] = self._table(src[et[0]], width, fill, pbar)
            for t in types:
                share = shares[t]
                width = int(net.root[i][t].out_features)
                local = self._alloc(share.shape[0], width)
                present = [et for et in rels[t] if et in tables]
                for a, b in batches[t]:
                    ids = share[a:b]
                    crow, col, rel = _in_edges(indptr, indices, ids, etype)
                    means = {}
                    for et, (c, pos) in zip(present, split_relations(
                            crow, rel, [rel_id[et] for et in present])):
                        s = et[0]
                        cols = col[pos]
                        edges = _Edges(ids, row_of[t](ids), c, cols, row_of[s](cols))
                        total_r = _aggregate(edges, tables[et], threads=threads)
                        dev = total_r.device
                        deg = torch.from_numpy(np.diff(c)).to(dev).clamp_(min=1)
                        means[et] = total_r.div_(deg.to(torch.float32)[:, None]).to(self.device)
                    x_dst = _take(h[t], row_of[t](ids)).to(self.device)
                    y = net.layer_output(i, t, x_dst, means, projected=project).float()
                    local[a:b] = y.to(local.device)
                    pbar.update(1)
                out[t] = self._gathered(local, dst[t].shape[0])
        return out

    def close(self) -> None:
        self._sets = {}
        super().close()
