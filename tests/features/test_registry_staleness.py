"""The LMDB copy of a .npy is rebuilt when the .npy changes, and concurrent first opens agree."""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np
import pytest

pytest.importorskip("lmdb")

from graphfeed.features.registry import open_feature  # noqa: E402


def test_lmdb_copy_follows_a_changed_npy(tmp_path):
    path = tmp_path / "f.npy"
    np.save(path, np.zeros((50, 3), np.float32))
    f = open_feature(path, "lmdb")
    assert float(f.read([1, 2]).sum()) == 0.0
    f.close()
    time.sleep(0.01)
    np.save(path, np.ones((50, 3), np.float32))  # same shape and dtype, new content
    g = open_feature(path, "lmdb")
    assert float(g.read([1, 2]).sum()) == 6.0
    g.close()


def _open_and_sum(path, q):
    try:
        f = open_feature(path, "lmdb")
        q.put(float(f.read(np.arange(200)).sum()))
        f.close()
    except BaseException as e:  # report, do not hang the test
        q.put(repr(e))


def test_concurrent_first_opens_build_once_and_agree(tmp_path):
    path = tmp_path / "f.npy"
    x = np.arange(200 * 4, dtype=np.float32).reshape(200, 4)
    np.save(path, x)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_open_and_sum, args=(str(path), q)) for _ in range(3)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert got == [float(x.sum())] * 3, got
    assert sorted(os.listdir(tmp_path)) == [".f.lmdb.lock", "f.lmdb", "f.npy"]
