"""In-neighbourhoods of node sets, in bounded batches: what whole-graph (layer-wise) inference walks.

- :class:`Relations`: any graph as node types and relations; an untyped ``CSCGraph`` is the one
  node type ``None`` and the one relation ``None``, a ``HeteroGraph`` its types and edge types
  over the fused CSC (global ids, each destination's in-edges grouped by relation);
- :func:`needed_nodes`: the nodes whose layer-``i`` output an evaluation of some targets needs;
- :func:`edge_batches` / :func:`degree_groups`: destinations cut into batches of at most so
  many in-edges and rows;
- :func:`in_edges`: a batch's in-edges as CSR rows (a slice of the graph when the ids are
  consecutive), :func:`split_relations` one CSR per relation.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["Relations", "degree_groups", "edge_batches", "in_edges", "needed_nodes",
           "split_relations"]

#: in-edges gathered at once while finding the in-neighbourhood of a node set
HOP_CHUNK_EDGES = 1 << 24


class Relations:
    """``graph`` (a ``CSCGraph`` or ``HeteroGraph``) seen as node types and relations.

    - ``csc``: the (fused) CSC graph, global ids; ``typed``: whether ``graph`` has types;
    - ``node_types``: ``(None,)`` or the graph's; ``relations``: ``(None,)`` or its edge types;
    - :meth:`by_type`, :meth:`type_offset`, :meth:`source_type`, :meth:`in_edges`.
    """

    def __init__(self, graph):
        from .hetero import HeteroGraph

        self.graph = graph
        self.typed = isinstance(graph, HeteroGraph)
        self.csc = graph.csc if self.typed else graph
        self.node_types = tuple(graph.node_types) if self.typed else (None,)
        self.relations = tuple(graph.edge_types) if self.typed else (None,)
        self._rel_id = {et: r for r, et in enumerate(self.relations)}
        n = int(self.csc.num_nodes)
        self.offsets = (np.asarray(graph.node_offsets, dtype=np.int64) if self.typed
                        else np.array([0, n], dtype=np.int64))

    def by_type(self, nodes: np.ndarray) -> dict:
        """Node type -> the sorted global ids of ``nodes`` (sorted) of that type (types with
        none left out)."""
        cut = np.searchsorted(nodes, self.offsets)
        return {t: nodes[cut[j]:cut[j + 1]] for j, t in enumerate(self.node_types)
                if cut[j + 1] > cut[j]}

    def type_offset(self, t) -> int:
        """The first global id of node type ``t``."""
        return int(self.offsets[self.node_types.index(t)])

    def type_of(self, ids: np.ndarray) -> np.ndarray:
        """The index in :attr:`node_types` of each global id of ``ids``."""
        return np.searchsorted(self.offsets, ids, side="right") - 1

    @staticmethod
    def source_type(rel):
        """The node type a relation's edges come from."""
        return None if rel is None else rel[0]

    def in_edges(self, dst: np.ndarray, relations: Sequence) -> dict:
        """Relation -> ``(crow, col)``: the in-edges of ``dst`` (sorted distinct int64 global
        ids of one type) of each of ``relations``, as CSR rows in ``dst``'s order."""
        if not self.typed:
            return {None: in_edges(self.csc.indptr, self.csc.indices, dst)}
        crow, col, rel = in_edges(self.csc.indptr, self.csc.indices, dst, self.graph.edge_type)
        ids = [self._rel_id[et] for et in relations]
        return {et: (c, col[pos]) for et, (c, pos) in zip(relations,
                                                         split_relations(crow, rel, ids))}


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


def in_edges(indptr: np.ndarray, indices: np.ndarray, dst: np.ndarray, *aligned):
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


def _in_neighbours(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray, mask: np.ndarray,
                   chunk_edges: int = HOP_CHUNK_EDGES) -> None:
    """Set ``mask[u]`` for every in-neighbour ``u`` of ``nodes`` (sorted distinct),
    ``chunk_edges`` edges at a time (memory O(chunk), whatever the degrees)."""
    starts = np.asarray(indptr[nodes], dtype=np.int64)
    counts = np.asarray(indptr[nodes + 1], dtype=np.int64) - starts
    for a, b in edge_batches(counts, chunk_edges, nodes.shape[0]):
        _, col = in_edges(indptr, indices, nodes[a:b])
        mask[col] = True


def needed_nodes(graph, targets, num_layers: int) -> list:
    """``sets[i]``: the sorted int64 ids whose layer-``i`` output the evaluation of ``targets``
    needs: ``sets[-1]`` the targets, ``sets[i]`` ``sets[i + 1]`` and its in-neighbours
    (``graph``: a ``CSCGraph``, a typed graph's fused one)."""
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
                  max_batch: int) -> list:
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
