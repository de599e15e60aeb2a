"""The two PyG subgraph shapes that graphfeed's shared sample does not give by itself, built
from it in numpy on the CPU (``GraphfeedSampler(disjoint=True)``,
``GraphfeedSampler(subgraph_type="induced")``).

- :func:`disjoint_output`: one subgraph per root (PyG's ``disjoint=True``: node ids repeat
  across roots, ``batch`` says whose subgraph each node is in). A graphfeed block samples every
  destination of its layer, so every (root, node) pair first reached at hop ``h - 1`` finds its
  hop-``h`` in-edges in block ``h``: each root's subgraph is a walk over the shared blocks,
  deduplicated per root. O(output nodes + edges) plus a sort per hop.
- :func:`induced_edges`: every stored edge between the sampled nodes (PyG's
  ``subgraph_type="induced"``, as torch-sparse's ``neighbor_sample(directed=False)`` gives it:
  by destination in node order, then in CSC order). O(sum of the sampled nodes' in-degrees):
  a hub pays for all its in-edges, as in PyG.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

__all__ = ["disjoint_output", "induced_edges"]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy()


def _expand(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``concat(arange(s, s + c) for s, c in zip(starts, counts))`` without a Python loop."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.repeat(starts.astype(np.int64) - offsets, counts) + np.arange(total, dtype=np.int64)


def disjoint_output(mb, roots: np.ndarray, root_batch: Optional[np.ndarray] = None):
    """PyG's disjoint ``SamplerOutput`` of a homogeneous ``MiniBatch``: subgraph ``i`` grows
    from ``roots[i]`` (a local id of ``mb``; roots may repeat), its nodes deduplicated within the
    subgraph only. Output nodes: the roots first (one each, in order), then hop by hop in the
    order they were reached; ``batch`` holds ``root_batch[i]`` (default ``i``) for every node
    of subgraph ``i``; ``num_sampled_nodes``/``num_sampled_edges`` per hop.

    A node reached by two roots at the same hop has the same sampled in-edges in both
    subgraphs (graphfeed samples it once per layer; PyG draws each copy independently); with
    every neighbour (``-1``) the two are identical."""
    from torch_geometric.sampler import SamplerOutput

    roots = np.asarray(roots, dtype=np.int64)
    blocks = mb.blocks
    nodes = _np(blocks[0].src_nodes) if blocks else _np(mb.seeds)
    width = max(int(nodes.shape[0]), 1)
    num_roots = int(roots.shape[0])
    sub = [np.arange(num_roots, dtype=np.int64)]    # subgraph of every output node
    local = [roots]                                  # its local id in ``mb``
    counts = [num_roots]
    # (subgraph, local id) keys already placed, sorted, with their output positions
    seen = np.arange(num_roots, dtype=np.int64) * width + roots  # increasing: roots < width
    seen_at = np.arange(num_roots, dtype=np.int64)
    f_sub, f_local, f_at = sub[0], roots, seen_at.copy()  # the frontier: last hop's new nodes
    total = num_roots
    rows, cols, eids, num_edges = [], [], [], []
    for b in reversed(blocks):  # hop 1 (the seeds' block) first
        ei = _np(b.edge_index)
        order = np.argsort(ei[1], kind="stable")  # the block's edges grouped by destination
        ptr = np.zeros(b.num_dst + 1, dtype=np.int64)
        np.cumsum(np.bincount(ei[1], minlength=b.num_dst), out=ptr[1:])
        deg = ptr[f_local + 1] - ptr[f_local]
        pos = order[_expand(ptr[f_local], deg)]
        src = ei[0][pos].astype(np.int64, copy=False)
        e_sub = np.repeat(f_sub, deg)
        col = np.repeat(f_at, deg)
        keys = e_sub * width + src
        at = np.searchsorted(seen, keys).clip(max=max(seen.shape[0] - 1, 0))
        found = seen[at] == keys if seen.shape[0] else np.zeros(keys.shape[0], dtype=bool)
        row = np.empty(keys.shape[0], dtype=np.int64)
        row[found] = seen_at[at[found]]
        new, first, inverse = np.unique(keys[~found], return_index=True, return_inverse=True)
        by_first = np.argsort(first, kind="stable")  # number new nodes in the order reached
        rank = np.empty(new.shape[0], dtype=np.int64)
        rank[by_first] = np.arange(new.shape[0])
        row[~found] = total + rank[inverse.reshape(-1)]
        reached = new[by_first]
        f_sub, f_local = reached // width, reached % width
        f_at = total + np.arange(reached.shape[0], dtype=np.int64)
        sub.append(f_sub)
        local.append(f_local)
        counts.append(int(reached.shape[0]))
        total += int(reached.shape[0])
        keep = np.argsort(np.concatenate([seen, reached]), kind="stable")
        seen = np.concatenate([seen, reached])[keep]
        seen_at = np.concatenate([seen_at, f_at])[keep]
        rows.append(row)
        cols.append(col)
        eids.append(None if b.edge_ids is None else _np(b.edge_ids)[pos])
        num_edges.append(int(row.shape[0]))
    sub_all = np.concatenate(sub)
    batch = sub_all if root_batch is None else np.asarray(root_batch, dtype=np.int64)[sub_all]
    t = torch.from_numpy
    empty = np.zeros(0, dtype=np.int64)
    return SamplerOutput(
        node=t(nodes[np.concatenate(local)].astype(np.int64, copy=False)),
        row=t(np.concatenate(rows) if rows else empty),
        col=t(np.concatenate(cols) if cols else empty),
        edge=(None if not eids or eids[0] is None
              else t(np.concatenate(eids).astype(np.int64, copy=False))),
        batch=t(batch), num_sampled_nodes=counts, num_sampled_edges=num_edges)


def induced_edges(indptr, indices, nodes: np.ndarray, node_map: Optional[np.ndarray] = None):
    """``(row, col, edge)`` int64 of every stored edge ``u -> v`` with ``u`` and ``v`` both in
    ``nodes`` (distinct global ids): ``row``/``col`` positions in ``nodes``, ``edge`` the CSC
    position (graphfeed's edge id). Ordered by destination as in ``nodes``, then by CSC
    position; multi-edges and self-loops are kept, as stored.

    ``node_map``: a clean int32 array of one ``-1`` per graph node (a core ``MapPool``'s dense
    map), left clean: the sources are looked up in it (a gather, about 20 ms for 2.2M in-edges
    of 110k nodes); without one, in the sorted ``nodes`` (binary searches, about 25x slower on
    that batch, but no memory of the graph's size)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    indptr = np.asarray(indptr)
    starts = indptr[nodes].astype(np.int64, copy=False)
    deg = indptr[nodes + 1].astype(np.int64, copy=False) - starts
    pos = _expand(starts, deg)
    src = np.asarray(indices)[pos]
    col = np.repeat(np.arange(nodes.shape[0], dtype=np.int64), deg)
    if node_map is not None:
        node_map[nodes] = np.arange(nodes.shape[0], dtype=np.int32)
        try:
            row = node_map[src]
        finally:
            node_map[nodes] = -1
        keep = row >= 0
        return row[keep].astype(np.int64), col[keep], pos[keep]
    src = src.astype(np.int64, copy=False)
    by_id = np.argsort(nodes, kind="stable")
    sorted_ids = nodes[by_id]
    at = np.searchsorted(sorted_ids, src).clip(max=max(nodes.shape[0] - 1, 0))
    keep = sorted_ids[at] == src if nodes.shape[0] else np.zeros(0, dtype=bool)
    return by_id[at[keep]], col[keep], pos[keep]
