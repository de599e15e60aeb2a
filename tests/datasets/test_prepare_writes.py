"""What ``prepare`` writes (issue 30, item 7): every byte of the edge arrays once, no temporary
copy, no writable memory map of a dataset file, and text features without a second copy."""

from __future__ import annotations

import hashlib
import io
import sys
from pathlib import Path

import numpy as np
import pytest

from graphfeed import _memory
from graphfeed.datasets import build
from graphfeed.datasets._readers import EdgeSource
from graphfeed.datasets.build import NpyAppender, build_csc_streaming
from graphfeed.datasets.format import Dataset
from graphfeed.datasets.importers import SplitRule, prepare
from graphfeed.graph.csc import CSCGraph

N, E = 40_000, 400_000
#: what may be written besides the dataset's own bytes: the metadata's temporary file, the
#: file system's own rounding to pages of small files
SLACK = 512 * 1024


def _edges(n=N, e=E, seed=0):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    src[: e // 10], dst[: e // 10] = dst[e // 10 : e // 5], src[e // 10 : e // 5]  # some reverses
    src[e // 5 : e // 4] = src[: e // 20]  # and some repeats
    dst[e // 5 : e // 4] = dst[: e // 20]
    w = rng.random(e).astype(np.float64)
    t = rng.integers(0, 10**6, e).astype(np.float64)
    return src, dst, {"weight": w, "timestamp": t}


def _write_bytes() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("write_bytes:"))


@pytest.fixture
def io_accounting(tmp_path):
    """Skip unless this process's disk writes are counted here (Linux task I/O accounting on a
    disk-backed ``tmp_path``; tmpfs counts nothing)."""
    if not sys.platform.startswith("linux") or not Path("/proc/self/io").is_file():
        pytest.skip("needs /proc/self/io")
    before = _write_bytes()
    (tmp_path / "probe").write_bytes(b"\1" * (4 << 20))
    if _write_bytes() - before < (4 << 20):
        pytest.skip(f"{tmp_path} does not count written bytes (tmpfs?)")
    (tmp_path / "probe").unlink()
    return _write_bytes


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _prepare(tmp_path, name, *, features, **kw):
    src, dst, vals = _edges()
    y = np.random.default_rng(1).integers(0, 5, N)
    return prepare(tmp_path / name, edges=EdgeSource(arrays=(src, dst), values=vals, block_bytes=1 << 20),
                   features=features, labels=y, splits=SplitRule.parse("0.5,0.2,0.2"), **kw)


@pytest.mark.parametrize("undirected,dedupe", [(True, True), (False, False)])
@pytest.mark.parametrize("budget", [2**31, 300_000])  # one window, several
def test_prepare_writes_each_byte_once(tmp_path, io_accounting, undirected, dedupe, budget):
    x = np.random.default_rng(2).standard_normal((N, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    before = io_accounting()
    rep = _prepare(tmp_path, "out", features={"feat": tmp_path / "x.npy"}, undirected=undirected,
                   dedupe=dedupe, drop_self_loops=True, memory_budget=budget)
    written = io_accounting() - before
    size = _size(tmp_path / "out")
    assert (rep.windows > 1) == (budget < 2**31)
    # before issue 30.7: the indices and the (E, 2) float64 values went through temporary files
    # first (1.7x here), and a long pass 2 wrote the mapped indices back again and again
    assert written <= size + SLACK, f"wrote {written} bytes for a {size}-byte dataset"


def test_text_features_written_once(tmp_path, io_accounting):
    x = np.random.default_rng(3).standard_normal((N, 16)).astype(np.float32)
    np.savetxt(tmp_path / "x.csv", x, delimiter=",", fmt="%.6g")
    before = io_accounting()
    _prepare(tmp_path, "out", features={"feat": tmp_path / "x.csv"})
    written = io_accounting() - before
    size = _size(tmp_path / "out")
    assert written <= size + SLACK, f"wrote {written} bytes for a {size}-byte dataset"
    got = np.load(tmp_path / "out" / "node_features" / "feat.npy")
    np.testing.assert_array_equal(got, np.loadtxt(tmp_path / "x.csv", delimiter=",", dtype=np.float32))


def test_build_maps_no_file_for_writing(tmp_path, monkeypatch):
    """Pass 2 places edges in process memory: a writable map of a dataset file is what the kernel
    wrote back repeatedly while the pass kept dirtying it."""
    real_memmap, real_open = np.memmap, np.lib.format.open_memmap

    def memmap(*a, mode="r+", **kw):
        assert mode in ("r", "c"), f"writable memory map ({mode}) in the CSC build"
        return real_memmap(*a, mode=mode, **kw)

    def open_memmap(*a, mode="r+", **kw):
        assert mode in ("r", "c"), f"writable memory map ({mode}) in the CSC build"
        return real_open(*a, mode=mode, **kw)

    monkeypatch.setattr(np, "memmap", memmap)
    monkeypatch.setattr(np.lib.format, "open_memmap", open_memmap)
    src, dst, vals = _edges(2000, 20_000)
    for i, (und, dd, budget) in enumerate([(True, True, 2**31), (False, False, 2**31), (True, True, 4096)]):
        out = tmp_path / f"g{i}"
        out.mkdir()
        res = build_csc_streaming(EdgeSource(arrays=(src, dst), values=vals, block_bytes=4096), out,
                                  num_nodes=2000, undirected=und, dedupe=dd, memory_budget=budget)
        assert sorted(p.name for p in out.iterdir()) == ["indices.npy", "indptr.npy", "timestamp.npy",
                                                         "weight.npy"]
        ref = CSCGraph.from_edges(src, dst, 2000, add_reverse=und, drop_duplicates=dd)
        g = CSCGraph.load(out, validate=True)
        np.testing.assert_array_equal(g.indptr, ref.indptr)
        np.testing.assert_array_equal(g.indices, ref.indices)
        assert res.num_edges == ref.num_edges


def test_windows_capped_by_available_memory(tmp_path, monkeypatch):
    """A window lives in process memory: when less is available than --memory-budget asks for,
    more windows are built (the same bytes), and the report says so."""
    x = np.random.default_rng(2).standard_normal((N, 4)).astype(np.float32)
    ref = _prepare(tmp_path, "ref", features={"feat": x}, undirected=True, dedupe=True)
    assert ref.windows == 1 and ref.budget_capped == 0
    monkeypatch.setattr(build, "MIN_WINDOW_BUDGET", 1024)
    monkeypatch.setattr(_memory, "reclaimable_memory", lambda: 2 * 500_000)
    rep = _prepare(tmp_path, "capped", features={"feat": x}, undirected=True, dedupe=True)
    assert rep.windows > 1 and rep.budget_capped == 500_000
    assert "--memory-budget capped at" in rep.summary()
    for rel in ("graph/indptr.npy", "graph/indices.npy", "graph/weights.npy",
                "edge_features/timestamp.npy"):
        a, b = (hashlib.sha256((tmp_path / d / rel).read_bytes()).hexdigest() for d in ("ref", "capped"))
        assert a == b, rel
    assert Dataset.open(tmp_path / "capped").num_edges == ref.num_edges
    # a budget below what is available is kept as given; unknown memory caps nothing
    assert build.window_budget(4096) == 4096
    monkeypatch.setattr(_memory, "reclaimable_memory", lambda: None)
    assert build.window_budget(2**40) == 2**40


def test_npy_appender_matches_np_save(tmp_path):
    rng = np.random.default_rng(4)
    for dtype, row_shape in ((np.int32, ()), (np.float32, (3,)), (np.uint16, ())):
        a = rng.integers(0, 100, (1000, *row_shape)).astype(dtype)
        with NpyAppender(tmp_path / "a.npy", dtype, row_shape=row_shape, rows_bound=10**15) as f:
            for i in range(0, 1000, 333):
                f.write(a[i : i + 333])
        b = io.BytesIO()
        np.save(b, a)
        assert (tmp_path / "a.npy").read_bytes() == b.getvalue()
    # an error leaves the header unwritten (the file sits in a folder that is never published)
    with pytest.raises(RuntimeError):
        with NpyAppender(tmp_path / "b.npy", np.int32, rows_bound=10) as f:
            f.write(np.arange(5, dtype=np.int32))
            raise RuntimeError
    assert (tmp_path / "b.npy").read_bytes()[:6] != b"\x93NUMPY"


def test_npy_appender_pads_a_shorter_header(tmp_path, monkeypatch):
    """Where numpy leaves no room to grow in its header (a shape with fewer digits makes a
    shorter header), the header is padded with spaces: still a valid .npy."""

    def unpadded(dtype, shape):
        d = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
             "shape": tuple(shape)}
        text = repr(d) + "\n"
        text = text[:-1] + " " * ((64 - (10 + len(text)) % 64) % 64) + "\n"
        return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode("latin1")

    monkeypatch.setattr(build, "npy_header", unpadded)
    assert len(unpadded(np.int64, (10**70,))) > len(unpadded(np.int64, (7,)))
    with NpyAppender(tmp_path / "a.npy", np.int64, rows_bound=10**70) as f:
        f.write(np.arange(7, dtype=np.int64))
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.arange(7))
    from graphfeed._io import load_npy

    np.testing.assert_array_equal(load_npy(tmp_path / "a.npy"), np.arange(7))


def test_own_cgroup_memory(tmp_path):
    proc = tmp_path / "cgroup"
    # cgroup v1: the hierarchical limit less the anonymous memory (page cache can be reclaimed)
    d = tmp_path / "memory" / "job"
    d.mkdir(parents=True)
    (d / "memory.stat").write_text("cache 900\nrss 50\nhierarchical_memory_limit 1000\n"
                                   "total_cache 900\ntotal_rss 100\n")
    proc.write_text("4:memory:/job\n1:cpu:/\n")
    assert _memory._own_cgroup_memory(str(proc), str(tmp_path)) == (1000, 100)
    (d / "memory.stat").write_text("hierarchical_memory_limit 9223372036854771712\ntotal_rss 1\n")
    assert _memory._own_cgroup_memory(str(proc), str(tmp_path)) is None
    # cgroup v2: the tightest memory.max on the way up
    v2 = tmp_path / "v2"
    leaf = v2 / "a" / "b"
    leaf.mkdir(parents=True)
    (leaf / "memory.stat").write_text("anon 30\nfile 500\n")
    (leaf / "memory.max").write_text("max\n")
    (v2 / "a" / "memory.max").write_text("800\n")
    proc.write_text("0::/a/b\n")
    assert _memory._own_cgroup_memory(str(proc), str(v2)) == (800, 30)
    (v2 / "a" / "memory.max").write_text("max\n")
    assert _memory._own_cgroup_memory(str(proc), str(v2)) is None
