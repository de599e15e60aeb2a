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


def test_coalesce_plan():
    ids = np.array([0, 1, 100, 101, 5000], dtype=np.int64)  # 400-byte rows, data at offset 128
    n = ids.shape[0]
    start, length, off = (np.empty(n, np.int64) for _ in range(3))
    nr = coalesce_blocks(ids, 128, 400, DIRECT_ALIGN, 0, 1 << 20, start, length, off)
    # rows 0 and 1 share block 0; rows 100, 101 share blocks 9-10; row 5000 is far away
    assert nr == 3
    assert (start[:nr] % DIRECT_ALIGN == 0).all() and (length[:nr] % DIRECT_ALIGN == 0).all()
    assert start[0] == 0 and length[0] == 4096
    # each row's bytes are where the plan says in the concatenated buffer
    base = np.concatenate([[0], np.cumsum(length[:nr])])
    for i, r in enumerate(ids):
        file_off = 128 + r * 400
        k = np.searchsorted(base, off[i], side="right") - 1
        assert start[k] + (off[i] - base[k]) == file_off
    # a large gap allowance merges everything into one read
    assert coalesce_blocks(ids, 128, 400, DIRECT_ALIGN, 1 << 30, 1 << 30, start, length, off) == 1


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
