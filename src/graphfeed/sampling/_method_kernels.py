"""numba kernels of the non-uniform sampling methods: weighted, LABOR and temporal.

They follow ``_kernels``' pipeline and conventions (count per destination -> prefix sum -> fill
global source ids -> ``relabel_layer``), with the same counter-based randomness: destination
``i``'s draws are ``splitmix64`` counters from ``dst_base(layer_key, i)``, and LABOR's per-node
variates are ``labor_variate(t, key)`` of the source id, so a batch does not depend on the
thread or chunk that sampled it. Count kernels cache each destination's neighbour range
(``starts``, ``degs``) for the fill kernels, which write exactly the counted edges.

Costs per destination of in-degree ``d`` and fanout ``k`` (and what is built once per graph):

- weighted: Walker alias records per edge (built once, O(E); 8 B per edge: a 32-bit threshold
  and a 32-bit alias offset; the chosen edges' ids are read from ``indices`` after the draws):
  with replacement ``k`` i.i.d. draws, O(k); without, successive draws from the same table
  skipping already chosen edges (the standard definition), O(k) expected plus an O(d) exact
  step when ``MAX_REJECTS`` draws in a row repeat (the chosen edges hold most of the weight),
  each destination's first draws made ``WEIGHTED_DRAW_AHEAD`` destinations ahead with their
  lines prefetched; degrees up to ``WEIGHTED_KEYS_MAX_DEG`` by exponential keys, O(d^2)
  branch-free compares on one or two cache lines; a large count close to the degree
  (``2 d <= 3 k``, ``d <= 64``) by an exact scan of its weights, O(k d). Each alias draw is one
  64-bit hash (position and coin) and one 8-byte record read.
- LABOR: every in-edge's source variate is compared with ``k / d``: O(d) (the definition needs
  each in-neighbour's variate). A first pass caches the neighbour ranges, the second prefetches
  lists ahead and hashes hub lists in blocks (a branch-free pass into a buffer, then only the
  blocks that keep an edge are read again, without rehashing).
- LABOR with ``variates="rotated"``: each column sorted once by its sources' fixed base
  variates (12 B per edge with int32 ids: source, relative position, base); per destination two
  binary searches find the arc of kept sources and a copy writes it: O(log d + k).
- temporal: each column sorted by time once (O(E log d), time, source and position per edge);
  per destination a binary search for the eligible prefix, then uniform sampling of that prefix
  (``_kernels.fill_layer``) or its last ``k`` edges: O(log d + k).
"""

from __future__ import annotations

import numpy as np
from numba.cpython.unsafe.numbers import leading_zeros

from .._numba import kernel, mix64, prefetch
from ._kernels import (
    COUNT_AHEAD, GOLDEN, PREFETCH_AHEAD, _inline_kernel, bounded, count_for, dst_base,
)

_S11 = np.uint64(11)
_S32 = np.uint64(32)
_TWO32 = np.uint64(1 << 32)
_INV53 = 1.0 / 9007199254740992.0  # 2**-53
_ONE = np.uint64(1)


# --------------------------------------------------------------------------- random numbers
@kernel
def unit_open1(ctr):
    """A uniform double in ``[0, 1)`` and the advanced counter."""
    ctr = ctr + GOLDEN
    return np.float64(mix64(ctr) >> _S11) * _INV53, ctr


_LN2 = 0.6931471805599453
_SQRT2 = 1.4142135623730951


@_inline_kernel
def neg_log_unit(x):
    """``-ln(u)`` for ``u = (x | 1) / 2**64`` in ``(0, 1)``: an exponential variate from one
    64-bit hash, without a libm call. ``x = m 2**e`` with the exponent from the leading zeros and
    ``m`` in ``[sqrt(2)/2, sqrt(2))`` (chosen branch-free), ``ln m = 2 atanh(s)``,
    ``s = (m - 1) / (m + 1)``, ``|s| < 0.172``, by its series to ``s**9``: absolute error below
    1e-9 (tested against ``np.log``), far below what separates two keys of float32 weights."""
    x = x | _ONE
    z = leading_zeros(x)
    m = np.float64((x << np.uint64(z)) >> _S11) * _INV53 * 2.0  # [1, 2)
    big = m > _SQRT2
    m = m * (0.5 if big else 1.0)
    e = 63 - np.int64(z) + (1 if big else 0)
    s = (m - 1.0) / (m + 1.0)
    s2 = s * s
    lnm = 2.0 * s * (1.0 + s2 * (1.0 / 3 + s2 * (1.0 / 5 + s2 * (1.0 / 7 + s2 * (1.0 / 9)))))
    return (64 - e) * _LN2 - lnm


# --------------------------------------------------------------------------- weighted
_MASK32 = np.uint64(0xFFFFFFFF)
_FULL = np.uint64(0xFFFFFFFF)  # threshold of an edge that is always kept (alias: itself)
# Successive draws that repeat an already chosen edge this many times in a row draw that step by
# one exact pass over the remaining weights instead (the chosen edges hold most of the weight).
MAX_REJECTS = 16


@kernel
def _row_degrees(indptr):
    """``(largest degree, first node whose degree needs more than 31 bits or -1)``: the
    per-row records of the builders hold relative positions in 32 bits."""
    maxd = 0
    for v in range(indptr.shape[0] - 1):
        d = indptr[v + 1] - indptr[v]
        if d > 2147483647:
            return d, v
        maxd = max(maxd, d)
    return maxd, -1


