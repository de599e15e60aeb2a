"""LMDBFeature: builds are all-or-nothing, updates are atomic, metadata is validated."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

from graphfeed.errors import DatasetError, GraphfeedError, MissingDependencyError
from graphfeed.features.lmdb_store import META_KEY, LMDBFeature, default_rows_per_chunk

lmdb = pytest.importorskip("lmdb")


def test_build_from_npy_array_and_blocks_agree(tmp_path):
    a = np.random.default_rng(0).standard_normal((1000, 5)).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    blocks = [a[:3], a[3:400], a[400:401], a[401:]]  # uneven blocks cross chunk borders
    stores = [
        LMDBFeature.build(tmp_path / "s1", tmp_path / "a.npy", rows_per_chunk=64),
        LMDBFeature.build(tmp_path / "s2", a, rows_per_chunk=64),
        LMDBFeature.build(tmp_path / "s3", iter(blocks), rows_per_chunk=64),
        LMDBFeature.build(tmp_path / "s4", torch.from_numpy(a)),
    ]
    ids = np.arange(1000)[::-1].copy()
    for s in stores:
        assert s.shape == (1000, 5)
        np.testing.assert_array_equal(s.read(ids).numpy(), a[ids])
    assert stores[0].rows_per_chunk == 64
    assert stores[3].rows_per_chunk == default_rows_per_chunk(20)


def test_build_rejects_mismatched_blocks_and_leaves_nothing(tmp_path):
    blocks = [np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32)]
    with pytest.raises(GraphfeedError, match="does not match"):
        LMDBFeature.build(tmp_path / "s", blocks)
    assert not (tmp_path / "s").exists()
    assert list(tmp_path.iterdir()) == []  # the temporary folder is gone too


def test_interrupted_build_leaves_no_store(tmp_path):
    def blocks():
        yield np.ones((100, 4), np.float32)
        yield np.ones((100, 4), np.float32)
        raise KeyboardInterrupt  # e.g. Ctrl-C in the middle

    with pytest.raises(KeyboardInterrupt):
        LMDBFeature.build(tmp_path / "s", blocks(), rows_per_chunk=8)
    assert not (tmp_path / "s").exists()
    with pytest.raises(DatasetError):
        LMDBFeature(tmp_path / "s")


def test_killed_build_leaves_no_store(tmp_path):
    """A process killed mid-build (no cleanup at all) leaves nothing under the final name."""
    code = textwrap.dedent(
        f"""
        import os, numpy as np
        from graphfeed.features.lmdb_store import LMDBFeature
        def blocks():
            for i in range(50):
                if i == 20:
                    os._exit(9)
                yield np.full((1000, 4), i, np.float32)
        LMDBFeature.build({str(tmp_path / 's')!r}, blocks(), rows_per_chunk=100)
        """
    )
    r = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert r.returncode == 9
    assert not (tmp_path / "s").exists()
    with pytest.raises(DatasetError):
        LMDBFeature(tmp_path / "s")
    # a later build succeeds next to the leftovers
    s = LMDBFeature.build(tmp_path / "s", np.ones((10, 4), np.float32))
    assert s.shape == (10, 4)


def test_update_persists_and_validates(tmp_path):
    a = np.arange(60, dtype=np.int64).reshape(20, 3)
    LMDBFeature.build(tmp_path / "s", a, rows_per_chunk=4)
    ro = LMDBFeature(tmp_path / "s")
    with pytest.raises(GraphfeedError, match="readonly"):
        ro.update([0], np.zeros((1, 3), np.int64))
    rw = LMDBFeature(tmp_path / "s", readonly=False)
    ids = np.array([19, 0, 5, 6, 7, 8])  # spans several chunks
    rows = -np.arange(18, dtype=np.int64).reshape(6, 3)
    rw.update(ids, rows)
    with pytest.raises(GraphfeedError, match="shape"):
        rw.update([1, 2], np.zeros((3, 3)))
    with pytest.raises(GraphfeedError, match="out of range"):
        rw.update([20], np.zeros((1, 3)))
    rw.close()
    want = a.copy()
    want[ids] = rows
    np.testing.assert_array_equal(LMDBFeature(tmp_path / "s").read(np.arange(20)).numpy(), want)


def test_update_is_atomic_for_concurrent_readers(tmp_path):
    """Every read sees one whole update: all rows carry the same value."""
    n = 400
    LMDBFeature.build(tmp_path / "s", np.zeros((n, 2), np.float32), rows_per_chunk=10)
    rw = LMDBFeature(tmp_path / "s", readonly=False)
    reader = LMDBFeature(tmp_path / "s")
    stop = threading.Event()
    seen, bad = set(), []

    def read_loop():
        ids = np.arange(n)
        while not stop.is_set():
            v = reader.read(ids).numpy()
            if not (v == v[0, 0]).all():
                bad.append(np.unique(v))
            seen.add(float(v[0, 0]))

    t = threading.Thread(target=read_loop)
    t.start()
    try:
        for k in range(1, 40):
            rw.update(np.arange(n), np.full((n, 2), k, np.float32))
    finally:
        stop.set()
        t.join(timeout=60)
    assert not bad, bad[:3]
    assert float(reader.read([n - 1])[0, 0]) == 39.0


def _tamper(path, **changes):
    env = lmdb.open(str(path), subdir=True)
    with env.begin(write=True) as txn:
        meta = json.loads(bytes(txn.get(META_KEY)))
        meta.update(changes)
        txn.put(META_KEY, json.dumps(meta).encode())
    env.close()


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"format_version": 99}, "format version 99"),
        ({"shape": [10_000, 3]}, "chunks"),
        ({"dtype": "|O"}, "invalid metadata"),
        ({"rows_per_chunk": 0}, "invalid metadata"),
        ({"dtype": "not-a-dtype"}, "malformed"),
    ],
)
def test_metadata_is_validated_on_open(tmp_path, changes, match):
    LMDBFeature.build(tmp_path / "s", np.zeros((20, 3), np.float32), rows_per_chunk=4)
    _tamper(tmp_path / "s", **changes)
    with pytest.raises(DatasetError, match=match) as e:
        LMDBFeature(tmp_path / "s")
    assert str(tmp_path / "s") in str(e.value)


def test_not_a_store(tmp_path):
    with pytest.raises(DatasetError, match="not an LMDB feature store"):
        LMDBFeature(tmp_path)
    env = lmdb.open(str(tmp_path / "plain"), subdir=True)
    env.close()
    with pytest.raises(DatasetError, match="no graphfeed metadata"):
        LMDBFeature(tmp_path / "plain")


def test_missing_lmdb_gives_actionable_error(tmp_path, monkeypatch):
    LMDBFeature.build(tmp_path / "s", np.zeros((4, 2), np.float32))
    monkeypatch.setitem(sys.modules, "lmdb", None)  # import lmdb now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"graphfeed\[lmdb\]") as e:
        LMDBFeature(tmp_path / "s")
    assert e.value.extra == "lmdb" and e.value.package == "lmdb"


def test_pickle_roundtrip_reopens(tmp_path):
    import pickle

    a = np.random.default_rng(1).random((50, 4)).astype(np.float32)
    s = LMDBFeature.build(tmp_path / "s", a, rows_per_chunk=8)
    s.read([1, 2])
    s2 = pickle.loads(pickle.dumps(s))
    np.testing.assert_array_equal(s2.read([49, 0]).numpy(), a[[49, 0]])


def test_reads_after_an_update_see_the_new_rows_and_a_short_chunk_is_a_clear_error(tmp_path):
    # reads use a per-snapshot table of chunk addresses: a write must invalidate it
    import struct

    a = np.arange(40 * 4, dtype=np.float32).reshape(40, 4)
    path = tmp_path / "s"
    LMDBFeature.build(path, a, rows_per_chunk=8).close()
    rw = LMDBFeature(path, readonly=False, num_threads=1)
    ids = torch.tensor([39, 0, 17, 17, 8])
    assert torch.equal(rw.read(ids), torch.from_numpy(a[ids.numpy()]))
    rw.update([17, 0], np.full((2, 4), -1.0, np.float32))
    b = a.copy()
    b[[17, 0]] = -1.0
    assert torch.equal(rw.read(ids), torch.from_numpy(b[ids.numpy()]))
    rw.close()

    env = lmdb.open(str(path), subdir=True)
    with env.begin(write=True) as txn:
        txn.put(struct.pack(">Q", 2), b"\0" * 12)  # chunk 2 cut short
    env.close()
    with LMDBFeature(path) as f, pytest.raises(DatasetError, match="chunk 2 is 12 bytes, expected 128"):
        f.read([0])


def test_in_memory_feature_pickles_its_rows_once():
    import pickle

    from graphfeed.features.memory import InMemoryFeature

    a = np.random.default_rng(0).standard_normal((300, 5)).astype(np.float32)
    f = InMemoryFeature(a, num_threads=3)
    g = pickle.loads(pickle.dumps(f))
    assert len(pickle.dumps(f)) < 2 * a.nbytes  # the word view is not pickled beside the rows
    ids = torch.tensor([299, 3, 3, 0])
    assert torch.equal(g.read(ids), torch.from_numpy(a[ids.numpy()]))
    assert g.num_threads == 3
