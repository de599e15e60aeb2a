"""One contract for every feature store: the same ids give the same rows as the in-memory
reference, for every dtype, row width and id pattern; bad ids fail; concurrent readers agree."""

from __future__ import annotations

import multiprocessing as mp
import threading

import numpy as np
import pytest
import torch
from store_factories import STORE_KINDS, make_array, make_store

from graphfeed.errors import GraphfeedError
from graphfeed.features.base import Feature
from graphfeed.features.disk import PARALLEL_MIN_ROWS

DTYPES = ("float32", "float16", "int64", "bool")
WIDTHS = (None, 1, 3, 4096)
NUM_ROWS = 97


def id_patterns(n: int, width, rng) -> dict:
    pats = {
        "empty": np.zeros(0, dtype=np.int64),
        "single": np.array([n - 1]),
        "sorted": np.arange(0, n, 3),
        "unsorted": rng.permutation(n),
        "duplicated": np.array([5, 5, 0, 5, n - 1, 0, n - 1, 5]),
        "random": rng.integers(0, n, 200),
        "int32": rng.integers(0, n, 50).astype(np.int32),
    }
    if width is None or width <= 3:
        # large enough for the threaded gather paths
        pats["large"] = rng.integers(0, n, PARALLEL_MIN_ROWS + 1234)
    return pats


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"w{w}")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", STORE_KINDS)
def test_same_rows_as_reference(kind, dtype, width, tmp_path):
    array = make_array(dtype, width, NUM_ROWS)
    ref = torch.from_numpy(array)
    store = make_store(kind, array, tmp_path)
    assert isinstance(store, Feature)
    assert store.shape == array.shape
    assert store.dtype == ref.dtype
    assert store.num_rows == NUM_ROWS
    rng = np.random.default_rng(1)
    for name, ids in id_patterns(NUM_ROWS, width, rng).items():
        want = ref[torch.from_numpy(ids.astype(np.int64))]
        for attempt in range(2):  # the second read is served (partly) from caches
            got = store.read(ids)
            assert got.shape == want.shape, (name, attempt)
            assert got.dtype == want.dtype
            assert torch.equal(got, want), (kind, name, attempt)
        # the same through a caller-provided output buffer
        out = torch.empty_like(want)
        res = store.read(torch.from_numpy(ids), out=out)
        assert res.data_ptr() == out.data_ptr() or out.numel() == 0
        assert torch.equal(out, want), (kind, name, "out=")


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_out_of_range_and_bad_ids(kind, tmp_path):
    store = make_store(kind, make_array("float32", 4, 20), tmp_path)
    for bad in ([20], [-1], [0, 3, 25, 1], [2**40]):
        with pytest.raises(GraphfeedError, match="out of range"):
            store.read(bad)
    with pytest.raises(GraphfeedError):
        store.read(np.array([[1, 2]]))
    with pytest.raises(GraphfeedError):
        store.read(np.array([0.5]))
    with pytest.raises(GraphfeedError, match="out must be"):
        store.read([1, 2], out=torch.empty(3, 4))
    # a failed read leaves the store usable
    assert torch.equal(store.read([19]), torch.from_numpy(make_array("float32", 4, 20))[[19]])


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_concurrent_threads(kind, tmp_path):
    array = make_array("float32", 16, 2000, seed=3)
    ref = torch.from_numpy(array)
    store = make_store(kind, array, tmp_path)
    errors = []

    def reader(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(25):
                n = int(rng.integers(0, 6000))
                ids = (rng.zipf(1.4, n) % 2000).astype(np.int64)
                got = store.read(ids)
                if not torch.equal(got, ref[torch.from_numpy(ids)]):
                    errors.append(f"thread {seed}: wrong rows")
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a reader hung"
    assert errors == []


def _read_in_child(store, ids_list):
    return [store.read(ids).numpy() for ids in ids_list]


PROCESS_KINDS = ("disk", "disk-direct", "lmdb", "cache-disk", "cache-s3fifo")


def test_concurrent_processes(tmp_path):
    """Two spawned processes read every store kind at once (stores are pickled to them and
    reopen their files lazily there)."""
    array = make_array("float32", 8, 3000, seed=4)
    rng = np.random.default_rng(5)
    ids_list = [rng.integers(0, 3000, PARALLEL_MIN_ROWS + 10) for _ in range(3)]
    stores = []
    for k in PROCESS_KINDS:
        d = tmp_path / k
        d.mkdir()
        s = make_store(k, array, d)
        s.read(ids_list[0])  # opened (maps, env, cache contents) in the parent first
        stores.append(s)
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        jobs = [pool.apply_async(_read_in_child, (s, ids_list)) for s in stores for _ in range(2)]
        results = [j.get(timeout=120) for j in jobs]
    for res in results:
        for ids, got in zip(ids_list, res):
            np.testing.assert_array_equal(got, array[ids])


def _fork_child(store, ids, q):
    try:
        q.put(store.read(ids).numpy())
    except Exception as e:  # pragma: no cover
        q.put(repr(e))


@pytest.mark.parametrize("kind", ["lmdb", "disk", "cache-disk"])
def test_read_after_fork(kind, tmp_path):
    """A store opened in the parent works in a forked child (it reopens there)."""
    if "fork" not in mp.get_all_start_methods():
        pytest.skip("no fork on this platform")
    array = make_array("float32", 8, 500, seed=6)
    store = make_store(kind, array, tmp_path)
    ids = np.random.default_rng(0).integers(0, 500, 4 * PARALLEL_MIN_ROWS + 1)  # threaded paths
    store.read(ids)
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_fork_child, args=(store, ids, q))
    p.start()
    got = q.get(timeout=60)
    p.join(timeout=60)
    assert not isinstance(got, str), got
    np.testing.assert_array_equal(got, array[ids])
    np.testing.assert_array_equal(store.read(ids).numpy(), array[ids])  # parent still fine
