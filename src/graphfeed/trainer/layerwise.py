"""Layer-wise inference: exact evaluation with every neighbour, each layer computed once per node.

Sampled evaluation (:class:`graphfeed.trainer.evaluate.Evaluator`) recomputes the lower layers
of every evaluated node from its own sampled receptive field: with ``L`` layers and fanout ``f``
a seed costs about ``f ** L`` edges, and the hidden output of a node shared by many receptive
fields is computed again for each. Layer-wise inference (PyG's and DGL's offline inference)
computes layer ``i``'s output once for every node that layer ``i + 1`` needs, from its full
in-neighbourhood, then layer ``i + 1`` from those outputs: about ``L x (edges + nodes)`` of
work, and exact.

One evaluator for every graph: the graph is node types and relations
(``graph.neighbourhood.Relations``; an untyped graph is the one type and relation ``None``), and
the model's math per layer comes from ``graphfeed.models.layerwise.layer_math`` (the direct
SAGE/GCN/GAT layers of a ``BlockGNN``, the R-GCN's pieces on a typed graph). This module decides
which rows, in which batches, and where the tables live:

- **Which nodes**: layer ``L - 1`` (the last) runs on the evaluated nodes; layer ``i`` on the
  ``L - 1 - i``-hop in-neighbourhood of those (``needed_nodes`` over the fused CSC), which is
  every node on a connected graph but can be far less for a small evaluated set. Those of type
  ``t`` form type ``t``'s table of the layer.
- **Layer 0's input**: the stored features (``placed.input_features``, any backend), read in
  chunks; where the model computes its inputs (the R-GCN's projections, a learned vector for a
  featureless type) one table per input type, else the features themselves, read on demand.
- **A layer**: per relation a *source table* over its source type's needed nodes, computed once
  per node in chunks of ``max_batch`` rows: the input itself, or the input already multiplied
  by the relation's weight where the layer projects first; then, per destination type, batches
  of consecutive destinations holding at most ``max_batch_edges`` in-edges and ``max_batch``
  rows (``edge_batches``), whose in-edges are CSR rows taken straight from the graph (split per
  relation on a typed graph) and summed over the tables (``models.layerwise.aggregate``: a
  numba kernel over the evaluator's ``num_threads`` on the host, sparse products on a GPU).
- **Through blocks** (a ``BlockGNN`` layer without a direct form): loaders sample each batch's
  full in-neighbourhood (fanout ``-1``) and run ``BlockGNN.layer`` on the block; destinations are
  grouped by in-degree (``degree_groups``), each group's batch size keeping a batch under
  ``max_batch_edges`` in-edges. The loaders are built on the first evaluation of a set of names
  and reused by the next ones.

Memory: a table is float32 on the device when it takes at most a quarter of its free memory,
else on the host (the sums run where the table is). A direct layer's source table is at most as
wide as the narrower of its input and output (GAT: its output plus two columns per head).

Ranks: each rank computes a strided share (``nodes[rank::world_size]``) of every table and of
every type's destinations; the shares are all-gathered in bounded chunks, so every rank holds
the whole layer before the next starts.

Exactness: equal to the model's forward on blocks sampled with every fanout ``-1``, up to float
rounding (tested: every direct layer, projected first or not, a featureless type, relations that
reach only some destinations, several ranks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from ..errors import GraphfeedError
from ..graph.neighbourhood import Relations, degree_groups, edge_batches, needed_nodes
from ..models.layerwise import Edges, Threads, layer_math, take_rows
from .evaluate import EVAL_MAX_BATCH_EDGES, gather_strided, unwrap, with_fanouts

__all__ = ["LAYERWISE_MAX_BATCH", "LayerwiseEvaluator"]

#: most destination nodes in one layer-wise batch (and source-table rows in one chunk)
LAYERWISE_MAX_BATCH = 1 << 16


class _RowMap:
    """Global id -> row of a table over ``nodes`` (sorted distinct; every id asked is one of
    them): the id itself when the table covers every node, the id less ``nodes[0]`` when
    ``nodes`` are consecutive (every node of one type of a typed graph), else through a dense
    int32 (int64 past 2^31 rows) map of ``nodes[-1] - nodes[0] + 1`` entries, O(1) a lookup."""

    def __init__(self, nodes: np.ndarray):
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


class LayerwiseEvaluator:
    """Scores node sets by layer-wise inference (module docstring). The calls of every
    evaluator (``trainer.evaluate.open_evaluator``): :meth:`evaluate` (every set from one pass
    over the layers), :meth:`logits` (one set), :attr:`ids`, :attr:`under_autocast`,
    :meth:`close`.

    ``placed``: the run's placed data (``graphfeed.placement.Placed``: its sampler, input
    features and labels); ``graph``: the host graph the model passes messages over (a
    ``CSCGraph``, or a ``HeteroGraph`` whose node and edge types are the model's); ``sets``:
    name -> global node ids (of the model's output types); ``num_layers``: the model's. Every
    rank passes the whole sets; a set's rows come back in the order of its ids (every output type
    of a set of the same width). ``max_batch_edges`` / ``max_batch``: the bounds of one batch."""

    #: float32 throughout: the direct layers accumulate in place into float32 tables, which
    #: autocast's low-precision results cannot join (``Task.evaluates_under_autocast``)
    under_autocast = False

    def __init__(self, placed, graph, sets: dict, num_layers: int, *, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2, prefetch: int = 2,
                 labels: bool = True, max_batch_edges: int = EVAL_MAX_BATCH_EDGES,
                 max_batch: int = LAYERWISE_MAX_BATCH):
        import torch

        self.placed, self.graph = placed, graph
        self.rel = Relations(graph)
        self.num_layers = int(num_layers)
        self.sets = {k: np.asarray(v, dtype=np.int64).reshape(-1) for k, v in sets.items()}
        self.ids = self.sets  # rows come back in the order of each set's ids
        self.device = torch.device(placed.device)
        self.rank, self.world_size = rank, world_size
        self.num_threads, self.prefetch = num_threads, prefetch
        self.max_batch_edges, self.max_batch = int(max_batch_edges), int(max_batch)
        self._pool = None  # host aggregation threads (_threads)
        n = int(self.rel.csc.num_nodes)
        for k, ids in self.sets.items():
            if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
                raise GraphfeedError(f"set {k!r}: node ids must be in [0, {n}) (global ids of "
                                     f"the graph)")
        self.labels = {}
        if labels:
            lab = placed.label_feature
            if lab is None:
                raise GraphfeedError("the placed data holds no labels: pass labels=False")
            for k, ids in self.sets.items():
                self.labels[k] = lab.read(torch.from_numpy(ids)).to(torch.long).reshape(-1).cpu()
        feat = placed.input_features.get(None)  # untyped: one row a node
        if feat is not None and feat.num_rows < n:
            raise GraphfeedError(f"features['feat'] has {feat.num_rows} rows but the graph "
                                 f"{n} nodes")
        self._sampler = None  # every in-neighbour, for layers run through blocks
        self._plans = {}  # names -> _Plan

    # ------------------------------------------------------------------ the pass
    def _plan(self, names: tuple) -> _Plan:
        if names not in self._plans:
            targets = (np.concatenate([self.sets[k] for k in names]) if names
                       else np.zeros(0, np.int64))
            self._plans[names] = _Plan(needed_nodes(self.rel.csc, targets, self.num_layers + 1))
        return self._plans[names]

    def logits(self, model, name: str, *, progress: bool = False, argmax: bool = False):
        """``(logits (n, C) float32, labels (n,) int64 or None)`` on CPU for set ``name`` in the
        order of its ids (``argmax=True``: ``(n, 1)`` predicted classes)."""
        return self.evaluate(model, (name,), progress=progress, argmax=argmax)[name]

    def evaluate(self, model, names: Optional[Sequence[str]] = None, *, progress: bool = False,
                 argmax: bool = False) -> dict:
        """name -> ``(rows, labels)`` as :meth:`logits` gives, for every set in ``names``
        (default: all), from one pass over the layers. Every rank must call it."""
        import torch

        names = tuple(self.sets) if names is None else tuple(names)
        try:
            math = layer_math(model, self._threads())
        except ValueError as e:
            raise GraphfeedError(str(e)) from None
        net = unwrap(model)
        if math.num_layers != self.num_layers:
            raise GraphfeedError(f"the model has {math.num_layers} layers, the evaluator "
                                 f"{self.num_layers}")
        if math.typed and (tuple(net.node_types), tuple(net.edge_types)) != (
                self.rel.node_types, self.rel.relations):
            raise GraphfeedError(f"the model's node and edge types ({list(net.node_types)}, "
                                 f"{list(net.edge_types)}) are not the graph's "
                                 f"({list(self.rel.node_types)}, {list(self.rel.relations)})")
        plan = self._plan(names)
        last = self.rel.by_type(plan.sets[-1])
        if math.typed:
            outputs = net.layer_types(self.num_layers - 1)
            for t in last:
                if t not in outputs:
                    raise GraphfeedError(f"the sets {list(names)} hold nodes of type {t!r}, "
                                         f"which the model does not output (its outputs: "
                                         f"{list(outputs)})")
            widths = {int(net.root[self.num_layers - 1][t].out_features) for t in last}
            if len(widths) > 1:
                raise GraphfeedError(f"the sets {list(names)} span output types of different "
                                     f"widths {sorted(widths)}: evaluate them separately")
        was_training = net.training
        net.eval()
        try:
            with torch.no_grad():
                h = self._inputs(math, self.rel.by_type(plan.sets[0]), progress)
                for i in range(self.num_layers):
                    h = self._layer(math, net, i, plan, h, progress)
        finally:
            net.train(was_training)
        return {k: (self._rows(self.sets[k], last, h, argmax), self.labels.get(k))
                for k in names}

    def _rows(self, ids: np.ndarray, last: dict, h: dict, argmax: bool):
        """The rows of set ``ids`` (global, any order) from the last layer's tables ``h`` (node
        type -> rows of ``last[t]``), on the CPU."""
        import torch

        width = next((int(v.shape[1]) for v in h.values() if v is not None), 0)
        got = (torch.zeros((ids.shape[0], 1), dtype=torch.long) if argmax
               else torch.zeros((ids.shape[0], width), dtype=torch.float32))
        types = self.rel.type_of(ids)
        for j, t in enumerate(self.rel.node_types):
            sel = np.flatnonzero(types == j)
            if not sel.size:
                continue
            rows = torch.from_numpy(np.searchsorted(last[t], ids[sel]))
            y = h[t].index_select(0, rows.to(h[t].device))
            got[torch.from_numpy(sel)] = (y.argmax(-1, keepdim=True) if argmax else y).cpu()
        return got

    def _read_features(self, t, ids: np.ndarray, out=None):
        """Type ``t``'s stored input rows of global ``ids`` (its features at type-local ids)."""
        import torch

        feat = self.placed.input_features[t]
        local = torch.from_numpy(ids - self.rel.type_offset(t))
        if out is not None:
            return feat.read(local, out=out.view(ids.shape[0], *feat.row_shape), check=False)
        return feat.read(local, check=False)

    def _inputs(self, math, nodes: dict, progress: bool) -> dict:
        """Node type -> layer 0's input table over ``nodes[t]`` where the model computes its
        inputs, ``None`` where they are the stored features (read on demand)."""
        from .._progress import bar
        from ..sampling.base import float_rows

        if math.input_width is None:
            return {t: None for t in nodes}
        h = {}
        todo = [t for t in math.input_types if t in nodes]
        with bar(sum(self._chunks(nodes[t].shape[0]) for t in todo), "eval inputs",
                 enabled=progress) as pbar:
            for t in todo:
                if math.reads_features(t) and t not in self.placed.input_features:
                    raise GraphfeedError(f"node type {t!r}: the model projects its features, "
                                         f"and the placed data holds none")

                def fill(ids, out, t=t):
                    if not math.reads_features(t):
                        out.copy_(math.input_rows(t, n=ids.shape[0]))
                        return
                    x = float_rows(self._read_features(t, ids)).to(self.device)
                    out.copy_(math.input_rows(t, x))

                h[t] = self._table(nodes[t], math.input_width, fill, pbar)
        return h

    def _layer(self, math, net, i: int, plan: _Plan, h: dict, progress: bool) -> dict:
        """Layer ``i``'s output (node type -> rows of ``plan.sets[i + 1]``'s nodes of the type)
        from its input ``h`` (node type -> rows of ``plan.sets[i]``'s, ``None``: the stored
        features), every rank's share gathered."""
        import torch

        from .._progress import bar
        from ..sampling.base import float_rows

        src, dst = self.rel.by_type(plan.sets[i]), self.rel.by_type(plan.sets[i + 1])
        widths = {t: (int(v.shape[1]) if v is not None else
                      int(np.prod(self.placed.input_features[t].row_shape, dtype=np.int64)))
                  for t, v in h.items()}
        layer = math.layer(i, next(iter(widths.values()), 0))
        if layer is None:  # no direct form: through blocks (an untyped BlockGNN layer)
            return {None: self._block_layer(net, i, plan, h.get(None), progress)}
        row_of = {t: _RowMap(ids) for t, ids in src.items()}

        def read_input(t, ids):  # layer i's input rows of ids (sorted, of type t)
            if h[t] is None:
                return float_rows(self._read_features(t, ids)).to(self.device)
            return take_rows(h[t], row_of[t](ids)).to(self.device)

        types = [t for t in layer.types if t in dst]
        for t in dst:
            assert t in layer.types, (i, t)  # the needed sets follow the model's types
        rels = {t: [r for r in layer.relations(t) if Relations.source_type(r) in src]
                for t in types}
        tables = {}  # relation -> its source table (None: built below)
        for t in types:
            for r in rels[t]:
                s = Relations.source_type(r)
                tables[r] = h[s] if h[s] is not None and not layer.projects(r) else None
        shares = {t: self._share(dst[t]) for t in types}
        batches = {t: edge_batches(np.asarray(self.rel.csc.in_degrees[shares[t]],
                                              dtype=np.int64),
                                   self.max_batch_edges, self.max_batch) for t in types}
        build = [r for r, v in tables.items() if v is None]
        chunks = sum(self._chunks(src[Relations.source_type(r)].shape[0]) for r in build)
        out = {}
        with bar(chunks + sum(len(b) for b in batches.values()), f"eval layer {i}",
                 enabled=progress) as pbar:
            for r in build:
                s = Relations.source_type(r)

                def fill(ids, rows, r=r, s=s):
                    if (h[s] is None and not layer.projects(r)
                            and self.placed.input_features[s].dtype == torch.float32
                            and self.placed.input_features[s].device == rows.device):
                        self._read_features(s, ids, out=rows)  # float32 features as stored
                    else:
                        rows.copy_(layer.source(r, read_input(s, ids)))

                width = layer.width(r)
                tables[r] = self._table(src[s], width, fill, pbar)
            prepared = {r: layer.prepare(r, v) for r, v in tables.items()}
            for t in types:
                share, local = shares[t], None
                for a, b in batches[t]:
                    ids = share[a:b]
                    edges = {}
                    for r, (crow, col) in self.rel.in_edges(ids, rels[t]).items():
                        s = Relations.source_type(r)
                        edges[r] = Edges(ids, row_of[t](ids), crow, col, row_of[s](col))
                    y = layer.output(t, ids, edges, prepared, lambda x, t=t: read_input(t, x))
                    if local is None:
                        local = self._alloc(share.shape[0], y.shape[1])
                    local[a:b] = y.to(local.device)
                    pbar.update(1)
                if local is None:  # no destinations on this rank
                    local = None if self.world_size > 1 else torch.zeros((0, 0))
                out[t] = self._gathered(local, dst[t].shape[0])
        return out

    def _block_layer(self, net, i: int, plan: _Plan, h_prev, progress: bool):
        """Layer ``i``'s output for ``plan.sets[i + 1]`` through sampled blocks (every
        in-neighbour) of an untyped graph, every rank's share gathered."""
        import torch

        from .._progress import bar
        from ..loader.dataloader import DataLoader
        from ..loader.item_sampler import ItemSampler
        from ..models.layerwise import model_inputs

        g, w = self.rel.csc, self.world_size
        n = int(g.num_nodes)
        nodes, prev_nodes = plan.sets[i + 1], plan.sets[i]
        share = nodes[self.rank::w]
        if self._sampler is None:
            self._sampler = with_fanouts(self.placed.sampler, [-1])
        if i not in plan.loaders:
            groups = degree_groups(share, g.in_degrees, self.max_batch_edges, self.max_batch)
            feats = {"feat": self.placed.input_features[None]} if i == 0 else None
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
        with bar(sum(len(ld) for ld in loaders), f"eval layer {i}", enabled=progress) as pbar:
            for loader in loaders:
                loader.set_epoch(0)
                for batch in loader:
                    block = batch.blocks[0]
                    if h_prev is None:
                        x = model_inputs(net, batch)  # the stored rows, for layer 0
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
            return local if local is not None else torch.zeros((0, 0), dtype=torch.float32)
        return gather_strided(local, nodes.shape[0], w, alloc=self._alloc)

    # ------------------------------------------------------------------ tables and ranks
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

    def _threads(self) -> Threads:
        """The evaluator's threads for host aggregations (``num_threads``; started on first
        use, stopped by :meth:`close`)."""
        if self.num_threads < 2:
            return Threads()
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self.num_threads,
                                            thread_name_prefix="graphfeed-layerwise")
        return Threads(self._pool, self.num_threads)

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
        for plan in self._plans.values():
            plan.close()
        self._plans = {}
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
