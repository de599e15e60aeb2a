"""Atomic, pickle-free file helpers shared by every writer and reader.

Writers go to a temporary sibling, fsync it, then ``os.replace`` it into place, so an interrupted
job never leaves a half-written file or folder under the final name. What they publish gets the
modes a plain ``open``/``mkdir`` would under the process umask (``tempfile`` creates 0600/0700,
which would make a dataset shared by a team readable only by its owner).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
import threading
import tokenize
from pathlib import Path
from typing import BinaryIO, Callable, Iterator, Optional

import numpy as np

from .errors import DatasetError, GraphfeedError


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so a rename inside it is durable (no-op where unsupported)."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_UMASK_LOCK = threading.Lock()


def process_umask() -> int:
    """The process umask. On Linux it is read from ``/proc/self/status`` without changing it;
    elsewhere it is set and restored under a lock, to 0o077 meanwhile, so a file another thread
    creates in that instant is at worst too private, never too open."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:  # pragma: no cover - not Linux (or no /proc)
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def umask_modes() -> tuple:
    """``(folder mode, file mode)`` that ``mkdir``/``open`` give under the current umask."""
    mask = process_umask()
    return 0o777 & ~mask, 0o666 & ~mask


def apply_umask(root: str | os.PathLike, *, fsync: bool = False) -> None:
    """Give folder ``root`` and everything below it the :func:`umask_modes` (symbolic links are
    neither followed nor changed); with ``fsync=True`` also fsync every regular file, in the
    same walk. O(number of entries)."""
    dmode, fmode = umask_modes()
    for dirpath, _dirs, files in os.walk(root):
        os.chmod(dirpath, dmode)
        for name in files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                continue  # a link, a FIFO, a socket: never opened here
            if stat.S_IMODE(st.st_mode) != fmode:
                os.chmod(p, fmode)
            if fsync:
                with open(p, "rb") as f:
                    os.fsync(f.fileno())


def atomic_write(path: str | os.PathLike, write: Callable[[BinaryIO], None], *,
                 fsync: bool = True) -> None:
    """Write ``path`` atomically: ``write(f)`` fills a temp file beside it (modes from the umask),
    which is fsynced and renamed over ``path``; on any failure the temp file is removed and
    ``path`` is untouched."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, umask_modes()[1])  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            if fsync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if fsync:
        fsync_dir(path.parent)


def save_npy(path: str | os.PathLike, array: np.ndarray, *, fsync: bool = True) -> None:
    """Write ``array`` to ``path`` as ``.npy`` via a temp file and an atomic rename."""
    array = np.asarray(array)
    if array.dtype == object:
        raise DatasetError(f"{path}: refusing to save an object array (it would need pickle)")
    atomic_write(path, lambda f: np.lib.format.write_array(f, np.ascontiguousarray(array),
                                                          allow_pickle=False), fsync=fsync)


_NOT_A_FILE = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular_file(path: str | os.PathLike, what: str = ".npy file") -> os.stat_result:
    """``os.stat(path)`` if ``path`` is a regular file (or a link to one); else a
    ``DatasetError`` naming ``path`` and saying what it is: missing, a broken link, a folder, a
    FIFO, a device, a socket. Only ``stat`` is used: opening a FIFO to look at it would block."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise DatasetError(f"{path}: broken symbolic link (to {os.readlink(path)!r})") from None
        raise DatasetError(f"{path}: {what} not found") from None
    except NotADirectoryError:
        raise DatasetError(f"{path}: {what} not found (a parent of it is not a folder)") from None
    except OSError as e:
        raise DatasetError(f"{path}: cannot access the {what} ({e.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _NOT_A_FILE if test(st.st_mode)), "something other than a regular file")
        raise DatasetError(f"{path}: is {kind}, not a {what}")
    return st


def load_npy(path: str | os.PathLike, *, mmap: bool = True) -> np.ndarray:
    """Open a ``.npy`` file without ever unpickling; errors name the file.

    With ``mmap=True`` nothing is read into RAM until used (read-only mapping).
    """
    path = Path(path)
    check_regular_file(path)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, SyntaxError, TypeError, KeyError, OverflowError, MemoryError,
            tokenize.TokenError) as e:
        # object arrays, truncated or garbled headers (numpy parses them with ast.literal_eval),
        # shapes that do not match the file size
        raise DatasetError(f"{path}: not a valid pickle-free .npy file ({type(e).__name__}: {e})") from None
    except (OSError, EOFError) as e:
        raise DatasetError(f"{path}: cannot read .npy file ({e})") from None
    if not isinstance(arr, np.ndarray):
        raise DatasetError(f"{path}: expected a single array in a .npy file")
    if arr.dtype.hasobject:
        raise DatasetError(f"{path}: object dtype arrays are not allowed")
    return arr


