"""numba kernels for uniform neighbour sampling of a fused heterogeneous CSC.

The homogeneous kernels' pipelined sampler (``_kernels._fill_range``: Floyd, bit-mask Floyd,
sparse Fisher-Yates, with-replacement draws) runs unchanged on each destination's run of
in-edges of one relation (the run is found by binary search on the per-edge relation ids, which
are sorted within every neighbour range). Randomness is counter-based as in ``_kernels``: the
draws of destination ``i`` (its type-local position in the layer) for relation ``r`` start from
``dst_base(mix64(layer_key ^ mix64(r + REL_SALT)), i)``, so a batch does not depend on threads.

Layer layout. A layer's destinations are one global-id array grouped by node type
(``dst[dst_ptr[t]:dst_ptr[t + 1]]`` are type ``t``'s, in type-local order). Edges are laid out
relation-major (``edge_ptr[r]:edge_ptr[r + 1]`` are relation ``r``'s, by destination), and the
node map holds *type-local* ids, so one relabel pass yields each relation's ``edge_index`` in
the local ids of its source and destination types, and the sources of each type start with that
type's destinations (destinations-first per node type).
"""

from __future__ import annotations

import numpy as np

from .._numba import kernel, mix64, prefetch
from ._kernels import (
    _fill_range, _hash_put, _hash_shift, _hash_tables, count_for, hash_capacity, relabel_layer,
    relabel_layer_hash,
)

REL_SALT = np.uint64(0x48455445524F)  # "HETERO": relation keys differ from layer keys


@kernel
def rel_key(layer_key, r):
    return mix64(layer_key ^ mix64(np.uint64(r) + REL_SALT))


@kernel
def _lower_bound(etype, lo, hi, r):
    """First position in ``[lo, hi)`` whose relation id is ``>= r`` (``etype`` is sorted there)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if etype[mid] < r:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def _run_end(etype, lo, end, r):
    """First position in ``[lo, end)`` whose relation id is ``> r`` (``etype`` sorted there):
    a short linear scan (most runs are short; no mispredicted halvings), then binary search."""
    stop = min(end, lo + 8)
    while lo < stop:
        if etype[lo] > r:
            return lo
        lo += 1
    return _lower_bound(etype, lo, end, r + 1)


# the count pass prefetches a destination's indptr entries COUNT_AHEAD destinations ahead and,
# once those have arrived, its relation ids half as far ahead: two dependent cache misses per
# destination would otherwise be paid one after the other (measured 6x slower than the
# homogeneous count pass without it on a 1M-node graph)
COUNT_AHEAD = 16


@kernel
def count_hetero(indptr, etype, dst, dst_ptr, rel_dst, fanouts, replace, item_ptr, offsets,
                 starts, degs):
    """Per work item (relation ``r``, destination of type ``rel_dst[r]``; items of ``r`` are
    ``item_ptr[r]:item_ptr[r + 1]``): the run of in-edges of relation ``r`` into ``starts``,
    ``degs`` and the sampled count into ``offsets[item + 1]``. Destination-major: each
    destination's ``indptr`` entries and relation ids are read once for all its relations (the
    runs follow each other in relation order, so each run starts where the previous ended)."""
    num_rel = rel_dst.shape[0]
    n = dst.shape[0]
    half = COUNT_AHEAD // 2
    for t in range(dst_ptr.shape[0] - 1):
        for i in range(dst_ptr[t], dst_ptr[t + 1]):
            if i + COUNT_AHEAD < n:
                prefetch(indptr, dst[i + COUNT_AHEAD])
            if i + half < n:
                prefetch(etype, indptr[dst[i + half]])
            v = dst[i]
            lo = indptr[v]
            end = indptr[v + 1]
            j = i - dst_ptr[t]
            for r in range(num_rel):
                if rel_dst[r] != t:
                    continue
                # relations between the previous one into t and r have no in-edges here (they
                # end at other types): lo is already the start of r's run
                hi = _run_end(etype, lo, end, r)
                if item_ptr[r + 1] == item_ptr[r]:  # not sampled in this layer (fanout 0)
                    lo = hi
                    continue
                k = item_ptr[r] + j
                starts[k] = lo
                degs[k] = hi - lo
                offsets[k + 1] = count_for(hi - lo, fanouts[r], replace)
                lo = hi


@kernel
def fill_hetero(indices, dst_ptr, rel_dst, fanouts, replace, layer_key, item_ptr, offsets, starts,
                degs, rows, cols, eids, want_eids):
    """Sample every work item into its slot: ``rows`` get global source ids, ``cols`` the
    destination's type-local id."""
    for r in range(rel_dst.shape[0]):
        k0 = item_ptr[r]
        k1 = item_ptr[r + 1]
        if k1 == k0:
            continue
        f = fanouts[r]
        key = rel_key(layer_key, r)
        hkeys, hvals = _hash_tables(f, replace)
        _fill_range(indices, starts, degs, k0, k1, starts, False, k0, f, replace, key, offsets,
                    rows, cols, eids, want_eids, hkeys, hvals)


