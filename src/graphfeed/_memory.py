"""Process memory helpers."""

from __future__ import annotations

import ctypes
import os
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


def peak_rss_bytes() -> int:
    """This process's peak resident set size so far (``ru_maxrss``: KiB on Linux, bytes on
    macOS)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(r) * (1 if sys.platform == "darwin" else 1024)


def current_rss_bytes() -> int:
    """Resident memory now (``/proc/self/statm``), 0 where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