@kernel
def _row_weights(weights, st, d):
    """The weight sum and the count of positive weights of the row ``weights[st:st + d]``,
    added in order: one definition for :func:`build_alias` and :func:`check_alias`, whose
    exact comparison relies on the same additions in the same order."""
    total = 0.0
    c = 0
    for p in range(d):
        w = weights[st + p]
        total += w
        if w > 0:
            c += 1
    return total, c


@kernel
def build_alias(indptr, weights, rec, totals, npos):
    """Per destination, Walker's alias table of its in-edge weights (Vose's construction): one
    8-byte record per edge ``p``, ``rec[p] = thr | (alias << 32)``: keep relative position
    ``p`` when a uniform 32-bit draw is below ``thr`` (a 32-bit fixed-point threshold, so each
    edge's probability is exact up to ``2**-32 / d``, finer than a float32 threshold), else take
    relative position ``alias`` (an offset from the row start, < 2**31). The source id is read
    from ``indices`` afterwards, only for the edges kept. ``totals[v]``: the weight sum;
    ``npos[v]``: the positive weights. Returns the first node whose degree needs more than 31
    bits, or ``-1``."""
    maxd, bad = _row_degrees(indptr)
    if bad >= 0:
        return bad
    scaled = np.empty(maxd, np.float64)
    small = np.empty(maxd, np.int64)
    large = np.empty(maxd, np.int64)
    for v in range(indptr.shape[0] - 1):
        st = indptr[v]
        d = indptr[v + 1] - st
        total, c = _row_weights(weights, st, d)
        totals[v] = total
        npos[v] = c
        for p in range(d):  # defaults: kept with probability 1 (rounding leftovers)
            rec[st + p] = _FULL | (np.uint64(p) << _S32)
        if c == 0:
            continue
        ns = 0
        nl = 0
        last_pos = 0
        for p in range(d):
            scaled[p] = weights[st + p] * d / total
            if weights[st + p] > 0:
                last_pos = p
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
            thr = min(np.uint64(scaled[j] * 4294967296.0), _FULL)
            if weights[st + j] <= 0:
                thr = np.uint64(0)
            rec[st + j] = thr | (np.uint64(g) << _S32)
            scaled[g] = (scaled[g] + scaled[j]) - 1.0
            if scaled[g] < 1.0:
                nl -= 1
                small[ns] = g
                ns += 1
        for q in range(ns):  # rounding leftovers: keep zero weights out
            j = small[q]
            if weights[st + j] <= 0:
                rec[st + j] = np.uint64(last_pos) << _S32
    return -1


@kernel
def check_alias(indptr, weights, rec, totals, npos):
    """Check tables that :func:`build_alias` wrote (or that claim to be its output, e.g. read
    back from a file) where the sampling kernels rely on them: every record's alias offset
    within its row, and each row's weight sum and positive count exactly as the build computes
    them (the same additions in the same order). ``(node, problem)`` of the first row that
    differs, ``problem`` 1 (alias offset), 2 (sum) or 3 (positive count); ``(-1, 0)`` if none.
    O(E), no allocation."""
    for v in range(indptr.shape[0] - 1):
        st = indptr[v]
        d = indptr[v + 1] - st
        for p in range(d):
            if np.int64(rec[st + p] >> _S32) >= d:
                return v, 1
        total, c = _row_weights(weights, st, d)
        if totals[v] != total:
            return v, 2
        if npos[v] != c:
            return v, 3
    return -1, 0


@kernel
def _pos_and_coin(ctr, d):
    """A uniform position in ``[0, d)`` (``1 <= d < 2**31``) and an independent uniform 32-bit
    coin from one 64-bit draw: the position from the high half (Lemire's multiply-shift, its
    rejection decided by the high half alone), the coin from the low half."""
    b = np.uint64(d)
    while True:
        ctr = ctr + GOLDEN
        x = mix64(ctr)
        m = (x >> _S32) * b
        low = m & _MASK32
        if low >= b or low >= (_TWO32 - b) % b:
            return np.int64(m >> _S32), x & _MASK32, ctr


@_inline_kernel
def _alias_draws(rec, indices, st, d, m, ctr, out, ubuf):
    """``m`` i.i.d. relative positions of ``[0, d)``, ``P(p) = w_p / sum(w)``, into
    ``out[:m]``; returns the advanced counter. The random numbers come first and the record
    reads after, independent of one another and branch-free, so their cache misses overlap."""
    for r in range(m):
        j, coin, ctr = _pos_and_coin(ctr, d)
        out[r] = j
        ubuf[r] = coin
        prefetch(indices, st + j)  # the id read after, when the edge is kept (most draws)
    _alias_resolve(rec, st, m, out, ubuf)
    return ctr


@_inline_kernel
def _alias_resolve(rec, st, m, out, ubuf):
    """The alias step of drawn positions ``out[:m]`` with coins ``ubuf[:m]``: each stays, or
    becomes its record's alias, in place."""
    for r in range(m):
        j = out[r]
        x = rec[st + j]
        out[r] = j if ubuf[r] < (x & _MASK32) else np.int64(x >> _S32)


