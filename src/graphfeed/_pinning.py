"""Page-locked (pinned) host memory and zero-copy GPU views of it: the bottom floor that the
graph (``CSCGraph.pin_memory``), features (``PinnedFeature``), the GPU sampler and shared segments
(``distributed.register_pinned``) all pin through.

- ``pin_tensor(t)`` page-locks a CPU tensor in place through the CUDA driver API
  (:func:`graphfeed._cuda.host_register`: read-only mappings get the read-only flag, a refusal
  leaves no CUDA error state behind), else returns a pinned copy. In-place registrations are
  undone by ``unpin(t)``, or at interpreter exit; nothing depends on what torch's private cudart
  binding exposes (the known crash is ``'PyCapsule' object has no attribute
  'cudaHostUnregister'``).
- ``uva_tensor(t, device)`` returns a CUDA tensor that aliases pinned host memory (unified
  virtual addressing): GPU kernels index it directly over PCIe/NVLink, nothing is copied.
- ``torch_view(a)``: a torch tensor over a numpy array's memory (read-only memory maps too).

Without CUDA ``pin_tensor`` returns its input, with one ``RuntimeWarning`` saying that pinning
needs CUDA.
"""

from __future__ import annotations

import atexit
import logging
import threading
import warnings
import weakref

import numpy as np
import torch

from . import _cuda, cuda_alloc
from .errors import GraphfeedError

logger = logging.getLogger("graphfeed.pinned")

__all__ = ["cuda_available", "pin_tensor", "unpin", "is_registered", "uva_tensor", "torch_view",
           "warn_no_cuda"]

_lock = threading.Lock()
_registered: dict[int, tuple[int, int, torch.Tensor]] = {}  # host ptr -> (nbytes, device, tensor kept alive)
# UVA views alive per registered host pointer, and the registrations whose unpin waits for them
# (unregistering pages a GPU kernel may still read through a view is an illegal access)
_views: dict[int, int] = {}
_deferred: set[int] = set()
_warned = False
_atexit_installed = False


def cuda_available() -> bool:
    """A CUDA device is visible; asks without initialising CUDA (:mod:`graphfeed._cuda`)."""
    return _cuda.cuda_available()


def warn_no_cuda() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(
            "pin_memory: pinning needs CUDA (this torch build or machine has no CUDA device); "
            "features and graphs stay in ordinary pageable memory",
            RuntimeWarning,
            stacklevel=3,
        )


def _install_atexit() -> None:
    global _atexit_installed
    if not _atexit_installed:
        atexit.register(_unregister_all)
        _atexit_installed = True


def _unregister_all() -> None:
    with _lock:
        items = list(_registered.items())
        _registered.clear()
    for ptr, (_, device, _) in items:
        # At interpreter exit the driver may already be torn down; the process is ending and
        # the driver releases the registration with it.
        _cuda.host_unregister(ptr, device=device)


def is_registered(t: torch.Tensor) -> bool:
    """Whether ``t``'s memory was page-locked in place by :func:`pin_tensor`."""
    return t.data_ptr() in _registered


