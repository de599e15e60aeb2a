"""Layer-wise inference: exact evaluation with every neighbour, each layer computed once per node.

Sampled evaluation (:class:`graphfeed.trainer.evaluate.Evaluator`) recomputes the lower layers
of every evaluated node from its own sampled receptive field: with ``L`` layers and fanout ``f``
a seed costs about ``f ** L`` edges, and the hidden output of a node shared by many receptive
fields is computed again for each. Layer-wise inference (PyG's and DGL's offline inference)
computes layer ``i``'s output once for every node that layer ``i + 1`` needs, from its full
in-neighbourhood (one block per batch of destination nodes, fanout ``-1``), then layer
``i + 1`` from those outputs: about ``L x (edges + nodes)`` of work, and exact.

Which nodes: layer ``L - 1`` (the last) runs on the evaluated nodes; layer ``i`` on the
``L - 1 - i``-hop in-neighbourhood of those (:func:`needed_nodes`), which is every node on a
connected graph but can be far less for a small evaluated set.

Batches: destinations are grouped by in-degree (powers of 4); each group's batch size keeps a
batch under ``max_batch_edges`` in-edges (so at most about as many input rows) and
``LAYERWISE_MAX_BATCH`` destinations, whatever the degree distribution: hubs come a few at a
time, leaves many thousands at once. Layer 0 reads its input rows through the placed
``features["feat"]`` (RAM, disk, LMDB, cached, GPU: any backend) with the loader's threads and
prefetching; layer ``i > 0`` reads the previous layer's outputs, a float32 tensor held on the
device when it takes at most a quarter of its free memory, else in host memory.

Ranks: each rank computes a strided share (``nodes[rank::world_size]``) of every layer's nodes
and the shares are all-gathered in bounded chunks, so every rank holds the whole layer before
the next starts.

Exactness: a model qualifies when a destination's output depends only on its in-edges and its
sources' rows (``BlockGNN.layerwise_exact``: SAGE, GAT, and GCN normalised by the graph's
degrees); then the result equals sampled evaluation with fanouts ``-1`` up to float rounding.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from ..errors import GraphfeedError
from .evaluate import (EVAL_MAX_BATCH_EDGES, features_as_float, gather_strided, unwrap,
                       with_fanouts)

#: most destination nodes in one layer-wise batch
LAYERWISE_MAX_BATCH = 1 << 16
#: in-edges gathered at once while finding the in-neighbourhood of a node set
_HOP_CHUNK_EDGES = 1 << 24


def _in_neighbours(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, mask: np.ndarray,
                   chunk_edges: int = _HOP_CHUNK_EDGES) -> None:
    """Set ``mask[u]`` for every in-neighbour ``u`` of ``nodes``, ``chunk_edges`` edges at a
    time (memory O(chunk), whatever the degrees)."""
    starts = indptr[nodes]
    counts = indptr[nodes + 1] - starts
    cum = np.cumsum(counts)
    i = 0
    while i < nodes.shape[0]:
        base = cum[i - 1] if i else 0
        j = max(i + 1, int(np.searchsorted(cum, base + chunk_edges, side="right")))
        c, s = counts[i:j], starts[i:j]
        total = int(c.sum())
        if total:
            first = np.repeat(s - (np.cumsum(c) - c), c)
            mask[np.asarray(indices[first + np.arange(total, dtype=np.int64)])] = True
        i = j


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


class LayerwiseEvaluator:
    """Scores node sets by layer-wise inference (module docstring). Same calls as
    :class:`graphfeed.trainer.evaluate.Evaluator`: :meth:`evaluate` (every set from one pass
    over the layers), :meth:`logits` (one set), :meth:`close`.

    ``placed``: the run's ``PlacedData`` (its sampler, ``features["feat"]`` and ``["label"]``);
    ``graph``: the same graph as a host ``CSCGraph`` (in-degrees and in-neighbourhoods);
    ``sets``: name -> node ids; ``num_layers``: the model's. Every rank passes the whole sets.
    ``max_batch_edges`` / ``max_batch``: the bounds of one batch (:func:`degree_groups`)."""

    def __init__(self, placed, graph, sets: dict, num_layers: int, *, rank: int = 0,
                 world_size: int = 1, num_threads: int = 2, prefetch: int = 2,
                 labels: bool = True, max_batch_edges: int = EVAL_MAX_BATCH_EDGES,
                 max_batch: int = LAYERWISE_MAX_BATCH):
        import torch

        self.placed, self.graph = placed, graph
        self.rank, self.world_size = rank, world_size
        self.device = torch.device(placed.device)
        self.num_layers = int(num_layers)
        self.num_threads, self.prefetch = num_threads, prefetch
        self.max_batch_edges, self.max_batch = int(max_batch_edges), int(max_batch)
        self.sets = {k: np.asarray(v, dtype=np.int64).reshape(-1) for k, v in sets.items()}
        self.labels = {}
        if labels:
            lab = placed.features["label"]
            for k, ids in self.sets.items():
                self.labels[k] = lab.read(torch.from_numpy(ids)).to(torch.long).reshape(-1).cpu()
        self._sampler = with_fanouts(placed.sampler, [-1])
        self._plans = {}  # names -> per-layer node sets

    def _layers(self, names: tuple) -> list:
        if names not in self._plans:
            targets = np.concatenate([self.sets[k] for k in names]) if names else np.zeros(0, np.int64)
            self._plans[names] = needed_nodes(self.graph, targets, self.num_layers)
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
        layers = self._layers(names)
        was_training = net.training
        net.eval()
        try:
            h, nodes = None, None
            with torch.no_grad():
                for i in range(self.num_layers):
                    h = self._layer(net, i, layers[i], h, nodes, progress)
                    nodes = layers[i]
        finally:
            net.train(was_training)
        out = {}
        last = torch.from_numpy(layers[-1]).to(h.device)
        for k in names:
            rows = torch.searchsorted(last, torch.from_numpy(self.sets[k]).to(h.device))
            got = h[rows]
            got = got.argmax(-1, keepdim=True) if argmax else got
            out[k] = (got.cpu(), self.labels.get(k))
        return out

    def _layer(self, net, i: int, nodes: np.ndarray, h_prev, prev_nodes, progress: bool):
        """Layer ``i``'s output for ``nodes`` (rows in their order), every rank's share gathered."""
        import torch

        from .._progress import bar
        from ..loader.dataloader import DataLoader
        from ..loader.item_sampler import ItemSampler

        n, w = int(self.graph.num_nodes), self.world_size
        share = nodes[self.rank::w]
        groups = degree_groups(share, self.graph.in_degrees, self.max_batch_edges,
                               self.max_batch)
        # global id -> row of the previous layer (identity when it covers every node)
        prev_index = None
        if h_prev is not None and prev_nodes.shape[0] < n:
            prev_index = torch.from_numpy(prev_nodes).to(h_prev.device)
        share_t = torch.from_numpy(share)
        local = None
        loaders = [DataLoader(ItemSampler(ids, bs, shuffle=False), self._sampler,
                              node_features={"feat": self.placed.features["feat"]} if i == 0 else None,
                              device=self.device, num_threads=self.num_threads,
                              prefetch=self.prefetch)
                   for ids, bs in groups]
        try:
            total = sum(len(ld) for ld in loaders)
            with bar(total, f"eval layer {i}", enabled=progress) as pbar:
                for loader in loaders:
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
        finally:
            for loader in loaders:
                loader.close()
        if w == 1:
            if local is None:  # nothing to compute: no rows
                local = torch.zeros((0, 0), dtype=torch.float32)
            return local
        return gather_strided(local, nodes.shape[0], w, alloc=self._alloc)

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
        self._plans = {}
