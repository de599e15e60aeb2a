"""CachedFeature: each policy matches a pure-Python reference model hit for hit; batches larger
than the cache complete with correct rows; statistics and configuration errors."""

from __future__ import annotations

import pickle
import threading

import numpy as np
import pytest
import torch
from cache_reference import MODELS, run_batch

from graphfeed.errors import GraphfeedError
from graphfeed.features.cache import POLICIES, AdmissionFilter, CachedFeature
from graphfeed.features.memory import InMemoryFeature


class CountingFeature(InMemoryFeature):
    """Records which ids reach the backing store."""

    def __init__(self, data):
        super().__init__(data)
        self.requests = []

    def _read(self, ids, out, executor):
        self.requests.append(ids.clone())
        return super()._read(ids, out, executor)


def _batches(rng, n, count, max_len, a=1.3):
    return [(rng.zipf(a, size=int(rng.integers(0, max_len))) % n).astype(np.int64) for _ in range(count)]


@pytest.mark.parametrize("policy", sorted(MODELS))
@pytest.mark.parametrize("admit_fraction", [1.0, 0.25])
@pytest.mark.parametrize("capacity", [1, 2, 5, 16, 64])
def test_policy_matches_reference_model(policy, capacity, admit_fraction):
    n = 300
    rng = np.random.default_rng(capacity)
    data = torch.from_numpy(rng.standard_normal((n, 3)).astype(np.float32))
    cache = CachedFeature(InMemoryFeature(data), capacity * 12, policy=policy,
                          admit_fraction=admit_fraction)
    assert cache.capacity == capacity
    model = MODELS[policy](capacity)
    state = {"filter": AdmissionFilter(n, cache.admit_budget, seed=0)}
    for i, ids in enumerate(_batches(rng, n, 120, 50)):
        flags = run_batch(model, ids.tolist(), state)
        h0, m0 = cache.hits, cache.misses
        got = cache.read(ids)
        assert torch.equal(got, data[ids])
        assert cache.hits - h0 == sum(flags), (policy, capacity, i)
        assert cache.misses - m0 == len(flags) - sum(flags)
        assert set(cache.cached_ids().tolist()) == model.keys(), (policy, capacity, i)


