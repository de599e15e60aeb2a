"""numba kernels of the papers-sized generator (:mod:`.synthetic_papers`): module-level
functions over plain arrays, each a pure function of ``(seed, node id)``, so any range of nodes
is generated on its own, in any order and on any thread, with the same result.

- A keyed pseudo-random bijection of ``[0, n)`` (:func:`permute` / :func:`unpermute`: a 4-round
  Feistel network on the next even power of two, cycle-walked into ``[0, n)``) maps *virtual
  positions* to node ids. Classes own contiguous ranges of positions (``class_start``); inside a
  class, a position's offset is its *popularity rank*. Nothing of size ``n`` is stored for it.
- Rank ``r`` of a class of ``m`` nodes is drawn with probability proportional to
  ``(r + r0) ** -beta`` (a Zipf law with an offset that caps the hubs): :func:`draw_rank`
  inverts that law's continuous CDF. A node's expected in-degree is the mean degree times its
  class size times that same probability, so in- and out-degrees follow one power law
  (hubs of 10^4-10^5 edges at full size).
- :func:`fill_columns` writes each destination's in-neighbours straight into its CSC column:
  ``homophily`` of the draws come from the destination's class, the rest from a class chosen in
  proportion to class size, each by rank; no self loops; the column is sorted and repeated
  sources are redrawn until it holds its degree of distinct sources.
- :func:`fill_features` writes bfloat16 bits of ``signal * centroid[class] + noise`` (noise: an
  Irwin-Hall(4) normal from one 64-bit hash per value).
"""

from __future__ import annotations

import math

import numpy as np

from .._numba import bucket_of, kernel, mix64

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_SALT = np.uint64(0x632BE59BD9B4E019)
_U53 = 1.0 / 9007199254740992.0  # 2 ** -53
_U24 = 1.0 / 16777216.0  # 2 ** -24
_LOW32 = np.uint64(0xFFFFFFFF)
_LOW16 = np.uint64(0xFFFF)
_SH11, _SH16, _SH32, _SH40, _SH48 = (np.uint64(11), np.uint64(16), np.uint64(32), np.uint64(40),
                                     np.uint64(48))


@kernel
def _feistel(x, keys, half, mask, inverse):
    """One pass of the Feistel network over ``x`` (``inverse``: the rounds undone, keys in
    reverse order on swapped halves)."""
    hi = x >> half
    lo = x & mask
    if inverse:
        hi, lo = lo, hi
    k = keys.shape[0]
    for i in range(k):
        hi, lo = lo, hi ^ (mix64(lo ^ keys[k - 1 - i if inverse else i]) & mask)
    if inverse:
        hi, lo = lo, hi
    return (hi << half) | lo


@kernel
def _walk(x, n, keys, half, mask, inverse):
    """Cycle-walk: apply the network until the value lands in ``[0, n)``."""
    x = _feistel(x, keys, half, mask, inverse)
    while x >= n:
        x = _feistel(x, keys, half, mask, inverse)
    return x


@kernel
def permute(x, n, keys, half, mask):
    """The node id at virtual position ``x`` (a bijection of ``[0, n)``; all uint64)."""
    return _walk(x, n, keys, half, mask, False)


@kernel
def unpermute(y, n, keys, half, mask):
    """The virtual position of node ``y``: :func:`permute`'s inverse."""
    return _walk(y, n, keys, half, mask, True)


@kernel
def class_of(p, class_start):
    """The class whose position range ``[class_start[c], class_start[c + 1])`` holds ``p``."""
    return bucket_of(class_start, p)


@kernel
def _g(y, beta):
    """The antiderivative of ``y ** -beta`` (``log y`` at ``beta == 1``)."""
    if beta == 1.0:
        return math.log(y)
    return y ** (1.0 - beta) / (1.0 - beta)


@kernel
def _g_inv(t, beta):
    if beta == 1.0:
        return math.exp(t)
    return (t * (1.0 - beta)) ** (1.0 / (1.0 - beta))


@kernel
def draw_rank(u, m, r0, beta, g0, gspan):
    """A rank in ``[0, m)`` with density ``(r + r0) ** -beta``, from ``u`` in ``[0, 1)``
    (``g0 = g(r0)``, ``gspan = g(m + r0) - g(r0)``)."""
    r = int(_g_inv(g0 + u * gspan, beta) - r0)
    if r < 0:
        return 0
    if r >= m:
        return m - 1
    return r


