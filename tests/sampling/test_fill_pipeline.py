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


# --------------------------------------------------------------------------- the count passes'
# searches: grouped binary searches (temporal) and searches started at the uniform guess
# (rotated LABOR) count exactly what one plain binary search per destination counts
from graphfeed.sampling import _method_kernels as MK  # noqa: E402


def _rows(rng, n_rows, degree_choices, key_fn):
    degs = rng.choice(np.array(degree_choices), n_rows).astype(np.int64)
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(degs, out=indptr[1:])
    keys = np.empty(int(indptr[-1]), key_fn(0).dtype)
    for v in range(n_rows):
        keys[indptr[v]:indptr[v + 1]] = np.sort(key_fn(int(degs[v])))
    return indptr, keys


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("fanout,replace", [(5, False), (-1, False), (3, True)])
def test_grouped_temporal_count_equals_binary_search(strict, fanout, replace):
    rng = np.random.default_rng(11 + strict)
    # times with many ties, rows of every length around the group size and the line size
    indptr, tkey = _rows(rng, 400, [0, 1, 2, 7, 8, 9, 16, 17, 100, 3000],
                         lambda d: rng.integers(0, 50, d))
    dst = rng.permutation(400)[:337].astype(np.int64)
    times = rng.integers(-5, 55, dst.shape[0])
    for lo, hi in ((0, 337), (3, 19), (100, 101), (40, 40)):
        counts = np.full(dst.shape[0] + 1, -9, np.int64)
        starts = np.full(dst.shape[0], -9, np.int64)
        degs = np.full(dst.shape[0], -9, np.int64)
        MK.count_temporal(indptr, tkey, dst, times, strict, lo, hi, fanout, replace, counts,
                          starts, degs)
        for i in range(lo, hi):
            v = dst[i]
            st, d = indptr[v], indptr[v + 1] - indptr[v]
            row = tkey[st:st + d]
            m = int(np.sum(row < times[i]) if strict else np.sum(row <= times[i]))
            assert (starts[i], degs[i]) == (st, m)
            assert counts[i + 1] == K.count_for(m, fanout, replace)
        assert (degs[:lo] == -9).all() and (degs[hi:] == -9).all()


@pytest.mark.parametrize("spread", ["uniform", "clustered"])
def test_rotated_labor_count_equals_binary_search(spread):
    """The arc counts match a direct count for shifts that wrap and not, on hash-like bases
    and on bases far from uniform (the guess is then wrong, the count still exact)."""
    rng = np.random.default_rng(3)
    if spread == "uniform":
        fn = lambda d: rng.integers(0, 1 << 32, d, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    else:
        fn = lambda d: rng.integers(0, 1 << 10, d, dtype=np.uint64).astype(np.uint32)  # noqa: E731
    indptr, lbase = _rows(rng, 300, [0, 1, 5, 6, 15, 16, 40, 500, 5000], fn)
    dst = rng.permutation(300)[:250].astype(np.int64)
    fanout = 5
    for shift in (0, 1, 1 << 31, (1 << 32) - 1, 123456789, (1 << 32) - 700):
        counts = np.zeros(dst.shape[0] + 1, np.int64)
        starts = np.empty(dst.shape[0], np.int64)
        degs = np.empty(dst.shape[0], np.int64)
        first = np.empty(dst.shape[0], np.int64)
        MK.count_labor_rotated(indptr, lbase, dst, 0, dst.shape[0], fanout, np.uint64(shift),
                               counts, starts, degs, first)
        a = ((1 << 32) - shift) & 0xFFFFFFFF
        for i, v in enumerate(dst):
            st, d = indptr[v], indptr[v + 1] - indptr[v]
            assert (starts[i], degs[i]) == (st, d)
            if d <= fanout:
                assert (counts[i + 1], first[i]) == (d, 0)
                continue
            row = lbase[st:st + d].astype(np.uint64)
            thr = int(fanout / d * 4294967296.0)
            r = (row + np.uint64((1 << 32) - a)) & np.uint64(0xFFFFFFFF)  # rotated: r < thr kept
            assert counts[i + 1] == int(np.sum(r < thr))
            p0 = int(np.sum(row < a))
            assert first[i] == (p0 if p0 < d else 0)
