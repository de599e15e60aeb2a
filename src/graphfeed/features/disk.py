"""Features on disk: a memory-mapped ``.npy`` read row by row, or read directly with ``pread``.

The memory-mapped path keeps its data in the OS page cache, which every process on the machine
shares (one copy per machine under DDP). The direct path (``direct_io=True``) opens the file with
``O_DIRECT`` and reads only the 4 KiB blocks that hold the requested rows, coalescing nearby blocks
into larger reads; it is for features far larger than RAM, where the page cache would thrash.

The gather kernels here are also used by the LMDB store and the cache.
"""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from .._numba import kernel
from ..errors import DatasetError, GraphfeedError
from .base import Feature

#: Batches smaller than this many rows are gathered on the calling thread.
PARALLEL_MIN_ROWS = 4096
#: O_DIRECT needs file offsets, lengths and buffer addresses aligned to the logical block size;
#: 4096 covers every common device.
DIRECT_ALIGN = 4096

_TORCH_DTYPES = {
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}


def torch_dtype(dtype: np.dtype, *, source: str = "array") -> torch.dtype:
    """The torch dtype of a numpy dtype, or a ``DatasetError`` naming ``source``."""
    dtype = np.dtype(dtype)
    try:
        return _TORCH_DTYPES[dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype]
    except KeyError:
        raise DatasetError(f"{source}: dtype {dtype} cannot be a feature (no torch equivalent)") from None


def word_dtype(row_nbytes: int) -> np.dtype:
    """The widest unsigned integer type that divides a row, so kernels copy words, not bytes."""
    for w in (8, 4, 2):
        if row_nbytes % w == 0:
            return np.dtype(f"u{w}")
    return np.dtype(np.uint8)


# ---------------------------------------------------------------------------------------- kernels
@kernel
def gather_rows(src, ids, out, start, end):
    """``out[i] = src[ids[i]]`` for ``i`` in ``[start, end)``; ``src``/``out`` are 2-D word arrays."""
    w = src.shape[1]
    for i in range(start, end):
        r = ids[i]
        for j in range(w):
            out[i, j] = src[r, j]


@kernel
def gather_rows_sorted(src, ids, order, out, start, end):
    """``out[order[k]] = src[ids[order[k]]]`` for ``k`` in ``[start, end)``: visits rows in the
    order given by ``order`` (ascending ids), so the reads walk the file forwards."""
    w = src.shape[1]
    for k in range(start, end):
        i = order[k]
        r = ids[i]
        for j in range(w):
            out[i, j] = src[r, j]


@kernel
def gather_rows_at(src_u8, offsets, which, out_u8, start, end):
    """``out_u8[i] = src_u8[offsets[which[i]] : offsets[which[i]] + row_nbytes]``: rows addressed
    by byte offsets into one flat buffer (direct reads, LMDB chunks)."""
    nb = out_u8.shape[1]
    for i in range(start, end):
        o = offsets[which[i]]
        for j in range(nb):
            out_u8[i, j] = src_u8[o + j]


@kernel
def gather_chunked(src_u8, chunk_off, ids, rows_per_chunk, out_u8, start, end):
    """Rows stored in chunks: row ``r`` starts at element ``chunk_off[r // rows_per_chunk] +
    (r % rows_per_chunk) * row_len`` of the flat ``src_u8`` (LMDB values inside one map span);
    ``src_u8``/``out_u8`` may be viewed as wider words (offsets then count words)."""
    nb = out_u8.shape[1]
    for i in range(start, end):
        r = ids[i]
        c = r // rows_per_chunk
        o = chunk_off[c] + (r - c * rows_per_chunk) * nb
        for j in range(nb):
            out_u8[i, j] = src_u8[o + j]


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
    """``(dtype, shape, fortran_order, data_offset)`` of a ``.npy`` file, without unpickling."""
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:  # pragma: no cover - numpy rejects unknown versions in read_magic
                raise ValueError(f"unsupported .npy version {version}")
            offset = f.tell()
    except (ValueError, OSError, EOFError) as e:
        raise DatasetError(f"{path}: not a valid .npy file ({e})") from None
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise DatasetError(f"{path}: object dtype arrays are not allowed (they need pickle)")
    if len(shape) == 0:
        raise DatasetError(f"{path}: a feature needs at least one dimension (rows), got a scalar")
    if fortran and len(shape) > 1 and int(np.prod(shape[1:])) > 1:
        raise DatasetError(f"{path}: Fortran-ordered arrays cannot be read by row; save it C-ordered")
    if dtype.byteorder == ">":
        raise DatasetError(f"{path}: big-endian dtype {dtype} is not supported; convert it first")
    expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = path.stat().st_size
    if size < expected:
        raise DatasetError(f"{path}: file is truncated ({size} bytes, header promises {expected})")
    return dtype, tuple(int(s) for s in shape), bool(fortran), offset


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