@kernel
def relabel_hetero(rows, edge_ptr, rel_src, node_map, src, src_ptr, n_src):
    """Global -> type-local ids of ``rows`` in place, relation by relation
    (:func:`relabel_layer`): a new node of type ``s`` gets the next local id ``n_src[s]`` and is
    written at ``src[src_ptr[s] + id]``."""
    for r in range(rel_src.shape[0]):
        s = rel_src[r]
        n_src[s] = relabel_layer(rows[edge_ptr[r]:edge_ptr[r + 1]], node_map, src[src_ptr[s]:],
                                 n_src[s])


@kernel
def hetero_layer_edges(indptr, indices, etype, dst, dst_ptr, rel_src, rel_dst, fanouts, replace,
                       layer_key, want_eids):
    """The count and fill of one layer (:func:`sample_hetero_layer` before its relabel):
    ``(edge_index, eids, edge_ptr, buf, cap_ptr, n_src)`` with row 0 of ``edge_index`` still
    global ids, and per type ``t`` the buffer ``buf[cap_ptr[t]:cap_ptr[t + 1]]`` holding its
    ``n_src[t]`` destinations (room for every edge whose source has type ``t``)."""
    num_rel = rel_src.shape[0]
    num_types = dst_ptr.shape[0] - 1
    item_ptr = np.zeros(num_rel + 1, np.int64)
    for r in range(num_rel):
        n_items = 0
        if fanouts[r] != 0:
            n_items = dst_ptr[rel_dst[r] + 1] - dst_ptr[rel_dst[r]]
        item_ptr[r + 1] = item_ptr[r] + n_items
    n_items = item_ptr[num_rel]
    offsets = np.empty(n_items + 1, np.int64)
    offsets[0] = 0
    starts = np.empty(n_items, np.int64)
    degs = np.empty(n_items, np.int64)
    count_hetero(indptr, etype, dst, dst_ptr, rel_dst, fanouts, replace, item_ptr, offsets,
                 starts, degs)
    for k in range(n_items):
        offsets[k + 1] += offsets[k]
    num_edges = offsets[n_items]
    edge_ptr = np.empty(num_rel + 1, np.int64)
    for r in range(num_rel + 1):
        edge_ptr[r] = offsets[item_ptr[r]]
    edge_index = np.empty((2, num_edges), np.int64)
    rows = edge_index[0]
    cols = edge_index[1]
    eids = np.empty(num_edges if want_eids else 0, np.int64)
    fill_hetero(indices, dst_ptr, rel_dst, fanouts, replace, layer_key, item_ptr, offsets, starts,
                degs, rows, cols, eids, want_eids)
    # room for each type: its destinations plus every edge whose source has that type
    cap_ptr = np.zeros(num_types + 1, np.int64)
    for t in range(num_types):
        cap_ptr[t + 1] = dst_ptr[t + 1] - dst_ptr[t]
    for r in range(num_rel):
        cap_ptr[rel_src[r] + 1] += edge_ptr[r + 1] - edge_ptr[r]
    for t in range(num_types):
        cap_ptr[t + 1] += cap_ptr[t]
    buf = np.empty(cap_ptr[num_types], np.int64)
    n_src = np.empty(num_types, np.int64)
    for t in range(num_types):
        n = dst_ptr[t + 1] - dst_ptr[t]
        buf[cap_ptr[t]:cap_ptr[t] + n] = dst[dst_ptr[t]:dst_ptr[t + 1]]
        n_src[t] = n
    return edge_index, eids, edge_ptr, buf, cap_ptr, n_src


@kernel
def compact_sources(buf, cap_ptr, n_src):
    """``(src, src_ptr)``: each type's sources (``buf``'s first ``n_src[t]`` of its room), one
    after another."""
    num_types = n_src.shape[0]
    src_ptr = np.zeros(num_types + 1, np.int64)
    for t in range(num_types):
        src_ptr[t + 1] = src_ptr[t] + n_src[t]
    src = np.empty(src_ptr[num_types], np.int64)
    for t in range(num_types):
        src[src_ptr[t]:src_ptr[t + 1]] = buf[cap_ptr[t]:cap_ptr[t] + n_src[t]]
    return src, src_ptr


