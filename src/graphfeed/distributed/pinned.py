"""Page-locking a machine's shared copy for fast host-to-GPU copies, without copying it.

What the platform allows, and what this does:

- ``tensor.pin_memory()`` would allocate a *new* pinned buffer and copy into it: one copy per
  rank. We never do that for shared data.
- ``cuMemHostRegister`` (driver API, :mod:`graphfeed._cuda`) page-locks existing memory in
  place. Run on a shared segment (``/dev/shm`` mapping) it pins the *same physical pages* every
  rank maps, so the machine holds one pinned copy of the bytes. The registration itself is per
  process (CUDA maps the pages into that process's context; there is no CUDA IPC for host
  memory), so each rank that copies from the segment calls it once for its own mapping; the pages
  are locked once, the bookkeeping is per rank. This is the "once per machine" that CUDA permits:
  one pinned copy, N registrations.
- Attachers map segments read-only by default, which needs the read-only registration flag
  (CUDA >= 11.1 and a device reporting ``cudaDevAttrHostRegisterReadOnlySupported``). Where
  that is refused the error says so (no silent private pinned copy).
  ``share_dataset(..., pinnable=True)`` maps the segments read-write in every rank instead, so
  read-write registration (as chosen by ``graphfeed._pinning.pin_tensor`` from the
  mapping) works in place everywhere.
- Large registrations may be refused (locked-memory limits in containers); that is reported.

Not tested without a GPU in this repository's CI; the CPU paths (argument checks, the error
without CUDA) are.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from .. import _cuda, cuda_alloc
from ..errors import GraphfeedError

__all__ = ["register_pinned", "PinnedRegion"]

class PinnedRegion:
    """A page-locked host range; ``close()`` (or the context manager's exit) unregisters it.

    ``tensor`` is a CPU tensor over the same memory (no copy) whose ``is_pinned()`` is true, so
    ``tensor[idx].to("cuda", non_blocking=True)``-style gathers can use it.
    """

    def __init__(self, tensor, ptr: int, nbytes: int, device: int = 0):
        self.tensor = tensor
        self.ptr = ptr
        self.nbytes = nbytes
        self.device = device
        self._open = nbytes > 0

    def close(self) -> None:
        if not self._open:
            return
        self._open = False
        _cuda.host_unregister(self.ptr, device=self.device)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


def register_pinned(data, *, read_only: Optional[bool] = None) -> PinnedRegion:
    """Page-lock ``data`` (numpy array or CPU tensor, C-contiguous) in place with
    ``cuMemHostRegister``; see the module docstring for what is shared across ranks.

    ``read_only``: pass ``CU_MEMHOSTREGISTER_READ_ONLY`` (default: when the array is not writable,
    as attached segments are). Raises ``GraphfeedError`` without CUDA or when CUDA refuses.
    """
    import torch

    from ..features.memory import to_tensor

    t = to_tensor(data) if not isinstance(data, torch.Tensor) else data
    if t.device.type != "cpu":
        raise GraphfeedError(f"register_pinned needs CPU memory, got a tensor on {t.device}")
    if not t.is_contiguous():
        raise GraphfeedError("register_pinned needs contiguous memory")
    if read_only is None:
        read_only = isinstance(data, np.ndarray) and not data.flags.writeable
    if not _cuda.cuda_available():
        raise GraphfeedError("register_pinned needs CUDA, but no CUDA device is visible")
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return PinnedRegion(t, t.data_ptr(), 0)
    device = cuda_alloc.start_cuda()
    reg = _cuda.host_register(t.data_ptr(), nbytes, device=device, read_only=bool(read_only))
    if not reg.ok:
        hint = (
            " (read-only registration is not supported on this device/driver; "
            "copy from pageable memory instead)"
            if read_only
            else ""
        )
        raise GraphfeedError(f"page-locking {nbytes} bytes in place failed: {reg.error}{hint}")
    return PinnedRegion(t, t.data_ptr(), nbytes, device)
