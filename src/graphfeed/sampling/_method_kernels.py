"""numba kernels of the non-uniform sampling methods: weighted, LABOR and temporal.

They follow ``_kernels``' pipeline and conventions (count per destination -> prefix sum -> fill
global source ids -> ``relabel_layer``), with the same counter-based randomness: destination
``i``'s draws are ``splitmix64`` counters from ``dst_base(layer_key, i)``, and LABOR's per-node
variates are ``mix64(node_key + (t + 1) * GOLDEN)`` for source node ``t``, so a batch does not
depend on the thread or chunk that sampled it. Every count kernel caches each destination's
neighbour range (``starts``, ``degs``) for its fill kernel, and fill kernels write exactly the
counted number of edges.

Costs per destination of in-degree ``d`` and fanout ``k``:

- weighted, without replacement: one sequential pass over the ``d`` weights with exponential
  jumps (Efraimidis-Spirakis A-ExpJ): ``O(d)`` additions, ``O(k log(d / k))`` random draws and
  logarithms in expectation; the count pass reads weights only until ``k`` positive ones.
- weighted, with replacement: ``O(d + k log k)`` (sorted uniform draws swept once over the
  cumulative weights).
- LABOR: ``O(d)`` hashes of source ids (count and fill); no sorting.
- temporal: ``O(d)`` time comparisons; ``uniform`` then draws as uniform sampling does among the
  eligible edges, ``last`` keeps a ``k``-heap of the most recent ones.
"""

from __future__ import annotations

import numpy as np

from .._numba import kernel
from ._kernels import GOLDEN, PREFETCH_AHEAD, bounded, count_for, dst_base, mix64, prefetch

_S11 = np.uint64(11)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53


# --------------------------------------------------------------------------- random numbers
@kernel
def unit_open0(ctr):
    """A uniform double in ``(0, 1]`` (never 0: its logarithm is finite) and the counter."""
    ctr = ctr + GOLDEN
    return (np.float64(mix64(ctr) >> _S11) + 1.0) * _INV53, ctr


@kernel
def unit_open1(ctr):
    """A uniform double in ``[0, 1)`` and the advanced counter."""
    ctr = ctr + GOLDEN
    return np.float64(mix64(ctr) >> _S11) * _INV53, ctr


# --------------------------------------------------------------------------- heaps
@kernel
def _sift_down_max(keys, pos, off, n, j):
    """Restore the max-heap ``keys[0:n]`` (payload ``pos[off:off+n]``) from index ``j``."""
    while True:
        left = 2 * j + 1
        if left >= n:
            return
        big = left
        if left + 1 < n and keys[left + 1] > keys[left]:
            big = left + 1
        if keys[big] <= keys[j]:
            return
        keys[j], keys[big] = keys[big], keys[j]
        pos[off + j], pos[off + big] = pos[off + big], pos[off + j]
        j = big


@kernel
def _sift_up_max(keys, pos, off, j):
    while j > 0:
        parent = (j - 1) // 2
        if keys[parent] >= keys[j]:
            return
        keys[j], keys[parent] = keys[parent], keys[j]
        pos[off + j], pos[off + parent] = pos[off + parent], pos[off + j]
        j = parent


# --------------------------------------------------------------------------- shared tails
@kernel
def _emit(indices, start, i, rows, cols, eids, want_eids, off, c):
    """Turn positions ``rows[off:off+c]`` (relative to ``start``) into global source ids."""
    for q in range(off, off + c):
        p = start + rows[q]
        rows[q] = indices[p]
        cols[q] = i
        if want_eids:
            eids[q] = p


# --------------------------------------------------------------------------- weighted
_S31 = np.uint64(31)
_ALIAS_MASK = np.uint64((1 << 31) - 1)
_ONE32 = np.uint64(1 << 32)
_MASK32 = np.uint64(0xFFFFFFFF)
# A-ExpJ's one pass over the weights is used when the positive weights are fewer than
# SCAN_FACTOR * fanout (successive draws would often repeat an edge); otherwise successive draws
# from the alias table, a repeated edge drawn again (O(k) per destination).
SCAN_FACTOR = 2
# Successive draws that repeat an already chosen edge this many times in a row draw that step by
# one exact pass over the remaining weights instead (the chosen edges hold most of the weight).
MAX_REJECTS = 16