@kernel
def count_weighted(indptr, npos, dst, lo, hi, fanout, replace, counts, starts, degs,
                   all_positive):
    """``counts[i + 1]``: ``min(fanout, #positive weights)`` (every positive one for
    ``fanout == -1``), or with replacement ``fanout`` if any weight is positive, else 0.
    ``degs[i]`` is the degree, negated (``-d - 1``) when the count is every positive-weight
    edge of a list that also has zero weights, so the fill pass need not read ``npos``.
    ``all_positive``: no weight of the graph is 0, so ``npos`` is the degree and is not read."""
    for i in range(lo, hi):
        if i + COUNT_AHEAD < hi:
            prefetch(indptr, dst[i + COUNT_AHEAD])
        if i + PREFETCH_AHEAD < hi and not all_positive:
            prefetch(npos, dst[i + PREFETCH_AHEAD])
        v = dst[i]
        st = indptr[v]
        d = indptr[v + 1] - st
        starts[i] = st
        c = d if all_positive else npos[v]
        allpos = not replace or fanout < 0
        if fanout >= 0:
            if replace:
                c = fanout if c > 0 else 0
            elif c > fanout:
                c = fanout
                allpos = False
        degs[i] = -d - 1 if allpos and c < d else d
        counts[i + 1] = c


@_inline_kernel
def _chosen(rows, off, n, p):
    for q in range(off, off + n):
        if rows[q] == p:
            return True
    return False


@_inline_kernel
def _weighted_successive(weights, rec, indices, totals, v, st, d, k, ctr, rows, cand, ubuf,
                         m0):
    """Successive draws without replacement: i.i.d. draws from the alias table (made in
    batches, see :func:`_alias_draws`) taken in order, an already chosen edge skipped (which
    is exactly drawing from the remaining edges); after ``MAX_REJECTS`` skips in a row one step
    is drawn by a pass over the remaining weights instead. ``k`` relative positions into
    ``rows``. ``m0 > 0``: the first batch was drawn ahead (``cand``/``ubuf``, not yet through
    the alias step, ``ctr`` after them; see :func:`fill_weighted`)."""
    m = 0  # draws in cand, r of them used; each batch holds the steps left plus one
    if m0 > 0:
        _alias_resolve(rec, st, m0, cand, ubuf)
        m = m0
    r = 0
    n = 0
    rejects = 0
    seen = np.uint64(0)
    while n < k:
        if rejects >= MAX_REJECTS:
            rest = totals[v]  # read here only: most destinations never fall back
            for q in range(n):
                rest -= weights[st + rows[q]]
            u, ctr = unit_open1(ctr)
            x = u * rest
            p = -1
            for q in range(d):
                w = weights[st + q]
                if w > 0 and not _chosen(rows, 0, n, q):
                    p = q
                    x -= w
                    if x < 0:
                        break
            rejects = 0
        else:
            if r == m:
                m = min(k - n + 1, cand.shape[0])
                ctr = _alias_draws(rec, indices, st, d, m, ctr, cand, ubuf)
                r = 0
            p = cand[r]
            r += 1
            # a 64-bit filter of the chosen positions (mod 64; exact when d <= 64): most fresh
            # draws skip the scan
            if (seen >> np.uint64(p & 63)) & _ONE and (d <= 64 or _chosen(rows, 0, n, p)):
                rejects += 1
                continue
            rejects = 0
        rows[n] = p
        seen |= _ONE << np.uint64(p & 63)
        n += 1


# How fill_weighted samples a destination of degree d and count k < #positive weights, without
# replacement (measured per degree class on `medium`, fanout 15, caches flushed as in a real
# batch; benchmarks/weighted_costs.py and docs/benchmarks.md):
# - d <= WEIGHTED_KEYS_MAX_DEG: exponential keys over the contiguous weights
#   (:func:`_weighted_keys`); degrees 16-23 cost 2.1x uniform's time per destination, against
#   3.2x for successive alias draws, which there mostly repeat edges already chosen. From
#   degree ~24 on, the keys' O(d) logarithms and O(d^2) rank compares cost as much as the draws.
# - else d <= WEIGHTED_SCAN_MAX_DEG (<= 64) and 2 d <= 3 k (large fanouts only): exact
#   successive draws over the weights (:func:`_weighted_scan`), O(k d) on a few cache lines.
# - else successive alias draws, the first batch drawn WEIGHTED_DRAW_AHEAD destinations ahead
#   with its record and id lines prefetched (:func:`_draw_ahead`): per destination 1.33x
#   uniform's time at degrees 64-4095 against 1.45x without. 4 ahead was no better than 2.
WEIGHTED_KEYS_MAX_DEG = 24
WEIGHTED_SCAN_MAX_DEG = 64
WEIGHTED_DRAW_AHEAD = 2


@_inline_kernel
def _weighted_scan(weights, st, d, k, ctr, pos):
    """Successive draws without replacement for ``d <= 64``: each step draws ``u * rest``
    (``rest`` the weight not yet chosen) and walks the unchosen positive weights (a 64-bit mask
    of the chosen ones) until it is used up; ``k`` positions of ``[0, d)`` into ``pos``. The
    last unchosen positive weight absorbs rounding."""
    rest = 0.0
    for q in range(d):
        w = weights[st + q]
        if w > 0:
            rest += w
    chosen = np.uint64(0)
    for n in range(k):
        u, ctr = unit_open1(ctr)
        x = u * rest
        p = -1
        for q in range(d):
            if chosen & (_ONE << np.uint64(q)):
                continue
            w = weights[st + q]
            if w > 0:
                p = q
                x -= w
                if x < 0:
                    break
        chosen |= _ONE << np.uint64(p)
        pos[n] = p
        rest -= weights[st + p]


