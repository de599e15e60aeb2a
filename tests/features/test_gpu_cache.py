"""GPUCachedFeature: the feature contract (same rows as the wrapped feature), each policy's
choice of rows, and its statistics. Run on CPU tensors (``device="cpu"`` stands for the GPU,
an in-memory CPU feature's rows for pinned memory seen through UVA); the ``cuda`` tests run the
real thing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from store_factories import bits_of, make_array, reference
from test_contract import id_patterns

from graphfeed import features
from graphfeed.errors import GraphfeedError
from graphfeed.features.disk import DiskFeature
from graphfeed.features.gpu_cache import GPU_POLICIES, GPUCachedFeature
from graphfeed.features.memory import InMemoryFeature

NUM_ROWS = 97


def backing(kind: str, array: np.ndarray, tmp_path, dtype=None):
    if kind == "memory":  # gathered directly (the CPU stand-in for UVA)
        return InMemoryFeature(array, dtype=dtype)
    np.save(tmp_path / "f.npy", array)
    return DiskFeature(tmp_path / "f.npy", dtype=dtype)  # through the wrapped feature's read


def cache_over(feature, policy: str, rows: int, device="cpu"):
    cap = rows * max(1, feature.row_nbytes)
    if policy == "degree":
        degrees = np.random.default_rng(3).integers(0, 50, feature.num_rows)
        return GPUCachedFeature(feature, cap, device=device, policy=policy, degrees=degrees)
    cache = GPUCachedFeature(feature, cap, device=device, policy=policy)
    if policy == "frequency":
        rng = np.random.default_rng(4)
        cache.warm_up(rng.integers(0, feature.num_rows, 30) for _ in range(5))
    return cache


def check_bookkeeping(cache: GPUCachedFeature, ref: torch.Tensor) -> None:
    """Every held slot maps back to its row id, no other id maps to a slot, and the slot holds
    that row's values."""
    n = cache.num_cached
    node_of = cache._node_of[:n].cpu()
    slot_of = cache._slot_of.cpu()
    assert torch.equal(slot_of[node_of].long(), torch.arange(n))
    assert int((slot_of >= 0).sum()) == n
    assert torch.equal(cache._rows[:n].cpu(), ref[node_of])


