"""Checks shared by the PyG interop tests: what every batch of PyG's loaders over
``GraphfeedSampler`` must satisfy, against the graphfeed graph it was sampled from."""

from __future__ import annotations

import numpy as np
import torch


def edge_keys(graph) -> np.ndarray:
    """Sorted ``src * N + dst`` of every edge of a ``CSCGraph``."""
    n = graph.num_nodes
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(graph.indptr))
    return np.sort(np.asarray(graph.indices, dtype=np.int64) * n + dst)


def typed_edge_keys(hetero, et) -> tuple:
    src, dst = hetero.edges_of(et)
    n = max(hetero.num_nodes_of(et[0]), hetero.num_nodes_of(et[2]))
    return np.sort(src * n + dst), n


def contains(sorted_keys: np.ndarray, keys: np.ndarray) -> bool:
    if keys.size == 0:
        return True
    at = np.searchsorted(sorted_keys, keys).clip(max=max(sorted_keys.size - 1, 0))
    return bool(sorted_keys.size) and bool((sorted_keys[at] == keys).all())


def hop_of(num_sampled_nodes) -> torch.Tensor:
    """The hop of every node of a batch (PyG's node order: seeds, hop 1, hop 2, ...)."""
    return torch.repeat_interleave(torch.arange(len(num_sampled_nodes)),
                                   torch.tensor(num_sampled_nodes))


def check_homogeneous_batch(b, graph, num_neighbors, seeds=None, *, exact=True):
    """The PyG subgraph rules: seeds first, every edge a graph edge (and at its ``e_id``), edges
    of hop ``h`` only into nodes first reached at hop ``h - 1``, at most (``exact``: exactly
    ``min(degree, fanout)``, as sampling without replacement gives) the hop's fanout of
    in-edges per node, no repeated edge, counts per hop consistent."""
    n_id, ei = b.n_id, b.edge_index
    assert n_id.unique().numel() == n_id.numel()
    if seeds is not None:
        assert torch.equal(n_id[: seeds.numel()], seeds)
    assert sum(b.num_sampled_nodes) == n_id.numel()
    assert sum(b.num_sampled_edges) == ei.shape[1]
    src, dst = n_id[ei[0]].numpy(), n_id[ei[1]].numpy()
    assert contains(edge_keys(graph), src.astype(np.int64) * graph.num_nodes + dst)
    indptr = np.asarray(graph.indptr)
    e = b.e_id.numpy()
    assert (np.asarray(graph.indices)[e] == src).all()
    assert (np.searchsorted(indptr, e, side="right") - 1 == dst).all()
    assert np.unique(e).size == e.size  # without replacement: no edge twice
    hops = hop_of(b.num_sampled_nodes)
    start = 0
    for h, count in enumerate(b.num_sampled_edges):
        cols = ei[1, start:start + count]
        assert (hops[cols] == h).all(), "an edge of hop h+1 into a node not reached at hop h"
        start += count
    deg_in_batch = torch.bincount(ei[1], minlength=n_id.numel())
    degree = torch.from_numpy(np.diff(indptr)[n_id.numpy()])
    for h, f in enumerate(num_neighbors):
        sel = hops == h
        want = degree[sel] if f < 0 else degree[sel].clamp(max=f)
        got = deg_in_batch[sel]
        assert (got == want).all() if exact else (got <= want).all()
    assert (deg_in_batch[hops == len(num_neighbors)] == 0).all()


def check_hetero_batch(b, hetero, num_neighbors: dict, seed_type=None, seeds=None):
    """The same rules per node type and edge type of a ``HeteroData`` batch (``num_neighbors``
    per edge type, hop 1 first; counts at most the fanout)."""
    nodes = {t: b[t].n_id for t in hetero.node_types}
    for t, v in nodes.items():
        assert v.unique().numel() == v.numel()
        assert sum(b[t].num_sampled_nodes) == v.numel()
        assert (v < hetero.num_nodes_of(t)).all()
    if seeds is not None:
        assert torch.equal(nodes[seed_type][: seeds.numel()], seeds)
    hops = {t: hop_of(b[t].num_sampled_nodes) for t in hetero.node_types}
    for et in hetero.edge_types:
        s, _, d = et
        ei = b[et].edge_index
        keys, n = typed_edge_keys(hetero, et)
        gs, gd = nodes[s][ei[0]].numpy(), nodes[d][ei[1]].numpy()
        assert contains(keys, gs.astype(np.int64) * n + gd), et
        counts = b[et].num_sampled_edges
        assert sum(counts) == ei.shape[1]
        start = 0
        for h, count in enumerate(counts):
            cols = ei[1, start:start + count]
            assert (hops[d][cols] == h).all(), et
            f = num_neighbors[et][h]
            if f >= 0 and count:
                assert int(torch.bincount(cols).max()) <= f, et
            start += count