@_inline_kernel
def _weighted_keys(weights, st, d, k, ctr, pos, kbuf):
    """Successive draws without replacement by exponential keys (Efraimidis and Spirakis), for
    ``d <= 64``: every edge ``q`` gets ``E_q / w_q`` with ``E_q ~ Exp(1)`` i.i.d. (``+inf`` for
    a zero weight); the ``k`` smallest keys in increasing order are ``k`` successive draws (the
    smallest the first). Each key's rank is counted against all ``d`` keys, ties broken by
    position (branch-free O(d^2) compares: cheaper at small ``d`` than keeping a sorted top
    ``k``, whose inserts mispredict, measured 40 ns per edge); the edge of rank ``r < k`` goes to
    ``pos[r]``, so positions come in draw order (``pos[k]`` takes the rest). Needs
    ``k < #positive weights``."""
    for q in range(d):
        w = weights[st + q]
        ctr = ctr + GOLDEN
        kbuf[q] = neg_log_unit(mix64(ctr)) / w if w > 0 else np.inf
    for q in range(d):
        key = kbuf[q]
        r = 0
        for j in range(d):
            x = kbuf[j]
            r += (x < key) | ((x == key) & (j < q))
        pos[min(r, k)] = q


# How fill_weighted samples one destination (see the comment above the thresholds)
_ALL, _IID, _KEYS, _SCAN, _ALIAS = 0, 1, 2, 3, 4


@_inline_kernel
def _weighted_path(c, deg_entry, replace, fanout, scan_max_deg, keys_max_deg):
    """The way fill_weighted samples a destination of count ``c`` and ``degs`` entry
    ``deg_entry`` (negative: every positive-weight edge, see :func:`count_weighted`): ``_ALL``
    (nothing drawn: every edge, or every positive-weight one, or none), ``_IID`` (with
    replacement), ``_KEYS``, ``_SCAN`` or ``_ALIAS`` (successive alias draws)."""
    if c == 0 or deg_entry < 0:
        return _ALL
    if replace and fanout >= 0:
        return _IID
    if c == deg_entry:
        return _ALL
    if deg_entry <= min(keys_max_deg, 64):
        return _KEYS
    if deg_entry <= min(scan_max_deg, 64) and 2 * deg_entry <= 3 * c:
        return _SCAN
    return _ALIAS


@_inline_kernel
def _draw_ahead(rec, indices, starts, degs, offsets, a, layer_key, fanout, replace,
                scan_max_deg, keys_max_deg, ring_pos, ring_coin, ring_ctr, ring_m):
    """Destination ``a``'s first batch of alias draws, made ahead into its ring slot with its
    record and id lines prefetched (``ring_m`` 0 when ``a`` is not sampled by alias draws):
    the draws are counter-based, so they are the ones :func:`_weighted_successive` would make."""
    slot = a % ring_m.shape[0]
    ring_m[slot] = 0
    c = offsets[a + 1] - offsets[a]
    d = degs[a]
    if _weighted_path(c, d, replace, fanout, scan_max_deg, keys_max_deg) != _ALIAS:
        return
    st = starts[a]
    m = min(c + 1, ring_pos.shape[1])
    ctr = dst_base(layer_key, a)
    for r in range(m):
        j, coin, ctr = _pos_and_coin(ctr, d)
        ring_pos[slot, r] = j
        ring_coin[slot, r] = coin
        prefetch(rec, st + j)
        prefetch(indices, st + j)
    ring_ctr[slot] = ctr
    ring_m[slot] = m