def _split(n: int, parts: int) -> list[tuple[int, int]]:
    step = -(-n // parts)
    return [(s, min(n, s + step)) for s in range(0, n, step)]


def _aligned_empty(nbytes: int, align: int = DIRECT_ALIGN) -> np.ndarray:
    raw = np.empty(nbytes + align, dtype=np.uint8)
    shift = (-raw.ctypes.data) % align
    return raw[shift : shift + nbytes]


class DiskFeature(Feature):
    """Rows of a ``.npy`` file on disk; reads touch only the requested rows.

    - ``path``: a C-ordered ``.npy`` file (opened without pickle; object dtypes are refused).
    - ``num_threads``: threads that gather one large batch (the kernels release the GIL).
    - ``direct_io``: read with ``O_DIRECT`` ``pread`` calls (bypassing the page cache) instead of
      a memory map; falls back to buffered ``pread`` with one warning where the filesystem refuses
      ``O_DIRECT`` (tmpfs).
    - ``sort_ids``: visit rows in ascending id order (helps a cold page cache read ahead; costs an
      argsort per batch, so it is off by default for the in-page-cache case).

    The memory map opens lazily in each process (safe after fork; picklable for spawn).
    Memory: none of its own beyond the output; the page cache holds what was read.
    """

    kind = "disk"

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        num_threads: int = 2,
        direct_io: bool = False,
        sort_ids: bool = False,
        max_gap: int = 64 * 1024,
        max_read: int = 4 * 1024 * 1024,
    ):
        self.path = Path(path)
        self._np_dtype, self._shape, _, self._offset = read_npy_header(self.path)
        self._dtype = torch_dtype(self._np_dtype, source=str(self.path))
        if int(num_threads) < 1:
            raise GraphfeedError(f"num_threads must be >= 1, got {num_threads}")
        self.num_threads = int(num_threads)
        self.direct_io = bool(direct_io)
        self.sort_ids = bool(sort_ids)
        self.max_gap = int(max_gap)
        self.max_read = max(int(max_read), DIRECT_ALIGN)
        self._row_nbytes = int(np.prod(self._shape[1:], dtype=np.int64)) * self._np_dtype.itemsize
        self._word = word_dtype(self._row_nbytes) if self._row_nbytes else np.dtype(np.uint8)
        self._reset_process_state()

    # -------------------------------------------------------------- per-process state
    def _reset_process_state(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._words: Optional[np.ndarray] = None
        self._fd: Optional[int] = None
        self._direct_active = False
        self._pool: Optional[ThreadPoolExecutor] = None

    def __getstate__(self):
        state = self.__dict__.copy()
        for k in ("_lock", "_words", "_fd", "_pool", "_pid", "_direct_active"):
            state.pop(k, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset_process_state()

    def _check_pid(self) -> None:
        if self._pid != os.getpid():  # forked: the parent's pool threads and fd are not ours
            self._reset_process_state()

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="gf-disk")
        return self._pool

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
        """Release the memory map, file descriptor and threads (reopened on the next read)."""
        with self._lock:
            if self._pid == os.getpid():
                if self._fd is not None:
                    os.close(self._fd)
                if self._pool is not None:
                    self._pool.shutdown(wait=True)
            self._words = None
            self._fd = None
            self._pool = None

    def drop_page_cache(self) -> bool:
        """Unmap the file and drop it from the page cache (cold-read benchmarks); the next read
        maps it again. Call it while no read is running."""
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
    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    def _out(self, n: int, out: Optional[torch.Tensor]) -> torch.Tensor:
        if out is None:
            out = torch.empty((n, *self._shape[1:]), dtype=self._dtype)
        return out

    def _out_words(self, out: torch.Tensor, word: np.dtype) -> np.ndarray:
        return out.view(torch.uint8).numpy().reshape(out.shape[0], -1).view(word)

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
        self._check_pid()
        n = int(ids.shape[0])
        out = self._out(n, out)
        if n == 0 or self._row_nbytes == 0:
            return out
        if self.direct_io:
            self._read_direct(ids.numpy(), out)
            return out
        src = self._map()
        ids_np = ids.numpy()
        dst = self._out_words(out, self._word)
        if self.sort_ids:
            order = np.argsort(ids_np, kind="stable")
            self._run(n, lambda s, e: gather_rows_sorted(src, ids_np, order, dst, s, e))
        else:
            self._run(n, lambda s, e: gather_rows(src, ids_np, dst, s, e))
        return out

    def _run(self, n: int, fn) -> None:
        if n < PARALLEL_MIN_ROWS or self.num_threads == 1:
            fn(0, n)
            return
        futs = [self._executor().submit(fn, s, e) for s, e in _split(n, self.num_threads)]
        for f in futs:
            f.result()

    # -------------------------------------------------------------- direct reads
    def _read_direct(self, ids_np: np.ndarray, out: torch.Tensor) -> None:
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
        path = self.path

        def read_ranges(a: int, b: int) -> None:
            for r in range(a, b):
                o, want, pos = int(rstart[r]), int(rlen[r]), int(buf_off[r])
                got = 0
                while got < want:
                    k = os.preadv(fd, [mv[pos + got : pos + want]], o + got)
                    if k == 0:
                        break  # end of file: the last block is short; the rows are complete
                    got += k

        if nr >= 8 and self.num_threads > 1:
            futs = [self._executor().submit(read_ranges, a, b) for a, b in _split(nr, self.num_threads)]
            for f in futs:
                f.result()
        else:
            read_ranges(0, nr)
        if not np.all(row_off + self._row_nbytes <= buf.shape[0]):  # pragma: no cover
            raise DatasetError(f"{path}: short read")
        dst = out.view(torch.uint8).numpy().reshape(out.shape[0], self._row_nbytes)
        which = inverse.astype(np.int64, copy=False).reshape(-1)
        self._run(len(which), lambda s, e: gather_rows_at(buf, row_off, which, dst, s, e))

    def __repr__(self) -> str:
        mode = "direct" if self.direct_io else "mmap"
        return f"DiskFeature({str(self.path)!r}, shape={self.shape}, dtype={self.dtype}, {mode})"