def _rename_new(tmp: Path, final: Path) -> None:
    """Rename folder ``tmp`` to ``final``, which must not exist: a ``final`` that another writer
    published meanwhile is a ``FileExistsError``, never replaced. ``rename`` itself refuses a
    non-empty target folder atomically (``ENOTEMPTY``/``EEXIST``), so the check and the rename
    cannot race past a published result (at worst an empty folder is taken over)."""
    exists = FileExistsError(f"{final} already exists (pass overwrite=True / --overwrite to "
                             f"replace it)")
    if final.exists() or final.is_symlink():
        raise exists
    try:
        os.rename(tmp, final)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise exists from None
        raise


@contextlib.contextmanager
def atomic_dir(
    final: str | os.PathLike, *, overwrite: bool = False, markers: tuple = ()
) -> Iterator[Path]:
    """Build a folder under a temporary name and rename it to ``final`` only on success.

    On an exception (or a kill) the temporary folder is removed (or left under a hidden
    ``.name.tmp-*`` name that never opens as ``final``). ``overwrite=True`` replaces an existing
    ``final`` only if it is empty or holds one of the ``markers`` (the file that shows it is
    what this writer makes, e.g. ``graphfeed.json``): a user's unrelated folder is never deleted.
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists() and not overwrite:
        raise FileExistsError(f"{final} already exists (pass overwrite=True / --overwrite to replace it)")
    if final.exists() or final.is_symlink():
        if not final.is_dir() or final.is_symlink():
            raise FileExistsError(f"refusing to replace {final}: it is not a folder")
        if any(final.iterdir()) and not any((final / m).exists() for m in markers):
            what = " or ".join(markers) if markers else "nothing graphfeed wrote"
            raise FileExistsError(
                f"refusing to replace {final}: it is not empty and holds no {what}, so it does not "
                f"look like something graphfeed made; remove it yourself or choose another path"
            )
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
    try:
        yield tmp
        apply_umask(tmp, fsync=True)  # mkdtemp makes 0700; stores such as LMDB pick their own modes
        fsync_dir(tmp)
        if overwrite and final.exists():
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            _rename_new(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def recover_interrupted_swap(final: str | os.PathLike, markers: tuple) -> Optional[Path]:
    """Repair what an interrupted replacement of folder ``final`` (:func:`atomic_dir` with
    ``overwrite=True``) left behind; call it holding :func:`publish_lock`.

    The replacement publishes in two renames (``final -> .final.old-PID``, then the new folder
    ``-> final``) and then deletes the old copy. Killed between the renames, ``final`` is missing
    and the previous complete folder (one holding a file of ``markers``) sits in
    ``.final.old-PID``: it is renamed back (the new one was never published). Killed after the
    second rename, the ``.old-*`` copies are garbage and are removed. Returns ``final`` when it
    was restored, else ``None``.
    """
    final = Path(final)
    olds = [p for p in final.parent.glob(f".{final.name}.old-*") if p.is_dir() and not p.is_symlink()]
    if not olds:
        return None
    restored = None
    if not (final.exists() or final.is_symlink()):
        complete = [p for p in olds if any((p / m).is_file() for m in markers)]
        if complete:
            restored = max(complete, key=lambda p: p.stat().st_mtime)
            os.replace(restored, final)
            fsync_dir(final.parent)
            olds.remove(restored)
    for p in olds:
        shutil.rmtree(p, ignore_errors=True)
    return final if restored is not None else None


@contextlib.contextmanager
def publish_lock(final: str | os.PathLike, markers: tuple, *, wait: bool = False,
                 what: str = "this folder") -> Iterator[None]:
    """One writer at a time for the folder ``final`` that :func:`atomic_dir` publishes: an
    exclusive ``flock`` on the hidden sibling ``.name.lock``. ``wait=False``: another holder
    is a ``DatasetError`` (``"another process is writing {what} right now"``); ``wait=True``:
    wait for it (then ``final`` may exist: the caller's ``atomic_dir`` refuses it without
    ``overwrite``). Holding the lock, the temporary folders a killed writer left
    (``.name.tmp-*``) are garbage and are removed, and an interrupted ``overwrite`` swap is
    repaired (:func:`recover_interrupted_swap`), when the lock is taken (after a kill) and when
    it is released (after an exception)."""
    final = Path(final)
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(file_lock(final.parent / f".{final.name}.lock", wait=wait))
        except BlockingIOError:
            raise DatasetError(f"{final}: another process is writing {what} right now") from None
        for stale in final.parent.glob(f".{final.name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)
        recover_interrupted_swap(final, markers)
        try:
            yield
        finally:
            recover_interrupted_swap(final, markers)


#: errnos saying that a place cannot be written: a read-only mount, no permission, a full disk or
#: quota, a file where a folder should be on the way
NOT_WRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT,
                          errno.ENOTDIR})


@contextlib.contextmanager
def writing_to(folder: str | os.PathLike, what: str, hint: Optional[str] = None) -> Iterator[None]:
    """Writes into ``folder`` that fail because it cannot be written (:data:`NOT_WRITABLE`)
    raise one ``GraphfeedError`` naming ``what`` (the option that chose the folder, e.g.
    ``"--table-cache"``) and the folder, e.g. ``--table-cache /mnt/ro: cannot write there
    (Read-only file system)``, then ``"; " + hint`` if given; other errors pass unchanged. The
    caller's own cleanup (inside) runs first."""
    try:
        yield
    except FileExistsError:
        raise  # "already exists, pass --overwrite": the writer's own message
    except OSError as e:
        if e.errno not in NOT_WRITABLE:
            raise
        reason = os.strerror(e.errno)
        where = os.fsdecode(e.filename) if e.filename is not None else None
        if where is not None and os.path.abspath(where) != os.path.abspath(folder):
            reason += f": {where}"
        raise GraphfeedError(f"{what} {os.fspath(folder)}: cannot write there ({reason})"
                             + (f"; {hint}" if hint else "")) from None


