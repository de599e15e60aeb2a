"""numba kernels for uniform neighbour sampling over CSC arrays.

Every kernel is ``njit(nogil=True, cache=True)`` (``graphfeed._numba.kernel``), so several Python
threads can sample different batches at the same time. There is no RNG state: the random numbers
of destination ``i`` of a layer are ``splitmix64(base_i + c * GOLDEN)`` for ``c = 1, 2, ...`` where
``base_i = mix(layer_key ^ mix(i))`` and ``layer_key`` derives from ``(seed, epoch, batch_index,
layer)``. A destination's sample therefore does not depend on which thread or chunk computed it.

Layer pipeline (exact sizes, no sorting): count per destination (caching each neighbour range)
-> prefix sum -> fill (global source ids) -> relabel (global -> local with a per-batch
``node_map``). ``sample_layer`` runs the passes in one call on one thread; the chunked multi-thread
path runs ``count_layer`` / ``fill_layer`` on several threads and ``relabel_layer`` on one, with
identical output. Separate fill and relabel passes, each with its own prefetching, measured
faster than relabelling inside the fill loop.

Conventions: ``indptr`` int64, ``indices`` int32 or int64 (both passed read-only, so one compiled
variant per index dtype), ``node_map`` int32 of size ``num_nodes`` holding ``-1`` for nodes not in
the batch. ``fanout == -1`` takes every neighbour.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from .._numba import KERNEL_FLAGS, kernel, mix64, prefetch

# The per-destination sampler, inlined at numba IR level into the fill loops (LLVM leaves it
# out of line, and the call with its many array arguments costs ~5-10% of the layer time).
_inline_kernel = numba.njit(inline="always", **KERNEL_FLAGS)

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK32 = np.uint64(0xFFFFFFFF)
_TWO32 = np.uint64(1 << 32)
_S32 = np.uint64(32)
# Largest fanout sampled with Floyd's algorithm and a linear membership scan (O(k^2), fastest for
# small k); larger fanouts use a sparse Fisher-Yates shuffle with a small hash table (O(k)).
FLOYD_MAX_K = 32


# Software prefetch distances (measured on a 1M-node power-law graph, fanouts [15, 10, 5]):
# the fill loop prefetches the neighbour list of the destination PREFETCH_AHEAD ahead (its
# per-destination work, RNG draws and membership scans, is too long for the CPU's out-of-order
# window to overlap the next destinations' cache misses on its own); the relabel pass prefetches
# the node-map entry of the edge RELABEL_PREFETCH_AHEAD ahead. Together ~+60% throughput.
PREFETCH_AHEAD = 8
RELABEL_PREFETCH_AHEAD = 64
# The uniform fill draws a destination's positions FILL_LAG destinations before it reads the
# ids they point at, prefetching each sampled position's line (a hub's sampled positions lie on
# different lines, which prefetching the list's start cannot cover); the count pass prefetches
# indptr COUNT_AHEAD destinations ahead.
FILL_LAG = 4
COUNT_AHEAD = 16


@kernel
def dst_base(layer_key, i):
    return mix64(layer_key ^ mix64(np.uint64(i)))


@kernel
def bounded(ctr, bound):
    """A uniform integer in ``[0, bound)`` (``bound >= 1``) and the advanced counter.

    Lemire's multiply-shift with rejection: exactly uniform for ``bound < 2**32``; larger bounds
    (never a real degree) fall back to a 64-bit modulo with bias below ``2**-31``.
    """
    if bound <= 0xFFFFFFFF:
        b = np.uint64(bound)
        while True:
            ctr = ctr + GOLDEN
            x = mix64(ctr) >> _S32
            m = x * b
            low = m & _MASK32
            if low >= b:  # threshold (2**32 - b) % b < b: accept at once
                return np.int64(m >> _S32), ctr
            if low >= (_TWO32 - b) % b:
                return np.int64(m >> _S32), ctr
    ctr = ctr + GOLDEN
    return np.int64(mix64(ctr) % np.uint64(bound)), ctr


@kernel
def count_for(deg, fanout, replace):
    if fanout < 0 or (deg <= fanout and not replace):
        return deg
    if replace:
        return fanout if deg > 0 else 0
    return fanout


@kernel
def _floyd(deg, k, ctr, out, off):
    """Floyd's algorithm: ``k`` distinct positions of ``[0, deg)`` into ``out[off:off+k]``,
    every k-subset equally likely."""
    n = 0
    for j in range(deg - k, deg):
        t, ctr = bounded(ctr, j + 1)
        hit = False
        for q in range(off, off + n):  # branch-free: the compiler vectorises the scan
            hit |= out[q] == t
        out[off + n] = j if hit else t
        n += 1


@kernel
def _floyd_small(deg, k, ctr, out, off):
    """For ``deg <= 64``: Floyd's algorithm over a bit mask, drawing whichever of the subset or
    its complement is smaller (``deg - k`` draws when ``k`` is close to ``deg``), then writing the
    chosen positions in increasing order (neighbour lists are read front to back)."""
    m = k if 2 * k <= deg else deg - k
    chosen = np.uint64(0)
    one = np.uint64(1)
    for j in range(deg - m, deg):
        t, ctr = bounded(ctr, j + 1)
        bit = one << np.uint64(t)
        if chosen & bit:
            bit = one << np.uint64(j)
        chosen |= bit
    if m != k:
        chosen = ~chosen
        if deg < 64:
            chosen &= (one << np.uint64(deg)) - one
    n = off
    while chosen:
        out[n] = trailing_zeros(chosen)
        chosen &= chosen - one
        n += 1


@kernel
def _hget(hkeys, hvals, mask, key):
    slot = (key * 0x9E3779B1) & mask
    while True:
        k = hkeys[slot]
        if k == key:
            return hvals[slot]
        if k == -1:
            return key
        slot = (slot + 1) & mask


@kernel
def _hset(hkeys, hvals, mask, key, val):
    slot = (key * 0x9E3779B1) & mask
    while True:
        k = hkeys[slot]
        if k == key or k == -1:
            hkeys[slot] = key
            hvals[slot] = val
            return
        slot = (slot + 1) & mask


@kernel
def _sparse_fisher_yates(deg, k, ctr, out, off, hkeys, hvals):
    """The first ``k`` entries of a Fisher-Yates shuffle of ``[0, deg)``, with the swapped
    entries kept in a hash table (O(k) time and memory, whatever ``deg``)."""
    hkeys[:] = -1
    mask = hkeys.shape[0] - 1
    for j in range(k):
        r, ctr = bounded(ctr, deg - j)
        r += j
        vr = _hget(hkeys, hvals, mask, r)
        vj = _hget(hkeys, hvals, mask, j)
        out[off + j] = vr
        _hset(hkeys, hvals, mask, r, vj)


@_inline_kernel
def _draw_positions(start, deg, indices, i, fanout, replace, layer_key, off, rows, hkeys, hvals):
    """The first half of :func:`_fill_one`: destination ``i``'s sampled positions in
    ``[0, deg)`` into ``rows[off:off+c]``, each one's index line prefetched (a destination
    taking every neighbour prefetches its list's first and last lines)."""
    c = count_for(deg, fanout, replace)
    if c == 0:
        return
    if c == deg and (fanout < 0 or not replace):
        prefetch(indices, start)
        prefetch(indices, start + deg - 1)
        return
    ctr = dst_base(layer_key, i)
    if replace:
        for q in range(c):
            t, ctr = bounded(ctr, deg)
            rows[off + q] = t
    elif deg <= 64:
        _floyd_small(deg, c, ctr, rows, off)
    elif c <= FLOYD_MAX_K:
        _floyd(deg, c, ctr, rows, off)
    else:
        _sparse_fisher_yates(deg, c, ctr, rows, off, hkeys, hvals)
    for q in range(off, off + c):
        prefetch(indices, start + rows[q])


