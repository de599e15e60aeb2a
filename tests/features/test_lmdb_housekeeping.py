"""LMDB stores on read-only datasets (issue 12, defect 5) and leftovers of killed builds
(defect 6)."""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import graphfeed
from graphfeed.errors import DatasetError
from graphfeed.features import lmdb_store
from graphfeed.features.lmdb_store import (
    BUILD_CLAIM, LMDBFeature, open_or_build, remove_stale_builds,
)

lmdb = pytest.importorskip("lmdb")

SRC = str(Path(graphfeed.__file__).resolve().parents[1])


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([SRC, env.get("PYTHONPATH", "")])
    return env


def _tmp_folders(store: Path) -> list:
    return sorted(store.parent.glob(f".{store.name}.tmp-*"))


def _start_build_that_waits(store: Path, go: Path) -> subprocess.Popen:
    """A real build in another process, parked mid-way until ``go`` exists."""
    code = textwrap.dedent(f"""
        import os, time, numpy as np
        from graphfeed.features.lmdb_store import LMDBFeature
        def blocks():
            for i in range(40):
                if i == 5:
                    while not os.path.exists({str(go)!r}):
                        time.sleep(0.02)
                yield np.full((1000, 8), i, np.float32)
        LMDBFeature.build({str(store)!r}, blocks(), rows_per_chunk=100)
    """)
    return subprocess.Popen([sys.executable, "-c", code], env=_env())


def _wait_for_claim(store: Path, proc: subprocess.Popen) -> Path:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"builder exited early ({proc.returncode})"
        for tmp in _tmp_folders(store):
            if (tmp / BUILD_CLAIM).exists() and (tmp / "data.mdb").exists():
                return tmp
        time.sleep(0.02)
    raise AssertionError("the builder never got going")


def test_a_killed_build_is_removed_by_the_next_one_and_a_running_one_is_not(tmp_path, caplog):
    store = tmp_path / "feat.lmdb"
    proc = _start_build_that_waits(store, tmp_path / "go")
    try:
        tmp = _wait_for_claim(store, proc)
        # still building: neither a cleanup nor a concurrent build may touch its folder
        assert remove_stale_builds(store) == []
        assert tmp.exists()
        proc.send_signal(signal.SIGKILL)  # the interruption of the issue: no cleanup at all
        proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _tmp_folders(store) == [tmp] and not store.exists()
    with caplog.at_level(logging.WARNING, logger="graphfeed.features"):
        s = LMDBFeature.build(store, np.ones((10, 4), np.float32))
    assert s.shape == (10, 4)
    s.close()
    assert _tmp_folders(store) == []
    msgs = [r.getMessage() for r in caplog.records if r.name == "graphfeed.features"]
    assert len(msgs) == 1, msgs
    assert str(tmp) in msgs[0] and f"process {proc.pid}" in msgs[0]
    assert "interrupted LMDB build" in msgs[0] and "no longer running" in msgs[0]
    assert not (store / BUILD_CLAIM).exists()  # the claim never reaches a published store


def test_unclaimed_leftovers_go_only_once_old(tmp_path):
    """Folders without a claim (an older graphfeed's, or killed before claiming): removed once
    older than UNCLAIMED_STALE_S, kept while they may belong to a build just starting."""
    store = tmp_path / "feat.lmdb"
    old = tmp_path / ".feat.lmdb.tmp-old"
    fresh = tmp_path / ".feat.lmdb.tmp-fresh"
    other = tmp_path / ".other.lmdb.tmp-old"  # another store's: never ours to remove
    for d in (old, fresh, other):
        d.mkdir()
        (d / "data.mdb").write_bytes(b"x" * 1000)
    past = time.time() - lmdb_store.UNCLAIMED_STALE_S - 10
    for d in (old, other):
        os.utime(d, (past, past))
    assert remove_stale_builds(store) == [old]
    assert fresh.exists() and other.exists() and not old.exists()