@kernel
def fill_weighted(indices, weights, rec, totals, dst, starts, degs, lo, hi, fanout,
                  replace, layer_key, offsets, edge_index, eids, want_eids, scan_max_deg,
                  keys_max_deg, draw_ahead):
    """Sample destinations ``[lo, hi)`` into their slots (global source ids in row 0, ``i`` in
    row 1, edge positions in ``eids`` when wanted), each the way :func:`_weighted_path` picks:
    every positive-weight edge when the count is all of them; with replacement i.i.d. alias
    draws; without, exponential keys up to degree ``keys_max_deg``, a scan of the weights when
    the degree is at most ``scan_max_deg`` (and 64) and at most 1.5x the count, else successive
    alias draws whose first batch is made ``draw_ahead`` destinations ahead (0: none).
    Draws give relative positions; the chosen edges' source ids are read from ``indices``
    after (independent reads)."""
    rows = edge_index[0]
    cols = edge_index[1]
    k = max(fanout, 1)
    ubuf = np.empty(k + 1, np.uint64)
    cand = np.empty(k + 1, np.int64)
    pos = np.empty(k + 1, np.int64)
    kbuf = np.empty(64, np.float64)
    ahead = max(draw_ahead, 1)
    ring_pos = np.empty((ahead, k + 1), np.int64)
    ring_coin = np.empty((ahead, k + 1), np.uint64)
    ring_ctr = np.empty(ahead, np.uint64)
    ring_m = np.zeros(ahead, np.int64)
    if draw_ahead > 0:
        for a in range(lo, min(lo + draw_ahead, hi)):
            _draw_ahead(rec, indices, starts, degs, offsets, a, layer_key, fanout, replace,
                        scan_max_deg, keys_max_deg, ring_pos, ring_coin, ring_ctr, ring_m)
    for i in range(lo, hi):
        m0 = 0
        if draw_ahead > 0:  # take i's draws out of the ring, then draw i + ahead's into it
            slot = i % ahead
            m0 = ring_m[slot]
            for r in range(m0):
                cand[r] = ring_pos[slot, r]
                ubuf[r] = ring_coin[slot, r]
            ctr0 = ring_ctr[slot]
            if i + draw_ahead < hi:
                _draw_ahead(rec, indices, starts, degs, offsets, i + draw_ahead, layer_key,
                            fanout, replace, scan_max_deg, keys_max_deg, ring_pos, ring_coin,
                            ring_ctr, ring_m)
        if i + PREFETCH_AHEAD < hi:  # the list read next: records for alias draws, else ids
            a = i + PREFETCH_AHEAD
            way = _weighted_path(offsets[a + 1] - offsets[a], degs[a], replace, fanout,
                                 scan_max_deg, keys_max_deg)
            if way == _IID or way == _ALIAS:
                prefetch(rec, starts[a])
            else:  # the ids, after the weights when the keys, the scan or a filter read them
                if way != _ALL or degs[a] < 0:
                    prefetch(weights, starts[a])
                prefetch(indices, starts[a])
        off = offsets[i]
        c = offsets[i + 1] - off
        way = _weighted_path(c, degs[i], replace, fanout, scan_max_deg, keys_max_deg)
        if c == 0:
            continue
        st = starts[i]
        d = degs[i]
        if way == _ALL:  # every edge, or (negative entry) every positive-weight one
            allpos = d < 0
            if allpos:
                d = -d - 1
            n = off
            for p in range(d):
                if not allpos or weights[st + p] > 0:
                    rows[n] = indices[st + p]
                    cols[n] = i
                    if want_eids:
                        eids[n] = st + p
                    n += 1
            continue
        ctr = dst_base(layer_key, i)
        if way == _IID:
            _alias_draws(rec, indices, st, d, c, ctr, pos, ubuf)
        elif way == _KEYS:
            _weighted_keys(weights, st, d, c, ctr, pos, kbuf)
        elif way == _SCAN:
            _weighted_scan(weights, st, d, c, ctr, pos)
        else:
            if m0 > 0:
                ctr = ctr0
            _weighted_successive(weights, rec, indices, totals, dst[i], st, d, c, ctr, pos,
                                 cand, ubuf, m0)
        for q in range(c):
            p = st + pos[q]
            rows[off + q] = indices[p]
            cols[off + q] = i
            if want_eids:
                eids[off + q] = p


# --------------------------------------------------------------------------- LABOR
_M32 = np.uint64(0xFFFFFFFF)
_G32 = np.uint64(0x9E3779B1)
_F1 = np.uint64(0x85EBCA6B)
_F2 = np.uint64(0xC2B2AE35)
_S13 = np.uint64(13)
_S16 = np.uint64(16)
_S32 = np.uint64(32)


@kernel
def labor_variate(t, key32):
    """LABOR's 32-bit variate of node ``t`` under ``key32``: murmur3's finaliser of
    ``fold(t) * golden + key32`` (``fold`` xors the high half of 64-bit ids into the low one),
    cheap enough to hash every in-edge of a hub. Uniform on ``[0, 2**32)``; the node's variate
    is ``variate / 2**32``."""
    u = np.uint64(t)
    h = (((u ^ (u >> _S32)) * _G32) + key32) & _M32
    h ^= h >> _S16
    h = (h * _F1) & _M32
    h ^= h >> _S13
    h = (h * _F2) & _M32
    return h ^ (h >> _S16)


# Hub in-edges are hashed in blocks of LABOR_BLOCK: one branch-free pass (it vectorises) hashes
# the block into a small buffer and counts the kept edges; a second pass over the buffer (no
# rehashing) writes them, skipped for blocks that keep nothing (most blocks of a hub).
LABOR_BLOCK = 128


@kernel
def _grow(rows, cols, ew, eids, n, cap, want_eids):
    """The output buffers of :func:`sample_labor` at capacity ``cap``, first ``n`` kept."""
    rows2 = np.empty(cap, np.int64)
    rows2[:n] = rows[:n]
    cols2 = np.empty(cap, np.int64)
    cols2[:n] = cols[:n]
    ew2 = np.empty(cap, np.float32)
    ew2[:n] = ew[:n]
    eids2 = eids
    if want_eids:
        eids2 = np.empty(cap, np.int64)
        eids2[:n] = eids[:n]
    return rows2, cols2, ew2, eids2