@kernel
def build_alias(indptr, weights, table, totals, npos):
    """Per destination, Walker's alias table of its in-edge weights (Vose's construction):
    ``table[p] = (threshold << 31) | alias`` with ``threshold`` in ``[0, 2**32]`` (accept edge
    ``p`` when a uniform 32-bit draw is below it, else take the edge at relative position
    ``alias``); ``totals[v]`` the weight sum, ``npos[v]`` the positive weights. Returns the first
    node whose degree exceeds ``2**31 - 1`` (alias positions are 31-bit), or ``-1``."""
    n = indptr.shape[0] - 1
    maxd = 0
    for v in range(n):
        maxd = max(maxd, indptr[v + 1] - indptr[v])
    scaled = np.empty(maxd, np.float64)
    small = np.empty(maxd, np.int64)
    large = np.empty(maxd, np.int64)
    for v in range(n):
        st = indptr[v]
        d = indptr[v + 1] - st
        if d > 2147483647:
            return v
        total = 0.0
        c = 0
        for p in range(d):
            w = weights[st + p]
            total += w
            if w > 0:
                c += 1
        totals[v] = total
        npos[v] = c
        if d == 0:
            continue
        if c == 0:
            for p in range(d):
                table[st + p] = np.uint64(0)
            continue
        ns = 0
        nl = 0
        for p in range(d):
            scaled[p] = weights[st + p] * d / total
            if scaled[p] < 1.0:
                small[ns] = p
                ns += 1
            else:
                large[nl] = p
                nl += 1
        while ns > 0 and nl > 0:
            ns -= 1
            j = small[ns]
            g = large[nl - 1]
            thr = np.uint64(scaled[j] * 4294967296.0)
            if weights[st + j] <= 0:
                thr = np.uint64(0)
            table[st + j] = (thr << _S31) | np.uint64(g)
            scaled[g] = (scaled[g] + scaled[j]) - 1.0
            if scaled[g] < 1.0:
                nl -= 1
                small[ns] = g
                ns += 1
        last_pos = -1
        for p in range(d):
            if weights[st + p] > 0:
                last_pos = p
        for q in range(nl):  # probability 1 (rounding aside)
            g = large[q]
            table[st + g] = (_ONE32 << _S31) | np.uint64(g)
        for q in range(ns):  # rounding leftovers: keep zero weights out
            j = small[q]
            if weights[st + j] > 0:
                table[st + j] = (_ONE32 << _S31) | np.uint64(j)
            else:
                table[st + j] = np.uint64(last_pos)
    return -1


@kernel
def _alias_draw(table, st, d, ctr):
    """One i.i.d. relative position of ``[0, d)`` with probability ``w_p / sum(w)``."""
    j, ctr = bounded(ctr, d)
    ctr = ctr + GOLDEN
    u = mix64(ctr) & _MASK32
    e = table[st + j]
    if u < (e >> _S31):
        return j, ctr
    return np.int64(e & _ALIAS_MASK), ctr


@kernel
def count_weighted(indptr, npos, dst, lo, hi, fanout, replace, counts, starts, degs):
    """``counts[i + 1]``: ``min(fanout, #positive weights)`` (every positive one for
    ``fanout == -1``), or with replacement ``fanout`` if any weight is positive, else 0."""
    for i in range(lo, hi):
        v = dst[i]
        st = indptr[v]
        starts[i] = st
        degs[i] = indptr[v + 1] - st
        c = npos[v]
        if fanout >= 0:
            if replace:
                c = fanout if c > 0 else 0
            elif c > fanout:
                c = fanout
        counts[i + 1] = c


@kernel
def _weighted_scan(weights, st, d, k, ctr, rows, off, hk):
    """A-ExpJ: the ``k`` positions of ``[0, d)`` with the smallest keys ``E_j / w_j`` (``E_j``
    i.i.d. Exp(1); zero weights never enter), found in one pass with exponential jumps. The
    caller guarantees at least ``k`` positive weights."""
    n = 0
    p = 0
    while n < k:
        w = weights[st + p]
        if w > 0:
            u, ctr = unit_open0(ctr)
            hk[n] = -np.log(u) / w
            rows[off + n] = p
            _sift_up_max(hk, rows, off, n)
            n += 1
        p += 1
    top = hk[0]
    u, ctr = unit_open0(ctr)
    x = -np.log(u) / top  # weight to skip before the next entrant: Exp(rate = threshold)
    while p < d:
        w = np.float64(weights[st + p])
        if x >= w:
            x -= w
        else:  # this edge's key is below the threshold: draw it conditioned on that
            u, ctr = unit_open0(ctr)
            q = -np.expm1(-top * w)  # P(key < top) = 1 - exp(-top * w)
            hk[0] = -np.log1p(-u * q) / w
            rows[off] = p
            _sift_down_max(hk, rows, off, k, 0)
            top = hk[0]
            u, ctr = unit_open0(ctr)
            x = -np.log(u) / top
        p += 1