@pytest.fixture
def read_only(monkeypatch):
    """Makes folders read-only for this process: chmod where that binds (not root), and for root
    (whom chmod does not stop) the same view through ``folder_writable`` plus a guard that fails
    any attempt to create a file there, as a read-only mount would (EROFS)."""
    made = []

    def make(folder: Path) -> Path:
        folder = folder.resolve()
        made.append(folder)
        for d in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            d.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
        return folder

    if os.geteuid() == 0:
        real_open = os.open

        def inside(p) -> bool:
            p = Path(os.path.abspath(p))
            return any(p == f or f in p.parents for f in made)

        def guarded_open(path, flags, *a, **kw):
            if flags & (os.O_CREAT | os.O_WRONLY | os.O_RDWR) and inside(path):
                raise OSError(30, "Read-only file system (simulated)", str(path))
            return real_open(path, flags, *a, **kw)

        monkeypatch.setattr(lmdb_store, "folder_writable", lambda p: not inside(p))
        monkeypatch.setattr(os, "open", guarded_open)
    yield make
    for folder in made:
        for d in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            d.chmod(0o755)


def _listing(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_an_existing_store_opens_on_a_read_only_dataset(tmp_path, read_only):
    feats = tmp_path / "ds" / "node_features"
    feats.mkdir(parents=True)
    x = np.arange(600, dtype=np.float32).reshape(200, 3)
    np.save(feats / "feat.npy", x)
    open_or_build(feats / "feat.lmdb", feats / "feat.npy").close()  # built while writable
    before = _listing(feats)
    read_only(tmp_path / "ds")
    store = open_or_build(feats / "feat.lmdb", feats / "feat.npy")
    try:
        ids = np.array([5, 0, 199, 5])
        np.testing.assert_array_equal(store.read(ids).numpy(), x[ids])
        flags = store.env().flags()
        assert flags["readonly"] and not flags["lock"]
    finally:
        store.close()
    assert _listing(feats) == before  # no .feat.lmdb.lock, no lock.mdb: nothing written


def test_a_read_only_dataset_without_a_current_store_says_why(tmp_path, read_only):
    feats = tmp_path / "ds" / "node_features"
    feats.mkdir(parents=True)
    np.save(feats / "feat.npy", np.ones((50, 2), np.float32))
    np.save(feats / "other.npy", np.ones((50, 2), np.float32))
    open_or_build(feats / "other.lmdb", feats / "other.npy").close()
    read_only(tmp_path / "ds")
    with pytest.raises(DatasetError, match=r"feat.lmdb: no LMDB store here, and .* is read-only"):
        open_or_build(feats / "feat.lmdb", feats / "feat.npy")
    with pytest.raises(DatasetError, match=r"does not match .*other.npy.* read-only"):
        open_or_build(feats / "other.lmdb", feats / "other.npy", is_current=lambda s: False)
    with pytest.raises(DatasetError, match="read-only, cannot build"):
        LMDBFeature.build(feats / "new.lmdb", np.ones((5, 2), np.float32))


def test_open_or_build_builds_once_then_reuses(tmp_path):
    np.save(tmp_path / "feat.npy", np.arange(40, dtype=np.int64).reshape(20, 2))
    built = []
    s = open_or_build(tmp_path / "feat.lmdb", tmp_path / "feat.npy", on_built=lambda: built.append(1))
    s.close()
    s = open_or_build(tmp_path / "feat.lmdb", tmp_path / "feat.npy", on_built=lambda: built.append(1))
    assert s.read(np.array([19])).tolist() == [[38, 39]]
    s.close()
    assert built == [1]
    s = open_or_build(tmp_path / "feat.lmdb", tmp_path / "feat.npy", is_current=lambda s: False,
                      on_built=lambda: built.append(2))
    s.close()
    assert built == [1, 2]


@pytest.mark.timeout(60)
def test_a_finaliser_inside_the_environment_lock_does_not_deadlock(tmp_path):
    """A garbage collection can start while this thread holds lmdb_store's lock (an allocation
    in lmdb.open) and run LMDBFeature.__del__ there: it must neither block nor touch the table."""
    import os

    import numpy as np

    from graphfeed.features import lmdb_store
    from graphfeed.features.lmdb_store import LMDBFeature

    path = tmp_path / "s.lmdb"
    LMDBFeature.build(path, np.arange(20, dtype=np.float32).reshape(10, 2)).close()
    a, b = LMDBFeature(path), LMDBFeature(path)
    a.read([1]), b.read([2])
    key = os.path.realpath(path)
    assert lmdb_store._ENVS[key][1] == 2
    with lmdb_store._ENVS_LOCK:
        b.__del__()  # what a collection inside the lock does
        assert lmdb_store._ENVS[key][1] == 2  # deferred, not applied under the holder's feet
    b._env = None  # as if collected
    a.close()  # the next holder applies the deferred release, then its own
    assert key not in lmdb_store._ENVS
