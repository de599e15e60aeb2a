"""DiskFeature's direct reads on both engines: rows equal the memory map's, several threads at
once, a forked child, a file cut short after it was opened, exact statistics, engine choice."""

from __future__ import annotations

import logging
import os
import threading

import numpy as np
import pytest
import torch

from graphfeed.errors import DatasetError, GraphfeedError
from graphfeed.features import _uring
from graphfeed.features import disk as disk_mod
from graphfeed.features.disk import DIRECT_ALIGN, DiskFeature

URING_OK, URING_WHY = _uring.probe()
ENGINES = [pytest.param("uring", marks=pytest.mark.skipif(not URING_OK, reason=URING_WHY)),
           "threads"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


def _save(path, a):
    np.save(path, a)
    return path


def _direct(path, engine, **kw):
    f = DiskFeature(path, direct_io=True, io_engine=engine, **kw)
    assert f.engine == engine
    return f


def _crossing_ids(n, row_nbytes, offset=128):
    """Rows whose bytes span a block boundary."""
    start = offset + np.arange(n, dtype=np.int64) * row_nbytes
    return np.flatnonzero(start // DIRECT_ALIGN != (start + row_nbytes - 1) // DIRECT_ALIGN)


@pytest.mark.parametrize("row_nbytes", [1, 3, 256, 4096, 5000])
def test_rows_equal_the_map(tmp_path, engine, row_nbytes):
    n = max(64, 300_000 // row_nbytes)  # a few hundred KB; the last block is short
    rng = np.random.default_rng(row_nbytes)
    a = rng.integers(0, 256, (n, row_nbytes), dtype=np.uint8)
    path = _save(tmp_path / "a.npy", a)
    assert os.path.getsize(path) % DIRECT_ALIGN
    crossing = _crossing_ids(n, row_nbytes)
    cases = [
        rng.integers(0, n, 500),  # unsorted, with duplicates
        np.unique(rng.integers(0, n, 200)),  # sorted and distinct: read into out directly
        np.array([], dtype=np.int64),
        np.array([0]), np.array([n - 1]), np.array([n - 1, 0, n - 1]),
        crossing[:50], crossing[::-1][:50],
        np.arange(n),  # every row: long merged reads
    ]
    for kw in ({}, {"max_gap": 0, "queue_depth": 3}, {"max_gap": 1 << 20, "max_read": 8192},
               {"queue_depth": 1}):
        f = _direct(path, engine, **kw)
        for ids in cases:
            np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
        out = torch.full((len(cases[0]), row_nbytes), 7, dtype=torch.uint8)
        assert f.read(cases[0], out=out) is out
        np.testing.assert_array_equal(out.numpy(), a[cases[0]])
        f.close()


def test_threads_engine_keeps_queue_depth_reads_going(tmp_path, monkeypatch):
    a = np.random.default_rng(6).integers(0, 256, (4000, 256), dtype=np.uint8)  # 250 blocks
    path = _save(tmp_path / "a.npy", a)
    f = _direct(path, "threads", queue_depth=8, max_gap=0)
    together = threading.Barrier(8, timeout=20)  # broken unless 8 loops run at once
    real = _uring.pread_reads

    def pread_reads(*args):
        together.wait()
        return real(*args)

    monkeypatch.setattr(_uring, "pread_reads", pread_reads)
    ids = np.arange(0, 4000, 40)  # 100 reads, one per block
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    assert f.stats()["reads"] == 100
    assert [t for t in threading.enumerate() if t.name.startswith("gf-pread")]
    f.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("gf-pread")]


def test_bfloat16_bits(tmp_path, engine):
    bits = np.random.default_rng(1).integers(0, 2**16, (3000, 128), dtype=np.uint16)
    path = _save(tmp_path / "bf.npy", bits)
    f = _direct(path, engine, dtype="bfloat16")
    ids = np.random.default_rng(2).integers(0, 3000, 700)
    got = f.read(ids)
    assert got.dtype == torch.bfloat16
    np.testing.assert_array_equal(got.view(torch.int16).numpy().view(np.uint16), bits[ids])
    f.close()


def test_threads_reading_at_once(tmp_path, engine):
    a = np.random.default_rng(3).standard_normal((20_000, 24)).astype(np.float32)  # 96-byte rows
    path = _save(tmp_path / "a.npy", a)
    f = _direct(path, engine, queue_depth=8)
    errors = []

    def reader(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(10):
                ids = rng.integers(0, len(a), int(rng.integers(1, 3000)))
                np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    idle = f._engines._idle
    assert 1 <= len(idle) <= 6 and all(e.name == engine for e in idle)
    f.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_reads_with_its_own_ring(tmp_path, engine):
    a = np.random.default_rng(4).integers(0, 2**31, (5000, 10), dtype=np.int64)
    path = _save(tmp_path / "a.npy", a)
    f = _direct(path, engine)
    ids = np.random.default_rng(5).integers(0, 5000, 800)
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])
    parent_engines = list(f._engines._idle)
    assert parent_engines
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        msg = "ok"
        try:
            got = f.read(ids[::-1]).numpy()
            mine = f._engines._idle
            if not np.array_equal(got, a[ids[::-1]]):
                msg = "wrong rows"
            elif not mine or any(e in parent_engines or e.pid != os.getpid() for e in mine):
                msg = "used the parent's engine"
            elif engine == "uring" and ({e.ring_fd for e in mine}
                                        & {e.ring_fd for e in parent_engines}):
                msg = "shares a ring descriptor"
            f.close()
        except BaseException as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}"
        os.write(w, msg.encode())
        os._exit(0)
    os.close(w)
    msg = os.read(r, 1000).decode()
    os.close(r)
    os.waitpid(pid, 0)
    assert msg == "ok"
    np.testing.assert_array_equal(f.read(ids).numpy(), a[ids])  # the parent's ring still works
    f.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("cut", [0, 1000])  # at a block boundary, or mid-block