@kernel
def _chosen(rows, off, n, p):
    for q in range(off, off + n):
        if rows[q] == p:
            return True
    return False


@kernel
def _weighted_successive(weights, table, total, st, d, k, ctr, rows, off):
    """Successive draws without replacement: each step draws from the alias table until it
    hits an edge not chosen yet (exactly the conditional distribution), or after
    ``MAX_REJECTS`` repeats draws that step by one pass over the remaining weights."""
    chosen_mass = 0.0
    for n in range(k):
        found = False
        for _ in range(MAX_REJECTS):
            p, ctr = _alias_draw(table, st, d, ctr)
            if not _chosen(rows, off, n, p):
                found = True
                break
        if not found:
            u, ctr = unit_open1(ctr)
            x = u * (total - chosen_mass)
            p = -1
            for q in range(d):
                w = weights[st + q]
                if w > 0 and not _chosen(rows, off, n, q):
                    p = q
                    x -= w
                    if x < 0:
                        break
        rows[off + n] = p
        chosen_mass += weights[st + p]


@kernel
def fill_weighted(indices, weights, table, totals, npos, dst, starts, degs, lo, hi, fanout,
                  replace, layer_key, offsets, edge_index, eids, want_eids):
    rows = edge_index[0]
    cols = edge_index[1]
    hk = np.empty(max(fanout, 1), np.float64)
    for i in range(lo, hi):
        if i + PREFETCH_AHEAD < hi:
            prefetch(table, starts[i + PREFETCH_AHEAD])
        off = offsets[i]
        c = offsets[i + 1] - off
        if c == 0:
            continue
        st = starts[i]
        d = degs[i]
        v = dst[i]
        ctr = dst_base(layer_key, i)
        if replace and fanout >= 0:
            for q in range(c):
                p, ctr = _alias_draw(table, st, d, ctr)
                rows[off + q] = p
        elif c == npos[v]:  # every positive-weight edge
            n = 0
            for p in range(d):
                if weights[st + p] > 0:
                    rows[off + n] = p
                    n += 1
        elif npos[v] < SCAN_FACTOR * c:
            _weighted_scan(weights, st, d, c, ctr, rows, off, hk)
        else:
            _weighted_successive(weights, table, totals[v], st, d, c, ctr, rows, off)
        _emit(indices, st, i, rows, cols, eids, want_eids, off, c)


# --------------------------------------------------------------------------- LABOR
@kernel
def sample_labor(indptr, indices, dst, lo, hi, fanout, node_key, want_eids):
    """LABOR-0 for destinations ``[lo, hi)`` in one pass: in-edge ``t -> dst[i]`` of a
    destination of degree ``d`` is kept when ``r_t < fanout / d`` (every edge when
    ``d <= fanout`` or ``fanout == -1``), with weight ``1 / (d * min(1, fanout / d))``.
    Returns ``(rows, cols, eids, weights)`` (global source ids, destination positions, edge
    positions or an empty array, float32 weights), grown as needed (no count pass)."""
    cap = 16 + (hi - lo) * (fanout if fanout > 0 else 16)
    rows = np.empty(cap, np.int64)
    cols = np.empty(cap, np.int64)
    ew = np.empty(cap, np.float32)
    eids = np.empty(cap if want_eids else 0, np.int64)
    n = 0
    for i in range(lo, hi):
        if i + PREFETCH_AHEAD < hi:
            prefetch(indptr, dst[i + PREFETCH_AHEAD])
        v = dst[i]
        st = indptr[v]
        d = indptr[v + 1] - st
        if d == 0:
            continue
        if n + d > cap:
            cap = max(2 * cap, n + d)
            rows2 = np.empty(cap, np.int64)
            rows2[:n] = rows[:n]
            rows = rows2
            cols2 = np.empty(cap, np.int64)
            cols2[:n] = cols[:n]
            cols = cols2
            ew2 = np.empty(cap, np.float32)
            ew2[:n] = ew[:n]
            ew = ew2
            if want_eids:
                eids2 = np.empty(cap, np.int64)
                eids2[:n] = eids[:n]
                eids = eids2
        if fanout < 0 or d <= fanout:
            w = np.float32(1.0 / d)
            for p in range(st, st + d):
                rows[n] = indices[p]
                cols[n] = i
                ew[n] = w
                if want_eids:
                    eids[n] = p
                n += 1
            continue
        # keep t when its 53-bit variate is below fanout / d * 2**53
        thr = np.uint64(fanout / d * 9007199254740992.0)
        w = np.float32(1.0 / fanout)
        for p in range(st, st + d):
            t = indices[p]
            if (mix64(node_key + np.uint64(t + 1) * GOLDEN) >> _S11) < thr:
                rows[n] = t
                cols[n] = i
                ew[n] = w
                if want_eids:
                    eids[n] = p
                n += 1
    return rows[:n], cols[:n], eids[:n] if want_eids else eids, ew[:n]