@_inline_kernel
def _read_positions(start, deg, indices, i, fanout, replace, off, rows, cols, eids, want_eids):
    """The second half of :func:`_fill_one`: positions -> global source ids (a destination
    taking every neighbour copies its list)."""
    c = count_for(deg, fanout, replace)
    if c == deg and (fanout < 0 or not replace):
        for q in range(c):
            p = start + q
            rows[off + q] = indices[p]
            cols[off + q] = i
            if want_eids:
                eids[off + q] = p
        return
    for q in range(off, off + c):
        p = start + rows[q]
        rows[q] = indices[p]
        cols[q] = i
        if want_eids:
            eids[q] = p


@_inline_kernel
def _fill_one(start, deg, indices, i, fanout, replace, layer_key, off, rows, cols, eids, want_eids,
              hkeys, hvals):
    """Sample destination ``i`` (in-edges ``indices[start:start+deg]``): global source ids into
    ``rows[off:off+c]``, ``i`` into ``cols``, edge positions into ``eids`` when wanted. Returns
    the count ``c``. (Loops over many destinations use :func:`_fill_range`, which overlaps one
    destination's draws with the reads of the ones before.)"""
    _draw_positions(start, deg, indices, i, fanout, replace, layer_key, off, rows, hkeys, hvals)
    _read_positions(start, deg, indices, i, fanout, replace, off, rows, cols, eids, want_eids)
    return count_for(deg, fanout, replace)


