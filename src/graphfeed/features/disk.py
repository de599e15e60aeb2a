"""Features on disk: a memory-mapped ``.npy`` read row by row, or read directly with ``pread``.

The memory-mapped path keeps its data in the OS page cache, which every process on the machine
shares (one copy per machine under DDP). The direct path (``direct_io=True``) opens the file with
``O_DIRECT`` and reads only the 4 KiB blocks that hold the requested rows, coalescing nearby blocks
into larger reads; it is for features far larger than RAM, where the page cache would thrash.

The row-copy kernels live in :mod:`._gather` (shared with the LMDB store and the cache).
"""

from __future__ import annotations

import os
import threading
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
from ..errors import DatasetError
from ._gather import copy_rows, gather_rows_at
from ._rows import PARALLEL_MIN_ROWS, StoredFeature, gather_words, word_dtype, word_view

__all__ = ["DiskFeature", "read_npy_header", "drop_page_cache", "coalesce_blocks",
           "DIRECT_ALIGN", "PARALLEL_MIN_ROWS"]

#: Direct reads planned into fewer ranges than this are issued on the calling thread.
PARALLEL_MIN_RANGES = 8
#: O_DIRECT needs file offsets, lengths and buffer addresses aligned to the logical block size;
#: 4096 covers every common device.
DIRECT_ALIGN = 4096

# ---------------------------------------------------------------------------------------- kernels
@kernel
def coalesce_blocks(uniq_ids, data_offset, row_nbytes, align, max_gap, max_len,
                    range_start, range_len, row_off):
    """Plan direct reads for sorted unique row ids.

    Each row covers the aligned blocks ``[floor(start/align), ceil(end/align))``; rows whose
    blocks are at most ``max_gap`` bytes apart share one read of at most ``max_len`` bytes (a
    single row longer than that gets its own read). Writes the reads into ``range_start`` /
    ``range_len`` (file offsets and lengths, multiples of ``align``) and, for each row, its byte
    offset in the concatenation of all reads into ``row_off``. Returns the number of reads.
    """
    n = uniq_ids.shape[0]
    nr = 0
    buf_base = 0  # offset in the concatenated buffer where the current read starts
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
                buf_base += cur_e - cur_s
                nr += 1
            cur_s = bs
            cur_e = be
        row_off[i] = buf_base + (s - cur_s)
    if cur_s >= 0:
        range_start[nr] = cur_s
        range_len[nr] = cur_e - cur_s
        nr += 1
    return nr


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


def _aligned_empty(nbytes: int, align: int = DIRECT_ALIGN) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    shift = (-raw.ctypes.data) % align
    return raw[shift : shift + nbytes]


