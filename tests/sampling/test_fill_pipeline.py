"""The pipelined fill (``_kernels._fill_range``: draw a destination's positions and prefetch their
lines ``FILL_LAG`` destinations before reading them) gives the same edges, bit for bit, as
sampling each destination on its own (``_fill_one``), on every path of the per-destination
sampler: take-all, bit-mask Floyd (degree <= 64), Floyd (fanout <= 32), sparse Fisher-Yates
(larger fanouts), with replacement, fanout -1, degree 0; for position ids, shifted ids (typed
graphs) and keyed ids (partitions); for ranges shorter than the lag and chunked ranges."""

from __future__ import annotations

import numpy as np
import pytest

import numba
from graphfeed.sampling import _kernels as K


# not cached: numba's cache of a function does not notice changes in the functions it inlines
# from other modules, and these two exist to test exactly those
_uncached = numba.njit(nogil=True, cache=False)


@_uncached
def _reference(indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace, layer_key,
               offsets, rows, cols, eids, want_eids):
    hkeys, hvals = K._hash_tables(fanout, replace)
    for k in range(lo, hi):
        v = keys[k] if use_keys else k - shift
        K._fill_one(starts[k], degs[k], indices, v, fanout, replace, layer_key, offsets[k], rows,
                    cols, eids, want_eids, hkeys, hvals)


@_uncached
def _pipelined(indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace, layer_key,
               offsets, rows, cols, eids, want_eids):
    hkeys, hvals = K._hash_tables(fanout, replace)
    K._fill_range(indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace,
                  layer_key, offsets, rows, cols, eids, want_eids, hkeys, hvals)


def _graph(rng, n_dst):
    """Destinations whose degrees cover every path: 0, small, around the fanouts, 64 and past
    it, hubs."""
    degs = rng.choice(np.array([0, 1, 3, 5, 10, 15, 16, 31, 33, 40, 63, 64, 65, 200, 5000]),
                      n_dst).astype(np.int64)
    starts = np.zeros(n_dst, np.int64)
    starts[1:] = np.cumsum(degs)[:-1]
    perm = rng.permutation(n_dst)  # lists not in destination order, as in a real layer
    starts = starts[perm]
    degs = degs[perm]
    indices = rng.integers(0, 1 << 30, int(degs.sum()) + 1).astype(np.int32)
    return indices, starts, degs


def _run(fn, indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace):
    counts = np.array([K.count_for(d, fanout, replace) for d in degs], np.int64)
    offsets = np.zeros(degs.shape[0] + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    e = int(offsets[-1])
    rows = np.full(e, -7, np.int64)
    cols = np.full(e, -7, np.int64)
    eids = np.full(e, -7, np.int64)
    fn(indices, starts, degs, lo, hi, keys, use_keys, shift, fanout, replace,
       np.uint64(0x1234_5678_9ABC), offsets, rows, cols, eids, True)
    return rows, cols, eids


@pytest.mark.parametrize("fanout,replace", [(5, False), (15, False), (32, False), (40, False),
                                            (100, False), (-1, False), (10, True), (1, True)])
@pytest.mark.parametrize("ids", ["position", "shifted", "keyed"])
def test_pipelined_fill_equals_one_at_a_time(fanout, replace, ids):
    rng = np.random.default_rng(abs(fanout) * 7 + replace)
    indices, starts, degs = _graph(rng, 300)
    keys = rng.permutation(10**6)[:300].astype(np.int64)
    use_keys, shift = ids == "keyed", (17 if ids == "shifted" else 0)
    for lo, hi in ((0, 300), (0, 2), (5, 6), (100, 250)):  # whole, shorter than the lag, chunks
        want = _run(_reference, indices, starts, degs, lo, hi, keys, use_keys, shift, fanout,
                    replace)
        got = _run(_pipelined, indices, starts, degs, lo, hi, keys, use_keys, shift, fanout,
                   replace)
        for a, b in zip(want, got):
            np.testing.assert_array_equal(a, b)
        rows, cols, eids = got
        sampled = rows != -7
        assert sampled.any() or degs[lo:hi].sum() == 0
        # every sampled edge exists: its source is the one stored at its position
        np.testing.assert_array_equal(indices[eids[sampled]], rows[sampled])
