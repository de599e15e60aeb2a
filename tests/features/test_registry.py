"""open_feature: one entry point for every backend, LMDB built on first use."""

from __future__ import annotations

import numpy as np
import pytest

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.features.cache import CachedFeature
from graphfeed.features.disk import DiskFeature
from graphfeed.features.lmdb_store import LMDBFeature, lmdb_path_for
from graphfeed.features.memory import InMemoryFeature
from graphfeed.features.registry import BACKENDS, open_feature


@pytest.fixture
def npy(tmp_path):
    a = np.random.default_rng(0).standard_normal((300, 6)).astype(np.float32)
    p = tmp_path / "feat.npy"
    np.save(p, a)
    return p, a


def test_backends_agree(npy):
    p, a = npy
    ids = np.random.default_rng(1).integers(0, 300, 500)
    kinds = {"ram": InMemoryFeature, "disk": DiskFeature, "lmdb": LMDBFeature}
    for name, cls in kinds.items():
        f = open_feature(p, name)
        assert type(f) is cls
        np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
        c = open_feature(p, name if name != "ram" else "disk", cache_size="2kB", cache_policy="lru")
        assert isinstance(c, CachedFeature) and c.capacity == 2000 // 24
        np.testing.assert_array_equal(c.read(ids).numpy(), a[ids])


def test_lmdb_built_once_next_to_the_file_and_rebuilt_on_mismatch(npy, tmp_path):
    p, a = npy
    store = lmdb_path_for(p)
    assert store == tmp_path / "feat.lmdb"
    f = open_feature(p, "lmdb", rows_per_chunk=16)
    assert store.is_dir() and f.rows_per_chunk == 16
    mtime = (store / "data.mdb").stat().st_mtime_ns
    f.close()
    del f
    g = open_feature(p, "lmdb")
    assert (store / "data.mdb").stat().st_mtime_ns == mtime  # reused, not rebuilt
    g.close()
    del g
    b = a[:100] * 2  # the .npy changed shape: the store no longer matches
    np.save(p, b)
    h = open_feature(p, "lmdb")
    assert h.shape == (100, 6)
    np.testing.assert_array_equal(h.read(np.arange(100)).numpy(), b)
    other = tmp_path / "elsewhere.lmdb"
    assert open_feature(p, "lmdb", lmdb_path=other).shape == (100, 6) and other.is_dir()


def test_errors(npy, tmp_path):
    p, _ = npy
    with pytest.raises(GraphfeedError, match="ram, disk, lmdb"):
        open_feature(p, "s3")
    with pytest.raises(GraphfeedError, match="unexpected options"):
        open_feature(p, "ram", num_threads=3)
    with pytest.raises(DatasetError, match="not found"):
        open_feature(tmp_path / "nope.npy", "lmdb")
    with pytest.raises(GraphfeedError, match="not a size"):
        open_feature(p, "disk", cache_size="big")
    with pytest.raises(GraphfeedError, match="unexpected options.*lmdb_path"):
        open_feature(p, "disk", lmdb_path=tmp_path / "x.lmdb")


def test_backends_registry_lists_and_opens_each():
    assert BACKENDS.names() == ("ram", "disk", "lmdb")
    assert BACKENDS.get("disk") is DiskFeature
    assert all(BACKENDS.entry(n).help for n in BACKENDS)
    with pytest.raises(GraphfeedError, match="valid: ram, disk, lmdb"):
        BACKENDS.check("s3")


def test_backend_names_are_case_insensitive_and_ram_is_never_cached(npy):
    p, a = npy
    f = open_feature(p, "DISK", num_threads=1, cache_size="1kB")
    assert isinstance(f, CachedFeature) and isinstance(f.feature, DiskFeature)
    m = open_feature(p, "ram", mmap=True, cache_size="1kB")
    assert type(m) is InMemoryFeature
    np.testing.assert_array_equal(m.read([3, 1]).numpy(), a[[3, 1]])
