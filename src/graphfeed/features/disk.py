"""Features on disk: a memory-mapped ``.npy`` read row by row, or read directly, many reads at once.

The memory-mapped path keeps its data in the OS page cache, which every process on the machine
shares (one copy per machine under DDP). The direct path (``direct_io=True``) opens the file with
``O_DIRECT`` and reads only the 4 KiB blocks that hold the requested rows; it is for features far
larger than RAM, where the page cache would thrash, and it reads at the drive's random-read rate:

1. plan (:func:`coalesce_blocks`): the distinct rows, sorted, become one read per run of needed
   blocks; rows that share a block share its read, and two runs merge only when the blocks
   between them cost less to read than one more request (``max_gap``, below);
2. read (:mod:`._uring`): ``queue_depth`` reads in flight at once, through io_uring where the
   kernel allows (``io_engine="uring"``), else through as many threads blocking in ``pread``
   (``"threads"``); each read's rows are copied out as it completes, from a fixed set of
   reused buffers (no allocation proportional to the batch's blocks).

Why ``max_gap`` is 8 KiB: a read costs a fixed time plus its bytes at the drive's bandwidth, so
merging two runs is cheaper than two requests while the skipped bytes take less than that fixed
time to transfer. fio's random reads on this project's VM disk at queue depth 64: 4 KiB 86-90k/s,
8 KiB 66-68k/s, 16 KiB 45-51k/s, 32 KiB 30-35k/s, 64 KiB 16-18k/s (about 1.1 GB/s), which fits
7.5 us + 0.9 us per KiB: two runs break even about 8 KiB apart (a fast NVMe drive, 1M IOPS at 6
GB/s, near 6 KiB). Measured on DiskFeature itself (``benchmarks/disk_reads.py``, 256-byte rows,
100k-row batches of a 16M-row file), rows/s at max_gap 0, 4, 8, 16, 64 KiB: 92k, 94k, 98k, 106k,
86k; 16 KiB gains 8% over 8 KiB for 1.5x the bytes (ascending reads favour this VM's disk), the
old 64 KiB loses 12% for 3.3x. ``max_read`` (128 KiB) caps a merged read: the bandwidth
saturates from 32-64 KiB requests, and the buffers are ``queue_depth`` reads of that size.

The row-copy kernels live in :mod:`._gather` (shared with the LMDB store and the cache).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from concurrent.futures import Executor
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .._checks import check_int
from .._io import npy_header
from .._numba import kernel
from .._threads import ChunkPool, run_chunks
from ..errors import DatasetError, GraphfeedError
from . import _uring
from ._gather import copy_rows
from ._rows import PARALLEL_MIN_ROWS, StoredFeature, gather_words, word_dtype, word_view

__all__ = ["DiskFeature", "read_npy_header", "drop_page_cache", "coalesce_blocks",
           "DIRECT_ALIGN", "PARALLEL_MIN_ROWS", "IO_ENGINES", "DEFAULT_QUEUE_DEPTH",
           "DEFAULT_MAX_GAP", "DEFAULT_MAX_READ"]

log = logging.getLogger("graphfeed.features")

#: O_DIRECT needs file offsets, lengths and buffer addresses aligned to the logical block size;
#: 4096 covers every common device.
DIRECT_ALIGN = _uring.ALIGN
#: How direct reads reach the drive: ``"auto"`` (io_uring where available, else threads),
#: ``"uring"`` (io_uring or an error saying why not), ``"threads"`` (``pread`` from
#: ``queue_depth`` threads).
IO_ENGINES = ("auto", "uring", "threads")
#: Direct reads in flight at once. fio on the project's VM disk: 4 KiB random reads 17k/s at
#: depth 1, 61k/s at 8, 82k/s at 32, 88k/s at 64, 94k/s at 128 (the latency grows with it);
#: DiskFeature there (100k-row batches, 7 KiB reads): 60k/s at 32, 71k/s at 64, 77k/s at 128.
#: 64 holds 8 MiB of buffers per reading thread; a drive that wants more takes ``queue_depth``.
DEFAULT_QUEUE_DEPTH = 64
#: Needed blocks at most this many bytes apart share one read (see the module docstring).
DEFAULT_MAX_GAP = 8 * 1024
#: The longest merged read (a row longer than this still gets one read).
DEFAULT_MAX_READ = 128 * 1024

_STAT_KEYS = ("batches", "reads", "bytes_read", "rows_read", "wait_s")
_announced: set = set()  # (pid, message): what this process has said about its engine


# ---------------------------------------------------------------------------------------- kernels
@kernel
def coalesce_blocks(uniq_ids, data_offset, row_nbytes, align, max_gap, max_len,
                    range_start, range_len, first_row, row_off):
    """Plan direct reads for sorted unique row ids; O(rows), no allocation.

    Each row covers the aligned blocks ``[floor(start/align), ceil(end/align))``. A row whose
    first block is at most ``max_gap`` bytes past the end of the current read joins it (so rows
    sharing a block, or in adjacent blocks, always do) while the read stays at most ``max_len``
    bytes; otherwise it starts a new read (a single row longer than ``max_len`` gets its own).
    Writes the reads into ``range_start`` / ``range_len`` (file offsets and lengths, multiples of
    ``align``), the index of each read's first row into ``first_row`` (read ``r`` holds rows
    ``first_row[r]`` to ``first_row[r + 1]``; ``len(uniq_ids) + 1`` entries) and each row's
    byte offset inside its read into ``row_off``. Returns the number of reads.
    """
    n = uniq_ids.shape[0]
    nr = 0
    cur_s = -1
    cur_e = -1
    for i in range(n):
        s = data_offset + uniq_ids[i] * row_nbytes
        e = s + row_nbytes
        bs = (s // align) * align
        be = ((e + align - 1) // align) * align
        if cur_s >= 0 and bs <= cur_e + max_gap and be - cur_s <= max_len:
            if be > cur_e:
                cur_e = be
        else:
            if cur_s >= 0:
                range_start[nr] = cur_s
                range_len[nr] = cur_e - cur_s
                nr += 1
            cur_s = bs
            cur_e = be
            first_row[nr] = i
        row_off[i] = s - cur_s
    if cur_s >= 0:
        range_start[nr] = cur_s
        range_len[nr] = cur_e - cur_s
        nr += 1
    first_row[nr] = n
    return nr


@kernel
def _strictly_increasing(ids):
    for i in range(1, ids.shape[0]):
        if ids[i] <= ids[i - 1]:
            return False
    return True


# ---------------------------------------------------------------------------------------- helpers
def read_npy_header(path: Path) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, data_offset)`` of a ``.npy`` file that can be read by row
    (:func:`graphfeed._io.npy_header`, plus a feature's refusals: scalars, Fortran order,
    big-endian dtypes)."""
    dtype, shape, fortran, offset = npy_header(path)
    if len(shape) == 0:
        raise DatasetError(f"{path}: a feature needs at least one dimension (rows), got a scalar")
    if fortran and len(shape) > 1 and int(np.prod(shape[1:])) > 1:
        raise DatasetError(f"{path}: Fortran-ordered arrays cannot be read by row; save it C-ordered")
    if dtype.byteorder == ">":
        raise DatasetError(f"{path}: big-endian dtype {dtype} is not supported; convert it first")
    return dtype, shape, fortran, offset


