"""One contract for every feature store: the same ids give the same rows as the in-memory
reference, for every dtype, row width and id pattern; bad ids fail; concurrent readers agree."""

from __future__ import annotations

import multiprocessing as mp
import threading

import numpy as np
import pytest
import torch
from store_factories import STORE_KINDS, bits_of, make_array, make_store, reference

from graphfeed.errors import GraphfeedError
from graphfeed.features.base import Feature
from graphfeed.features.disk import PARALLEL_MIN_ROWS

DTYPES = ("float32", "float16", "bfloat16", "int64", "bool")
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
    ref = reference(array, bits_of(dtype))  # bfloat16: the file holds bits, reads give bf16
    store = make_store(kind, array, tmp_path, dtype=bits_of(dtype))
    assert isinstance(store, Feature)
    assert store.shape == array.shape
    assert store.dtype == ref.dtype
    assert store.num_rows == NUM_ROWS
    assert store.nbytes == array.nbytes  # what placement and memory plans count: 2 B a bf16
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


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_close_is_idempotent_and_a_later_read_reopens(kind, tmp_path):
    """``close()`` releases files, maps and threads; closing twice is fine, and a read after it
    (also one large enough for the threaded paths) returns the right rows again."""
    array = make_array("float32", 3, 300, seed=7)
    ids = np.random.default_rng(2).integers(0, 300, PARALLEL_MIN_ROWS + 17)
    store = make_store(kind, array, tmp_path)
    np.testing.assert_array_equal(store.read(ids).numpy(), array[ids])
    store.close()
    store.close()
    np.testing.assert_array_equal(store.read(ids).numpy(), array[ids])
    with store as s:
        assert s is store
        np.testing.assert_array_equal(s.read(ids[:5]).numpy(), array[ids[:5]])
    np.testing.assert_array_equal(store.read(ids[:5]).numpy(), array[ids[:5]])
    store.close()


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_reads_on_a_given_executor(kind, tmp_path):
    """With ``executor=``, large reads run their chunks there and give the same rows; the store
    starts no threads of its own."""
    from concurrent.futures import ThreadPoolExecutor

    array = make_array("float32", 3, 300, seed=8)
    ids = np.random.default_rng(3).integers(0, 300, 4 * PARALLEL_MIN_ROWS + 5)
    store = make_store(kind, array, tmp_path)
    submitted = []

    class Counting(ThreadPoolExecutor):
        def submit(self, fn, *a, **kw):
            submitted.append(fn)
            return super().submit(fn, *a, **kw)

    before = {t.name for t in threading.enumerate()}
    with Counting(2, thread_name_prefix="test-exec") as ex:
        for _ in range(2):  # the second read is served (partly) from caches
            out = torch.empty((len(ids), 3), dtype=torch.float32)
            got = store.read(ids, out=out, executor=ex)
            assert got.data_ptr() == out.data_ptr()
            np.testing.assert_array_equal(out.numpy(), array[ids])
    own = {t.name for t in threading.enumerate()} - before
    assert not [n for n in own if n.startswith("gf-")], own
    if kind not in ("memory", "pinned"):  # index_select: torch's own threads
        assert submitted, "a large read split into chunks ran none on the executor"
    store.close()


@pytest.mark.parametrize("wrapper", ["cache", "pinned"])
def test_a_wrapper_owns_and_closes_the_feature_it_wraps(wrapper):
    import warnings

    from graphfeed.features.cache import CachedFeature
    from graphfeed.features.memory import InMemoryFeature
    from graphfeed.features.pinned import PinnedFeature

    class Closing(InMemoryFeature):
        closes = 0

        def close(self):
            self.closes += 1

    inner = Closing(make_array("float32", 2, 10))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # "pinning needs CUDA" on CPU
        outer = CachedFeature(inner, 40) if wrapper == "cache" else PinnedFeature(inner)
    with outer:
        outer.read([1, 2])
    assert inner.closes == 1
    outer.close()
    assert inner.closes == 2  # each close is passed on; the wrapped feature's close is idempotent
