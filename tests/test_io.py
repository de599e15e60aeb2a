"""graphfeed._io: what its writers publish honours the umask; load_npy names what a path is."""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

import numpy as np
import pytest

from graphfeed import _io
from graphfeed.errors import DatasetError
from graphfeed.graph.csc import CSCGraph

UMASKS = [(0o022, 0o755, 0o644), (0o002, 0o775, 0o664), (0o077, 0o700, 0o600)]


@pytest.fixture
def umask():
    """Set the process umask for one test and restore it afterwards."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


def _modes(root: Path) -> dict:
    items = [root, *root.rglob("*")]
    return {str(p.relative_to(root)): (p.is_dir(), stat.S_IMODE(p.lstat().st_mode)) for p in items}


def _assert_modes(root: Path, dmode: int, fmode: int, at_least: int) -> None:
    modes = _modes(root)
    assert len(modes) >= at_least, modes
    for rel, (is_dir, mode) in modes.items():
        assert mode == (dmode if is_dir else fmode), (rel, oct(mode))


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_process_umask_reads_without_changing(umask, mask, dmode, fmode):
    umask(mask)
    assert _io.process_umask() == mask
    assert _io.umask_modes() == (dmode, fmode)
    assert os.umask(mask) == mask  # unchanged by reading it


def test_process_umask_without_proc_falls_back_and_restores(umask, monkeypatch):
    umask(0o027)

    def no_proc(path, *a, **kw):
        raise FileNotFoundError(path)

    monkeypatch.setattr(_io, "open", no_proc, raising=False)  # shadows the builtin in _io only
    assert _io.process_umask() == 0o027
    monkeypatch.undo()
    assert os.umask(0o022) == 0o027


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_save_npy_file_mode(tmp_path, umask, mask, dmode, fmode):
    umask(mask)
    _io.save_npy(tmp_path / "a.npy", np.arange(5))
    assert stat.S_IMODE((tmp_path / "a.npy").stat().st_mode) == fmode
    np.testing.assert_array_equal(_io.load_npy(tmp_path / "a.npy"), np.arange(5))


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_csc_graph_save_honours_umask(tmp_path, umask, mask, dmode, fmode):
    g = CSCGraph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 0]), 3)
    umask(mask)
    g.save(tmp_path / "g")
    g.save(tmp_path / "g", overwrite=True)  # the replacing copy too
    _assert_modes(tmp_path / "g", dmode, fmode, at_least=3)
    np.testing.assert_array_equal(CSCGraph.load(tmp_path / "g").indices, g.indices)


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_atomic_dir_fixes_what_the_writer_made_private(tmp_path, umask, mask, dmode, fmode):
    umask(mask)
    with _io.atomic_dir(tmp_path / "out") as tmp:
        (tmp / "sub").mkdir(mode=0o700)
        (tmp / "sub" / "f").write_bytes(b"x")
        os.chmod(tmp / "sub" / "f", 0o755)  # e.g. LMDB creates its files 0755
        (tmp / "g").write_bytes(b"y")
        os.chmod(tmp / "g", 0o600)
        os.symlink("g", tmp / "link")
    out = tmp_path / "out"
    assert (out / "link").is_symlink()
    modes = {k: v for k, v in _modes(out).items() if k != "link"}
    assert modes == {".": (True, dmode), "sub": (True, dmode), "sub/f": (False, fmode), "g": (False, fmode)}


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_lmdb_store_honours_umask(tmp_path, umask, mask, dmode, fmode):
    pytest.importorskip("lmdb")
    from graphfeed.features.lmdb_store import LMDBFeature

    umask(mask)
    LMDBFeature.build(tmp_path / "s", np.ones((10, 3), np.float32)).close()
    # what the build published; lock.mdb is made later, when the store is opened (next test)
    modes = {k: v for k, v in _modes(tmp_path / "s").items() if k != "lock.mdb"}
    assert modes == {".": (True, dmode), "data.mdb": (False, fmode)}


def test_lmdb_lock_file_honours_umask(tmp_path, umask):
    pytest.importorskip("lmdb")
    from graphfeed.features.lmdb_store import LMDBFeature

    umask(0o002)
    LMDBFeature.build(tmp_path / "s", np.ones((10, 3), np.float32)).close()
    assert stat.S_IMODE((tmp_path / "s" / "lock.mdb").stat().st_mode) == 0o664


@pytest.mark.parametrize("mask,dmode,fmode", UMASKS)
def test_file_lock_mode(tmp_path, umask, mask, dmode, fmode):
    umask(mask)
    with _io.file_lock(tmp_path / "d" / ".x.lock"):
        pass
    assert stat.S_IMODE((tmp_path / "d" / ".x.lock").stat().st_mode) == fmode


@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS])
def test_file_lock_on_a_lock_file_we_may_not_write(tmp_path, monkeypatch, err):
    """Another user's 0644 lock file (EACCES) or a read-only mount (EROFS): locked through a
    read-only descriptor. Simulated, so it also runs as root."""
    real_open = os.open
    flags_seen = []

    def refusing_open(path, flags, *a):
        flags_seen.append(flags)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(err, os.strerror(err), str(path))
        return real_open(path, flags, *a)

    lock = tmp_path / ".x.lock"
    lock.touch()
    monkeypatch.setattr(os, "open", refusing_open)
    with _io.file_lock(lock):
        assert flags_seen[-1] & (os.O_WRONLY | os.O_RDWR) == 0
    # a missing lock file that cannot be created still fails loudly
    with pytest.raises(OSError) as e:
        with _io.file_lock(tmp_path / ".y.lock"):
            pass
    assert e.value.errno == err


# --------------------------------------------------------------------------- load_npy
def test_load_npy_names_a_folder(tmp_path):
    (tmp_path / "a.npy").mkdir()
    with pytest.raises(DatasetError, match=r"a\.npy: is a folder, not a \.npy file"):
        _io.load_npy(tmp_path / "a.npy")


def test_load_npy_names_a_device():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    with pytest.raises(DatasetError, match=r"^/dev/zero: is a character device, not a \.npy file"):
        _io.load_npy("/dev/zero")


def test_load_npy_names_a_fifo_without_opening_it(tmp_path):
    fifo = tmp_path / "a.npy"
    os.mkfifo(fifo)
    result = {}

    def load():
        try:
            _io.load_npy(fifo, mmap=False)
        except DatasetError as e:
            result["error"] = str(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(60)
    if t.is_alive():  # it opened the FIFO and blocks: free it, then fail
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("load_npy opened a FIFO for reading (it blocks until a writer comes)")
    assert result["error"] == f"{fifo}: is a named pipe (FIFO), not a .npy file"


def test_load_npy_missing_and_broken_link(tmp_path):
    with pytest.raises(DatasetError, match=r"b\.npy: \.npy file not found$"):
        _io.load_npy(tmp_path / "b.npy")
    os.symlink(tmp_path / "gone.npy", tmp_path / "l.npy")
    with pytest.raises(DatasetError, match=r"l\.npy: broken symbolic link \(to .*gone\.npy'\)"):
        _io.load_npy(tmp_path / "l.npy")
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(DatasetError, match="not found .a parent of it is not a folder"):
        _io.load_npy(tmp_path / "f" / "c.npy")


def test_load_npy_follows_a_link_to_a_regular_file(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(3))
    os.symlink(tmp_path / "a.npy", tmp_path / "l.npy")
    np.testing.assert_array_equal(_io.load_npy(tmp_path / "l.npy"), np.arange(3))
