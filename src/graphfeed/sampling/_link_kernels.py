"""numba kernels of the link sampler's exclusion filter on CPU (sequential passes over a
block's edges; the torch path in ``link.py`` does the same with a few vectorised ops on any
device)."""

from __future__ import annotations

import numpy as np

from .._numba import kernel


@kernel
def _is_seed_pair(u, v, num_seeds, keys):
    """Both ends below ``num_seeds`` and ``u * num_seeds + v`` in the sorted ``keys``."""
    if u >= num_seeds or v >= num_seeds:
        return False
    k = u * num_seeds + v
    lo, hi = 0, keys.shape[0]
    while lo < hi:  # first key >= k
        mid = (lo + hi) >> 1
        if keys[mid] < k:
            lo = mid + 1
        else:
            hi = mid
    return lo < keys.shape[0] and keys[lo] == k


@kernel
def count_seed_pairs(edge_index, num_seeds, keys):
    """How many edges of ``edge_index`` (int64 ``(2, E)``, local ids) are seed pairs (see
    :func:`_is_seed_pair`); one read-only pass."""
    rows = edge_index[0]
    cols = edge_index[1]
    n = 0
    for i in range(rows.shape[0]):
        if _is_seed_pair(rows[i], cols[i], num_seeds, keys):
            n += 1
    return n


@kernel
def drop_seed_pairs(edge_index, num_seeds, keys, num_drop):
    """``(kept edge_index (2, E - num_drop), their positions (E - num_drop,))`` without the
    ``num_drop`` seed-pair edges :func:`count_seed_pairs` counted."""
    rows = edge_index[0]
    cols = edge_index[1]
    e = rows.shape[0]
    out = np.empty((2, e - num_drop), np.int64)
    keep = np.empty(e - num_drop, np.int64)
    n = 0
    for i in range(e):
        u = rows[i]
        v = cols[i]
        if _is_seed_pair(u, v, num_seeds, keys):
            continue
        out[0, n] = u
        out[1, n] = v
        keep[n] = i
        n += 1
    return out, keep
