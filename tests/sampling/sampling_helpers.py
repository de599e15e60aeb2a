"""Helpers for the sampler tests: random graphs and the MiniBatch invariant checker."""

from __future__ import annotations

import numpy as np
import torch

from graphfeed.graph.csc import CSCGraph


def random_graph(num_nodes=300, seed=0, *, hubs=(70, 150), isolated=10, index_dtype=None):
    """A directed graph with varied in-degrees: zero-degree nodes, low degrees, and hub nodes
    with in-degree above 64 (so every sampling path of the kernels runs)."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    active = num_nodes - isolated  # the last `isolated` nodes get no in-edges
    degs = rng.integers(0, 20, size=active)
    for h, d in zip(range(len(hubs)), hubs):
        degs[h] = d
    for v in range(active):
        nbrs = rng.choice(num_nodes, size=min(int(degs[v]), num_nodes), replace=False)
        src.extend(nbrs.tolist())
        dst.extend([v] * len(nbrs))
    g = CSCGraph.from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), num_nodes)
    if index_dtype is not None:
        g = CSCGraph(g.indptr, g.indices.astype(index_dtype))
    return g


def check_minibatch(graph: CSCGraph, mb, seeds, fanouts, replace: bool, *, distinct_nbrs=True):
    """Assert every structural invariant of a sampled MiniBatch (tensors may be on any device)."""
    indptr = np.asarray(graph.indptr)
    indices = np.asarray(graph.indices).astype(np.int64)
    deg_all = np.diff(indptr)
    seeds = np.asarray(seeds, dtype=np.int64)
    assert len(mb.blocks) == len(fanouts)
    assert np.array_equal(mb.seeds.cpu().numpy(), seeds)
    assert np.array_equal(mb.blocks[-1].dst_nodes.cpu().numpy(), seeds)
    assert torch.equal(mb.input_nodes, mb.blocks[0].src_nodes)
    for i in range(len(fanouts) - 1):
        assert torch.equal(mb.blocks[i].dst_nodes, mb.blocks[i + 1].src_nodes)
    for block, fanout in zip(mb.blocks, fanouts):
        ei = block.edge_index.cpu().numpy()
        src_nodes = block.src_nodes.cpu().numpy()
        assert block.edge_index.dtype == torch.int64 and block.src_nodes.dtype == torch.int64
        assert ei.ndim == 2 and ei.shape[0] == 2
        assert len(np.unique(src_nodes)) == len(src_nodes), "src_nodes must be unique"
        n_dst = block.num_dst
        assert n_dst <= len(src_nodes)
        if ei.shape[1]:
            assert ei[0].min() >= 0 and ei[0].max() < len(src_nodes)
            assert ei[1].min() >= 0 and ei[1].max() < n_dst
        gsrc = src_nodes[ei[0]]
        gdst = src_nodes[ei[1]]
        dst_deg = deg_all[src_nodes[:n_dst]]
        # exact per-destination counts
        counts = np.bincount(ei[1], minlength=n_dst)
        if fanout == -1:
            expected = dst_deg
        elif replace:
            expected = np.where(dst_deg > 0, fanout, 0)
        else:
            expected = np.minimum(dst_deg, fanout)
        assert np.array_equal(counts, expected)
        # every sampled edge exists; edge ids (when present) point at it
        if block.edge_ids is not None:
            eids = block.edge_ids.cpu().numpy()
            assert eids.shape == (ei.shape[1],)
            assert np.all(eids >= indptr[gdst]) and np.all(eids < indptr[gdst + 1])
            assert np.array_equal(indices[eids], gsrc)
            if not replace or fanout == -1:
                assert len(np.unique(eids)) == len(eids), "edges repeat without replacement"
        else:
            for u, v in zip(gsrc.tolist(), gdst.tolist()):
                assert u in indices[indptr[v] : indptr[v + 1]]
        if (not replace or fanout == -1) and distinct_nbrs:
            pairs = gsrc * (len(deg_all) + 1) + gdst
            assert len(np.unique(pairs)) == len(pairs)
        # non-destination sources: each used by an edge, numbered in order of first appearance
        new = ei[0][ei[0] >= n_dst]
        _, first = np.unique(new, return_index=True)
        order = new[np.sort(first)]
        assert np.array_equal(order, np.arange(n_dst, len(src_nodes)))


def assert_same_minibatch(a, b):
    """Two MiniBatches are equal: seeds, and per block the edge index, source nodes, destination
    count, edge ids and edge weights (each absent in both or equal)."""
    assert torch.equal(a.seeds, b.seeds)
    assert len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        assert torch.equal(x.edge_index, y.edge_index)
        assert torch.equal(x.src_nodes, y.src_nodes)
        assert x.num_dst == y.num_dst
        for f in ("edge_ids", "edge_weight"):
            u, v = getattr(x, f), getattr(y, f)
            assert (u is None) == (v is None)
            if u is not None:
                assert torch.equal(u, v)
