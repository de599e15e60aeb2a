"""A folder that behaves like a read-only mount (EROFS) for this process, for tests that run as
root (where ``chmod 0555`` stops nothing): every call that would create, write, rename or remove
something under it raises ``OSError(errno.EROFS)``, as the kernel would. Reads are untouched.

``read_only(monkeypatch, folder)`` patches ``os`` and ``open`` for the rest of the test."""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def read_only(monkeypatch, folder) -> Path:
    root = os.path.realpath(folder)

    def inside(path) -> bool:
        if isinstance(path, int):  # a file descriptor: opened (read-only) before
            return False
        p = os.path.realpath(os.fsdecode(path))
        return p == root or p.startswith(root + os.sep)

    def refuse(path):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    def guard(real, *, flags_arg=None, paths=1):
        def call(*args, **kwargs):
            if flags_arg is not None:
                flags = args[flags_arg] if len(args) > flags_arg else kwargs.get("flags", 0)
                if not flags & _WRITE_FLAGS:
                    return real(*args, **kwargs)
            for p in args[:paths]:
                if inside(p):
                    refuse(p)
            return real(*args, **kwargs)

        return call

    real_open = builtins.open

    def open_(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and inside(file):
            refuse(file)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", guard(os.open, flags_arg=1))
    for name in ("mkdir", "rmdir", "unlink", "remove"):
        monkeypatch.setattr(os, name, guard(getattr(os, name)))
    for name in ("rename", "replace", "link", "symlink"):
        monkeypatch.setattr(os, name, guard(getattr(os, name), paths=2))
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    return Path(folder)
