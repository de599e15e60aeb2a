"""Process memory helpers."""

from __future__ import annotations

import ctypes
import gc
import sys

_libc = None


def release_free_memory() -> None:
    """Collect garbage and return freed heap pages to the OS (glibc ``malloc_trim``).

    Batches allocate and free tens of MB per step; glibc keeps freed arena memory resident,
    which per process adds up under DDP. No-op where ``malloc_trim`` does not exist.
    """
    global _libc
    gc.collect()
    if not sys.platform.startswith("linux"):
        return
    try:
        if _libc is None:
            _libc = ctypes.CDLL("libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass
