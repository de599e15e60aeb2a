"""Atomic, pickle-free file helpers shared by every writer and reader.

Writers go to a temporary sibling, fsync it, then ``os.replace`` it into place, so an interrupted
job never leaves a half-written file or folder under the final name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import tokenize
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import DatasetError


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


def save_npy(path: str | os.PathLike, array: np.ndarray, *, fsync: bool = True) -> None:
    """Write ``array`` to ``path`` as ``.npy`` via a temp file and an atomic rename."""
    path = Path(path)
    array = np.asarray(array)
    if array.dtype == object:
        raise DatasetError(f"{path}: refusing to save an object array (it would need pickle)")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.lib.format.write_array(f, np.ascontiguousarray(array), allow_pickle=False)
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


def load_npy(path: str | os.PathLike, *, mmap: bool = True) -> np.ndarray:
    """Open a ``.npy`` file without ever unpickling; errors name the file.

    With ``mmap=True`` nothing is read into RAM until used (read-only mapping).
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
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
        raise FileExistsError(f"{final} already exists (pass overwrite=True to replace it)")
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
        for p in tmp.rglob("*"):
            if p.is_file():
                with open(p, "rb") as f:
                    os.fsync(f.fileno())
        fsync_dir(tmp)
        if final.exists():
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def file_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing), waiting for other holders:
    serialises check-then-build sequences across processes (ranks opening the same store)."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