def test_file_truncated_after_open(tmp_path, engine, cut):
    a = np.arange(40_000 * 16, dtype=np.int32).reshape(40_000, 16)  # 64-byte rows, 2.5 MB
    path = _save(tmp_path / "a.npy", a)
    f = _direct(path, engine, queue_depth=4)
    np.testing.assert_array_equal(f.read([0, 39_999]).numpy(), a[[0, 39_999]])  # opened
    keep = 1 << 20
    os.truncate(path, keep + cut)
    head = np.arange(0, 16_000, 7)  # before the cut
    np.testing.assert_array_equal(f.read(head).numpy(), a[head])
    for ids in ([39_999], np.arange(0, 40_000, 13), [16_400]):
        with pytest.raises(DatasetError, match=rf"a\.npy: .*now has {keep + cut} bytes.*truncated"):
            f.read(ids)
    np.testing.assert_array_equal(f.read(head).numpy(), a[head])  # the engine is still usable
    f.close()


def test_read_errors_name_the_file_and_errno(tmp_path, engine, monkeypatch):
    a = np.zeros((100, 8), np.float32)
    path = _save(tmp_path / "a.npy", a)
    f = _direct(path, engine)
    bad = os.open(tmp_path, os.O_RDONLY)  # reads of a directory fail with EISDIR
    try:
        monkeypatch.setattr(f, "_file", lambda: bad)
        with pytest.raises(DatasetError, match=r"a\.npy: direct read failed .*Errno 21"):
            f.read([1, 50])
    finally:
        f.close()
        os.close(bad)