def pin_tensor(t: torch.Tensor) -> torch.Tensor:
    """``t`` page-locked: the same tensor when registered in place, else a pinned copy.

    In place means ``cuMemHostRegister`` on ``t``'s own pages (portable, mapped for UVA); a
    read-only mapping (``np.load(..., mmap_mode="r")``, a segment attached read-only) is
    registered read-only from the start. A refusal (locked-memory limit, a driver without
    read-only registration, an overlapping registration) leaves no CUDA error behind and falls
    back to a pinned copy of exactly ``t``'s size (host memory registered the same way, unpinned
    when the copy is freed; ``t.pin_memory()``, which rounds up to a power of two, only where
    that is refused too).

    CPU-only: returns ``t`` unchanged (and warns once). Already pinned tensors are returned as
    they are. A tensor registered in place stays alive until :func:`unpin` or exit.
    """
    if not isinstance(t, torch.Tensor):
        raise GraphfeedError(f"pin_tensor expects a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise GraphfeedError(f"pin_tensor expects a CPU tensor, got one on {t.device}")
    if not cuda_available():
        warn_no_cuda()
        return t
    device = cuda_alloc.start_cuda()
    if t.is_pinned():
        return t
    nbytes = t.numel() * t.element_size()
    if nbytes == 0:
        return t.pin_memory()
    if t.is_contiguous() and t.storage_offset() == 0 and t.untyped_storage().nbytes() == nbytes:
        ptr = t.data_ptr()
        with _lock:
            if ptr in _registered:
                return t
        reg = _register(t, nbytes, device)
        if reg.ok:
            return t
        logger.debug("pin_tensor: in-place registration of %d bytes refused (%s); pinning a copy",
                     nbytes, reg.error)
    return _pinned_copy(t, nbytes, device)


def _register(t: torch.Tensor, nbytes: int, device: int, read_only=None, *,
              keep_alive: bool = True) -> "_cuda.HostRegistration":
    """Register ``t``'s own pages and record it: kept alive until :func:`unpin` or exit, or
    (``keep_alive=False``) unregistered when ``t`` is freed."""
    ptr = t.data_ptr()
    with _lock:
        reg = _cuda.host_register(ptr, nbytes, device=device, read_only=read_only)
        if reg.ok:
            _registered[ptr] = (nbytes, device, t if keep_alive else None)
            _install_atexit()
    if reg.ok and not keep_alive:
        weakref.finalize(t, _unpin_ptr, ptr)
    return reg


def _pinned_copy(t: torch.Tensor, nbytes: int, device: int) -> torch.Tensor:
    """A page-locked copy of ``t`` of exactly its size: ordinary host memory, registered with the
    driver. ``t.pin_memory()`` goes through torch's caching host allocator, which rounds every
    block up to a power of two (a 9 GB graph would take 16 GB of page-locked memory); it is only
    the last resort, where the copy cannot be registered either."""
    copy = torch.empty(t.shape, dtype=t.dtype)
    copy.copy_(t)
    reg = _register(copy, nbytes, device, read_only=False, keep_alive=False)
    if reg.ok:
        return copy
    logger.debug("pin_tensor: registering a %d-byte copy refused too (%s); torch's pinned "
                 "allocator rounds it up to a power of two", nbytes, reg.error)
    return t.pin_memory()


def unpin(t: torch.Tensor) -> None:
    """Undo an in-place registration by :func:`pin_tensor` (no-op for copies and on CPU). While
    a UVA view of it (:func:`uva_tensor`) is alive the pages stay registered, and are
    unregistered when the last view is freed."""
    _unpin_ptr(t.data_ptr())


def _unpin_ptr(ptr: int) -> None:
    with _lock:
        if _views.get(ptr, 0) > 0 and ptr in _registered:
            _deferred.add(ptr)
            return
        entry = _registered.pop(ptr, None)
    if entry is not None:
        _cuda.host_unregister(ptr, device=entry[1])


def _view_opened(ptr: int) -> bool:
    """Count a new UVA view of ``ptr`` if it is registered in place (checked and counted under
    one lock, so a concurrent :func:`unpin` sees it); whether it was."""
    with _lock:
        if ptr not in _registered:
            return False
        _views[ptr] = _views.get(ptr, 0) + 1
        return True


def _view_closed(ptr: int) -> None:
    """A UVA view of ``ptr`` was freed: the last one carries out an unpin that waited for it."""
    entry = None
    with _lock:
        left = _views.get(ptr, 0) - 1
        if left > 0:
            _views[ptr] = left
            return
        _views.pop(ptr, None)
        if ptr in _deferred:
            _deferred.discard(ptr)
            entry = _registered.pop(ptr, None)
    if entry is not None:
        _cuda.host_unregister(ptr, device=entry[1])


class _HostArrayInterface:
    """Exposes pinned host memory as a CUDA array (UVA: the device address is the host address).
    The CUDA tensor made from it holds it for as long as its storage lives, so its lifetime is
    the view's: it counts itself among the views of an in-place registration (see
    :func:`unpin`)."""

    def __init__(self, t: torch.Tensor):
        self._keep = t
        base = t.untyped_storage().data_ptr()
        if _view_opened(base):
            weakref.finalize(self, _view_closed, base)
        typestr = np.dtype(torch.empty((), dtype=t.dtype).numpy().dtype).str
        self.__cuda_array_interface__ = {
            "shape": tuple(t.shape),
            "typestr": typestr,
            "data": (t.data_ptr(), False),
            "version": 3,
            "strides": None,
        }


def uva_tensor(t: torch.Tensor, device="cuda") -> torch.Tensor:
    """A CUDA tensor on ``device`` aliasing the pinned host tensor ``t`` (zero copy).

    ``t`` must be contiguous and pinned (``pin_tensor``); reads from GPU kernels go over the
    bus, so gathers of a few rows are cheap and whole-tensor scans are slow. The result keeps
    ``t`` alive.
    """
    if not cuda_available():
        raise GraphfeedError("uva_tensor needs a CUDA device; this build or machine has none")
    if t.device.type != "cpu" or not t.is_pinned():
        raise GraphfeedError("uva_tensor needs a pinned CPU tensor (use pin_tensor first)")
    if not t.is_contiguous():
        raise GraphfeedError("uva_tensor needs a contiguous tensor")
    device = torch.device(device)
    if t.dtype in (torch.bfloat16,):  # no numpy typestr: alias the bits as int16
        return uva_tensor(t.view(torch.int16), device).view(t.dtype)
    with torch.cuda.device(device):
        return torch.as_tensor(_HostArrayInterface(t), device=device)


def torch_view(a: np.ndarray) -> torch.Tensor:
    """A torch tensor sharing ``a``'s memory (no copy); read-only memory maps included."""
    with warnings.catch_warnings():
        # torch warns that read-only arrays give writable tensors; graphfeed never writes them.
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(a)
