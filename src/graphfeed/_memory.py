"""Process memory helpers."""

from __future__ import annotations

import ctypes
import sys

_libc = None


def release_free_memory() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``).

    Batches allocate and free tens of MB per step; glibc keeps freed arena memory resident,
    which per process adds up under DDP. Tensors are freed by reference counting, so no
    ``gc.collect()`` (0.2 s with PyG's thousands of modules loaded). No-op without glibc.
    """
    global _libc
    if not sys.platform.startswith("linux"):
        return
    try:
        if _libc is None:
            _libc = ctypes.CDLL("libc.so.6")
        _libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass
