"""DiskFeature: safe header parsing, direct reads, page-cache dropping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.features.disk import DIRECT_ALIGN, DiskFeature, coalesce_blocks


def test_rejects_unsafe_or_unreadable_files(tmp_path):
    obj = tmp_path / "obj.npy"
    np.save(obj, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DatasetError, match="obj.npy.*object"):
        DiskFeature(obj)
    with pytest.raises(DatasetError, match="not found"):
        DiskFeature(tmp_path / "missing.npy")
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy at all")
    with pytest.raises(DatasetError, match="junk.npy"):
        DiskFeature(junk)
    trunc = tmp_path / "trunc.npy"
    np.save(trunc, np.zeros((100, 4), np.float32))
    trunc.write_bytes(trunc.read_bytes()[:-10])
    with pytest.raises(DatasetError, match="truncated"):
        DiskFeature(trunc)
    fort = tmp_path / "fortran.npy"
    np.save(fort, np.asfortranarray(np.zeros((10, 4), np.float32)))
    with pytest.raises(DatasetError, match="Fortran"):
        DiskFeature(fort)
    scalar = tmp_path / "scalar.npy"
    np.save(scalar, np.float32(1))
    with pytest.raises(DatasetError, match="dimension"):
        DiskFeature(scalar)
    good = tmp_path / "good.npy"
    np.save(good, np.zeros((3, 2), np.float32))
    with pytest.raises(GraphfeedError, match="num_threads"):
        DiskFeature(good, num_threads=0)


def test_multi_dim_rows_and_odd_row_sizes(tmp_path):
    a = np.random.default_rng(0).standard_normal((50, 3, 5)).astype(np.float16)  # 30-byte rows
    np.save(tmp_path / "a.npy", a)
    for kw in ({}, {"direct_io": True}):
        f = DiskFeature(tmp_path / "a.npy", **kw)
        assert f.shape == (50, 3, 5) and f.row_nbytes == 30
        ids = np.array([49, 0, 7, 7])
        np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])


def _plan(ids, offset, row_nbytes, max_gap, max_len):
    ids = np.asarray(ids, dtype=np.int64)
    n = ids.shape[0]
    start, length, off = (np.empty(n, np.int64) for _ in range(3))
    first = np.empty(n + 1, np.int64)
    nr = coalesce_blocks(ids, offset, row_nbytes, DIRECT_ALIGN, max_gap, max_len,
                         start, length, first, off)
    return start[:nr], length[:nr], first[:nr + 1], off


def test_coalesce_plan():
    ids = np.array([0, 1, 100, 101, 5000], dtype=np.int64)  # 400-byte rows, data at offset 128
    start, length, first, off = _plan(ids, 128, 400, 0, 1 << 20)
    # rows 0 and 1 share block 0; rows 100, 101 share blocks 9-10; row 5000 is far away
    assert len(start) == 3
    assert (start % DIRECT_ALIGN == 0).all() and (length % DIRECT_ALIGN == 0).all()
    assert start[0] == 0 and length[0] == 4096
    assert first.tolist() == [0, 2, 4, 5]
    # each row's bytes are where the plan says: inside its read, at its offset from the start
    for r in range(len(start)):
        for i in range(first[r], first[r + 1]):
            assert start[r] + off[i] == 128 + ids[i] * 400
            assert off[i] + 400 <= length[r]
    # a large gap allowance merges everything into one read
    assert len(_plan(ids, 128, 400, 1 << 30, 1 << 30)[0]) == 1


def test_coalesce_gap_and_length_limits():
    # 256-byte rows from offset 0: 16 a block; blocks 0, 1 (adjacent), 3 (one block away), 6
    ids = [0, 15, 16, 48, 96]
    assert _plan(ids, 0, 256, 0, 1 << 20)[1].tolist() == [8192, 4096, 4096]
    assert _plan(ids, 0, 256, 4096, 1 << 20)[1].tolist() == [16384, 4096]  # skips block 2
    assert _plan(ids, 0, 256, 8192, 1 << 20)[1].tolist() == [28672]  # skips 2, 4, 5
    assert _plan(ids, 0, 256, 8192, 8192)[1].tolist() == [8192, 4096, 4096]  # capped
    # a row longer than the cap still gets its one read (blocks 0-2 of a 10000-byte row)
    start, length, first, _ = _plan([0, 1], 0, 10000, 0, 4096)
    assert start.tolist() == [0, 8192] and length.tolist() == [12288, 12288]
    assert first.tolist() == [0, 1, 2]
    assert len(_plan([], 0, 256, 0, 4096)[0]) == 0


def test_drop_page_cache_then_read(tmp_path):
    a = np.arange(4000, dtype=np.int64).reshape(1000, 4)
    np.save(tmp_path / "a.npy", a)
    f = DiskFeature(tmp_path / "a.npy")
    ids = np.arange(0, 1000, 7)
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    assert f.drop_page_cache() in (True, False)
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    f.close()
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])  # reopens lazily


def test_zero_rows_and_zero_width(tmp_path):
    np.save(tmp_path / "e.npy", np.zeros((0, 4), np.float32))
    f = DiskFeature(tmp_path / "e.npy")
    assert f.read([]).shape == (0, 4)
    with pytest.raises(GraphfeedError, match="out of range"):
        f.read([0])
    np.save(tmp_path / "w.npy", np.zeros((5, 0), np.float32))
    assert DiskFeature(tmp_path / "w.npy").read([1, 2]).shape == (2, 0)


def test_pickle_reopens(tmp_path):
    import pickle

    a = np.random.default_rng(2).random((64, 3))
    np.save(tmp_path / "a.npy", a)
    f = DiskFeature(tmp_path / "a.npy", direct_io=True)
    f.read([1])
    g = pickle.loads(pickle.dumps(f))
    assert torch.equal(g.read([63, 0]), torch.from_numpy(a[[63, 0]]))


def test_num_threads_can_be_changed_between_reads(tmp_path):
    import threading

    from graphfeed.features.disk import PARALLEL_MIN_ROWS

    a = np.arange(600 * 3, dtype=np.float32).reshape(600, 3)
    np.save(tmp_path / "f.npy", a)
    f = DiskFeature(tmp_path / "f.npy", num_threads=2)
    ids = np.random.default_rng(0).integers(0, 600, PARALLEL_MIN_ROWS * 2)

    def pool_threads():
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("gf-disk"))

    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    assert 1 <= len(pool_threads()) <= 2
    f.num_threads = 1  # serial from now on: the running pool stops
    assert f.num_threads == 1 and pool_threads() == []
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    assert pool_threads() == []
    with pytest.raises(GraphfeedError, match="num_threads"):
        f.num_threads = 0
    f.close()


def test_direct_io_auto_reads_directly_only_what_memory_cannot_hold(tmp_path, monkeypatch):
    import graphfeed._memory as M

    path = tmp_path / "x.npy"
    np.save(path, np.arange(4000, dtype=np.float32).reshape(1000, 4))  # 16 kB of rows
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 10**9)
    assert DiskFeature(path).direct_io is False  # fits: the page cache keeps it
    monkeypatch.setattr(M, "reclaimable_memory", lambda: 20_000)
    f = DiskFeature(path)  # more than half of what is left: read around the page cache
    assert f.direct_io is True
    assert np.array_equal(f.read([3, 999, 0]).numpy(), np.load(path)[[3, 999, 0]])
    monkeypatch.setattr(M, "reclaimable_memory", lambda: None)  # unknown (not Linux): the map
    assert DiskFeature(path).direct_io is False
    assert DiskFeature(path, direct_io=True).direct_io is True
    with pytest.raises(GraphfeedError, match="direct_io"):
        DiskFeature(path, direct_io="yes")