@_inline_kernel
def _fill_range(indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace, layer_key,
                offsets, rows, cols, eids, want_eids, hkeys, hvals):
    """:func:`_fill_one` for every destination ``k`` in ``[lo, hi)``, identified (random
    numbers and ``cols``) by ``keys[k]`` when ``use_keys``, else by ``k - shift``. A software
    pipeline: destination ``k``'s positions are drawn (arithmetic only) and the index lines
    they point at prefetched ``FILL_LAG`` destinations before those ids are read, so the
    misses of several destinations are in flight while the next ones draw."""
    for k in range(lo, hi + FILL_LAG):
        if k < hi:
            v = keys[k] if use_keys else k - shift
            _draw_positions(starts[k], degs[k], indices, v, fanout, replace, layer_key,
                            offsets[k], rows, hkeys, hvals)
        j = k - FILL_LAG
        if j >= lo:
            v = keys[j] if use_keys else j - shift
            _read_positions(starts[j], degs[j], indices, v, fanout, replace, offsets[j], rows,
                            cols, eids, want_eids)


@kernel
def _hash_tables(fanout, replace):
    cap = 1
    if fanout > FLOYD_MAX_K and not replace:
        while cap < 2 * fanout:
            cap *= 2
    return np.empty(cap, np.int64), np.empty(cap, np.int64)


@kernel
def count_layer(indptr, dst, lo, hi, fanout, replace, counts, starts, degs):
    """For ``i`` in ``[lo, hi)``: ``counts[i + 1]`` = number of edges sampled for ``dst[i]``;
    ``starts[i]``, ``degs[i]`` = its neighbour range (read once here, sequentially later)."""
    for i in range(lo, hi):
        if i + COUNT_AHEAD < hi:
            prefetch(indptr, dst[i + COUNT_AHEAD])
        v = dst[i]
        st = indptr[v]
        d = indptr[v + 1] - st
        starts[i] = st
        degs[i] = d
        counts[i + 1] = count_for(d, fanout, replace)


@kernel
def fill_layer(indices, starts, degs, lo, hi, fanout, replace, layer_key, offsets, edge_index,
               eids, want_eids):
    """Sample destinations ``[lo, hi)`` into their slots ``offsets[i]:offsets[i+1]``: row 0 of
    ``edge_index`` gets *global* source ids (``relabel_layer`` makes them local), row 1 ``i``."""
    hkeys, hvals = _hash_tables(fanout, replace)
    _fill_range(indices, starts, degs, lo, hi, starts, False, 0, fanout, replace, layer_key,
                offsets, edge_index[0], edge_index[1], eids, want_eids, hkeys, hvals)