class DiskFeature(StoredFeature):
    """Rows of a ``.npy`` file on disk; reads touch only the requested rows.

    - ``path``: a C-ordered ``.npy`` file (opened without pickle; object dtypes are refused).
    - ``num_threads``: threads that gather one large batch (the kernels release the GIL) when
      ``read`` gets no ``executor``; with one, its chunks run there, split ``num_threads`` ways.
    - ``direct_io``: read with ``O_DIRECT`` ``pread`` calls (bypassing the page cache) instead of
      a memory map; falls back to buffered ``pread`` with one warning where the filesystem refuses
      ``O_DIRECT`` (tmpfs).
    - ``sort_ids``: visit rows in ascending id order (helps a cold page cache read ahead; costs an
      argsort per batch, so it is off by default for the in-page-cache case).
    - ``dtype``: the rows' dtype where the file holds the bits of one numpy lacks
      (``"bfloat16"`` for a uint16 file; a dataset's metadata says so), see
      :func:`._rows.torch_dtype`.

    The memory map opens lazily in each process (safe after fork; picklable for spawn).
    ``close()`` releases the map, the descriptor and the threads; a later read reopens them.
    Memory: none of its own beyond the output; the page cache holds what was read.
    """

    kind = "disk"
    _process_state = ("_lock", "_words", "_fd", "_direct_active")

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        num_threads: int = 2,
        direct_io: bool = False,
        sort_ids: bool = False,
        max_gap: int = 64 * 1024,
        max_read: int = 4 * 1024 * 1024,
        dtype=None,
    ):
        self.path = Path(path)
        np_dtype, shape, _, self._offset = read_npy_header(self.path)
        self._set_layout(np_dtype, shape, str(self.path), dtype)
        self._pool = ChunkPool(check_int("num_threads", num_threads, 1), "gf-disk")
        self.direct_io = bool(direct_io)
        self.sort_ids = bool(sort_ids)
        self.max_gap = int(max_gap)
        self.max_read = max(int(max_read), DIRECT_ALIGN)
        self._word = word_dtype(self._row_nbytes) if self._row_nbytes else np.dtype(np.uint8)
        self._init_process_state()

    # -------------------------------------------------------------- per-process state
    def _open_process_state(self) -> None:
        self._lock = threading.Lock()
        self._words: Optional[np.ndarray] = None
        self._fd: Optional[int] = None
        self._direct_active = False

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
                            "buffered pread (reads go through the page cache)",
                            RuntimeWarning,
                            stacklevel=4,
                        )
                        fd = os.open(self.path, flags)
                    self._fd = fd
        return self._fd

    def close(self) -> None:
        """Release the memory map, file descriptor and threads (reopened on the next read).
        Idempotent; in a forked child it releases only the child's own."""
        self._check_process()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
            self._words = None
            self._fd = None
        self._pool.close()

    def drop_page_cache(self) -> bool:
        """Unmap the file and drop it from the page cache (cold-read benchmarks); the next read
        maps it again. Call it while no read is running."""
        self._check_process()
        with self._lock:
            self._words = None  # numpy unmaps when the last view goes
        return drop_page_cache(self.path)

    def __del__(self):
        try:
            if self._pid == os.getpid() and self._fd is not None:
                os.close(self._fd)
        except Exception:
            pass

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
        fd = self._file()
        uniq, inverse = np.unique(ids_np, return_inverse=True)
        m = uniq.shape[0]
        rstart = np.empty(m, dtype=np.int64)
        rlen = np.empty(m, dtype=np.int64)
        row_off = np.empty(m, dtype=np.int64)
        nr = coalesce_blocks(
            uniq, self._offset, self._row_nbytes, DIRECT_ALIGN, self.max_gap, self.max_read,
            rstart, rlen, row_off,
        )
        rstart, rlen = rstart[:nr], rlen[:nr]
        buf_off = np.zeros(nr + 1, dtype=np.int64)
        np.cumsum(rlen, out=buf_off[1:])
        buf = _aligned_empty(int(buf_off[-1]))
        mv = memoryview(buf)

        def read_ranges(a: int, b: int) -> None:
            for r in range(a, b):
                o, want, pos = int(rstart[r]), int(rlen[r]), int(buf_off[r])
                got = 0
                while got < want:
                    k = os.preadv(fd, [mv[pos + got : pos + want]], o + got)
                    if k == 0:
                        break  # end of file: the last block is short; the rows are complete
                    got += k

        run_chunks(read_ranges, nr, self.num_threads, executor, serial_below=PARALLEL_MIN_RANGES)
        if not np.all(row_off + self._row_nbytes <= buf.shape[0]):  # pragma: no cover
            raise DatasetError(f"{self.path}: short read")
        dst = out.view(torch.uint8).numpy().reshape(out.shape[0], self._row_nbytes)
        which = inverse.astype(np.int64, copy=False).reshape(-1)
        run_chunks(lambda s, e: gather_rows_at(buf, row_off, which, dst, s, e), len(which),
                   self.num_threads, executor, serial_below=PARALLEL_MIN_ROWS)

    def __repr__(self) -> str:
        mode = "direct" if self.direct_io else "mmap"
        return f"DiskFeature({str(self.path)!r}, shape={self.shape}, dtype={self.dtype}, {mode})"
