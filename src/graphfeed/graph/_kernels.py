"""numba kernels that build and check CSC arrays from COO edges in O(E + N).

One set serves both builders: :meth:`graphfeed.graph.csc.CSCGraph.from_edges` (the whole edge
list in memory: one window spanning every node) and the streamed, windowed build of
``graphfeed prepare`` (:func:`graphfeed.datasets.build.build_csc_streaming`: chunks of edges,
windows of destination nodes).
"""

from __future__ import annotations

import numpy as np

from .._numba import kernel, prefetch


@kernel
def accumulate_in_degrees(src, dst, counts, undirected, drop_self_loops):
    """``counts[v + 1] += in-degree of v`` over the edges ``src[e] -> dst[e]`` (one chunk; a
    cumulative sum of ``counts`` afterwards is ``indptr``). ``undirected`` also counts
    ``dst -> src``; a self loop counts once (reversed, it is itself), or not at all with
    ``drop_self_loops``.

    Returns the index of the first edge with an endpoint outside ``[0, len(counts) - 1)``, or -1.
    """
    num_nodes = counts.shape[0] - 1
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s < 0 or d < 0 or s >= num_nodes or d >= num_nodes:
            return e
        if s == d:
            if drop_self_loops:
                continue
            counts[d + 1] += 1
            continue
        counts[d + 1] += 1
        if undirected:
            counts[s + 1] += 1
    return -1


@kernel
def scatter_window(src, dst, vals, lo, hi, base, cursor, out, vout, undirected, drop_self_loops,
                   tag_reverse):
    """Place the edges whose destination lies in ``[lo, hi)``: each edge's source goes to
    ``cursor[d - lo]`` (an absolute edge position) in ``out``, the slice of the indices array
    starting at edge ``base``, and its values ``vals[:, e]`` (``(k, R)``, k may be 0) to row
    ``p - base`` of ``vout`` (``(window, k)``). Stable (a counting sort): a column keeps its
    input order; a reverse edge carries the same values. ``cursor`` starts as ``indptr[lo:hi]``
    and ends as ``indptr[lo + 1:hi + 1]``. ``tag_reverse``: a reverse edge ``d -> s`` is
    written as ``-(d + 1)``, for :func:`drop_present_reverses` to resolve."""
    k = vals.shape[0]
    for e in range(src.shape[0]):
        s = src[e]
        d = dst[e]
        if s == d and drop_self_loops:
            continue
        if d >= lo and d < hi:
            p = cursor[d - lo]
            out[p - base] = s
            for j in range(k):
                vout[p - base, j] = vals[j, e]
            cursor[d - lo] = p + 1
        if undirected and s != d and s >= lo and s < hi:
            p = cursor[s - lo]
            out[p - base] = -d - 1 if tag_reverse else d
            for j in range(k):
                vout[p - base, j] = vals[j, e]
            cursor[s - lo] = p + 1


@kernel
def dedupe_window(local_indptr, indices, vals, marker, new_counts):
    """Drop repeated sources within each column of a window, in place (keep the first, and its
    row of ``vals``, ``(window, k)``). O(window) with a last-seen marker per node, no sorting.

    ``local_indptr`` are offsets into ``indices`` (the window); ``marker`` is an int64 array of
    ``num_nodes`` entries set to -1 (see :func:`empty_marker`; it is -1 again on return);
    writes each column's new size to ``new_counts`` and returns the window's new edge count.
    Columns stay packed from the window start.
    """
    k = vals.shape[1]
    w = 0
    for v in range(local_indptr.shape[0] - 1):
        start = w
        for p in range(local_indptr[v], local_indptr[v + 1]):
            u = indices[p]
            if marker[u] == v:
                continue
            marker[u] = v
            indices[w] = u
            for j in range(k):
                vals[w, j] = vals[p, j]
            w += 1
        new_counts[v] = w - start
        # reset markers of this column so the next window (v restarts at 0) sees a clean slate
        for p in range(start, w):
            marker[indices[p]] = -1
    return w


@kernel
def drop_present_reverses(local_indptr, indices, vals, marker, new_counts):
    """Resolve the reverse edges :func:`scatter_window` wrote tagged (``-(u + 1)`` in column
    ``v`` for the reverse of the input edge ``v -> u``), in place: a reverse is dropped when the
    input holds ``u -> v`` itself (an untagged ``u`` in column ``v``), else stored as ``u``. So
    adding the reverse of every edge of an input that already holds both directions stores each
    directed edge once. Arguments as :func:`dedupe_window` (columns packed from the window
    start; ``marker`` all -1 before and after). Returns ``(kept edges, dropped reverses)``."""
    k = vals.shape[1]
    w = 0
    dropped = 0
    for v in range(local_indptr.shape[0] - 1):
        a = local_indptr[v]
        b = local_indptr[v + 1]
        for p in range(a, b):
            if indices[p] >= 0:
                marker[indices[p]] = v
        start = w
        for p in range(a, b):
            u = indices[p]
            if u < 0:
                u = -u - 1
                if marker[u] == v:
                    dropped += 1
                    continue
            indices[w] = u
            for j in range(k):
                vals[w, j] = vals[p, j]
            w += 1
        new_counts[v] = w - start
        for p in range(start, w):  # every marked node is among the kept entries
            marker[indices[p]] = -1
    return w, dropped


def empty_marker(num_nodes: int) -> np.ndarray:
    """The marker array :func:`dedupe_window` expects: ``num_nodes`` int64 entries of -1."""
    return np.full(num_nodes, -1, dtype=np.int64)


@kernel
def count_sources(indices, out, lo, hi):
    """``out[v - lo] += 1`` for every entry ``v`` of ``indices`` in ``[lo, hi)`` (ids already
    checked): threads that count disjoint id ranges over the same indices share no counter."""
    n = indices.shape[0]
    for i in range(n):
        if i + 32 < n:  # the counter 32 entries ahead: many cache misses in flight at once
            w = indices[i + 32]
            if w >= lo and w < hi:
                prefetch(out, w - lo)
        v = indices[i]
        if v >= lo and v < hi:
            out[v - lo] += 1


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