@kernel
def relabel_layer(rows, node_map, src, n_src):
    """Global -> local ids of ``rows`` (an edge index's row 0) in place; new nodes get the next
    local ids in order of first appearance and are appended to ``src`` (which has room for
    every row). Returns the new ``n_src``."""
    num_edges = rows.shape[0]
    for e in range(num_edges):
        if e + RELABEL_PREFETCH_AHEAD < num_edges:
            prefetch(node_map, rows[e + RELABEL_PREFETCH_AHEAD])
        u = rows[e]
        m = node_map[u]
        new = m < 0
        if new:  # a select, not a branch: the stores below happen either way
            m = n_src
        node_map[u] = m
        src[n_src] = u  # kept only when new (src holds n_dst + num_edges slots)
        n_src += new
        rows[e] = m
    return n_src


@kernel
def _count_fill(indptr, indices, dst, fanout, replace, layer_key, want_eids):
    """Count, prefix sum and fill of one layer on one thread: ``(edge_index`` with global
    sources in row 0, ``eids``, ``src`` with room for every source and ``src[:len(dst)] ==
    dst)``."""
    n_dst = dst.shape[0]
    offsets = np.empty(n_dst + 1, np.int64)
    offsets[0] = 0
    starts = np.empty(n_dst, np.int64)
    degs = np.empty(n_dst, np.int64)
    count_layer(indptr, dst, 0, n_dst, fanout, replace, offsets, starts, degs)
    for i in range(n_dst):
        offsets[i + 1] += offsets[i]
    num_edges = offsets[n_dst]
    edge_index = np.empty((2, num_edges), np.int64)
    eids = np.empty(num_edges if want_eids else 0, np.int64)
    src = np.empty(n_dst + num_edges, np.int64)
    src[:n_dst] = dst
    fill_layer(indices, starts, degs, 0, n_dst, fanout, replace, layer_key, offsets, edge_index,
               eids, want_eids)
    return edge_index, eids, src


@kernel
def sample_layer(indptr, indices, dst, fanout, replace, layer_key, node_map, want_eids):
    """One layer on one thread. ``dst`` (global ids) must already be in ``node_map`` as
    local ids ``0..len(dst)-1``. Returns ``(edge_index (2, E) int64, eids (E,) or (0,) int64,
    src (num_src,) int64)`` with ``src[:len(dst)] == dst``; ``node_map`` then maps every node of
    ``src`` to its position."""
    edge_index, eids, src = _count_fill(indptr, indices, dst, fanout, replace, layer_key,
                                        want_eids)
    n_src = relabel_layer(edge_index[0], node_map, src, dst.shape[0])
    return edge_index, eids, src[:n_src]


@kernel
def sample_layer_hash(indptr, indices, dst, fanout, replace, layer_key, table, want_eids):
    """:func:`sample_layer` with the batch-sized hash map ``table`` (see
    :func:`relabel_layer_hash`) instead of the dense node map. Returns ``(edge_index, eids,
    src, table)``: ``table`` is a new, larger array when the layer grew it."""
    edge_index, eids, src = _count_fill(indptr, indices, dst, fanout, replace, layer_key,
                                        want_eids)
    n_src, table = relabel_layer_hash(edge_index[0], table, src, dst.shape[0])
    return edge_index, eids, src[:n_src], table


@kernel
def insert_seeds(seeds, node_map, num_nodes):
    """Map ``seeds[i] -> i``. Returns ``(0, 0)``, or ``(1, i)`` if ``seeds[i]`` is out of range,
    ``(2, i)`` if it repeats an earlier seed; on an error ``node_map`` is left clean."""
    code = 0
    bad = 0
    for i in range(seeds.shape[0]):
        u = seeds[i]
        if u < 0 or u >= num_nodes:
            code = 1
            bad = i
            break
        if node_map[u] >= 0:
            code = 2
            bad = i
            break
        node_map[u] = i
    if code != 0:
        for j in range(bad):
            u = seeds[j]
            if node_map[u] == j:
                node_map[u] = -1
    return code, bad


@kernel
def reset_map(node_map, nodes):
    for i in range(nodes.shape[0]):
        node_map[nodes[i]] = -1