# --------------------------------------------------------------------------- temporal
@kernel
def build_time_order(indptr, indices, node_times, edge_times, has_nt, has_et, tkey, tsrc, tpos):
    """Each destination's in-edges sorted by time (stable: ties keep their stored order): the
    edge's time ``tkey`` (its edge time, its source's node time, or the later of the two), its
    source ``tsrc`` and its position in ``indices`` ``tpos``. An already sorted column is
    copied as it is."""
    n = indptr.shape[0] - 1
    for v in range(n):
        st = indptr[v]
        d = indptr[v + 1] - st
        is_sorted = True
        for p in range(st, st + d):
            t = indices[p]
            if has_et and has_nt:
                te = max(edge_times[p], node_times[t])
            elif has_et:
                te = edge_times[p]
            else:
                te = node_times[t]
            tkey[p] = te
            if p > st and tkey[p - 1] > te:
                is_sorted = False
        if is_sorted:
            for p in range(st, st + d):
                tsrc[p] = indices[p]
                tpos[p] = p
            continue
        order = np.argsort(tkey[st:st + d], kind="mergesort")
        keys = tkey[st:st + d].copy()
        for q in range(d):
            p = st + order[q]
            tkey[st + q] = keys[order[q]]
            tsrc[st + q] = indices[p]
            tpos[st + q] = p


@kernel
def _eligible_prefix(tkey, st, d, t, strict):
    """How many of the sorted times ``tkey[st:st+d]`` are ``<= t`` (``< t`` when strict)."""
    lo = 0
    hi = d
    while lo < hi:
        mid = (lo + hi) >> 1
        x = tkey[st + mid]
        if x < t or (x == t and not strict):
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel
def count_temporal(indptr, tkey, dst, dst_times, strict, lo, hi, fanout, replace, counts,
                   starts, degs):
    """Per destination, ``degs[i]`` = its eligible (early enough) in-edges, a prefix of its
    time-sorted column, and ``counts[i + 1]`` what uniform sampling takes of that prefix."""
    for i in range(lo, hi):
        v = dst[i]
        st = indptr[v]
        m = _eligible_prefix(tkey, st, indptr[v + 1] - st, dst_times[i], strict)
        starts[i] = st
        degs[i] = m
        counts[i + 1] = count_for(m, fanout, replace)


@kernel
def fill_last(tsrc, starts, degs, lo, hi, offsets, edge_index, eids, want_eids):
    """``strategy="last"``: each destination's ``c`` most recent eligible edges, the end of its
    eligible prefix (``eids`` are positions in the time-sorted arrays)."""
    rows = edge_index[0]
    cols = edge_index[1]
    for i in range(lo, hi):
        off = offsets[i]
        c = offsets[i + 1] - off
        first = starts[i] + degs[i] - c
        for q in range(c):
            rows[off + q] = tsrc[first + q]
            cols[off + q] = i
            if want_eids:
                eids[off + q] = first + q


@kernel
def propagate_times(edge_index, n_dst, dst_times, src_times):
    """``src_times``: each source node's time, the minimum over the destinations that sampled
    it (and its own as a destination, ``src_times[:n_dst]`` preset; the rest preset to the
    largest time)."""
    rows = edge_index[0]
    cols = edge_index[1]
    for e in range(rows.shape[0]):
        t = dst_times[cols[e]]
        m = rows[e]
        if t < src_times[m]:
            src_times[m] = t
