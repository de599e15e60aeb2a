"""Proportional set size (PSS) of processes, from ``/proc``.

PSS divides each shared page among the processes that map it, so the PSS of all ranks sums to
the memory they really use together: a segment shared by N ranks counts once in the sum, a
private copy N times. Linux only.
"""

from __future__ import annotations

import os
from typing import Iterable, Optional

from ..errors import GraphfeedError

__all__ = ["pss_bytes", "total_pss_bytes", "memory_breakdown"]


def _read_fields(path: str, wanted: Optional[set] = None) -> dict:
    out: dict = {}
    with open(path, "rb") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[0].endswith(b":") and parts[2] == b"kB":
                key = parts[0][:-1].decode()
                if wanted is None or key in wanted:
                    out[key] = out.get(key, 0) + int(parts[1]) * 1024
    return out


def memory_breakdown(pid: int | str = "self") -> dict:
    """``Rss``, ``Pss``, ``Pss_Anon``, ``Pss_File``, ``Pss_Shmem``, ... in bytes for ``pid``,
    from ``/proc/<pid>/smaps_rollup`` (summed over ``/proc/<pid>/smaps`` on kernels before 4.14)."""
    base = f"/proc/{pid}"
    try:
        return _read_fields(f"{base}/smaps_rollup")
    except FileNotFoundError:
        if not os.path.exists(base):
            raise GraphfeedError(f"no process {pid} (it has exited?)") from None
    except PermissionError:
        raise GraphfeedError(f"not allowed to read {base}/smaps_rollup") from None
    try:
        return _read_fields(f"{base}/smaps")
    except FileNotFoundError:
        raise GraphfeedError(f"{base}/smaps not found: PSS needs Linux /proc") from None


def pss_bytes(pid: int | str = "self") -> int:
    """Proportional set size of ``pid`` in bytes (``"self"``: this process)."""
    fields = memory_breakdown(pid)
    if "Pss" not in fields:
        raise GraphfeedError(f"/proc/{pid}: no Pss field (kernel too old?)")
    return int(fields["Pss"])


def total_pss_bytes(pids: Iterable[int]) -> int:
    """Sum of the PSS of ``pids``; processes that have already exited count 0."""
    total = 0
    for pid in pids:
        try:
            total += pss_bytes(pid)
        except GraphfeedError:
            continue
    return total
