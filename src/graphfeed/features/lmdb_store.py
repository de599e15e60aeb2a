"""Features in an LMDB environment: rows stored in fixed-size chunks, read zero-copy.

Layout: key ``graphfeed-meta`` holds JSON metadata (format version, dtype, shape,
rows_per_chunk); key ``struct.pack(">Q", c)`` holds the raw bytes of rows
``[c * rows_per_chunk, (c + 1) * rows_per_chunk)`` (the last chunk may be shorter). Big-endian keys
sort in chunk order, so building appends.

A batched read groups ids by chunk inside one read transaction, fetches each chunk once as a
zero-copy buffer into LMDB's memory map, and gathers the rows with a nogil numba kernel. Many
readers (threads and processes) can read at once; each process opens the environment lazily.

A store in a folder this process cannot write (a read-only mount, a dataset shared by another
user) opens read-only without a lock file; :func:`open_or_build` then never tries to build or
lock anything there. A build writes into a hidden ``.<name>.tmp-*`` sibling that it holds a
``flock`` on; a later build removes the ones whose builder died (killed mid-build) and says so on
the ``graphfeed.features`` logger.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import struct
import threading
import time
from concurrent.futures import Executor
from pathlib import Path
from typing import Callable, Iterable, Optional, Union

import numpy as np
import torch

from .._checks import check_int
from .._io import atomic_dir, file_lock, load_npy
from .._threads import ChunkPool, run_chunks
from .._units import format_bytes
from ..errors import DatasetError, GraphfeedError, MissingDependencyError
from ._gather import gather_chunked
from ._rows import (PARALLEL_MIN_ROWS, StoredFeature, held_as_bits, numpy_rows, torch_dtype,
                    word_dtype)
from .base import as_id_tensor, check_id_range

FORMAT_VERSION = 1
META_KEY = b"graphfeed-meta"
#: Rows per LMDB value. Reads fetch whole chunks as zero-copy buffers, so large chunks cost
#: nothing per row read; they cut the per-chunk Python overhead of a batch (measured: 1024 rows
#: of 400 bytes keeps a 150k-id batch over 1M rows at ~1k chunk lookups).
DEFAULT_CHUNK_BYTES = 1 << 19  # ~512 KiB per value
DEFAULT_MAP_SIZE = 1 << 40  # virtual reservation only; LMDB grows the file as needed
#: Inside a temporary build folder: the builder holds an exclusive ``flock`` on it for the whole
#: build and writes ``pid host`` into it (for the message when a later build removes the folder).
BUILD_CLAIM = ".graphfeed-build"
#: A temporary build folder without a claim file (left by a graphfeed that did not write one, or
#: killed between creating the folder and claiming it) is stale once this old.
UNCLAIMED_STALE_S = 60.0

log = logging.getLogger("graphfeed.features")


def _lmdb():
    try:
        import lmdb
    except ImportError:
        raise MissingDependencyError(
            package="lmdb", extra="lmdb", purpose="LMDBFeature (features stored in LMDB)"
        ) from None
    return lmdb


def _check_path(name: str, path) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise GraphfeedError(f"{name} must be a str or os.PathLike, got {type(path).__name__}")


def _check_rows_per_chunk(rows_per_chunk) -> Optional[int]:
    """``None`` (the default, about 512 KiB a chunk) or an int ``>= 1``: ``0`` is not the
    default, ``"5"`` not a count."""
    return None if rows_per_chunk is None else check_int("rows_per_chunk", rows_per_chunk, 1)


def _chunk_key(c: int) -> bytes:
    return struct.pack(">Q", c)


def default_rows_per_chunk(row_nbytes: int) -> int:
    """About ``DEFAULT_CHUNK_BYTES`` per chunk, at least 1 row, a power of two."""
    r = max(1, DEFAULT_CHUNK_BYTES // max(1, row_nbytes))
    return 1 << (r.bit_length() - 1)


class _RawBytes:
    """A numpy view of ``n`` bytes at address ``addr``, through the array interface. (A ctypes
    ``c_ubyte * n`` type per read would be a new type object each time: cyclic garbage that
    only the cycle collector frees.) Flagged writable so the gather kernel keeps one compiled
    variant; nothing writes to it."""

    __slots__ = ("__array_interface__",)

    def __init__(self, addr: int, n: int):
        self.__array_interface__ = {
            "data": (addr, False), "shape": (n,), "typestr": "|u1", "version": 3,
        }


def _buffer_address(buf) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data if len(buf) else 0


# One environment per store folder and process: LMDB (and py-lmdb) refuse to open the same
# environment twice in a process. Entries: real path -> [env, users].
_ENVS: dict[str, list] = {}
_ENVS_PID = os.getpid()
_ENVS_LOCK = threading.Lock()
# Releases a finaliser could not do itself: ``__del__`` may run from a garbage collection that
# started inside a ``with _ENVS_LOCK`` block of this very thread, where waiting for the
# (non-reentrant) lock would deadlock and mutating ``_ENVS`` would corrupt the block's work. It
# appends here (atomic under the GIL) and applies the releases only if the lock is free at once;
# otherwise the next holder of the lock applies them.
_DEFERRED_RELEASES: list = []


def _apply_deferred_releases() -> None:
    """With ``_ENVS_LOCK`` held: the releases finalisers deferred."""
    while _DEFERRED_RELEASES:
        _release_key(_DEFERRED_RELEASES.pop())


def _forget_inherited_envs() -> None:
    """In a forked child: close the environments inherited from the parent (LMDB forbids using
    them there, and they would block reopening). Closing is safe because no read transaction
    outlives a read (``max_spare_txns=0``), so no reader slot of the parent's is released.
    Do not fork in the middle of a read."""
    global _ENVS_PID
    if _ENVS_PID != os.getpid():
        for env, _ in _ENVS.values():
            try:
                env.close()
            except Exception:  # pragma: no cover - best effort
                pass
        _ENVS.clear()
        _ENVS_PID = os.getpid()


def folder_writable(path: Path) -> bool:
    """Whether this process may create files in folder ``path`` (False on a read-only mount
    (``EROFS``) or without write permission)."""
    return os.access(path, os.W_OK)


def _acquire_env(path: Path):
    lmdb = _lmdb()
    key = os.path.realpath(path)
    with _ENVS_LOCK:
        _forget_inherited_envs()
        _apply_deferred_releases()
        entry = _ENVS.get(key)
        if entry is None:
            # Opened writable where the folder is (update() needs it; readers never take the
            # write lock); with the lock file readers register themselves, so an update() in
            # another process never recycles pages they are reading.
            writable = folder_writable(path)
            kw = dict(subdir=True, create=False, readahead=False, max_readers=1024,
                      max_spare_txns=0,  # no reader slot survives a read (fork-safe)
                      mode=0o666)  # lock.mdb follows the umask (py-lmdb's default is 0o644)
            try:
                if writable:
                    env = lmdb.open(str(path), readonly=False, lock=True, map_size=DEFAULT_MAP_SIZE, **kw)
                else:  # read-only filesystem: no lock file possible, so no concurrent writers
                    env = lmdb.open(str(path), readonly=True, lock=False, **kw)
            except lmdb.Error as e:
                raise DatasetError(f"{path}: cannot open LMDB store ({e})") from None
            entry = _ENVS[key] = [env, 0]
        entry[1] += 1
        return entry[0]


def _release_env(path: Path) -> None:
    with _ENVS_LOCK:
        if _ENVS_PID != os.getpid():
            return
        _apply_deferred_releases()
        _release_key(os.path.realpath(path))


def _release_key(key: str) -> None:
    """With ``_ENVS_LOCK`` held: one user fewer; the environment closes with its last user."""
    entry = _ENVS.get(key)
    if entry is None:
        return
    entry[1] -= 1
    if entry[1] <= 0:
        del _ENVS[key]
        entry[0].close()


class _ChunkTable:
    """Where every chunk of a store lies in this process's LMDB map, for one snapshot.

    A batch then needs no per-chunk lookups: its read transaction checks that it sees the same
    snapshot (``txn.id()``: a store nobody writes keeps one id forever) in the same
    environment, and the gather kernel reads rows straight out of the map. Built with one
    ``get`` per chunk (about 2 microseconds each) the first time, and again after a write.

    - ``chunk_off``: offset of each chunk from ``lo`` (in words when ``word`` is set);
    - ``lo``/``span``: the address and length of the map range that holds every chunk;
    - ``word``: the unsigned word dtype the rows are copied as, or ``None`` (bytes) where a
      chunk does not start on a word boundary.
    """

    __slots__ = ("env", "txn_id", "lo", "span", "chunk_off", "word")

    @classmethod
    def build(cls, feature: "LMDBFeature", env, txn) -> "_ChunkTable":
        rpc, nb = feature.rows_per_chunk, feature._row_nbytes
        num_chunks = -(-feature.num_rows // rpc)
        addrs = np.empty(num_chunks, dtype=np.int64)
        ends = np.empty(num_chunks, dtype=np.int64)
        get = txn.get
        for c in range(num_chunks):
            b = get(_chunk_key(c))
            rows = min(rpc, feature.num_rows - c * rpc)
            if b is None or len(b) != rows * nb:
                got = "missing" if b is None else f"{len(b)} bytes, expected {rows * nb}"
                raise DatasetError(f"{feature.path}: chunk {c} is {got}")
            addrs[c] = _buffer_address(b)
            ends[c] = addrs[c] + len(b)
        t = cls()
        t.env, t.txn_id = env, txn.id()
        t.lo = int(addrs.min())
        t.span = int(ends.max()) - t.lo
        t.chunk_off = addrs - t.lo
        w = word_dtype(nb)
        t.word = None
        if w.itemsize > 1 and t.lo % w.itemsize == 0 and not np.any(t.chunk_off % w.itemsize):
            t.word = w
            t.span -= t.span % w.itemsize
            t.chunk_off //= w.itemsize
        return t


class LMDBFeature(StoredFeature):
    """Rows read from an LMDB store written by :meth:`build`.

    ``readonly=True`` opens without a write lock (any number of processes); :meth:`update` needs
    ``readonly=False``. The environment opens lazily in each process, so the object can be
    created before ``fork`` or pickled to spawned workers. Opening validates the metadata (format
    version, dtype, shape, chunking) and raises ``DatasetError`` naming the store otherwise.
    ``num_threads`` gathers one large batch when ``read`` gets no ``executor``. ``dtype``: the
    rows' dtype where the store holds the bits of one numpy lacks (``"bfloat16"`` over uint16
    bits; :func:`._rows.torch_dtype`).
    """

    kind = "lmdb"
    _process_state = ("_env", "_lock", "_table")

    def __init__(self, path: str | os.PathLike, *, readonly: bool = True, num_threads: int = 2,
                 dtype=None):
        _check_path("path", path)
        if not isinstance(readonly, bool):
            raise GraphfeedError(f"readonly must be True or False, got {type(readonly).__name__}")
        self.path = Path(path)
        self.readonly = readonly
        self._pool = ChunkPool(check_int("num_threads", num_threads, 1), "gf-lmdb")
        _lmdb()  # fail early and clearly when the extra is missing
        if not (self.path / "data.mdb").is_file():
            raise DatasetError(f"{self.path}: not an LMDB feature store (no data.mdb)")
        self._init_process_state()
        meta = self._read_meta()
        self._meta = meta
        self._set_layout(meta["dtype"], meta["shape"], str(self.path), dtype)
        self.rows_per_chunk = int(meta["rows_per_chunk"])

    # -------------------------------------------------------------- per-process state
    def _open_process_state(self) -> None:
        self._env = None
        self._lock = threading.Lock()
        self._table: Optional[_ChunkTable] = None

    def env(self):
        """This process's LMDB environment for the store (opened on first use, shared by every
        ``LMDBFeature`` of the same folder in the process, reopened after ``fork``)."""
        self._check_process()
        if self._env is None:
            with self._lock:
                if self._env is None:
                    self._env = _acquire_env(self.path)
        return self._env

    def close(self) -> None:
        """Release this object's use of the environment (closed when no user is left) and its
        threads. Idempotent; a later read opens the environment again."""
        self._check_process()  # a forked child: the parent's environment is not ours to release
        with self._lock:
            if self._env is not None:
                _release_env(self.path)
            self._env = None
            self._table = None
        self._pool.close()

    def __del__(self):
        # never wait for _ENVS_LOCK here (see _DEFERRED_RELEASES): a collection may have started
        # while this very thread holds it. Free: release now; held (by anyone): defer.
        try:
            if self._env is None or self._pid != os.getpid():
                return
            _DEFERRED_RELEASES.append(os.path.realpath(self.path))
            if _ENVS_LOCK.acquire(blocking=False):
                try:
                    _apply_deferred_releases()
                finally:
                    _ENVS_LOCK.release()
        except Exception:
            pass

    def _read_meta(self) -> dict:
        with self.env().begin(buffers=False) as txn:
            raw = txn.get(META_KEY)
        if raw is None:
            raise DatasetError(f"{self.path}: LMDB store has no graphfeed metadata")
        try:
            meta = json.loads(raw.decode("utf-8"))
            version = int(meta["format_version"])
            dtype = np.dtype(str(meta["dtype"]))
            shape = [int(s) for s in meta["shape"]]
            rpc = int(meta["rows_per_chunk"])
        except (ValueError, KeyError, TypeError) as e:
            raise DatasetError(f"{self.path}: malformed LMDB metadata ({e})") from None
        if version != FORMAT_VERSION:
            raise DatasetError(
                f"{self.path}: LMDB store format version {version}, this graphfeed reads {FORMAT_VERSION}"
            )
        if dtype.hasobject or len(shape) < 1 or min(shape) < 0 or rpc < 1:
            raise DatasetError(
                f"{self.path}: invalid metadata dtype={dtype} shape={shape} rows_per_chunk={rpc}"
            )
        num_chunks = -(-shape[0] // rpc)
        stat = self.env().stat()
        if stat["entries"] != num_chunks + 1:
            raise DatasetError(
                f"{self.path}: store holds {stat['entries'] - 1} chunks, metadata promises {num_chunks}"
            )
        return meta

    # -------------------------------------------------------------- Feature
    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor],
              executor: Optional[Executor]) -> torch.Tensor:
        n = int(ids.shape[0])
        out = self._output(n, out)
        if n == 0 or self._row_nbytes == 0:
            return out
        env = self.env()
        ids_np = ids.numpy()
        with env.begin(buffers=True) as txn:
            # the read transaction pins its snapshot: the table's addresses stay valid until
            # it ends, and they are the table's own snapshot's when the ids match
            table = self._table
            if table is None or table.env is not env or table.txn_id != txn.id():
                table = self._table = _ChunkTable.build(self, env, txn)
            base = np.asarray(_RawBytes(table.lo, table.span))
            dst = out.view(torch.uint8).numpy().reshape(n, self._row_nbytes)
            if table.word is not None:
                base, dst = base.view(table.word), dst.view(table.word)
            chunk_off = table.chunk_off
            run_chunks(
                lambda s, e: gather_chunked(base, chunk_off, ids_np, self.rows_per_chunk, dst,
                                            s, e),
                n, self.num_threads, self._executor(executor), serial_below=PARALLEL_MIN_ROWS)
            del base
        return out

    # -------------------------------------------------------------- writes
    def update(self, ids, rows) -> None:
        """Overwrite rows ``ids`` with ``rows`` (shape ``(len(ids), *row_shape)``) in ONE write
        transaction: readers see all of the update or none of it, also after a crash. ``rows``
        are values (a tensor or array), converted to the store's dtype."""
        if self.readonly:
            raise GraphfeedError(f"{self.path}: opened readonly; use LMDBFeature(path, readonly=False)")
        ids = as_id_tensor(ids).numpy()
        check_id_range(torch.from_numpy(ids), self.num_rows, what=f"LMDB store {self.path}")
        if held_as_bits(self._dtype) and not isinstance(rows, torch.Tensor):
            rows = torch.as_tensor(np.asarray(rows))  # values, converted by torch (bfloat16)
        if isinstance(rows, torch.Tensor):
            rows = numpy_rows(rows.to(self._dtype))[0]  # a dtype numpy lacks: its bits
        else:
            rows = np.asarray(rows)
        want = (ids.shape[0], *self._shape[1:])
        if tuple(rows.shape) != want:
            raise GraphfeedError(f"rows must have shape {want}, got {tuple(rows.shape)}")
        rows = np.ascontiguousarray(rows.astype(self._np_dtype, copy=False))
        rpc = self.rows_per_chunk
        chunks = np.unique(ids // rpc)
        with self.env().begin(write=True) as txn:
            for c in chunks.tolist():
                raw = txn.get(_chunk_key(c))
                if raw is None:
                    raise DatasetError(f"{self.path}: chunk {c} is missing")
                block = np.frombuffer(raw, dtype=self._np_dtype).reshape(-1, *self._shape[1:]).copy()
                sel = np.nonzero(ids // rpc == c)[0]
                block[ids[sel] - c * rpc] = rows[sel]  # later duplicates win, like numpy
                txn.put(_chunk_key(c), block.tobytes())

    @classmethod
    def build(
        cls,
        path: str | os.PathLike,
        source: Union[np.ndarray, torch.Tensor, str, os.PathLike, Iterable[np.ndarray]],
        *,
        rows_per_chunk: Optional[int] = None,
        map_size: Optional[int] = None,
        overwrite: bool = False,
        readonly: bool = True,
        dtype=None,
    ) -> "LMDBFeature":
        """Write a store at ``path`` from an array, a ``.npy`` path (memory-mapped, streamed) or an
        iterable of row blocks (each ``(k, *row_shape)``, same dtype; the total is counted).
        ``dtype``: the rows' dtype where the source holds the bits of one numpy lacks
        (``"bfloat16"`` over uint16 bits; a bfloat16 tensor says so itself); the store keeps the
        bits, and opening it again takes the same ``dtype``.

        The store is written into a hidden temporary folder and renamed into place only when
        complete, so an interrupted build never leaves a store that opens.
        ``rows_per_chunk`` defaults to about 512 KiB per chunk.
        """
        _check_path("path", path)
        for name, v in (("overwrite", overwrite), ("readonly", readonly)):
            if not isinstance(v, bool):
                raise GraphfeedError(f"{name} must be True or False, got {type(v).__name__}")
        rows_per_chunk = _check_rows_per_chunk(rows_per_chunk)
        if map_size is not None:
            map_size = check_int("map_size", map_size, 1)
        lmdb = _lmdb()
        path = Path(path)
        with _ENVS_LOCK:
            if os.path.realpath(path) in _ENVS and _ENVS_PID == os.getpid():
                raise GraphfeedError(f"{path}: the store is open in this process; close it before rebuilding")
        if path.parent.is_dir() and not folder_writable(path.parent):
            raise DatasetError(f"{path.parent}: read-only, cannot build an LMDB store there")
        remove_stale_builds(path)
        blocks, first, named = _as_blocks(source)
        dtype = named if dtype is None else dtype
        row_shape = tuple(first.shape[1:])
        np_dtype = first.dtype
        torch_dtype(np_dtype, source=str(path), as_dtype=dtype)
        row_nbytes = int(np.prod(row_shape, dtype=np.int64)) * np_dtype.itemsize
        rpc = rows_per_chunk if rows_per_chunk is not None else default_rows_per_chunk(row_nbytes)
        with atomic_dir(path, overwrite=overwrite, markers=("data.mdb",)) as tmp, \
                _claim_build(tmp):
            env = lmdb.open(
                str(tmp), map_size=int(map_size or DEFAULT_MAP_SIZE), subdir=True,
                readahead=False, sync=False, metasync=False, max_dbs=0,
            )
            try:
                total = 0
                pending = np.empty((0, *row_shape), dtype=np_dtype)
                chunk = 0
                txn = env.begin(write=True)
                try:
                    for block in blocks:
                        block = np.ascontiguousarray(block)
                        if block.dtype != np_dtype or tuple(block.shape[1:]) != row_shape:
                            raise GraphfeedError(
                                f"row block of dtype {block.dtype} shape {block.shape} does not match "
                                f"the first block ({np_dtype}, rows {row_shape})"
                            )
                        total += block.shape[0]
                        if pending.shape[0]:
                            block = np.concatenate([pending, block])
                        full = (block.shape[0] // rpc) * rpc
                        for s in range(0, full, rpc):
                            txn.put(_chunk_key(chunk), block[s : s + rpc].tobytes(), append=True)
                            chunk += 1
                            if chunk % 256 == 0:  # bound the dirty pages of one transaction
                                txn.commit()
                                txn = env.begin(write=True)
                        pending = np.array(block[full:])
                    if pending.shape[0]:
                        txn.put(_chunk_key(chunk), pending.tobytes(), append=True)
                        chunk += 1
                    meta = {
                        "format_version": FORMAT_VERSION,
                        "dtype": np_dtype.str,
                        "shape": [total, *row_shape],
                        "rows_per_chunk": rpc,
                    }
                    txn.put(META_KEY, json.dumps(meta).encode("utf-8"))
                    txn.commit()
                except BaseException:
                    txn.abort()
                    raise
                env.sync(True)
            finally:
                env.close()
            lock = tmp / "lock.mdb"
            if lock.exists():
                lock.unlink()
        return cls(path, readonly=readonly, dtype=dtype)

    def __repr__(self) -> str:
        return (
            f"LMDBFeature({str(self.path)!r}, shape={self.shape}, dtype={self.dtype}, "
            f"rows_per_chunk={self.rows_per_chunk})"
        )


def _as_blocks(source):
    """``(iterator of row blocks, first block, dtype name of a tensor numpy holds as bits or
    None)`` for any supported ``build`` source."""
    named = None
    if isinstance(source, (str, os.PathLike)):
        source = load_npy(source, mmap=True)
    if isinstance(source, torch.Tensor):
        source, named = numpy_rows(source)
    if isinstance(source, np.ndarray):
        if source.ndim == 0:
            raise GraphfeedError("a feature needs at least one dimension (rows)")
        if source.dtype.hasobject:
            raise GraphfeedError("object arrays cannot be features")
        step = max(1, (64 << 20) // max(1, source[:1].nbytes))  # ~64 MiB blocks
        blocks = (source[s : s + step] for s in range(0, source.shape[0], step))
        first = source[:0]
        return blocks, first, named
    it = iter(source)
    try:
        first = np.asarray(next(it))
    except StopIteration:
        raise GraphfeedError("cannot build a store from an empty iterable of row blocks") from None
    if first.ndim == 0 or first.dtype.hasobject:
        raise GraphfeedError(f"row blocks must be numeric arrays with a row axis, got {first.dtype} {first.shape}")

    def chain():
        yield first
        yield from it

    return chain(), first[:0], named


@contextlib.contextmanager
def _claim_build(tmp: Path):
    """Hold an exclusive ``flock`` on ``tmp/BUILD_CLAIM`` while building in ``tmp``: the kernel
    drops it when the builder dies, however it dies, which is how a later build tells a
    leftover from a build in progress (also for another host's builder on NFS, where a pid
    would mean nothing). The file goes before the folder is published."""
    import fcntl

    claim = tmp / BUILD_CLAIM
    fd = os.open(claim, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()} {socket.gethostname()}".encode())
        yield
        os.unlink(claim)
    finally:
        os.close(fd)


def _dead_builder(tmp: Path) -> Optional[str]:
    """Who left ``tmp`` (``"process 123 on host"``) if its builder is gone, else ``None``."""
    import fcntl

    claim = tmp / BUILD_CLAIM
    try:
        fd = os.open(claim, os.O_RDONLY)
    except FileNotFoundError:
        # no claim: an older graphfeed's leftover, or killed right after creating the folder
        age = time.time() - tmp.stat().st_mtime
        return "an unknown process" if age > UNCLAIMED_STALE_S else None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # its builder still runs
        pid, _, host = os.read(fd, 256).decode(errors="replace").partition(" ")
        return f"process {pid or '?'}" + (f" on {host}" if host else "")
    finally:
        os.close(fd)


def _folder_bytes(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


def remove_stale_builds(path: str | os.PathLike) -> list[Path]:
    """Remove the temporary folders (``.<name>.tmp-*`` beside ``path``) of builds whose builder
    died: a killed build leaves about one copy of the feature there, which nothing else would
    ever remove. Builds still running (their builder holds the folder's ``flock``) are left
    alone. Each removal is logged at WARNING on ``graphfeed.features``; returns the folders."""
    path = Path(path)
    removed = []
    try:
        candidates = sorted(path.parent.glob(f".{path.name}.tmp-*"))
    except OSError:
        return removed
    for tmp in candidates:
        try:
            if tmp.is_symlink() or not tmp.is_dir():
                continue
            who = _dead_builder(tmp)
        except OSError:
            continue  # vanished meanwhile, or unreadable: not ours to judge
        if who is None:
            continue
        size = _folder_bytes(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        if not tmp.exists():
            removed.append(tmp)
            log.warning("removed %s (%s) left by an interrupted LMDB build (%s, no longer running)",
                        tmp, format_bytes(size), who)
    return removed


def open_or_build(
    store_path: str | os.PathLike,
    source: str | os.PathLike,
    *,
    is_current: Callable[[LMDBFeature], bool] = lambda store: True,
    on_built: Optional[Callable[[], None]] = None,
    rows_per_chunk: Optional[int] = None,
    num_threads: int = 2,
    dtype=None,
) -> LMDBFeature:
    """The LMDB copy of ``.npy`` file ``source`` at ``store_path``: opened if it exists and
    ``is_current(store)``, else (re)built from ``source`` (then ``on_built()`` runs).
    ``dtype``: as :class:`LMDBFeature`'s (``"bfloat16"`` for a file of bf16 bits).

    - A writable folder: check-then-build runs under a ``flock`` on ``.<name>.lock`` beside the
      store, so several processes opening it first build it once; leftovers of killed builds
      are removed (:func:`remove_stale_builds`).
    - A folder this process cannot write (read-only dataset): no lock file is created and
      nothing is built; an existing current store opens read-only (LMDB ``lock=False``). A
      missing or outdated store is a :class:`DatasetError` that says so.
    """
    store_path, source = Path(store_path), Path(source)
    folder = store_path.parent
    if folder.is_dir() and not folder_writable(folder):
        if not (store_path / "data.mdb").is_file():
            raise DatasetError(
                f"{store_path}: no LMDB store here, and {folder} is read-only so none can be "
                "built; build it once where the folder is writable, or use the disk backend"
            )
        store = LMDBFeature(store_path, num_threads=num_threads, dtype=dtype)
        if not is_current(store):
            store.close()
            raise DatasetError(
                f"{store_path}: the LMDB store does not match {source}, and {folder} is "
                "read-only so it cannot be rebuilt"
            )
        return store
    with file_lock(folder / f".{store_path.name}.lock"):
        if store_path.exists():
            store = None
            try:
                store = LMDBFeature(store_path, num_threads=num_threads, dtype=dtype)
                if is_current(store):
                    return store
            except DatasetError:
                pass
            if store is not None:
                store.close()
        if not source.is_file():
            raise DatasetError(f"{source}: file not found (needed to build {store_path})")
        LMDBFeature.build(store_path, source, rows_per_chunk=rows_per_chunk, overwrite=True,
                          dtype=dtype).close()
        if on_built is not None:
            on_built()
        return LMDBFeature(store_path, num_threads=num_threads, dtype=dtype)



# ------------------------------------------------------------------ the "lmdb" backend of a .npy
#: beside the LMDB files: which .npy (size, mtime) the store was built from
SOURCE_FILE = "graphfeed-source.json"


def lmdb_path_for(npy_path: str | os.PathLike) -> Path:
    """Where the LMDB copy of ``<dir>/<name>.npy`` lives: ``<dir>/<name>.lmdb/``."""
    p = Path(npy_path)
    return p.with_name(p.stem + ".lmdb")


def _fingerprint(npy_path: Path) -> dict:
    st = npy_path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _built_from(store: LMDBFeature, npy_path: Path) -> bool:
    """Same shape and dtype, and (for stores built by :func:`open_npy`) built from this very
    file version."""
    from .disk import read_npy_header

    dtype, shape, _, _ = read_npy_header(npy_path)
    if store.shape != shape or store._np_dtype != dtype:
        return False
    side = store.path / SOURCE_FILE
    if not side.exists():
        return True  # a store the user built: nothing to compare against
    try:
        return json.loads(side.read_text()) == _fingerprint(npy_path)
    except (OSError, ValueError):
        return False


def _record_source(store_path: Path, npy_path: Path) -> None:
    tmp = store_path / (SOURCE_FILE + ".tmp")
    tmp.write_text(json.dumps(_fingerprint(npy_path)))
    os.replace(tmp, store_path / SOURCE_FILE)


def open_npy(
    npy_path: str | os.PathLike,
    *,
    lmdb_path: Optional[str | os.PathLike] = None,
    rows_per_chunk: Optional[int] = None,
    num_threads: int = 2,
    dtype=None,
) -> LMDBFeature:
    """The ``"lmdb"`` backend: the LMDB copy of ``npy_path`` at ``lmdb_path`` (default
    :func:`lmdb_path_for`), built on first use and rebuilt when the ``.npy`` changed (shape,
    dtype, or the size and mtime recorded at the build). ``dtype``: as :class:`LMDBFeature`'s
    (``"bfloat16"`` for a file of bf16 bits)."""
    _check_path("npy_path", npy_path)
    if lmdb_path is not None:
        _check_path("lmdb_path", lmdb_path)
    rows_per_chunk = _check_rows_per_chunk(rows_per_chunk)
    check_int("num_threads", num_threads, 1)
    path = Path(npy_path)
    store_path = Path(lmdb_path) if lmdb_path is not None else lmdb_path_for(path)
    # several ranks may open the same store first: one builds, the others wait and reuse it;
    # a read-only dataset folder opens an existing store without a lock file
    return open_or_build(store_path, path, rows_per_chunk=rows_per_chunk, num_threads=num_threads,
                         dtype=dtype, is_current=lambda s: _built_from(s, path),
                         on_built=lambda: _record_source(store_path, path))
