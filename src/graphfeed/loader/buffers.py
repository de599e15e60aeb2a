"""A pool of reusable output buffers for feature reads.

Fetching a batch's features writes tens to hundreds of MB; a fresh tensor per batch pays page
faults on every first write. The pool hands out row-slices of a few large buffers instead, and
reuses a buffer ONLY when nothing outside the pool references its memory any more: a caller who
keeps batches (in a list, as a numpy array, as a view) never sees them overwritten.

"Nothing references it" is read from the storage's use count, which counts every tensor (and
view) over that storage. ``torch._C._storage_Use_Count`` is a private torch function; where it is
missing the pool never reuses (every take allocates), which is slower but still correct.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Optional

import torch

__all__ = ["BufferPool", "storage_use_count", "reuse_supported"]

_use_count_fn: Optional[Callable[[int], int]] = getattr(torch._C, "_storage_Use_Count", None)


def reuse_supported() -> bool:
    """Whether this torch exposes the storage use count the pool needs to reuse safely."""
    return _use_count_fn is not None


def storage_use_count(t: torch.Tensor) -> int:
    """How many tensors (views included) share ``t``'s storage, plus one while the storage has
    a Python object. Raises ``RuntimeError`` when torch does not expose it."""
    if _use_count_fn is None:
        raise RuntimeError("this torch build has no torch._C._storage_Use_Count")
    return int(_use_count_fn(t.untyped_storage()._cdata))


class _Slot:
    __slots__ = ("buf", "baseline")

    def __init__(self, buf: torch.Tensor):
        self.buf = buf
        self.baseline = self._refs()

    def _refs(self) -> tuple[int, int]:
        st = self.buf.untyped_storage()
        # The use count sees tensors and views; the refcount of the storage's Python object
        # sees a caller holding ``t.untyped_storage()`` itself, which the use count cannot.
        return int(_use_count_fn(st._cdata)), sys.getrefcount(st)

    def is_free(self) -> bool:
        now = self._refs()
        return now[0] <= self.baseline[0] and now[1] <= self.baseline[1]

    @property
    def rows(self) -> int:
        return int(self.buf.shape[0])


class BufferPool:
    """Up to ``max_buffers`` buffers of ``(rows, *row_shape)`` ``dtype`` on CPU (pinned when
    ``pin_memory``), each sized to the largest request seen so far (plus 1/8 headroom).

    ``take(n)`` returns a contiguous ``(n, *row_shape)`` tensor: a view of a free pooled buffer,
    or a new allocation when every buffer is in use. Thread-safe: the view is created under the
    pool's lock, so two threads never get the same buffer. ``on_take(reused: bool)`` is called
    once per take (statistics).
    """

    def __init__(
        self,
        row_shape: tuple[int, ...],
        dtype: torch.dtype,
        *,
        pin_memory: bool = False,
        max_buffers: int = 8,
        on_take: Optional[Callable[[bool], None]] = None,
    ):
        assert max_buffers >= 0
        self.row_shape = tuple(int(s) for s in row_shape)
        self.dtype = dtype
        self.pin_memory = pin_memory
        self.max_buffers = max_buffers if reuse_supported() else 0
        self._on_take = on_take
        self._slots: list[_Slot] = []
        self._largest = 0
        self._lock = threading.Lock()

    def _alloc(self, rows: int) -> torch.Tensor:
        return torch.empty((rows, *self.row_shape), dtype=self.dtype, pin_memory=self.pin_memory)

    def take(self, n: int) -> torch.Tensor:
        reused = False
        with self._lock:
            self._largest = max(self._largest, n)
            out = None
            grow = None  # a free slot too small for n: replaced by a bigger buffer
            for slot in self._slots:
                if slot.is_free():
                    if slot.rows >= n:
                        out = slot.buf[:n]
                        reused = True
                        break
                    grow = grow or slot
            if out is None:
                rows = self._largest + self._largest // 8
                if grow is not None:
                    self._slots.remove(grow)
                if len(self._slots) < self.max_buffers:
                    slot = _Slot(self._alloc(rows))
                    self._slots.append(slot)
                    out = slot.buf[:n]
                else:
                    out = self._alloc(n)
        if self._on_take is not None:
            self._on_take(reused)
        return out

    @property
    def nbytes(self) -> int:
        """Bytes held by the pooled buffers."""
        return sum(s.buf.untyped_storage().nbytes() for s in self._slots)

    @property
    def num_buffers(self) -> int:
        return len(self._slots)

    def clear(self) -> None:
        """Forget the pooled buffers (batches still referencing them keep them alive)."""
        with self._lock:
            self._slots.clear()
            self._largest = 0
