"""Shared segments in one process: layout, read-only attach, atomic publish, cleanup."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from graphfeed.distributed import pss_bytes
from graphfeed.distributed.shm import (
    SharedArrays,
    drop_file_pages,
    in_shared_file_mapping,
    list_segments,
    remove_segments,
    segment_path,
)
from graphfeed.errors import GraphfeedError


def test_create_attach_roundtrip(no_leftover_segments):
    arrays = {
        "a": np.arange(10, dtype=np.int64),
        "b": np.random.default_rng(0).random((7, 3)).astype(np.float32),
        "empty": np.zeros((0, 4), dtype=np.int32),
    }
    path = segment_path("test1", "seg")
    seg = SharedArrays.create(path, arrays)
    try:
        assert path.exists()
        other = SharedArrays.attach(path)
        for k, v in arrays.items():
            assert other[k].dtype == v.dtype and other[k].shape == v.shape
            np.testing.assert_array_equal(other[k], v)
            assert not other[k].flags.writeable and not seg[k].flags.writeable
            assert other[k].ctypes.data % 4096 == 0 or v.size == 0  # page-aligned arrays
        assert in_shared_file_mapping(other["b"])
    finally:
        seg.unlink()
    assert not path.exists()
    np.testing.assert_array_equal(other["b"], arrays["b"])  # mapping outlives the name


def test_existing_name_is_refused_and_temp_removed(no_leftover_segments):
    path = segment_path("test2", "seg")
    seg = SharedArrays.create(path, {"a": np.ones(3)})
    try:
        with pytest.raises(FileExistsError):
            SharedArrays.create(path, {"a": np.ones(3)})
        assert list_segments("test2") == [path]  # no half-written temporary left
    finally:
        seg.unlink()


def test_attach_missing_or_foreign_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAPHFEED_SHM_DIR", str(tmp_path))
    with pytest.raises(GraphfeedError, match="not found"):
        SharedArrays.attach(segment_path("nope", "x"))
    bad = segment_path("bad", "x")
    bad.write_bytes(b"\0" * 8192)
    with pytest.raises(GraphfeedError, match="not a graphfeed"):
        SharedArrays.attach(bad)


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden"])
def test_unsafe_names_are_rejected(name):
    with pytest.raises(GraphfeedError):
        segment_path("run", name)


def test_remove_segments_by_run_id():
    keep = SharedArrays.create(segment_path("keepme", "a"), {"a": np.ones(2)})
    SharedArrays.create(segment_path("dropme", "a"), {"a": np.ones(2)})
    SharedArrays.create(segment_path("dropme", "b"), {"a": np.ones(2)})
    try:
        removed = remove_segments("dropme")
        assert sorted(p.name for p in removed) == ["graphfeed-dropme-a", "graphfeed-dropme-b"]
        assert list_segments("dropme") == [] and list_segments("keepme") != []
    finally:
        keep.unlink()


def test_sigterm_removes_the_creators_live_segments(tmp_path):
    code = textwrap.dedent(
        """
        import os, signal, sys, numpy as np
        from graphfeed.distributed.shm import SharedArrays, segment_path
        SharedArrays.create(segment_path("sigterm", "a"), {"a": np.ones(10)})
        print("created", flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
        """
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "created" in p.stdout
    assert p.returncode == 128 + 15
    assert list_segments("sigterm") == []


def test_drop_file_pages_only_touches_file_mappings(tmp_path):
    from graphfeed._io import save_npy

    save_npy(tmp_path / "a.npy", np.arange(4 << 20, dtype=np.float32))  # 16 MB
    a = np.load(tmp_path / "a.npy", mmap_mode="r")
    total = float(a.sum())  # fault every page in
    before = pss_bytes()
    assert drop_file_pages(a)
    assert pss_bytes() < before - 8 * (1 << 20)
    assert float(a.sum()) == total  # data intact, faulted back from the page cache
    anon = np.ones(1 << 20)
    assert not drop_file_pages(anon) and anon.sum() == anon.size


def _perms_of(a) -> str:
    ptr = int(a.ctypes.data)
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= ptr < hi:
                return line.split()[1]
    return ""


def test_attach_maps_read_only_unless_pinnable(no_leftover_segments):
    path = segment_path("perms", "seg")
    seg = SharedArrays.create(path, {"a": np.arange(5000, dtype=np.float64)})
    try:
        ro = SharedArrays.attach(path)
        rw = SharedArrays.attach(path, writable_mapping=True)
    finally:
        seg.unlink()
    assert _perms_of(ro["a"]) == "r--s"
    assert _perms_of(rw["a"]) == "rw-s"
    assert not ro["a"].flags.writeable and not rw["a"].flags.writeable  # numpy stays read-only
    np.testing.assert_array_equal(rw["a"], np.arange(5000))


def test_pss_of_this_process_grows_with_touched_memory():
    from graphfeed.distributed.pss import memory_breakdown, total_pss_bytes

    import mmap

    before = pss_bytes()
    # fresh anonymous pages (np.ones could reuse heap pages freed, still resident, by earlier tests)
    region = mmap.mmap(-1, 32 << 20)
    block = np.frombuffer(region, dtype=np.uint8)
    block[::4096] = 1  # touch every page: 32 MB
    assert pss_bytes() - before > 24 << 20
    m = memory_breakdown(os.getpid())
    assert m["Pss"] <= m["Rss"] and "Pss_Anon" in m
    assert total_pss_bytes([os.getpid(), 2**22 + 12345]) > 0  # a missing pid counts 0
    del block
    region.close()


def test_register_pinned_without_cuda_says_so(no_gpu):
    from graphfeed.distributed import register_pinned

    with pytest.raises(GraphfeedError, match="needs CUDA"):
        register_pinned(np.ones(10))