def test_policies_differ_on_a_scan():
    """A sanity check that the policies are not all the same algorithm: a one-off scan evicts
    LRU's hot set but not S3-FIFO's."""
    n, cap = 1000, 50
    data = torch.zeros(n, 1)
    hot = np.arange(20)
    res = {}
    for policy in ("lru", "s3fifo"):
        c = CachedFeature(InMemoryFeature(data), cap * 4, policy=policy)
        for _ in range(5):
            for x in hot:
                c.read([x])
        for x in range(100, 100 + 3 * cap):  # scan, one id at a time
            c.read([x])
        c.reset_stats()
        c.read(hot)
        res[policy] = c.hit_rate
    assert res["s3fifo"] > res["lru"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_batch_larger_than_cache(policy):
    """dmlc/dgl#7646: a batch with more distinct ids than the cache holds must complete with
    correct rows; the excess is served from the backing store."""
    n = 10_000
    data = torch.arange(n * 2, dtype=torch.int64).reshape(n, 2)
    backing = CountingFeature(data)
    degrees = np.arange(n) % 97 if policy == "degree" else None
    cache = CachedFeature(backing, 8 * 2 * 10, policy=policy, degrees=degrees)  # 10 rows
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(3):
        ids = rng.permutation(n)[:5000]
        ids = np.concatenate([ids, ids[:100]])  # plus duplicates
        seen.update(ids.tolist())
        assert torch.equal(cache.read(ids), data[ids])
        assert cache.num_cached <= 10
    # every miss read the backing store once per distinct id
    assert all(torch.equal(r, r.unique()) for r in backing.requests)
    if policy == "degree":  # the 10 hot rows that were read, and no other
        hot = set(np.flatnonzero(degrees == 96)[:10].tolist())
        assert set(cache.cached_ids().tolist()) == hot & seen
    else:
        assert cache.num_cached == min(10, 3 * cache.admit_budget)


def test_admission_budget_keeps_hot_rows_under_oversize_batches():
    """Batches that miss far more rows than the cache holds admit only a sample, so rows that
    are hit in every batch stay cached instead of being swept out by each batch."""
    n = 20_000
    data = torch.zeros(n, 1)
    hot = np.arange(50)
    rng = np.random.default_rng(0)
    rates = {}
    for frac in (1.0, 0.25):
        cache = CachedFeature(InMemoryFeature(data), 4 * 200, policy="sieve", admit_fraction=frac)
        for b in range(30):
            cold = rng.choice(np.arange(50, n), size=5000, replace=False)
            cache.read(np.concatenate([hot, cold]))
        cache.reset_stats()
        cache.read(hot)
        rates[frac] = cache.hit_rate
        assert cache.admit_budget == int(200 * frac)
    assert rates[0.25] > rates[1.0]
    with pytest.raises(GraphfeedError, match="admit_fraction"):
        CachedFeature(InMemoryFeature(data), 100, admit_fraction=0)


def test_hits_do_not_touch_backing_store():
    data = torch.arange(100.0).reshape(50, 2)
    backing = CountingFeature(data)
    cache = CachedFeature(backing, data[:10].numel() * 4, policy="sieve", admit_fraction=1.0)
    cache.read([1, 2, 3, 3, 1])
    assert cache.hits == 0 and cache.misses == 5
    assert backing.requests[-1].tolist() == [1, 2, 3]
    backing.requests.clear()
    got = cache.read([3, 2, 1, 1])
    assert torch.equal(got, data[[3, 2, 1, 1]])
    assert backing.requests == []
    assert cache.hits == 4 and cache.hit_rate == pytest.approx(4 / 9)
    cache.reset_stats()
    assert cache.hits == cache.misses == 0 and cache.hit_rate == 0.0


def test_configuration():
    f = InMemoryFeature(torch.zeros(100, 4))
    with pytest.raises(GraphfeedError, match="clock, degree, lru, s3fifo, sieve"):
        CachedFeature(f, 1000, policy="arc")
    assert CachedFeature(f, "1kB", policy="S3-FIFO").capacity == 1000 // 16
    assert CachedFeature(f, 10**9).capacity == 100  # never more slots than rows
    with pytest.raises(GraphfeedError):
        CachedFeature(f, "lots")
    with pytest.raises(GraphfeedError):
        CachedFeature(torch.zeros(3), 100)
    c = CachedFeature(f, 10)  # less than a row: no cache, plain pass-through
    assert c.capacity == 0
    assert torch.equal(c.read([1, 2]), torch.zeros(2, 4)) and c.misses == 2


def test_threads_with_heavy_eviction():
    """Many threads, a tiny cache, lots of eviction: rows stay correct."""
    n = 5000
    data = torch.from_numpy(np.random.default_rng(0).standard_normal((n, 7)).astype(np.float32))
    cache = CachedFeature(InMemoryFeature(data), 7 * 4 * 64, policy="s3fifo")
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(60):
            ids = (rng.zipf(1.2, size=int(rng.integers(1, 3000))) % n).astype(np.int64)
            if not torch.equal(cache.read(ids), data[ids]):
                errors.append(seed)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not errors
    assert len(set(cache.cached_ids().tolist())) == cache.num_cached == 64
    assert cache.hits + cache.misses > 0


# ----------------------------------------------------------------------- the static "degree" policy
def test_degree_policy_caches_exactly_the_top_rows_and_never_evicts():
    n = 1000
    data = torch.arange(n * 3, dtype=torch.float32).reshape(n, 3)
    degrees = np.random.default_rng(1).integers(0, 20, n)
    backing = CountingFeature(data)
    cache = CachedFeature(backing, 12 * 50, policy="degree", degrees=degrees)  # 50 rows
    want = np.sort(np.lexsort((np.arange(n), -degrees))[:50])  # ties to the lower id
    rng = np.random.default_rng(2)
    for _ in range(20):
        ids = rng.integers(0, n, 300)
        assert torch.equal(cache.read(ids), data[ids])
        assert set(cache.cached_ids().tolist()) <= set(want.tolist())
    before = len(backing.requests)
    cache.reset_stats()
    assert torch.equal(cache.read(want), data[want])  # all seen by now: no backing read
    assert len(backing.requests) == before and cache.hit_rate == 1.0
    assert np.array_equal(cache.cached_ids(), want)
    c = cache.counters()["cached"]
    assert c["hits"] == 50 and c["misses"] == 0 and c["cached_rows"] == 50


def test_degree_policy_warm_fills_every_reserved_row_in_sorted_reads():
    n = 5000
    data = torch.randn(n, 4)
    degrees = np.arange(n)[::-1] % 300  # high degrees at low ids
    backing = CountingFeature(data)
    cache = CachedFeature(backing, 16 * 700, policy="degree", degrees=degrees)
    assert cache.warm(rows_per_read=256) == 700
    assert all(torch.equal(r, r.sort().values) for r in backing.requests)  # ascending reads
    assert cache.warm() == 0 and cache.num_cached == 700
    hot = cache.cached_ids()
    backing.requests.clear()
    assert torch.equal(cache.read(hot), data[hot]) and backing.requests == []
    clone = pickle.loads(pickle.dumps(cache))  # arrives empty, with the same hot rows
    assert clone.num_cached == 0 and clone.warm() == 700
    assert np.array_equal(clone.cached_ids(), hot)


@pytest.mark.parametrize("kwargs, match", [
    (dict(policy="degree"), "needs degrees"),
    (dict(policy="degree", degrees=np.arange(5)), "one per row"),
    (dict(policy="degree", degrees=np.linspace(0, 1, 100)), "integers"),
    (dict(policy="degree", degrees=np.arange(100) - 3), ">= 0"),
    (dict(policy="sieve", degrees=np.arange(100)), "for cache policy 'degree'"),
])
def test_degree_policy_refuses_bad_degrees(kwargs, match):
    with pytest.raises(GraphfeedError, match=match):
        CachedFeature(InMemoryFeature(torch.zeros(100, 2)), 80, **kwargs)


def test_warm_fills_only_static_caches():
    cache = CachedFeature(InMemoryFeature(torch.zeros(100, 2)), 80, policy="sieve")
    assert cache.warm() == 0 and cache.num_cached == 0  # dynamic: admits as rows are read
    assert InMemoryFeature(torch.zeros(3, 1)).warm() == 0


def test_a_datasets_disk_features_cache_the_most_sampled_nodes_by_default(tiny_dataset):
    ds = tiny_dataset
    f = ds.node_feature("feat", "disk", cache_size=ds.features["feat"].row_nbytes * 100)
    assert isinstance(f, CachedFeature) and f.policy_name == "degree"
    out = ds.graph.out_degrees
    assert out.sum() == ds.num_edges and np.array_equal(out, np.bincount(
        np.asarray(ds.graph.indices), minlength=ds.num_nodes))
    assert f.warm() == 100
    top = np.sort(np.lexsort((np.arange(ds.num_nodes), -out))[:100])
    assert np.array_equal(f.cached_ids(), top)
    ids = torch.arange(ds.num_nodes)
    assert torch.equal(f.read(ids), ds.features["feat"].read(ids))
    sieve = ds.node_feature("feat", "disk", cache_size=4096, cache_policy="sieve")
    assert sieve.policy_name == "sieve"


def test_typed_features_take_their_types_out_degrees(builtin_root):
    from graphfeed.datasets.open import open_dataset

    ds = open_dataset("hetero", builtin_root("hetero"))
    h = ds.hetero
    t = h.type_id("paper")
    lo, hi = int(h.node_offsets[t]), int(h.node_offsets[t + 1])
    f = ds.type_feature("paper", "feat", "disk", cache_size=10 * 32 * 4)
    assert f.policy_name == "degree" and f.warm() == 10
    want = np.sort(np.lexsort((np.arange(hi - lo), -h.csc.out_degrees[lo:hi]))[:10])
    assert np.array_equal(f.cached_ids(), want)
