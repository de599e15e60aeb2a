"""numba kernels of the partitioned graph: per-part CSC builds, edge cut, and uniform sampling
keyed by a destination's GLOBAL id.

The keyed fill reuses ``sampling._kernels._fill_range`` (Floyd / sparse Fisher-Yates, exactly
uniform) with the destination's key in place of its position in the batch: the random numbers of
a destination are ``splitmix64(mix(layer_key ^ mix(key)) + c * GOLDEN)``, so a node's sample in
a batch does not depend on which part, or which position of which request, it is sampled in.
Inputs come from our own code (offsets built here, ids checked at the boundary), so the loops
index without bounds checks, like the sampling kernels.
"""

from __future__ import annotations

from .._numba import kernel
from ..sampling._kernels import _fill_range, _hash_tables, count_layer


@kernel
def part_degrees(indptr, members, out_indptr):
    """``out_indptr[i + 1]`` = in-degree of node ``members[i]``; then the running sum."""
    out_indptr[0] = 0
    for i in range(members.shape[0]):
        v = members[i]
        out_indptr[i + 1] = out_indptr[i] + (indptr[v + 1] - indptr[v])


@kernel
def part_fill(indptr, indices, members, new_ids, out_indptr, out_indices):
    """The in-edges of ``members`` (old ids), in the stored order, with their sources relabelled
    by ``new_ids`` (old -> new), into ``out_indices`` at ``out_indptr``."""
    for i in range(members.shape[0]):
        v = members[i]
        st = indptr[v]
        o = out_indptr[i]
        for q in range(indptr[v + 1] - st):
            out_indices[o + q] = new_ids[indices[st + q]]


@kernel
def cut_edges(indptr, indices, part_of):
    """How many edges ``u -> v`` have ``part_of[u] != part_of[v]``."""
    cut = 0
    for v in range(indptr.shape[0] - 1):
        pv = part_of[v]
        for q in range(indptr[v], indptr[v + 1]):
            if part_of[indices[q]] != pv:
                cut += 1
    return cut


@kernel
def count_keyed(indptr, local, fanout, replace, offsets, starts, degs):
    """For destination ``i`` (row ``local[i]`` of ``indptr``): its neighbour range into
    ``starts``/``degs`` and its sampled count into ``offsets[i + 1]``, then the running sum."""
    offsets[0] = 0
    n = local.shape[0]
    count_layer(indptr, local, 0, n, fanout, replace, offsets, starts, degs)
    for i in range(n):
        offsets[i + 1] += offsets[i]


@kernel
def fill_keyed(indices, starts, degs, keys, fanout, replace, layer_key, offsets, rows, scratch):
    """Sample destination ``i`` keyed by ``keys[i]`` into ``rows[offsets[i]:offsets[i+1]]``
    (source ids as stored in ``indices``); ``scratch`` (same length as ``rows``) receives the
    keys and is not read."""
    hkeys, hvals = _hash_tables(fanout, replace)
    _fill_range(indices, starts, degs, 0, keys.shape[0], keys, True, 0, fanout, replace,
                layer_key, offsets, rows, scratch, scratch, False, hkeys, hvals)


@kernel
def scatter_segments(src, src_offsets, order, dst_offsets, out):
    """Segment ``j`` of ``src`` (``src_offsets[j]:src_offsets[j+1]``) goes to segment
    ``order[j]`` of ``out`` (at ``dst_offsets[order[j]]``)."""
    for j in range(order.shape[0]):
        a = src_offsets[j]
        n = src_offsets[j + 1] - a
        b = dst_offsets[order[j]]
        for q in range(n):
            out[b + q] = src[a + q]


@kernel
def fill_cols(offsets, cols):
    """``cols[offsets[i]:offsets[i+1]] = i`` (the destination of each sampled edge)."""
    for i in range(offsets.shape[0] - 1):
        for q in range(offsets[i], offsets[i + 1]):
            cols[q] = i


@kernel
def sym_degrees(indptr, indices, xadj):
    """``xadj[u + 1]``: the entries of row ``u`` of ``A + A^T`` before repeats are dropped (one
    per stored edge ``u -> v`` or ``v -> u`` with ``u != v``); then the running sum, so row ``u``
    spans ``xadj[u]:xadj[u + 1]``. ``xadj`` (``n + 1``) must be zero."""
    n = indptr.shape[0] - 1
    for v in range(n):
        for q in range(indptr[v], indptr[v + 1]):
            u = indices[q]
            if u != v:
                xadj[u + 1] += 1
                xadj[v + 1] += 1
    for v in range(n):
        xadj[v + 1] += xadj[v]


@kernel
def sym_fill(indptr, indices, xadj, pos, adjncy):
    """Both directions of every stored edge without self loops into ``adjncy`` at the rows of
    ``xadj`` (``sym_degrees``); ``pos`` (``n``) is a cursor per row, overwritten."""
    n = indptr.shape[0] - 1
    for v in range(n):
        pos[v] = xadj[v]
    for v in range(n):
        for q in range(indptr[v], indptr[v + 1]):
            u = indices[q]
            if u != v:
                adjncy[pos[u]] = v
                pos[u] += 1
                adjncy[pos[v]] = u
                pos[v] += 1


@kernel
def sort_unique_rows(xadj, adjncy):
    """Sort every row of ``(xadj, adjncy)`` and drop its repeats, moving the rows left so they
    stay contiguous; ``xadj`` is rewritten in place. Returns the entries kept (``xadj[-1]``).
    Safe in place: a row's write position never passes its read position."""
    n = xadj.shape[0] - 1
    w = 0
    start = xadj[0]
    for u in range(n):
        end = xadj[u + 1]
        adjncy[start:end].sort()
        first = w
        for q in range(start, end):
            x = adjncy[q]
            if w == first or adjncy[w - 1] != x:
                adjncy[w] = x
                w += 1
        xadj[u + 1] = w
        start = end
    return w