@kernel
def _labor_fill(indices, starts, degs, lo, i0, fanout, key32, rows, cols, ew, eids, want_eids,
                n, hb):
    """Destinations ``i0, i0 + 1, ...`` (positions relative to ``lo``) into the buffers from
    ``n`` on, until every one is done or one does not fit: returns ``(i, n)`` with ``i`` the
    destination to redo after growing (its partial output dropped; its draws do not depend on
    the attempt), or ``len(starts)``. The buffers are arguments, fixed for the loop (numba
    reloads arrays reassigned inside a loop)."""
    n_dst = starts.shape[0]
    cap = rows.shape[0]
    for i in range(i0, n_dst):
        if i + PREFETCH_AHEAD < n_dst:
            prefetch(indices, starts[i + PREFETCH_AHEAD])
        st = starts[i]
        d = degs[i]
        if d == 0:
            continue
        col = lo + i
        if fanout < 0 or d <= fanout:
            if n + d > cap:
                return i, n
            w = np.float32(1.0 / d)
            for p in range(st, st + d):
                rows[n] = indices[p]
                cols[n] = col
                ew[n] = w
                if want_eids:
                    eids[n] = p
                n += 1
            continue
        # keep t when its variate is below fanout / d (2**-32 resolution)
        thr = np.uint64(fanout / d * 4294967296.0)
        w = np.float32(1.0 / fanout)
        n0 = n
        end = st + d
        for b0 in range(st, end, LABOR_BLOCK):
            m = min(LABOR_BLOCK, end - b0)
            c = 0
            for q in range(m):
                h = labor_variate(indices[b0 + q], key32)
                hb[q] = h
                c += h < thr
            if c == 0:
                continue
            if n + c > cap:
                return i, n0
            for q in range(m):
                if hb[q] < thr:
                    rows[n] = indices[b0 + q]
                    cols[n] = col
                    ew[n] = w
                    if want_eids:
                        eids[n] = b0 + q
                    n += 1
    return n_dst, n


@kernel
def sample_labor(indptr, indices, dst, lo, hi, fanout, node_key, want_eids):
    """LABOR-0 for destinations ``[lo, hi)``: in-edge ``t -> dst[i]`` of a destination of
    degree ``d`` is kept when ``r_t < fanout / d`` (``r_t`` from :func:`labor_variate` and the
    low 32 bits of ``node_key``; every edge when ``d <= fanout`` or ``fanout == -1``), with
    weight ``1 / (d * min(1, fanout / d))``. Returns ``(edge_index, eids, weights)``: global
    source ids in row 0 and destination positions in row 1 of a ``(2, E)`` int64 array, edge
    positions (or an empty array), float32 weights.

    A first pass caches every destination's neighbour range (independent reads the CPU
    overlaps) and sizes the buffers for the expected count; :func:`_labor_fill` fills them,
    prefetching neighbour lists ahead, and they grow when a hub keeps more than expected."""
    n_dst = hi - lo
    starts = np.empty(n_dst, np.int64)
    degs = np.empty(n_dst, np.int64)
    cap = 16
    for i in range(n_dst):
        if i + COUNT_AHEAD < n_dst:
            prefetch(indptr, dst[lo + i + COUNT_AHEAD])
        v = dst[lo + i]
        st = indptr[v]
        d = indptr[v + 1] - st
        starts[i] = st
        degs[i] = d
        cap += d if (fanout < 0 or d <= fanout) else fanout
    cap += cap >> 3  # hubs keep fanout edges in expectation: slack before any growth
    rows = np.empty(cap, np.int64)
    cols = np.empty(cap, np.int64)
    ew = np.empty(cap, np.float32)
    eids = np.empty(cap if want_eids else 0, np.int64)
    hb = np.empty(LABOR_BLOCK, np.uint64)
    key32 = node_key & _M32
    i, n = _labor_fill(indices, starts, degs, lo, 0, fanout, key32, rows, cols, ew, eids,
                       want_eids, 0, hb)
    while i < n_dst:
        cap = max(2 * cap, n + degs[i])
        rows, cols, ew, eids = _grow(rows, cols, ew, eids, n, cap, want_eids)
        i, n = _labor_fill(indices, starts, degs, lo, i, fanout, key32, rows, cols, ew, eids,
                           want_eids, n, hb)
    edge_index = np.empty((2, n), np.int64)
    edge_index[0] = rows[:n]
    edge_index[1] = cols[:n]
    return edge_index, eids[:n] if want_eids else eids, ew[:n]


# --------------------------------------------------------------------------- LABOR, rotated
# variates="rotated": r_t = (b_t + shift) mod 2**32 with b_t = labor_variate(t, base_key) fixed
# per sampler seed and shift per (seed, epoch, batch, layer). Edge t -> s is kept when
# r_t < thr_s, i.e. when b_t lies in the circular arc [2**32 - shift, 2**32 - shift + thr_s):
# with each column sorted by b once, that is a run of consecutive (circular) positions.


@kernel
def build_base_order(indptr, indices, base_key32, lsrc, lpos, lbase):
    """Each destination's in-edges sorted by their source's base variate
    ``labor_variate(t, base_key32)`` (stable): the source ids ``lsrc``, the edge's position
    relative to the row start ``lpos`` (int32) and the sorted bases ``lbase`` (uint32).
    Returns the first node whose degree needs more than 31 bits, or ``-1``."""
    maxd, bad = _row_degrees(indptr)
    if bad >= 0:
        return bad
    keys = np.empty(maxd, np.uint64)
    for v in range(indptr.shape[0] - 1):
        st = indptr[v]
        for q in range(indptr[v + 1] - st):
            keys[q] = labor_variate(indices[st + q], base_key32)
        d = indptr[v + 1] - st
        order = np.argsort(keys[:d], kind="mergesort")
        for q in range(d):
            lsrc[st + q] = indices[st + order[q]]
            lpos[st + q] = order[q]
            lbase[st + q] = keys[order[q]]
    return -1