@kernel
def nodes_degrees_labels(lo, hi, n, keys, half, mask, class_start, gspan, g0, r0, beta,
                         mean_degree, caps, seed, degrees, labels):
    """For nodes ``lo .. hi - 1``: ``labels[v - lo]`` its class, ``degrees[v - lo]`` its
    in-degree: ``mean_degree * m * P(rank)`` (the mass of ``[r, r + 1)`` under the rank law),
    rounded up with probability its fraction (a hash of ``(seed, v)``), at most ``caps[c]``."""
    nn = np.uint64(n)
    for v in range(lo, hi):
        p = unpermute(np.uint64(v), nn, keys, half, mask)
        c = class_of(np.int64(p), class_start)
        m = class_start[c + 1] - class_start[c]
        r = np.int64(p) - class_start[c]
        mass = (_g(r + 1.0 + r0, beta) - _g(r + r0, beta)) / gspan[c]
        e = mean_degree * m * mass
        d = int(e)
        u = (mix64(seed ^ mix64(np.uint64(v))) >> _SH11) * _U53
        if u < e - d:
            d += 1
        if d > caps[c]:
            d = caps[c]
        degrees[v - lo] = d
        labels[v - lo] = c


@kernel
def fill_columns(v0, v1, indptr, out, n, keys, half, mask, class_start, gspan, g0, r0, beta,
                 homophily, seed):
    """The in-neighbours of destinations ``v0 .. v1 - 1`` into ``out`` (which starts at edge
    ``indptr[v0]``): each column sorted, distinct, without ``v``. Returns the number of draws
    made (redraws included)."""
    base = indptr[v0]
    nn = np.uint64(n)
    draws = 0
    for v in range(v0, v1):
        s = indptr[v] - base
        d = indptr[v + 1] - indptr[v]
        if d == 0:
            continue
        seg = out[s : s + d]
        p = unpermute(np.uint64(v), nn, keys, half, mask)
        own = class_of(np.int64(p), class_start)
        key = mix64(seed ^ mix64(np.uint64(v)))
        k = np.uint64(0)
        have = 0
        while have < d:
            i = have
            while i < d:
                h1 = mix64(key + k * _GOLDEN)
                h2 = mix64(h1 ^ _SALT)
                k += np.uint64(1)
                draws += 1
                if (h1 >> _SH40) * _U24 < homophily:
                    c = own
                else:  # a class in proportion to its size: the class of a uniform position
                    c = class_of(np.int64(((h1 & _LOW32) * nn) >> _SH32), class_start)
                m = class_start[c + 1] - class_start[c]
                r = draw_rank((h2 >> _SH11) * _U53, m, r0, beta, g0, gspan[c])
                src = permute(np.uint64(class_start[c] + r), nn, keys, half, mask)
                if src == np.uint64(v):
                    continue
                seg[i] = src
                i += 1
            seg.sort()
            u = 1
            for j in range(1, d):
                if seg[j] != seg[u - 1]:
                    seg[u] = seg[j]
                    u += 1
            have = u
    return draws


@kernel
def fill_features(v0, v1, labels, centroids, signal, seed, out):
    """bfloat16 bits of row ``v`` (``v0 <= v < v1``) into ``out[v - v0]``: ``signal *
    centroids[labels[v]]`` plus unit noise (Irwin-Hall of four 16-bit uniforms, rescaled),
    rounded to nearest, ties to even."""
    f = centroids.shape[1]
    scale = math.sqrt(3.0) / 65536.0  # sum of 4 uniforms on [0, 65536): mean 131070, var 4/12
    row = np.empty(f, dtype=np.float32)
    bits = row.view(np.uint32)
    for v in range(v0, v1):
        key = mix64(seed ^ mix64(np.uint64(v)))
        c = labels[v - v0]
        for j in range(f):
            h = mix64(key + np.uint64(j) * _GOLDEN)
            s = (np.float64(h & _LOW16) + np.float64((h >> _SH16) & _LOW16)
                 + np.float64((h >> _SH32) & _LOW16) + np.float64(h >> _SH48))
            row[j] = signal * centroids[c, j] + (s - 131070.0) * scale
        for j in range(f):
            b = bits[j]
            out[v - v0, j] = np.uint16((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1)))
                                       >> np.uint32(16))


@kernel
def permute_range(a, b, n, keys, half, mask, out):
    """``out[i - a] = permute(i)`` for ``a <= i < b``."""
    nn = np.uint64(n)
    for i in range(a, b):
        out[i - a] = np.int64(permute(np.uint64(i), nn, keys, half, mask))