# ------------------------------------------------------------------------------ contract
@pytest.mark.parametrize("width", [None, 3])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
@pytest.mark.parametrize("kind", ["memory", "disk"])
@pytest.mark.parametrize("policy", GPU_POLICIES)
def test_same_rows_as_the_wrapped_feature(policy, kind, dtype, width, tmp_path):
    array = make_array(dtype, width, NUM_ROWS)
    ref = reference(array, bits_of(dtype))
    cache = cache_over(backing(kind, array, tmp_path, bits_of(dtype)), policy, NUM_ROWS // 3)
    assert cache.uses_uva == (kind == "memory")
    assert (cache.shape, cache.dtype, cache.device) == (array.shape, ref.dtype, torch.device("cpu"))
    rng = np.random.default_rng(1)
    for name, ids in id_patterns(NUM_ROWS, width, rng).items():
        want = ref[torch.from_numpy(ids.astype(np.int64))]
        for attempt in range(2):  # the second read hits what the first admitted (clock)
            got = cache.read(ids)
            assert got.dtype == want.dtype and torch.equal(got, want), (name, attempt)
            check_bookkeeping(cache, ref)
        out = torch.empty_like(want)
        res = cache.read(torch.from_numpy(ids), out=out)
        assert (res.data_ptr() == out.data_ptr() or out.numel() == 0) and torch.equal(out, want)
    assert cache.hits + cache.misses > 0 and 0.0 <= cache.hit_rate <= 1.0
    for bad in ([NUM_ROWS], [-1], [0, 3, NUM_ROWS + 5]):
        with pytest.raises(GraphfeedError, match="out of range"):
            cache.read(bad)
    assert torch.equal(cache.read([NUM_ROWS - 1]), ref[[NUM_ROWS - 1]])  # still usable


def test_zero_capacity_serves_everything_from_the_host():
    array = make_array("float32", 4, 20)
    cache = GPUCachedFeature(InMemoryFeature(array), 0, device="cpu", policy="clock")
    assert cache.capacity == 0
    assert torch.equal(cache.read([3, 3, 19]), torch.from_numpy(array)[[3, 3, 19]])
    assert (cache.hits, cache.misses, cache.num_cached) == (0, 3, 0)


# ------------------------------------------------------------------------------ policies
def test_degree_policy_holds_the_highest_degrees():
    array = make_array("float32", 4, 10)
    degrees = np.array([5, 1, 9, 9, 0, 7, 2, 2, 8, 3])
    cache = GPUCachedFeature(InMemoryFeature(array), 4 * 16, device="cpu", policy="degree",
                             degrees=torch.from_numpy(degrees))
    assert cache.cached_ids().tolist() == [2, 3, 5, 8]
    assert cache.bytes_moved == 4 * 16  # the fill
    cache.reset_stats()
    got = cache.read([2, 8, 1, 2, 4, 1])
    assert torch.equal(got, torch.from_numpy(array)[[2, 8, 1, 2, 4, 1]])
    assert (cache.hits, cache.misses, cache.bytes_moved) == (3, 3, 3 * 16)  # every missed position
    assert cache.hit_rate == pytest.approx(0.5)
    assert cache.cached_ids().tolist() == [2, 3, 5, 8]  # static: misses are not admitted
    assert cache.stats() == {"hits": 3, "misses": 3, "hit_rate": pytest.approx(0.5),
                             "bytes_moved": 48, "cached_rows": 4, "capacity": 4}


def test_frequency_policy_fills_after_warm_up():
    array = make_array("int64", None, 12)
    cache = GPUCachedFeature(InMemoryFeature(array), 3 * 8, device="cpu", policy="frequency")
    assert cache.num_cached == 0
    assert cache.read([1, 2]).tolist() == array[[1, 2]].tolist() and cache.misses == 2
    seen = cache.warm_up([[7, 7, 1], np.array([7, 4, 4, 11]), torch.tensor([1, 0, 4])])
    assert seen == 10
    assert cache.cached_ids().tolist() == [1, 4, 7]  # 7 x3, 4 x3, 1 x2 (0 and 11 once)
    cache.reset_stats()
    cache.read([7, 4, 1, 0])
    assert (cache.hits, cache.misses) == (3, 1)
    with pytest.raises(GraphfeedError, match="out of range"):
        cache.warm_up([[12]])


def test_clock_keeps_referenced_rows_and_sweeps_in_order():
    array = make_array("float32", 2, 10)
    ref = torch.from_numpy(array)
    cache = GPUCachedFeature(InMemoryFeature(array), 4 * 8, device="cpu", policy="clock",
                             admit_fraction=1)  # every miss admitted: the sweep alone
    cache.read([0, 1, 2, 3])  # fills slots 0..3, reference bits clear
    assert cache.cached_ids().tolist() == [0, 1, 2, 3] and cache.misses == 4
    cache.read([0, 1])  # hits: bits of slots 0 and 1 set
    assert cache.hits == 2
    got = cache.read([5, 4, 5])  # 4 and 5 admitted into the clear slots 2 and 3
    assert torch.equal(got, ref[[5, 4, 5]])
    assert cache.cached_ids().tolist() == [0, 1, 4, 5]
    cache.read([6])  # the hand passed every slot (bits cleared) and is back at slot 0
    assert cache.cached_ids().tolist() == [1, 4, 5, 6]
    cache.read([1, 4, 5, 6])  # all referenced: a full turn clears them, the second turn evicts
    assert cache.hits == 2 + 4
    cache.read([8, 9])  # in hand order: slots 1 and 2 (rows 1 and 4)
    assert cache.cached_ids().tolist() == [5, 6, 8, 9]
    assert torch.equal(cache.read([9, 8, 6, 5]), ref[[9, 8, 6, 5]])
    assert cache.misses == 4 + 3 + 1 + 2


def test_clock_admits_at_most_its_capacity_per_read():
    array = make_array("float32", 2, 50)
    cache = GPUCachedFeature(InMemoryFeature(array), 5 * 8, device="cpu", policy="clock",
                             admit_fraction=1)
    ids = np.concatenate([np.arange(40)[::-1], [3, 3]])
    assert torch.equal(cache.read(ids), torch.from_numpy(array)[ids])
    assert cache.num_cached == 5 and cache.bytes_moved == 40 * 8  # the distinct missed rows
    assert cache.cached_ids().tolist() == [0, 1, 2, 3, 4]


def test_clock_admits_a_bounded_share_the_rows_missed_most_first():
    """At most ``admit_fraction`` of the capacity per read (16 rows, 1/8: 2), the rows missed
    most often before first, ties to the lower id; a row missed once is not preferred over
    one missed twice."""
    array = make_array("float32", 2, 100)
    ref = torch.from_numpy(array)
    cache = GPUCachedFeature(InMemoryFeature(array), 16 * 8, device="cpu", policy="clock")
    assert cache.admit_max == 2
    cache.read(np.arange(50, 60))  # ten misses, none seen before: the two lowest ids
    assert cache.cached_ids().tolist() == [50, 51]
    cache.read([70, 71, 72])  # first misses again: 70, 71
    assert cache.cached_ids().tolist() == [50, 51, 70, 71]
    got = cache.read([40, 59, 58, 41, 72])  # 58, 59, 72 were missed before: 58 and 59
    assert torch.equal(got, ref[[40, 59, 58, 41, 72]])
    assert cache.cached_ids().tolist() == [50, 51, 58, 59, 70, 71]
    cache.read([72, 40, 41])  # 72 missed twice before, 40 and 41 once: 72, then 40
    assert cache.cached_ids().tolist() == [40, 50, 51, 58, 59, 70, 71, 72]
    check_bookkeeping(cache, ref)


def test_clock_miss_counts_age():
    """The counts are halved once the counted misses reach AGE_AFTER times the capacity, so
    rows hot long ago lose their lead."""
    from graphfeed.features.gpu_cache import AGE_AFTER

    array = make_array("float32", 2, 1000)
    cache = GPUCachedFeature(InMemoryFeature(array), 10 * 8, device="cpu", policy="clock")
    assert cache.admit_max == 1 and AGE_AFTER * cache.capacity == 100
    ids = np.arange(500, 530)
    cache.read(ids)  # 30 misses; row 500 admitted (ties: the lowest id)
    assert cache._counted == 30 and int(cache._missed[529]) == 1
    cache.read(ids)  # 29 misses, 501 admitted
    cache.read(ids)  # 28 misses: 87 counted
    assert cache._counted == 87 and int(cache._missed[529]) == 3
    cache.read(ids)  # 27 misses: 114 counted, over 100: every count halved
    assert cache._counted == 0 and int(cache._missed[529]) == (3 + 1) >> 1
    assert cache.cached_ids().tolist() == [500, 501, 502, 503]


def test_clock_random_reads_keep_rows_and_bookkeeping_right():
    array = make_array("float32", 3, 200)
    ref = torch.from_numpy(array)
    cache = GPUCachedFeature(InMemoryFeature(array), 17 * 12, device="cpu", policy="clock")
    rng = np.random.default_rng(7)
    for step in range(60):
        ids = rng.zipf(1.5, rng.integers(1, 40)) % 200  # skewed, with repeats
        assert torch.equal(cache.read(ids), ref[ids]), step
        check_bookkeeping(cache, ref)
    assert cache.num_cached == 17 and cache.hit_rate > 0.3


def test_bad_arguments():
    f = InMemoryFeature(make_array("float32", 2, 10))
    with pytest.raises(GraphfeedError, match="unknown GPU cache policy 'lru'; valid policies"):
        GPUCachedFeature(f, 64, device="cpu", policy="lru")
    with pytest.raises(GraphfeedError, match="needs degrees="):
        GPUCachedFeature(f, 64, device="cpu", policy="degree")
    with pytest.raises(GraphfeedError, match="one entry per row"):
        GPUCachedFeature(f, 64, device="cpu", policy="degree", degrees=np.ones(9))
    with pytest.raises(GraphfeedError, match="degrees= is for the 'degree' policy"):
        GPUCachedFeature(f, 64, device="cpu", policy="clock", degrees=np.ones(10))
    with pytest.raises(GraphfeedError, match="warm_up is for the 'frequency' policy"):
        GPUCachedFeature(f, 64, device="cpu").warm_up([[1]])
    with pytest.raises(GraphfeedError, match="wraps a graphfeed Feature"):
        GPUCachedFeature(torch.zeros(3), 64, device="cpu")
    for bad in (0, -0.5, 1.5, "x"):
        with pytest.raises(GraphfeedError, match="admit_fraction must be in"):
            GPUCachedFeature(f, 64, device="cpu", admit_fraction=bad)
    with pytest.raises(GraphfeedError, match="admit_fraction= is for the 'clock' policy"):
        GPUCachedFeature(f, 64, device="cpu", policy="frequency", admit_fraction=0.5)


def test_lazy_export():
    assert features.GPUCachedFeature is GPUCachedFeature


# ---------------------------------------------------------------------------- real GPU
@pytest.mark.cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("policy", GPU_POLICIES)
def test_cuda_over_pinned_rows_through_uva(policy, dtype):
    from graphfeed.features.pinned import PinnedFeature

    array = make_array(dtype, 16, 5000)
    pinned = PinnedFeature(InMemoryFeature(array.copy(), dtype=bits_of(dtype)))
    cache = cache_over(pinned, policy, 500, device="cuda")
    assert cache.uses_uva and cache.device.type == "cuda"
    ids = np.random.default_rng(0).integers(0, 5000, 3000)
    for _ in range(2):
        got = cache.read(ids)
        assert got.is_cuda and got.dtype == cache.dtype
        assert torch.equal(got.cpu(), reference(array, bits_of(dtype))[ids])
    assert cache.hits > 0 and cache.bytes_moved > 0
    # the static policies read through the one-launch gather kernel where triton is present
    try:
        import triton  # noqa: F401
        has_triton = True
    except ImportError:
        has_triton = False
    assert cache.uses_gather_kernel == (has_triton and policy != "clock")