@kernel
def check_base_order(indptr, indices, base_key32, lsrc, lpos, lbase):
    """Check tables that claim to be :func:`build_base_order`'s output where the kernels rely
    on them: per row, every relative position ``lpos`` within the row, the source ``lsrc`` the
    edge's at that position in ``indices``, its base the source's variate, and the bases
    sorted. ``(edge position, problem)`` of the first edge that differs, ``problem`` 1
    (position), 2 (source), 3 (base) or 4 (order); ``(-1, 0)`` if none. O(E), no allocation."""
    for v in range(indptr.shape[0] - 1):
        st = indptr[v]
        d = indptr[v + 1] - st
        for p in range(st, st + d):
            q = np.int64(lpos[p])
            if q < 0 or q >= d:
                return p, 1
            if lsrc[p] != indices[st + q]:
                return p, 2
            if lbase[p] != labor_variate(indices[st + q], base_key32):
                return p, 3
            if p > st and lbase[p - 1] > lbase[p]:
                return p, 4
    return -1, 0


@kernel
def count_labor_rotated(indptr, lbase, dst, lo, hi, fanout, shift32, counts, starts, degs,
                        first):
    """Per destination of degree ``d > fanout``: the kept sources are those whose base lies in
    the arc ``[a, a + thr)`` (``a = -shift mod 2**32``, ``thr = floor(fanout / d * 2**32)``),
    found by two searches of the sorted bases ``lbase`` (:func:`_uniform_lower_bound`, the
    count of values below a bound, started where the uniform spread of the bases puts it; the
    line of the first search is prefetched ``COUNT_AHEAD // 2`` destinations ahead):
    ``first[i]`` the arc's first relative position and
    ``counts[i + 1]`` its length (circular). Every edge when ``d <= fanout`` or ``fanout ==
    -1``."""
    a = (_TWO32 - shift32) & _M32
    half = COUNT_AHEAD // 2
    for i in range(lo, hi):
        if i + COUNT_AHEAD < hi:
            prefetch(indptr, dst[i + COUNT_AHEAD])
        if i + half < hi:  # its indptr has arrived: the line where the first search starts
            v = dst[i + half]
            st = indptr[v]
            prefetch(lbase, st + ((np.uint64(indptr[v + 1] - st) * a) >> _S32))
        v = dst[i]
        st = indptr[v]
        d = indptr[v + 1] - st
        starts[i] = st
        degs[i] = d
        if fanout < 0 or d <= fanout:
            first[i] = 0
            counts[i + 1] = d
            continue
        thr = np.uint64(fanout / d * 4294967296.0)
        b = a + thr
        p0 = _uniform_lower_bound(lbase, st, d, a)  # the bases below a
        if b <= _TWO32:
            c = _uniform_lower_bound(lbase, st, d, b) - p0
        else:  # the arc wraps: [a, 2**32) and [0, b - 2**32)
            c = d - p0 + _uniform_lower_bound(lbase, st, d, b - _TWO32)
        first[i] = p0 if p0 < d else 0  # an arc past the last base goes on at the first
        counts[i + 1] = c


@_inline_kernel
def _uniform_lower_bound(keys, st, d, bound):
    """How many of the sorted 32-bit keys ``keys[st:st+d]`` are below ``bound`` (``<= 2**32``),
    for keys spread uniformly (hashes): the search starts where a uniform spread puts the
    bound, ``d * bound / 2**32`` (the true place is within about ``sqrt(d) / 2`` of it, mostly
    on the same cache line), gallops outwards to bracket it and bisects the bracket. Any key
    order that is sorted gives the exact count, as :func:`_eligible_prefix` does; only the
    number of lines read depends on the spread."""
    p = np.int64((np.uint64(d) * bound) >> _S32)
    if p > d - 1:
        p = d - 1
    if keys[st + p] < bound:  # the count is above p: gallop right
        lo = p + 1
        step = 1
        while True:
            q = p + step
            if q >= d:
                hi = d
                break
            if keys[st + q] < bound:
                lo = q + 1
                step <<= 1
            else:
                hi = q
                break
    else:  # the count is at most p: gallop left
        hi = p
        step = 1
        while True:
            q = p - step
            if q < 0:
                lo = 0
                break
            if keys[st + q] >= bound:
                hi = q
                step <<= 1
            else:
                lo = q + 1
                break
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[st + mid] < bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


@_inline_kernel
def _copy_arc_run(lsrc, lpos, st, p, m, i, w, rows, cols, ew, eids, want_eids, off):
    """Positions ``st + p .. st + p + m`` of the sorted column into slots ``off ..``."""
    for q in range(m):
        rows[off + q] = lsrc[st + p + q]
        cols[off + q] = i
        ew[off + q] = w
        if want_eids:
            eids[off + q] = st + lpos[st + p + q]


