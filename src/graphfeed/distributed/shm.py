"""Shared-memory segments: files in ``/dev/shm`` mapped ``MAP_SHARED`` by every process.

Why plain files and not ``multiprocessing.shared_memory``: before Python 3.13 every process that
*attaches* a ``SharedMemory`` registers it with its own resource tracker, which unlinks it (and
warns about a "leak") when that process exits, while the other processes still use it. A file in
tmpfs opened with ``os.open`` and mapped with ``mmap`` has none of that: the kernel shares the
pages between every mapping (one physical copy; each process's PSS counts its share), and the
segment lives until it is unlinked *and* the last mapping is gone.

That last property gives the cleanup rule used by :mod:`graphfeed.distributed.sharing`: the
creator unlinks the name as soon as every local rank has mapped it. From then on nothing is left
in ``/dev/shm`` even if every process is SIGKILLed; the kernel frees the memory with the last
mapping. Between creation and that point, a segment is removed by its creator on exceptions,
``SIGTERM`` / ``SIGHUP`` and interpreter exit, and by :func:`graphfeed.distributed.launch`'s
parent (by run-id prefix) as a last resort.

Layout of a segment: a 4096-byte header (magic line + JSON table of ``name, dtype, shape,
offset``), then each array at a 4096-byte-aligned offset (page-aligned, so each array can be
``cudaHostRegister``-ed or ``madvise``-d on its own).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import mmap
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from ..errors import GraphfeedError

#: Every segment graphfeed creates is named ``graphfeed-<run id>-...``.
PREFIX = "graphfeed-"
#: Environment variable carrying the run id (set by ``launch``; agreed on by broadcast otherwise).
RUN_ID_ENV = "GRAPHFEED_RUN_ID"
#: Overrides the folder segments live in (default ``/dev/shm``, else the temp dir).
SHM_DIR_ENV = "GRAPHFEED_SHM_DIR"

_MAGIC = b"GRAPHFEED-SHM-1\n"
_HEADER = 4096
_ALIGN = 4096
_COPY_CHUNK = 64 << 20  # bytes copied per step (bounds the transient page-table footprint)


def shm_dir() -> Path:
    """Folder for segments: ``$GRAPHFEED_SHM_DIR``, else ``/dev/shm`` (tmpfs), else the temp dir
    (a regular file there is still shared through the page cache, but may be written back)."""
    env = os.environ.get(SHM_DIR_ENV)
    if env:
        return Path(env)
    d = Path("/dev/shm")
    if d.is_dir() and os.access(d, os.W_OK):
        return d
    return Path(tempfile.gettempdir())


def segment_path(run_id: str, name: str) -> Path:
    """``<shm dir>/graphfeed-<run_id>-<name>``; both parts must be safe file-name pieces."""
    for what, part in (("run id", run_id), ("segment name", name)):
        if not part or any(not (c.isalnum() or c in "-_.") for c in part) or part.startswith("."):
            raise GraphfeedError(f"{what} {part!r} must be non-empty [A-Za-z0-9._-]")
    return shm_dir() / f"{PREFIX}{run_id}-{name}"


def list_segments(run_id: Optional[str] = None) -> list[Path]:
    """Segments (and half-written temporaries) of ``run_id``, or of every graphfeed run."""
    d = shm_dir()
    stem = PREFIX + (f"{run_id}-" if run_id else "")
    try:
        names = os.listdir(d)
    except FileNotFoundError:
        return []
    return sorted(d / n for n in names if n.startswith(stem) or n.startswith("." + stem))


def remove_segments(run_id: str) -> list[Path]:
    """Unlink every segment of ``run_id`` (the launcher's last-resort cleanup); returns them.

    Processes that still map a segment keep their mapping; only the name goes away.
    """
    if not run_id:
        raise GraphfeedError("remove_segments needs a non-empty run id")
    removed = []
    for p in list_segments(run_id):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
            removed.append(p)
    return removed


# ---------------------------------------------------------------------------- cleanup registry
_live: set[str] = set()
_live_lock = threading.Lock()
_handlers_installed = False


def _unlink_live() -> None:
    with _live_lock:
        paths = list(_live)
        _live.clear()
    for p in paths:
        with contextlib.suppress(OSError):
            os.unlink(p)


def _install_cleanup() -> None:
    """On first use (never at import): unlink this process's live segments at exit and on
    SIGTERM / SIGHUP, then defer to the previous handler (default: exit with 128 + signum)."""
    global _handlers_installed
    if _handlers_installed:
        return
    _handlers_installed = True
    atexit.register(_unlink_live)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still applies
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        prev = signal.getsignal(sig)
        if prev is signal.SIG_IGN:
            continue

        def handler(signum, frame, _prev=prev):
            _unlink_live()
            if callable(_prev):
                return _prev(signum, frame)
            raise SystemExit(128 + signum)

        signal.signal(sig, handler)


def _register(path: Path) -> None:
    _install_cleanup()
    with _live_lock:
        _live.add(os.fspath(path))


def _unregister(path: Path) -> None:
    with _live_lock:
        _live.discard(os.fspath(path))


# ---------------------------------------------------------------------------- layout
def _layout(specs: Iterable[Tuple[str, np.dtype, tuple]]) -> Tuple[list, int]:
    table, off = [], _HEADER
    for name, dtype, shape in specs:
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise GraphfeedError(f"array {name!r}: object arrays cannot be shared")
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        table.append({"name": name, "dtype": dtype.str, "shape": list(map(int, shape)), "offset": off})
        off += -(-max(nbytes, 1) // _ALIGN) * _ALIGN
    return table, off


def _encode_header(table: list) -> bytes:
    body = json.dumps(table, separators=(",", ":")).encode()
    head = _MAGIC + len(body).to_bytes(8, "little") + body
    if len(head) > _HEADER:
        raise GraphfeedError(f"too many arrays for one segment ({len(table)})")
    return head


def _decode_header(buf, path: Path) -> list:
    if bytes(buf[: len(_MAGIC)]) != _MAGIC:
        raise GraphfeedError(f"{path}: not a graphfeed shared-memory segment")
    n = int.from_bytes(bytes(buf[len(_MAGIC) : len(_MAGIC) + 8]), "little")
    start = len(_MAGIC) + 8
    if n <= 0 or start + n > _HEADER:
        raise GraphfeedError(f"{path}: corrupt segment header")
    return json.loads(bytes(buf[start : start + n]).decode())


def _file_shared_ranges() -> list:
    """``(start, end)`` of this process's shared file mappings (``/proc/self/maps``)."""
    out = []
    try:
        with open("/proc/self/maps", "rb") as f:
            for line in f:
                parts = line.split()
                # address perms offset dev inode [path]; 's' = MAP_SHARED, inode 0 = anonymous
                if len(parts) >= 6 and parts[1][3:4] == b"s" and parts[4] != b"0":
                    lo, hi = parts[0].split(b"-")
                    out.append((int(lo, 16), int(hi, 16)))
    except OSError:
        return []
    return out


def _address_range(data):
    if isinstance(data, np.ndarray):
        return int(data.ctypes.data), int(data.nbytes)
    try:
        return int(data.data_ptr()), int(data.numel() * data.element_size())
    except AttributeError:
        return None


def _page_span(ptr: int, nbytes: int):
    page = mmap.PAGESIZE
    return ptr - ptr % page, -(-(ptr + nbytes) // page) * page


def in_shared_file_mapping(data) -> bool:
    """True if all of ``data`` (ndarray or CPU tensor) lies in ``MAP_SHARED`` file mappings
    (a memory-mapped dataset file, or a ``/dev/shm`` segment): every process mapping that file
    shares the same physical pages, so the data is already one copy per machine."""
    span = _address_range(data)
    if span is None or span[1] == 0:
        return False
    start, end = _page_span(*span)
    pos = start
    for lo, hi in sorted(r for r in _file_shared_ranges() if r[1] > start and r[0] < end):
        if lo > pos:
            return False
        pos = max(pos, hi)
    return pos >= end


def drop_file_pages(data) -> bool:
    """Drop the pages of ``data`` (ndarray or CPU tensor) from *this process's* page tables if,
    and only if, it lies entirely in shared file mappings (``MADV_DONTNEED``; the bytes stay in
    the file and the page cache and are faulted back in if read again). Used after copying out of
    a memory-mapped file, so that the copier's PSS does not count the source on top of the copy.
    Anything else (anonymous or private memory, where ``MADV_DONTNEED`` would lose data) is left
    alone. Returns whether pages were dropped."""
    import ctypes

    if not hasattr(mmap, "MADV_DONTNEED") or not in_shared_file_mapping(data):
        return False
    start, end = _page_span(*_address_range(data))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), mmap.MADV_DONTNEED) == 0


