"""numba kernels for building CSC arrays from COO edges in O(E + N)."""

from __future__ import annotations

import numpy as np

from .._numba import kernel


@kernel
def count_in_degrees(src, dst, num_nodes, add_reverse, drop_self_loops):
    counts = np.zeros(num_nodes + 1, dtype=np.int64)
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s == d:
            if drop_self_loops:
                continue
            counts[d + 1] += 1  # a self loop reversed is itself: add it once
            continue
        counts[d + 1] += 1
        if add_reverse:
            counts[s + 1] += 1
    for v in range(num_nodes):
        counts[v + 1] += counts[v]
    return counts  # == indptr


@kernel
def scatter_edges(src, dst, weights, has_weights, indptr, add_reverse, drop_self_loops, indices, out_w):
    """Stable counting-sort placement: neighbours keep their input order within a column."""
    num_nodes = indptr.shape[0] - 1
    cursor = indptr[:num_nodes].copy()
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s == d:
            if drop_self_loops:
                continue
        p = cursor[d]
        indices[p] = s
        if has_weights:
            out_w[p] = weights[e]
        cursor[d] = p + 1
        if add_reverse and s != d:
            p = cursor[s]
            indices[p] = d
            if has_weights:
                out_w[p] = weights[e]
            cursor[s] = p + 1


@kernel
def dedupe_columns(indptr, indices, weights, has_weights):
    """Drop repeated (src, dst) pairs in place, keeping the first; returns the new indptr.

    O(E + N): a last-seen marker per node instead of sorting each column.
    """
    num_nodes = indptr.shape[0] - 1
    marker = np.full(num_nodes, -1, dtype=np.int64)
    new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    w = 0
    for v in range(num_nodes):
        for p in range(indptr[v], indptr[v + 1]):
            u = indices[p]
            if marker[u] == v:
                continue
            marker[u] = v
            indices[w] = u
            if has_weights:
                weights[w] = weights[p]
            w += 1
        new_indptr[v + 1] = w
    return new_indptr


@kernel
def check_csc(indptr, indices, num_nodes):
    """Returns (-1, 0) if valid, else (code, position): 1 indptr decreases, 2 index out of range."""
    for v in range(indptr.shape[0] - 1):
        if indptr[v + 1] < indptr[v]:
            return 1, v
    for p in range(indices.shape[0]):
        u = indices[p]
        if u < 0 or u >= num_nodes:
            return 2, p
    return -1, 0