# ---------------------------------------------------------------------------------------------
# The batch-sized node map: an open-addressing hash table (linear probing, Fibonacci hashing)
# of ``global id -> local id``, for graphs whose dense ``num_nodes`` map would be too large.
# ``table`` is one int64 array of ``2 * cap`` entries, slot ``s`` at ``[2s]`` (key, ``-1`` =
# empty) and ``[2s + 1]`` (local id), so a probe touches one cache line; ``cap`` is a power of
# two and the table holds at most ``cap / 2`` keys (it doubles, rehashing from ``src``, before
# an insert would pass that). Local ids are the dense map's exactly: the next id in order of
# first appearance, so both give the same batches bit for bit.

HASH_MIN_CAP = 1 << 12


@kernel
def _hash_slot(key, shift):
    return np.int64((np.uint64(key) * GOLDEN) >> shift)


@kernel
def _hash_shift(cap):
    return np.uint64(64 - trailing_zeros(np.uint64(cap)))


@_inline_kernel
def _hash_find(table, mask, shift, key):
    """The slot of ``key``: the one holding it, or the empty one where it goes (linear
    probing; the table is never full)."""
    s = _hash_slot(key, shift)
    while True:
        k = table[2 * s]
        if k == key or k == -1:
            return s
        s = (s + 1) & mask


@_inline_kernel
def _hash_put(table, mask, shift, key, val):
    """Insert ``key -> val`` (the table has room); False, writing nothing, when ``key`` is
    there already."""
    s = _hash_find(table, mask, shift, key)
    if table[2 * s] == key:
        return False
    table[2 * s] = key
    table[2 * s + 1] = val
    return True


@kernel
def _hash_rebuild(src, n, cap):
    """A table of ``cap`` slots holding ``src[i] -> i`` for ``i < n`` (distinct keys)."""
    table = np.full(2 * cap, -1, np.int64)
    mask = cap - 1
    shift = _hash_shift(cap)
    for i in range(n):
        _hash_put(table, mask, shift, src[i], i)
    return table


@kernel
def hash_capacity(n):
    """The smallest power-of-two capacity (at least ``HASH_MIN_CAP``) holding ``n`` keys."""
    cap = HASH_MIN_CAP
    while cap < 2 * n:
        cap *= 2
    return cap


@kernel
def relabel_layer_hash(rows, table, src, n_src):
    """:func:`relabel_layer` over the hash table (which holds ``src[:n_src]``). Returns
    ``(n_src, table)``; ``table`` is a new array when the layer doubled it."""
    num_edges = rows.shape[0]
    cap = table.shape[0] >> 1
    mask = cap - 1
    shift = _hash_shift(cap)
    for e in range(num_edges):
        if e + RELABEL_PREFETCH_AHEAD < num_edges:
            prefetch(table, 2 * _hash_slot(rows[e + RELABEL_PREFETCH_AHEAD], shift))
        u = rows[e]
        s = _hash_find(table, mask, shift, u)
        if table[2 * s] == u:
            m = table[2 * s + 1]
        else:
            if 2 * (n_src + 1) > cap:  # keep the load at most 1/2
                cap *= 2
                table = _hash_rebuild(src, n_src, cap)
                mask = cap - 1
                shift = _hash_shift(cap)
                s = _hash_find(table, mask, shift, u)
            m = n_src
            table[2 * s] = u
            table[2 * s + 1] = m
            src[n_src] = u
            n_src += 1
        rows[e] = m
    return n_src, table


@kernel
def insert_seeds_hash(seeds, table, num_nodes):
    """:func:`insert_seeds` into the (empty) hash table. Returns ``(code, bad, table)``, the
    table grown first if the seeds need it; on an error the table is left empty."""
    n = seeds.shape[0]
    cap = table.shape[0] >> 1
    if 2 * n > cap:
        cap = hash_capacity(n)
        table = np.full(2 * cap, -1, np.int64)
    mask = cap - 1
    shift = _hash_shift(cap)
    code = 0
    bad = 0
    for i in range(n):
        u = seeds[i]
        if u < 0 or u >= num_nodes:
            code = 1
            bad = i
            break
        if not _hash_put(table, mask, shift, u, i):
            code = 2
            bad = i
            break
    if code != 0:
        table[:] = -1
    return code, bad, table
