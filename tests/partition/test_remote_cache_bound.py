"""Issue 30, item 4: ``DistFeature.build_cache`` counts only the remote ids requested (memory
bounded by them, not by the global node count) and chooses the same rows as the former counter
over every global node (ties to the lower id)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from graphfeed.partition import partition_dataset
from graphfeed.partition.book import Part, PartitionBook
from graphfeed.partition.dist import DistFeature, RequestCounts


def _old_top(num_nodes: int, lo: int, hi: int, requests, k: int) -> np.ndarray:
    """The former method: a counter over every global node, own rows zeroed, a stable
    descending argsort (ties: lower id), the first ``k`` of the rows requested at all."""
    c = np.zeros(num_nodes, np.int32)
    for r in requests:
        np.add.at(c, r, 1)
    c[lo:hi] = 0
    k = min(k, int(np.count_nonzero(c)))
    top = np.argsort(-c.astype(np.int64), kind="stable")[:k] if k else np.empty(0, np.int64)
    return np.sort(top).astype(np.int64)


class _TwoRanks:
    """Rank 0 of a 2-rank exchange, for what ``DistFeature`` asks of one (its ``_fetch`` is
    replaced in the tests: nothing is exchanged)."""

    rank, size = 0, 2


def _feature(part, name="feat", rows=None):
    f = DistFeature(part, name, _TwoRanks())
    f._fetch = lambda rids: (np.asarray(rows[rids]) if rows is not None else np.zeros(
        (rids.shape[0], *part.features[name].shape[1:]), part.features[name].dtype),
        np.arange(rids.shape[0]))
    return f


@pytest.mark.parametrize("fold_at", [1, 7, 1 << 20])
def test_the_counts_are_those_of_every_request(fold_at):
    rng = np.random.default_rng(fold_at)
    reqs = [rng.integers(0, 50, rng.integers(0, 30)) for _ in range(40)]
    rc = RequestCounts(fold_at=fold_at)
    for r in reqs:
        rc.add(r)
    ids, counts = rc.totals()
    want_ids, want_counts = np.unique(np.concatenate(reqs), return_counts=True)
    np.testing.assert_array_equal(ids, want_ids)
    np.testing.assert_array_equal(counts, want_counts)


@pytest.mark.parametrize("seed", range(6))
def test_top_equals_a_stable_descending_sort_ties_to_the_lower_id(seed):
    rng = np.random.default_rng(seed)
    n = 200
    # few distinct counts: many ties at the threshold
    reqs = [rng.choice(n, rng.integers(1, 60), replace=False) for _ in range(rng.integers(1, 8))]
    rc = RequestCounts(fold_at=3)
    for r in reqs:
        rc.add(r)
    for k in (0, 1, 5, 17, 64, rc.distinct - 1, rc.distinct, rc.distinct + 10):
        np.testing.assert_array_equal(rc.top(k), _old_top(n, 0, 0, reqs, k))


def test_the_tie_rule_on_a_hand_made_case():
    rc = RequestCounts()
    rc.add(np.array([9, 4, 4, 7, 7, 2, 5]))  # counts: 4 and 7 twice; 2, 5, 9 once
    assert rc.top(1).tolist() == [4]  # 4 and 7 tie: the lower id
    assert rc.top(3).tolist() == [2, 4, 7]  # then the lowest of 2, 5, 9
    assert rc.top(4).tolist() == [2, 4, 5, 7]


@pytest.fixture(scope="module")
def two_parts(tiny_dataset, tmp_path_factory):
    from graphfeed.partition import load_part

    book = partition_dataset(tiny_dataset, tmp_path_factory.mktemp("cache") / "p2", 2,
                             method="random")
    return load_part(book, 0)


def test_build_cache_keeps_the_rows_the_old_method_kept(tiny_dataset, two_parts):
    part, book = two_parts, two_parts.book
    rows = np.asarray(tiny_dataset.arrays.node_features["feat"])[np.asarray(book.orig_ids())]
    f = _feature(part, rows=rows)
    rng = np.random.default_rng(3)
    reqs = []
    for _ in range(30):  # power-law-ish reads with repeats inside a read, as a batch has none
        ids = np.unique((rng.pareto(1.2, 300) * 40).astype(np.int64) % book.num_nodes)
        got = f.read(ids).numpy()
        np.testing.assert_array_equal(got, rows[ids])
        reqs.append(ids[(ids < part.lo) | (ids >= part.hi)])
    for cap in (0, 10, 123, 10_000):
        want = _old_top(book.num_nodes, part.lo, part.hi, reqs, cap)
        g = _feature(part, rows=rows)
        for r in reqs:
            g.read(r)
        assert g.build_cache(cap) == want.shape[0]
        np.testing.assert_array_equal(g._cache_ids, want)
        np.testing.assert_array_equal(g._cache_rows, rows[want])
        # the cache answers, and the counts start again
        ids = np.unique(np.concatenate(reqs))
        np.testing.assert_array_equal(g.read(ids).numpy(), rows[ids])
        assert g.cache_stats.hits == np.isin(ids, want).sum()
    f.build_cache(5)
    assert f._requests.distinct == 0


def _huge_part(tmp_path: Path, num_nodes: int, own: int, dim: int = 4) -> Part:
    """Part 0 of a made-up 2-part book whose global node count is ``num_nodes`` (nothing of
    the rest exists)."""
    book = PartitionBook(path=tmp_path, name="huge", num_parts=2, num_nodes=num_nodes,
                         num_edges=0, method="random", seed=0,
                         offsets=np.array([0, own, num_nodes], np.int64), num_classes=2,
                         target="label", features={}, splits=("train",), edge_cut=0)
    feat = np.arange(own * dim, dtype=np.float32).reshape(own, dim)
    return Part(book, 0, 0, own, np.zeros(own + 1, np.int64), np.empty(0, np.int32),
                np.arange(own, dtype=np.int64), {"feat": feat}, {})


def test_memory_is_bounded_by_the_requests_not_the_global_node_count(tmp_path):
    """1e9 global nodes, 20k distinct remote ids requested over 40 reads: the former counter
    alone was 4 GB (int32 per global node) and its int64 argsort 16 GB more."""
    n, own = 1_000_000_000, 1_000
    part = _huge_part(tmp_path, n, own)
    rng = np.random.default_rng(0)
    pool = rng.choice(np.arange(own, n, 997, dtype=np.int64), 20_000, replace=False)
    reads = [np.concatenate([rng.choice(pool, 2_000), rng.integers(0, own, 100)])
             for _ in range(40)]
    tracemalloc.start()
    try:
        f = _feature(part)
        for ids in reads:
            f.read(ids)
        cached = f.build_cache(1_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert cached == 1_000
    remote = np.concatenate([r[r >= own] for r in reads])
    assert f._cache_ids.shape == (1_000,)
    np.testing.assert_array_equal(f._cache_ids, _old_top_sparse(remote, 1_000))
    # 80k ids requested (640 KB as int64): a few MB at most, whatever the global node count
    assert peak < 8 << 20, peak


def _old_top_sparse(requests: np.ndarray, k: int) -> np.ndarray:
    """``_old_top`` where the global counter would not fit: the same order (count descending,
    id ascending) on the ids requested."""
    ids, counts = np.unique(requests, return_counts=True)
    order = np.lexsort((ids, -counts))[:k]
    return np.sort(ids[order])


def test_a_feature_without_counts_refuses_build_cache(two_parts):
    f = DistFeature(two_parts, "label", _TwoRanks(), count=False)
    with pytest.raises(Exception, match="count=True"):
        f.build_cache(3)