@kernel
def sample_hetero_layer(indptr, indices, etype, dst, dst_ptr, rel_src, rel_dst, fanouts, replace,
                        layer_key, node_map, want_eids):
    """One layer on one thread. ``dst``: global ids grouped by type (``dst_ptr``), each already
    in ``node_map`` as its type-local id. ``fanouts[r]``: relation ``r``'s fanout (``0``: not
    sampled, ``-1``: every in-edge).

    Returns ``(edge_index, eids, edge_ptr, src, src_ptr)``: relation ``r``'s edges are columns
    ``[edge_ptr[r], edge_ptr[r + 1])`` of ``edge_index`` (2, E), row 0 the type-local source
    and row 1 the type-local destination ids; ``src[src_ptr[t]:src_ptr[t + 1]]`` the global ids of type
    ``t``'s sources, its destinations first.
    """
    edge_index, eids, edge_ptr, buf, cap_ptr, n_src = hetero_layer_edges(
        indptr, indices, etype, dst, dst_ptr, rel_src, rel_dst, fanouts, replace, layer_key,
        want_eids)
    relabel_hetero(edge_index[0], edge_ptr, rel_src, node_map, buf, cap_ptr, n_src)
    src, src_ptr = compact_sources(buf, cap_ptr, n_src)
    return edge_index, eids, edge_ptr, src, src_ptr


# --------------------------------------------------------------------------- the hash node map
# The batch-sized table of ``_kernels.relabel_layer_hash`` (key/value pairs side by side, load at
# most 1/2) holding type-local ids. A layer reserves room for every node it could add before it
# relabels (its destinations are every node mapped so far; each edge adds at most one), so the
# relabel itself never grows the table.


@kernel
def _typed_reserve(table, dst, dst_ptr, need):
    """``table`` when it holds ``need`` keys at load 1/2, else a larger one rebuilt from the
    mapped nodes ``dst`` (type-local ids: their positions within their type)."""
    if 2 * need <= table.shape[0] >> 1:
        return table
    cap = hash_capacity(need)
    new = np.full(2 * cap, -1, np.int64)
    shift = _hash_shift(cap)
    for t in range(dst_ptr.shape[0] - 1):
        for p in range(dst_ptr[t], dst_ptr[t + 1]):
            _hash_put(new, cap - 1, shift, dst[p], p - dst_ptr[t])
    return new


@kernel
def relabel_hetero_hash(rows, edge_ptr, rel_src, table, src, src_ptr, n_src):
    """:func:`relabel_hetero` over the hash table (:func:`relabel_layer_hash`; the caller
    reserved room for every row, so the table never grows here)."""
    for r in range(rel_src.shape[0]):
        s = rel_src[r]
        n_src[s], grown = relabel_layer_hash(rows[edge_ptr[r]:edge_ptr[r + 1]], table,
                                             src[src_ptr[s]:], n_src[s])
        assert grown.shape[0] == table.shape[0]  # never grown: a rebuild would hold one type


@kernel
def sample_hetero_layer_hash(indptr, indices, etype, dst, dst_ptr, rel_src, rel_dst, fanouts,
                             replace, layer_key, table, want_eids):
    """:func:`sample_hetero_layer` over the hash table; returns its five arrays and the table
    (a new one when it had to grow)."""
    edge_index, eids, edge_ptr, buf, cap_ptr, n_src = hetero_layer_edges(
        indptr, indices, etype, dst, dst_ptr, rel_src, rel_dst, fanouts, replace, layer_key,
        want_eids)
    table = _typed_reserve(table, dst, dst_ptr, dst.shape[0] + edge_index.shape[1])
    relabel_hetero_hash(edge_index[0], edge_ptr, rel_src, table, buf, cap_ptr, n_src)
    src, src_ptr = compact_sources(buf, cap_ptr, n_src)
    return edge_index, eids, edge_ptr, src, src_ptr, table


@kernel
def insert_typed_seeds_hash(seeds, seed_ptr, table):
    """:func:`insert_typed_seeds` into the (empty) hash table: ``(bad, table)``, the table
    grown first when the seeds need it; on an error it is left empty."""
    n = seeds.shape[0]
    cap = table.shape[0] >> 1
    if 2 * n > cap:
        cap = hash_capacity(n)
        table = np.full(2 * cap, -1, np.int64)
    shift = _hash_shift(cap)
    bad = -1
    for t in range(seed_ptr.shape[0] - 1):
        for p in range(seed_ptr[t], seed_ptr[t + 1]):
            if not _hash_put(table, cap - 1, shift, seeds[p], p - seed_ptr[t]):
                bad = p
                break
        if bad >= 0:
            break
    if bad >= 0:
        table[:] = -1
    return bad, table


@kernel
def insert_typed_seeds(seeds, seed_ptr, node_map):
    """Map each seed to its type-local position (``seeds[seed_ptr[t] + i] -> i``). Returns -1,
    or the position of the first seed repeating an earlier one (``node_map`` then left
    clean). Range checks happen before."""
    num_types = seed_ptr.shape[0] - 1
    bad = -1
    for t in range(num_types):
        for p in range(seed_ptr[t], seed_ptr[t + 1]):
            u = seeds[p]
            if node_map[u] >= 0:
                bad = p
                break
            node_map[u] = p - seed_ptr[t]
        if bad >= 0:
            break
    if bad >= 0:
        for p in range(bad):
            node_map[seeds[p]] = -1
    return bad