_drop_source_pages = drop_file_pages


class SharedArrays(Mapping[str, np.ndarray]):
    """Named numpy arrays in one shared-memory segment (a read-only mapping for attachers).

    Create with :meth:`create` (copies the given arrays in, then publishes the file under its
    final name atomically) or :meth:`attach`. The arrays stay valid as long as this object or any
    array taken from it is alive, even after :meth:`unlink`.
    """

    def __init__(self, path: Path, mm: mmap.mmap, table: list, *, owner: bool):
        self.path = Path(path)
        self._mmap = mm
        self._owner = owner
        self._arrays: Dict[str, np.ndarray] = {}
        for e in table:
            dtype = np.dtype(e["dtype"])
            shape = tuple(e["shape"])
            count = int(np.prod(shape, dtype=np.int64))
            a = np.frombuffer(mm, dtype=dtype, count=count, offset=e["offset"]).reshape(shape)
            self._arrays[e["name"]] = a

    # -- Mapping
    def __getitem__(self, name: str) -> np.ndarray:
        try:
            return self._arrays[name]
        except KeyError:
            raise KeyError(f"no shared array {name!r}; have {sorted(self._arrays)}") from None

    def __iter__(self):
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    @property
    def nbytes(self) -> int:
        return len(self._mmap)

    def __repr__(self) -> str:
        return f"SharedArrays({self.path.name}, {sorted(self._arrays)}, {self.nbytes} bytes)"

    # -- lifecycle
    @classmethod
    def create(cls, path: Path, arrays: Mapping[str, np.ndarray]) -> "SharedArrays":
        """Copy ``arrays`` into a new segment at ``path``; the name appears only when complete.

        File memory maps are copied in 64 MiB chunks and then dropped from this process's page
        tables, so the creator does not hold the data twice. The segment is registered for
        cleanup (exit, SIGTERM) until :meth:`unlink`. Raises ``FileExistsError`` if ``path``
        exists.
        """
        path = Path(path)
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
        table, size = _layout((k, a.dtype, a.shape) for k, a in arrays.items())
        head = _encode_header(table)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        _register(tmp)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, size)  # fail now (ENOSPC), not with SIGBUS later
            except (AttributeError, OSError) as e:
                if isinstance(e, OSError) and e.errno == 28:
                    raise GraphfeedError(
                        f"{path.parent}: not enough space for a {size}-byte shared segment"
                    ) from None
                os.ftruncate(fd, size)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        try:
            mm[: len(head)] = head
            out = cls(tmp, mm, table, owner=True)
            for k, a in arrays.items():
                dst = out._arrays[k].reshape(-1)
                src = np.ascontiguousarray(a).reshape(-1) if a.ndim != 1 else a
                step = max(1, _COPY_CHUNK // max(a.itemsize, 1))
                for i in range(0, src.shape[0], step):
                    dst[i : i + step] = src[i : i + step]
                _drop_source_pages(a)
            if os.path.lexists(path):
                raise FileExistsError(f"{path}: shared segment already exists")
            os.rename(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            _unregister(tmp)
            raise
        _unregister(tmp)
        _register(path)
        out.path = path
        for a in out._arrays.values():
            a.flags.writeable = False
        return out

    @classmethod
    def attach(cls, path: Path, *, writable_mapping: bool = False) -> "SharedArrays":
        """Map an existing segment (no copy). The arrays are read-only numpy arrays either way.

        ``writable_mapping=False`` maps it ``PROT_READ`` (a stray write faults). ``True`` maps it
        read-write at the OS level, which CUDA needs to page-lock it in place with default flags
        (``cudaHostRegister`` of a read-only mapping needs ``cudaHostRegisterReadOnly``, which
        not every device/driver supports).
        """
        path = Path(path)
        try:
            fd = os.open(path, os.O_RDWR if writable_mapping else os.O_RDONLY)
        except FileNotFoundError:
            raise GraphfeedError(f"{path}: shared segment not found (creator failed or exited?)") from None
        try:
            size = os.fstat(fd).st_size
            if size < _HEADER:
                raise GraphfeedError(f"{path}: truncated segment ({size} bytes)")
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable_mapping else 0)
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, prot)
        finally:
            os.close(fd)
        table = _decode_header(memoryview(mm)[:_HEADER], path)
        out = cls(path, mm, table, owner=False)
        for a in out._arrays.values():
            a.flags.writeable = False
        return out

    def unlink(self) -> None:
        """Remove the name (the mapping stays valid; memory is freed with the last mapping)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        _unregister(self.path)
