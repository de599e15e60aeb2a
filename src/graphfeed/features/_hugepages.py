"""Transparent huge pages for large feature tables held in process memory (Linux).

A feature gather reads random 400-byte rows of a table of hundreds of MB: with 4 KiB pages
nearly every row is also a TLB miss (a page walk before the cache miss). Backed by 2 MiB pages
the table needs a few hundred TLB entries instead of ~100k, and on the 2-core test machine one
thread gathers the sampled input rows of a ``medium`` batch about 15-20% faster (measured:
``benchmarks/pipeline_costs.py``).

:func:`advise_huge_pages` asks for that on the 2 MiB-aligned interior of a tensor's memory:

- private anonymous memory (a tensor built in this process; numpy already advises its own
  large arrays): ``madvise(MADV_HUGEPAGE)`` (future faults and ``khugepaged`` use huge pages)
  and then, up to ``MAX_COLLAPSE_BYTES``, ``madvise(MADV_COLLAPSE)`` (Linux >= 6.1: collapse
  the pages already there now, which copies the table once);
- a memory map of a file (the ``"ram"`` backend over a dataset's shared map): only
  ``MADV_HUGEPAGE``. Pages the page cache already holds keep their size (the kernel maps them
  with 2 MiB entries only where it holds them as 2 MiB folios); pages read in through this map
  from then on arrive as 2 MiB folios, for every process that maps the file. A file the page
  cache holds in small folios gets huge ones once it is dropped from the cache and read again
  (``graphfeed.features.disk.drop_page_cache``). The disk backend's map is never advised: a
  cold random read would then fetch 2 MiB per row.

Shared anonymous memory, pinned buffers and small tables are left alone; any refusal by the
kernel is ignored (the rows are the same either way, only the page size differs). Nothing
happens where the system disables transparent huge pages
(``/sys/kernel/mm/transparent_hugepage/enabled`` is ``[never]``).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Optional

import torch

__all__ = ["advise_huge_pages", "HUGE_PAGE_BYTES", "MIN_TABLE_BYTES", "MAX_COLLAPSE_BYTES"]

HUGE_PAGE_BYTES = 2 << 20
#: Tables smaller than this keep their pages (a few MB fit the TLB's reach with 4 KiB pages).
MIN_TABLE_BYTES = 32 << 20
#: Anonymous tables up to this size are collapsed at once; larger ones are only marked (the
#: collapse copies the table: 2.8 s for 380 MB measured on the 2-core machine at load 8).
MAX_COLLAPSE_BYTES = 4 << 30

_MADV_HUGEPAGE = 14
_MADV_COLLAPSE = 25
_THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"

_madvise = None


def _libc_madvise():
    global _madvise
    if _madvise is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).madvise
        except (OSError, AttributeError):
            fn = False
        else:
            fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
            fn.restype = ctypes.c_int
        _madvise = fn
    return _madvise or None


def thp_mode() -> Optional[str]:
    """The system's transparent-huge-page mode (``always``, ``madvise``, ``never``), or
    ``None`` where it cannot be read (not Linux, no THP)."""
    try:
        with open(_THP_ENABLED) as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1:end] if 0 <= start < end else None


def _mapping_kind(lo: int, hi: int) -> Optional[str]:
    """``"anon"`` when every mapping overlapping ``[lo, hi)`` is private anonymous memory,
    ``"file"`` when all of it maps one file, else ``None`` (shared anonymous memory, a mix, a
    gap), from ``/proc/self/maps``."""
    covered, kind, file = lo, None, None
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                a, b = (int(x, 16) for x in parts[0].split("-"))
                if b <= lo or a >= hi:
                    continue
                if a > covered:
                    return None
                path = parts[5].strip() if len(parts) > 5 else ""
                if not path or path == "[heap]":
                    this = "anon" if parts[1][3] == "p" else None
                elif path.startswith("/") and not path.endswith("(deleted)"):
                    this = "file"
                    if file not in (None, path):
                        return None
                    file = path
                else:
                    this = None
                if this is None or kind not in (None, this):
                    return None
                kind = this
                covered = max(covered, b)
    except (OSError, ValueError, IndexError):
        return None
    return kind if covered >= hi else None


def advise_huge_pages(t: torch.Tensor, *, collapse: bool = True,
                      min_bytes: int = MIN_TABLE_BYTES) -> int:
    """Back the 2 MiB-aligned interior of ``t``'s memory with transparent huge pages, when it
    is a contiguous CPU tensor of at least ``min_bytes`` in private anonymous memory or in a
    memory map of a file (see the module docstring). Returns the bytes advised, 0 when nothing
    was done. ``collapse=False`` only marks anonymous memory (pages already there stay small
    until ``khugepaged`` gets to them); a file map is only ever marked."""
    if not sys.platform.startswith("linux") or t.device.type != "cpu" or not t.is_contiguous():
        return 0
    nbytes = t.numel() * t.element_size()
    if nbytes < min_bytes or thp_mode() in (None, "never"):
        return 0
    start = t.data_ptr()
    lo = -(-start // HUGE_PAGE_BYTES) * HUGE_PAGE_BYTES
    hi = (start + nbytes) // HUGE_PAGE_BYTES * HUGE_PAGE_BYTES
    kind = _mapping_kind(lo, hi) if hi > lo else None
    if kind is None:
        return 0
    madvise = _libc_madvise()
    if madvise is None or madvise(lo, hi - lo, _MADV_HUGEPAGE) != 0:
        return 0
    if collapse and kind == "anon" and hi - lo <= MAX_COLLAPSE_BYTES:
        madvise(lo, hi - lo, _MADV_COLLAPSE)  # EINVAL before Linux 6.1, EAGAIN when memory is short: ignored
    return hi - lo