@kernel
def fill_labor_rotated(lsrc, lpos, starts, degs, first, lo, hi, fanout, offsets, edge_index,
                       ew, eids, want_eids):
    """Copy each destination's arc (``first[i]`` on, circular, ``offsets`` sized) into its
    slots, as at most two runs (to the column's end, then from its start): source ids in row
    0, ``i`` in row 1, weight ``1 / (d * min(1, fanout / d))``, edge positions in ``eids``
    when wanted. The arc of the destination ``PREFETCH_AHEAD`` ahead is prefetched."""
    rows = edge_index[0]
    cols = edge_index[1]
    for i in range(lo, hi):
        if i + PREFETCH_AHEAD < hi:
            prefetch(lsrc, starts[i + PREFETCH_AHEAD] + first[i + PREFETCH_AHEAD])
        d = degs[i]
        c = offsets[i + 1] - offsets[i]
        take_all = fanout < 0 or d <= fanout
        w = np.float32(1.0 / max(d, 1)) if take_all else np.float32(1.0 / fanout)
        m = min(c, d - first[i])
        _copy_arc_run(lsrc, lpos, starts[i], first[i], m, i, w, rows, cols, ew, eids, want_eids,
                      offsets[i])
        _copy_arc_run(lsrc, lpos, starts[i], 0, c - m, i, w, rows, cols, ew, eids, want_eids,
                      offsets[i] + m)


# --------------------------------------------------------------------------- temporal
@kernel
def _edge_time(indices, node_times, edge_times, has_nt, has_et, p):
    """The time of the edge at position ``p``: its edge time, its source's node time, or the
    later of the two (:func:`build_time_order` sorts by it, :func:`check_time_order` checks it)."""
    if has_et and has_nt:
        return max(edge_times[p], node_times[indices[p]])
    if has_et:
        return edge_times[p]
    return node_times[indices[p]]


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
            te = _edge_time(indices, node_times, edge_times, has_nt, has_et, p)
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
def check_time_order(indptr, indices, node_times, edge_times, has_nt, has_et, tkey, tsrc, tpos):
    """Check tables that claim to be :func:`build_time_order`'s output where the kernels rely
    on them: per row, every position ``tpos`` within the row, the source ``tsrc`` the one at
    that position in ``indices``, the time ``tkey`` that edge's time, and the times sorted.
    ``(edge position, problem)`` of the first edge that differs, ``problem`` 1 (position), 2
    (source), 3 (time) or 4 (order); ``(-1, 0)`` if none. O(E), no allocation."""
    for v in range(indptr.shape[0] - 1):
        st = indptr[v]
        end = indptr[v + 1]
        for p in range(st, end):
            q = tpos[p]
            if q < st or q >= end:
                return p, 1
            if tsrc[p] != indices[q]:
                return p, 2
            if tkey[p] != _edge_time(indices, node_times, edge_times, has_nt, has_et, q):
                return p, 3
            if p > st and tkey[p - 1] > tkey[p]:
                return p, 4
    return -1, 0


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


# The count passes of temporal and rotated-LABOR sampling run their binary searches
# SEARCH_GROUP destinations at a time, level by level: each level probes every unfinished
# search of the group and prefetches its next probe, so a group's probes are in flight together
# instead of one dependent miss after another per destination (the same lower bounds as
# _eligible_prefix, found in the same steps).
SEARCH_GROUP = 16


@_inline_kernel
def _search_group(keys, bst, blo, bhi, bound, strict, n):
    """For each lane ``k < n``: the count of ``keys[bst[k] + blo[k] : bst[k] + bhi[k]]`` (sorted)
    that are ``<= bound[k]`` (``< bound[k]`` when strict), added to ``blo[k]`` (``bhi[k]`` is
    then equal to it); lanes advance one binary-search level per sweep."""
    active = True
    while active:
        active = False
        for k in range(n):
            lo = blo[k]
            hi = bhi[k]
            if lo >= hi:
                continue
            mid = (lo + hi) >> 1
            x = keys[bst[k] + mid]
            t = bound[k]
            if x < t or (x == t and not strict):
                lo = mid + 1
            else:
                hi = mid
            blo[k] = lo
            bhi[k] = hi
            if lo < hi:
                prefetch(keys, bst[k] + ((lo + hi) >> 1))
                active = True


@kernel
def count_temporal(indptr, tkey, dst, dst_times, strict, lo, hi, fanout, replace, counts,
                   starts, degs):
    """Per destination, ``degs[i]`` = its eligible (early enough) in-edges, a prefix of its
    time-sorted column, and ``counts[i + 1]`` what uniform sampling takes of that prefix."""
    G = SEARCH_GROUP
    bst = np.empty(G, np.int64)
    blo = np.empty(G, np.int64)
    bhi = np.empty(G, np.int64)
    bound = dst_times[lo:lo + G].copy()
    for g0 in range(lo, hi, G):
        n = min(G, hi - g0)
        for k in range(n):
            i = g0 + k
            if i + G < hi:  # the next group's rows
                prefetch(indptr, dst[i + G])
            st = indptr[dst[i]]
            starts[i] = bst[k] = st
            blo[k] = 0
            bhi[k] = indptr[dst[i] + 1] - st
            bound[k] = dst_times[i]
            prefetch(tkey, st + (bhi[k] >> 1))
        _search_group(tkey, bst, blo, bhi, bound, strict, n)
        for k in range(n):
            m = blo[k]
            degs[g0 + k] = m
            counts[g0 + k + 1] = count_for(m, fanout, replace)


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