def drop_page_cache(path: str | os.PathLike) -> bool:
    """Ask the kernel to drop ``path``'s pages from the page cache (``POSIX_FADV_DONTNEED``).

    Pages still mapped by a live memory map are kept by the kernel; close maps first. Returns
    False where ``posix_fadvise`` is unavailable.
    """
    if not hasattr(os, "posix_fadvise"):
        return False
    fd = os.open(os.fspath(path), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return True


def _say_once(level: int, message: str) -> None:
    key = (os.getpid(), message)
    if key not in _announced:
        _announced.add(key)
        log.log(level, message)


class _EnginePool:
    """The direct-read engines of one feature in one process: a batch takes one (a new one when
    all are busy, so each thread reading at once has its own ring) and gives it back.
    ``close()`` closes the idle ones at once and the busy ones when they come back."""

    def __init__(self):
        self._lock = threading.Lock()
        self._idle: list = []
        self._generation = 0

    def take(self, make):
        with self._lock:
            if self._idle:
                return self._idle.pop(), self._generation
            generation = self._generation
        return make(), generation

    def give(self, engine, generation: int) -> None:
        with self._lock:
            if generation == self._generation and not engine.closed:
                self._idle.append(engine)
                return
        engine.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
            self._generation += 1
        for e in idle:
            e.close()


class DiskFeature(StoredFeature):
    """Rows of a ``.npy`` file on disk; reads touch only the requested rows.

    - ``path``: a C-ordered ``.npy`` file (opened without pickle; object dtypes are refused).
    - ``num_threads``: threads that gather one large batch (the kernels release the GIL) when
      ``read`` gets no ``executor``; with one, its chunks run there, split ``num_threads`` ways.
    - ``direct_io``: read with ``O_DIRECT`` (bypassing the page cache) instead of through a
      memory map, ``queue_depth`` reads at once (module docstring); falls back to buffered reads
      with one warning where the filesystem refuses ``O_DIRECT`` (tmpfs). ``"auto"`` (the
      default): direct when the file is larger than half the memory this process may still
      use (``graphfeed._memory.reclaimable_memory``, a memory cgroup's limit included), where
      a memory map would only thrash the page cache; through the map otherwise, where the page
      cache keeps what was read.
    - ``queue_depth`` (direct reads): reads in flight at once (default 64; the drive's rate
      grows with it up to its internal parallelism, and so does each read's latency).
    - ``io_engine`` (direct reads): ``"auto"`` (default: io_uring where the kernel allows it,
      else threads), ``"uring"`` (io_uring, or a ``GraphfeedError`` saying why it is not
      available), ``"threads"`` (``queue_depth`` threads blocking in ``pread``). Which engine
      ``"auto"`` picked, and why, is logged once per process on ``graphfeed.features``;
      :attr:`engine` tells it.
    - ``max_gap`` / ``max_read`` (direct reads, bytes): needed blocks at most ``max_gap`` apart
      share one read of at most ``max_read`` (defaults 8 KiB and 128 KiB, from the measured cost
      of a read against its bytes: module docstring).
    - ``sort_ids``: visit rows in ascending id order (helps a cold page cache read ahead; costs an
      argsort per batch, so it is off by default for the in-page-cache case).
    - ``dtype``: the rows' dtype where the file holds the bits of one numpy lacks
      (``"bfloat16"`` for a uint16 file; a dataset's metadata says so), see
      :func:`._rows.torch_dtype`.

    Direct reads cost: the sort of the distinct ids (skipped when they already are sorted and
    distinct, as a cache's misses are), one O(rows) planning pass, then per read about 0.3 us
    of CPU here and 3-4 us in the kernel (io_uring; fio spends 5-6 us), about twice that with
    threads, with the GIL released for the whole batch; each thread reading at once holds
    ``queue_depth * max_read`` bytes of buffers (8 MiB by default), plus, for unsorted or
    repeated ids, one row per distinct id. :meth:`stats` counts what reached the drive.

    The memory map, descriptor, rings and threads open lazily in each process (safe after fork:
    a forked child never uses its parent's ring; picklable for spawn). ``close()`` releases them;
    a later read reopens them. Memory: none of its own beyond the output and the read buffers;
    the page cache holds what the map read.
    """

    kind = "disk"
    _process_state = ("_lock", "_words", "_fd", "_direct_active", "_engines", "_engine_name",
                      "_stats_lock")

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        num_threads: int = 2,
        direct_io="auto",
        sort_ids: bool = False,
        max_gap: int = DEFAULT_MAX_GAP,
        max_read: int = DEFAULT_MAX_READ,
        queue_depth: int = DEFAULT_QUEUE_DEPTH,
        io_engine: str = "auto",
        dtype=None,
    ):
        if not isinstance(path, (str, os.PathLike)):
            raise GraphfeedError(f"path must be a str or os.PathLike to a .npy file, got "
                                 f"{type(path).__name__}")
        if not isinstance(sort_ids, bool):
            raise GraphfeedError(f"sort_ids must be True or False, got {type(sort_ids).__name__}")
        self.path = Path(path)
        np_dtype, shape, _, self._offset = read_npy_header(self.path)
        self._set_layout(np_dtype, shape, str(self.path), dtype)
        self._pool = ChunkPool(check_int("num_threads", num_threads, 1), "gf-disk")
        if direct_io == "auto":
            from .._memory import reclaimable_memory

            avail = reclaimable_memory()
            direct_io = avail is not None and self._shape[0] * self._row_nbytes > avail // 2
        elif not isinstance(direct_io, bool):
            raise GraphfeedError(f"direct_io must be True, False or 'auto', got {direct_io!r}")
        self.direct_io = direct_io
        self.sort_ids = sort_ids
        self.max_gap = check_int("max_gap", max_gap, 0)
        self.max_read = check_int("max_read", max_read, DIRECT_ALIGN)
        self.queue_depth = check_int("queue_depth", queue_depth, 1, 4096)
        if io_engine not in IO_ENGINES:
            raise GraphfeedError(f"io_engine must be one of {list(IO_ENGINES)}, got {io_engine!r}")
        self.io_engine = io_engine
        self._io_pool = ChunkPool(self.queue_depth, "gf-pread")
        self._word = word_dtype(self._row_nbytes) if self._row_nbytes else np.dtype(np.uint8)
        # a read slot holds a merged read or one row's blocks, whichever is longer
        row_span = (-(-self._row_nbytes // DIRECT_ALIGN) + 1) * DIRECT_ALIGN
        self._slot_size = -(-max(self.max_read, row_span) // DIRECT_ALIGN) * DIRECT_ALIGN
        self._data_end = self._offset + self._shape[0] * self._row_nbytes
        self._counts = dict.fromkeys(_STAT_KEYS, 0)
        self._init_process_state()

    # -------------------------------------------------------------- per-process state
    def _open_process_state(self) -> None:
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._words: Optional[np.ndarray] = None
        self._fd: Optional[int] = None
        self._direct_active = False
        self._engines = _EnginePool()
        self._engine_name: Optional[str] = None

    def _map(self) -> np.ndarray:
        if self._words is None:
            with self._lock:
                if self._words is None:
                    n = self._shape[0]
                    wpr = self._row_nbytes // self._word.itemsize
                    if n == 0 or wpr == 0:
                        self._words = np.zeros((n, wpr), dtype=self._word)
                    else:
                        self._words = np.memmap(
                            self.path, dtype=self._word, mode="r", offset=self._offset, shape=(n, wpr)
                        )
        return self._words

    def _file(self) -> int:
        if self._fd is None:
            with self._lock:
                if self._fd is None:
                    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
                    odirect = getattr(os, "O_DIRECT", 0)
                    fd = -1
                    if odirect:
                        try:
                            fd = os.open(self.path, flags | odirect)
                            self._direct_active = True
                        except OSError:
                            fd = -1
                    if fd < 0:
                        warnings.warn(
                            f"{self.path}: O_DIRECT is not supported here; direct_io uses "
                            "buffered reads (through the page cache)",
                            RuntimeWarning,
                            stacklevel=5,
                        )
                        fd = os.open(self.path, flags)
                    self._fd = fd
        return self._fd

    @property
    def engine(self) -> str:
        """The engine direct reads use in this process, ``"uring"`` or ``"threads"`` (resolved
        from ``io_engine`` on first use; a ``GraphfeedError`` for ``"uring"`` where io_uring is
        not available)."""
        self._check_process()
        if self._engine_name is None:
            ok, why = _uring.probe()
            if self.io_engine == "threads":
                name = "threads"
                _say_once(logging.INFO, "direct reads use threads blocking in pread "
                                        "(io_engine='threads')")
            elif ok:
                name = "uring"
                _say_once(logging.INFO, f"direct reads use io_uring ({why})")
            elif self.io_engine == "uring":
                raise GraphfeedError(f"io_engine='uring' for {self.path}: {why}")
            else:
                name = "threads"
                _say_once(logging.WARNING, f"direct reads use threads blocking in pread, not "
                                           f"io_uring: {why}")
            self._engine_name = name
        return self._engine_name

    def _make_engine(self):
        fd = self._file()
        args = (fd, self.queue_depth, self._slot_size, self._data_end, self._direct_active)
        if self.engine == "uring":
            try:
                return _uring.Ring(*args)
            except OSError as e:  # the probe's ring was small: memlock (before 5.12), limits
                why = f"a ring of {self.queue_depth} entries failed: [Errno {e.errno}] {e.strerror}"
                if self.io_engine == "uring":
                    raise GraphfeedError(f"io_engine='uring' for {self.path}: {why}") from e
                _say_once(logging.WARNING, f"direct reads use threads blocking in pread, not "
                                           f"io_uring: {why}")
                self._engine_name = "threads"
        return _uring.ThreadReads(*args)

    def close(self) -> None:
        """Release the memory map, file descriptor, rings and threads (reopened on the next
        read). Idempotent; in a forked child it releases only the child's own. A ring still
        reading in another thread is closed when that read ends."""
        self._check_process()
        self._engines.close()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
            self._words = None
            self._fd = None
        self._pool.close()
        self._io_pool.close()

    def drop_page_cache(self) -> bool:
        """Unmap the file and drop it from the page cache (cold-read benchmarks); the next read
        maps it again. Call it while no read is running."""
        self._check_process()
        with self._lock:
            self._words = None  # numpy unmaps when the last view goes
        return drop_page_cache(self.path)

    def __del__(self):
        try:
            if self._pid == os.getpid():
                self._engines.close()
                if self._fd is not None:
                    os.close(self._fd)
        except Exception:
            pass

    # -------------------------------------------------------------- statistics
    def stats(self) -> dict:
        """What direct reads asked of the drive since construction or :meth:`reset_stats`:
        ``batches`` (direct reads of at least one row), ``reads`` (requests issued, a retried
        short read counting again), ``bytes_read`` (bytes requested: whole blocks),
        ``rows_read`` (distinct rows), ``wait_s`` (seconds spent reading, summed over the
        threads that read at once: planning and sorting not included), ``rows_per_read``.
        Reads through the memory map count nothing (the page cache does them)."""
        with self._stats_lock:
            out = dict(self._counts)
        out["rows_per_read"] = out["rows_read"] / out["reads"] if out["reads"] else 0.0
        return out

    def reset_stats(self) -> None:
        with self._stats_lock:
            self._counts = dict.fromkeys(_STAT_KEYS, 0)

    def counters(self) -> dict:
        """``{"disk": stats()}`` for direct reads, ``{}`` through the map (which counts
        nothing): the shape every feature's ``counters()`` has, keyed by kind."""
        return {"disk": self.stats()} if self.direct_io else {}

    def reset_counters(self) -> None:
        self.reset_stats()

    # -------------------------------------------------------------- Feature
    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        self._check_process()
        n = int(ids.shape[0])
        out = self._output(n, out)
        if n == 0 or self._row_nbytes == 0:
            return out
        executor = self._executor(executor)
        if self.direct_io:
            self._read_direct(ids.numpy(), out, executor)
            return out
        src = self._map()
        ids_np = ids.numpy()
        if not self.sort_ids:
            gather_words(src, ids_np, out, self.num_threads, executor)
            return out
        order = np.argsort(ids_np, kind="stable")
        sorted_ids = ids_np[order]
        dst = word_view(out, self._word)
        run_chunks(lambda s, e: copy_rows(src, sorted_ids, dst, order, s, e), n,
                   self.num_threads, executor, serial_below=PARALLEL_MIN_ROWS)
        return out

    # -------------------------------------------------------------- direct reads
    def _read_direct(self, ids_np: np.ndarray, out: torch.Tensor,
                     executor: Optional[Executor]) -> None:
        """Plan the distinct rows' reads, run them on an engine, copy rows to ``out``."""
        nb = self._row_nbytes
        out_bytes = out.view(torch.uint8).numpy().reshape(out.shape[0], nb)
        if _strictly_increasing(ids_np):  # a cache's misses: rows land in ``out`` directly
            uniq, inverse, dst = ids_np, None, out_bytes
        else:
            uniq, inverse = np.unique(ids_np, return_inverse=True)
            dst = np.empty((uniq.shape[0], nb), dtype=np.uint8)
        m = uniq.shape[0]
        rstart = np.empty(m, dtype=np.int64)
        rlen = np.empty(m, dtype=np.int64)
        first_row = np.empty(m + 1, dtype=np.int64)
        row_off = np.empty(m, dtype=np.int64)
        nr = coalesce_blocks(uniq, self._offset, nb, DIRECT_ALIGN, self.max_gap, self.max_read,
                             rstart, rlen, first_row, row_off)
        rstart, rlen, first_row = rstart[:nr], rlen[:nr], first_row[:nr + 1]
        assert int(rlen.max()) <= self._slot_size
        engine, generation = self._engines.take(self._make_engine)
        t0 = time.perf_counter()
        try:
            if engine.name == "uring":
                issued, err = engine.run(rstart, rlen, first_row, row_off, dst)
            else:
                issued, err = engine.run(rstart, rlen, first_row, row_off, dst,
                                         self._io_pool.get())
        finally:
            self._engines.give(engine, generation)
        waited = time.perf_counter() - t0
        with self._stats_lock:
            c = self._counts
            c["batches"] += 1
            c["reads"] += issued
            c["bytes_read"] += int(rlen.sum())
            c["rows_read"] += m
            c["wait_s"] += waited
        if err[_uring.E_CODE]:
            raise self._read_error(err, rstart, rlen)
        if inverse is not None:
            gather_words(dst.view(self._word), inverse.reshape(-1).astype(np.int64, copy=False),
                         out, self.num_threads, executor)

    def _read_error(self, err: np.ndarray, rstart: np.ndarray, rlen: np.ndarray) -> DatasetError:
        code, r = int(err[_uring.E_CODE]), int(err[_uring.E_READ])
        where = (f"reading {int(rlen[r])} bytes at offset {int(rstart[r])} "
                 f"(got {int(err[_uring.E_GOT])})")
        if code == _uring.TRUNCATED:
            try:
                size = os.path.getsize(self.path) if self._fd is None else os.fstat(self._fd).st_size
            except OSError:
                size = -1
            return DatasetError(
                f"{self.path}: the file is shorter than its header says (the rows end at byte "
                f"{self._data_end}, the file now has {size} bytes): truncated or replaced after "
                f"it was opened; the end of the file came at byte {int(err[_uring.E_OFFSET])} "
                f"while {where}")
        return DatasetError(f"{self.path}: direct read failed while {where}: "
                            f"[Errno {code}] {os.strerror(code)}")

    def __repr__(self) -> str:
        mode = (f"direct, queue_depth={self.queue_depth}, io_engine={self.io_engine!r}"
                if self.direct_io else "mmap")
        return f"DiskFeature({str(self.path)!r}, shape={self.shape}, dtype={self.dtype}, {mode})"