def _paged_npy(path, rows):
    """A .npy of 256-byte rows whose data starts at byte 4096: 16 rows a block, aligned."""
    header = "{'descr': '|u1', 'fortran_order': False, 'shape': (%d, 256), }" % rows
    header = header.ljust(4096 - 10 - 1) + "\n"
    data = (np.arange(rows * 256) % 251).astype(np.uint8).reshape(rows, 256)
    with open(path, "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode("latin1"))
        fh.write(data.tobytes())
    assert np.array_equal(np.load(path), data)
    return data


def test_stats_count_exactly(tmp_path, engine):
    data = _paged_npy(tmp_path / "p.npy", 16 * 20)
    f = _direct(tmp_path / "p.npy", engine, max_gap=8192)
    assert f.stats() == {"batches": 0, "reads": 0, "bytes_read": 0, "rows_read": 0,
                         "wait_s": 0.0, "rows_per_read": 0.0}

    def counts(ids):
        f.reset_stats()
        np.testing.assert_array_equal(f.read(ids).numpy(), data[ids])
        s = f.stats()
        assert s["batches"] == 1 and s["wait_s"] > 0
        return s["reads"], s["bytes_read"], s["rows_read"], s["rows_per_read"]

    assert counts(np.arange(16)) == (1, 4096, 16, 16.0)  # one block: one read
    assert counts(np.arange(16)[::-1].repeat(3)) == (1, 4096, 16, 16.0)  # the same, unsorted
    assert counts([0, 16, 17]) == (1, 8192, 3, 3.0)  # adjacent blocks
    assert counts([0, 48]) == (1, 16384, 2, 2.0)  # two blocks skipped: cheaper than a read
    assert counts([0, 64]) == (2, 8192, 2, 1.0)  # three: two reads
    f.max_gap = 0
    assert counts([0, 48]) == (2, 8192, 2, 1.0)
    f.reset_stats()
    assert f.stats()["reads"] == 0
    f.read(np.arange(0, 320, 16))  # 20 blocks, one row each, two batches
    f.read([5])
    s = f.stats()
    assert (s["batches"], s["reads"], s["rows_read"]) == (2, 2, 21)  # 20 adjacent blocks merge
    assert f.counters() == {"disk": f.stats()}
    f.reset_counters()
    assert f.stats()["reads"] == 0
    assert DiskFeature(tmp_path / "p.npy").counters() == {}  # the map counts nothing
    f.close()


@pytest.mark.skipif(not URING_OK, reason=URING_WHY)
def test_auto_uses_io_uring_where_available(tmp_path, caplog):
    path = _save(tmp_path / "a.npy", np.ones((10, 4), np.float32))
    disk_mod._announced.clear()
    with caplog.at_level(logging.INFO, logger="graphfeed.features"):
        f = DiskFeature(path, direct_io=True)
        assert f.engine == "uring"
        f.read([3])
        DiskFeature(path, direct_io=True).read([2])
    assert [r.getMessage() for r in caplog.records].count(
        f"direct reads use io_uring ({URING_WHY})") == 1  # once per process
    (ring,) = f._engines._idle
    assert isinstance(ring, _uring.Ring) and ring.ring_fd >= 0
    fd = ring.ring_fd
    f.close()
    assert ring.closed and ring.ring_fd == -1
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        target = None
    assert target != "anon_inode:[io_uring]"  # closed (or the number now names something else)
    np.testing.assert_array_equal(f.read([3]).numpy(), np.ones((1, 4), np.float32))  # reopens
    f.close()


def test_fallback_when_io_uring_is_unavailable(tmp_path, monkeypatch, caplog):
    a = np.arange(400, dtype=np.float32).reshape(100, 4)
    path = _save(tmp_path / "a.npy", a)
    monkeypatch.setattr(_uring, "probe", lambda: (False, "io_uring is not permitted here (test)"))
    disk_mod._announced.clear()
    with caplog.at_level(logging.INFO, logger="graphfeed.features"):
        f = DiskFeature(path, direct_io=True)
        assert f.engine == "threads"
        np.testing.assert_array_equal(f.read([5, 1]).numpy(), a[[5, 1]])
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "not permitted here (test)" in warned[0].getMessage()
    with pytest.raises(GraphfeedError, match="io_engine='uring'.*not permitted here"):
        DiskFeature(path, direct_io=True, io_engine="uring").read([1])
    f.close()


@pytest.mark.skipif(not URING_OK, reason=URING_WHY)
def test_a_ring_that_cannot_be_set_up(tmp_path, monkeypatch, caplog):
    a = np.arange(400, dtype=np.float32).reshape(100, 4)
    path = _save(tmp_path / "a.npy", a)

    def no_ring(*args, **kw):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr(_uring, "Ring", no_ring)
    disk_mod._announced.clear()
    with caplog.at_level(logging.WARNING, logger="graphfeed.features"):
        f = DiskFeature(path, direct_io=True)
        np.testing.assert_array_equal(f.read([5, 1]).numpy(), a[[5, 1]])
    assert f.engine == "threads" and "Errno 12" in caplog.records[0].getMessage()
    with pytest.raises(GraphfeedError, match="io_engine='uring'.*Errno 12"):
        DiskFeature(path, direct_io=True, io_engine="uring").read([1])
    f.close()


def test_options_are_checked(tmp_path):
    path = _save(tmp_path / "a.npy", np.ones((10, 4), np.float32))
    with pytest.raises(GraphfeedError,
                       match=r"io_engine must be one of \['auto', 'uring', 'threads'\]"):
        DiskFeature(path, io_engine="aio")
    with pytest.raises(GraphfeedError, match="queue_depth"):
        DiskFeature(path, queue_depth=0)
    with pytest.raises(GraphfeedError, match="max_read"):
        DiskFeature(path, max_read=100)
    with pytest.raises(GraphfeedError, match="max_gap"):
        DiskFeature(path, max_gap=-1)