@contextlib.contextmanager
def file_lock(path: str | os.PathLike, *, wait: bool = True) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing, with the umask's file mode
    like any ``open``), waiting for other holders: serialises check-then-build sequences across
    processes (ranks opening the same store). ``wait=False``: another holder is a
    ``BlockingIOError`` at once. A lock file this user may not write (another team member's, or
    on a read-only mount) is locked through a read-only descriptor, which ``flock`` allows."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        if e.errno not in (errno.EACCES, errno.EPERM, errno.EROFS) or not path.is_file():
            raise
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        yield
    finally:
        os.close(fd)  # closing releases the lock


def npy_header(path: Path, *, what: str = "an array") -> tuple[np.dtype, tuple[int, ...], bool, int]:
    """``(dtype, shape, fortran_order, data_offset)`` of a ``.npy`` file, read without
    unpickling (no torch). ``DatasetError`` naming the file for a missing or invalid file, an
    object dtype (it would need pickle) or a file shorter than its header promises."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: not a regular file" if path.exists() else f"{path}: file not found")
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            else:  # numpy's read_magic refuses versions other than 1.0, 2.0 and 3.0
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            offset = f.tell()
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        raise DatasetError(f"{path}: not a valid .npy file ({e})") from None
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise DatasetError(f"{path}: object dtype arrays are not allowed (they would need pickle)")
    expected = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = path.stat().st_size
    if size < expected:
        raise DatasetError(f"{path}: file is truncated ({size} bytes, the header promises {expected})")
    return dtype, tuple(int(s) for s in shape), bool(fortran), offset
