"""Process memory helpers."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Optional

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


# ---------------------------------------------------------------------- host memory
def _meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    out = {}
    try:
        with open(path) as f:
            for line in f:
                key, _, rest = line.partition(":")
                parts = rest.split()
                if parts and parts[0].isdigit():
                    scale = 1024 if len(parts) > 1 and parts[1].lower() == "kb" else 1
                    out[key.strip()] = int(parts[0]) * scale
    except OSError:
        pass
    return out


def host_memory() -> tuple[int, int]:
    """``(total, available)`` bytes of host RAM for this process: the machine's, capped by the
    memory cgroup the process is in (a container's, or a nested one such as ``with-memory-limit``
    makes): its limit, and the limit less its anonymous memory (page cache can be reclaimed)."""
    info = _meminfo()
    total = info.get("MemTotal")
    free = info.get("MemAvailable", info.get("MemFree"))
    if total is None or free is None:  # not Linux: ask the C library
        try:
            page = os.sysconf("SC_PAGE_SIZE")
            total = os.sysconf("SC_PHYS_PAGES") * page
            free = os.sysconf("SC_AVPHYS_PAGES") * page
        except (ValueError, OSError, AttributeError):  # pragma: no cover - exotic platforms
            total, free = 0, 0
    cg = _own_cgroup_memory()
    if cg is not None:
        limit, anon = cg
        total = min(total, limit)
        free = min(free, max(0, limit - anon))
    return int(total), int(free)


def _stat_file(path: Path) -> dict[str, int]:
    """A cgroup ``memory.stat``: ``key value`` lines."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and parts[1].isdigit():
                    out[parts[0]] = int(parts[1])
    except OSError:
        pass
    return out


def _own_cgroup_memory(proc: str = "/proc/self/cgroup",
                       root: str = "/sys/fs/cgroup") -> Optional[tuple[int, int]]:
    """``(limit, anonymous bytes)`` of the memory cgroup this process is in (the tightest
    limit on the way up for cgroup v2; v1's ``hierarchical_memory_limit``), or ``None`` when
    there is no limit or it cannot be read. Page cache is left out: it can be reclaimed."""
    try:
        lines = Path(proc).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.strip("/")
        if "memory" in controllers.split(","):  # v1
            d = Path(root) / "memory" / rel
            if not (d / "memory.stat").is_file():  # a container sees its own cgroup at the root
                d = Path(root) / "memory"
            stat = _stat_file(d / "memory.stat")
            limit = stat.get("hierarchical_memory_limit")
            anon = stat.get("total_rss", stat.get("rss"))
            if limit is None or anon is None or limit >= 1 << 60:
                return None
            return limit, anon
        if controllers == "":  # v2
            d = Path(root) / rel
            if not (d / "memory.stat").is_file():
                d = Path(root)
            stat = _stat_file(d / "memory.stat")
            if "anon" not in stat:
                continue
            limit = None
            for up in (d, *d.parents):
                try:
                    text = (up / "memory.max").read_text().strip()
                except OSError:
                    text = ""
                if text.isdigit():
                    limit = int(text) if limit is None else min(limit, int(text))
                if up == Path(root):
                    break
            return None if limit is None else (limit, stat["anon"])
    return None


def reclaimable_memory() -> Optional[int]:
    """Bytes this process could still allocate without swapping or being killed: the host's
    ``MemAvailable`` (free memory plus page cache that can be dropped), capped by its memory
    cgroup's limit less the cgroup's anonymous memory. ``None`` where unknown (not Linux)."""
    avail = _meminfo().get("MemAvailable")
    if avail is None:
        return None
    cg = _own_cgroup_memory()
    if cg is not None:
        avail = min(avail, max(0, cg[0] - cg[1]))
    return int(avail)
