"""Page-locked (pinned) host memory for features and graphs, and zero-copy GPU views of it.

- ``pin_tensor(t)`` page-locks a CPU tensor in place through the CUDA driver API
  (:func:`graphfeed._cuda.host_register`: read-only mappings get the read-only flag, a refusal
  leaves no CUDA error state behind), else returns a pinned copy. In-place registrations are
  undone by ``unpin(t)``, or at interpreter exit; nothing depends on what torch's private cudart
  binding exposes (the known crash is ``'PyCapsule' object has no attribute
  'cudaHostUnregister'``).
- ``uva_tensor(t, device)`` returns a CUDA tensor that aliases pinned host memory (unified
  virtual addressing): GPU kernels index it directly over PCIe/NVLink, nothing is copied.
- ``PinnedFeature(feature)`` pins an in-memory feature's rows and writes reads into pinned
  buffers (fast ``non_blocking`` host-to-device copies); ``pin_graph(graph)`` backs
  ``CSCGraph.pin_memory()``.

On a build or machine without CUDA every function is a no-op that returns its input, with one
``RuntimeWarning`` saying that pinning needs CUDA.
"""

from __future__ import annotations

import atexit
import logging
import threading
import warnings
from typing import Optional

import numpy as np
import torch

from .. import _cuda
from ..errors import GraphfeedError
from .base import Feature, WrappedFeature

logger = logging.getLogger("graphfeed.pinned")

__all__ = ["cuda_available", "pin_tensor", "unpin", "uva_tensor", "PinnedFeature", "pin_memory", "pin_graph"]

_lock = threading.Lock()
_registered: dict[int, tuple[int, int, torch.Tensor]] = {}  # host ptr -> (nbytes, device, tensor kept alive)
_warned = False
_atexit_installed = False


def cuda_available() -> bool:
    """A CUDA device is visible; asks without initialising CUDA (:mod:`graphfeed._cuda`)."""
    return _cuda.cuda_available()


def _warn_no_cuda() -> None:
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
    back to ``t.pin_memory()``, a pinned copy.

    CPU-only: returns ``t`` unchanged (and warns once). Already pinned tensors are returned as
    they are. A tensor registered in place stays alive until :func:`unpin` or exit.
    """
    if not isinstance(t, torch.Tensor):
        raise GraphfeedError(f"pin_tensor expects a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise GraphfeedError(f"pin_tensor expects a CPU tensor, got one on {t.device}")
    if not cuda_available():
        _warn_no_cuda()
        return t
    device = _cuda.start_cuda()
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
            reg = _cuda.host_register(ptr, nbytes, device=device)
            if reg.ok:
                _registered[ptr] = (nbytes, device, t)
                _install_atexit()
                return t
        logger.debug("pin_tensor: in-place registration of %d bytes refused (%s); pinning a copy",
                     nbytes, reg.error)
    return t.pin_memory()


def unpin(t: torch.Tensor) -> None:
    """Undo an in-place registration by :func:`pin_tensor` (no-op for copies and on CPU)."""
    ptr = t.data_ptr()
    with _lock:
        entry = _registered.pop(ptr, None)
    if entry is not None:
        _cuda.host_unregister(ptr, device=entry[1])


class _HostArrayInterface:
    """Exposes pinned host memory as a CUDA array (UVA: the device address is the host address)."""

    def __init__(self, t: torch.Tensor):
        self._keep = t
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


class PinnedFeature(WrappedFeature):
    """A feature whose rows (when in memory) are page-locked and whose reads land in pinned
    buffers, ready for ``.to("cuda", non_blocking=True)``.

    Wraps any feature; an ``InMemoryFeature``'s tensor is pinned in place (or copied once).
    ``uva(device)`` gives a CUDA view of the pinned rows for GPU-side gathers. Without CUDA it
    behaves exactly like the wrapped feature.
    """

    kind = "pinned"

    def __init__(self, feature: Feature, *, pin_outputs: bool = True):
        if not isinstance(feature, Feature):
            raise GraphfeedError(f"PinnedFeature wraps a graphfeed Feature, got {type(feature).__name__}")
        self.feature = feature
        self._cuda = cuda_available()
        self.pin_outputs = bool(pin_outputs) and self._cuda
        self._data: Optional[torch.Tensor] = None
        from .memory import InMemoryFeature

        if isinstance(feature, InMemoryFeature) and feature.device.type == "cpu":
            self._data = pin_tensor(feature.data.contiguous())
        elif not self._cuda:
            _warn_no_cuda()

    @property
    def data(self) -> Optional[torch.Tensor]:
        """The pinned rows (``None`` when the wrapped feature is not in memory)."""
        return self._data

    @property
    def is_pinned(self) -> bool:
        return self._data is not None and self._data.is_pinned()

    def uva(self, device="cuda") -> torch.Tensor:
        if self._data is None:
            raise GraphfeedError(f"{self.feature!r} is not in memory; only in-memory features have a UVA view")
        return uva_tensor(self._data, device)

    def _read(self, ids: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
        if out is None and self.pin_outputs:
            out = torch.empty((ids.shape[0], *self.row_shape), dtype=self.dtype, pin_memory=True)
        if self._data is not None:
            if out is None:
                return torch.index_select(self._data, 0, ids)
            return torch.index_select(self._data, 0, ids, out=out)
        return self.feature.read(ids, out=out, check=False)

    def close(self) -> None:
        """Unregister in-place pinned rows now (otherwise at exit)."""
        if self._data is not None:
            unpin(self._data)

    def __getstate__(self):
        return {"feature": self.feature, "pin_outputs": self.pin_outputs}

    def __setstate__(self, state):
        self.__init__(state["feature"], pin_outputs=state["pin_outputs"])

    def __repr__(self) -> str:
        return f"PinnedFeature({self.feature!r}, pinned={self.is_pinned})"


def pin_graph(graph):
    """Page-lock a ``CSCGraph``'s ``indptr``/``indices`` (and weights): in place where possible,
    else the graph switches to pinned copies. Returns the graph. CPU-only: a no-op (one warning)."""
    if not cuda_available():
        _warn_no_cuda()
        return graph
    from ..graph.csc import _shared_tensor

    pinned = {}
    for name in ("indptr", "indices", "weights"):
        a = getattr(graph, name)
        if a is None:
            continue
        t = pin_tensor(_shared_tensor(np.ascontiguousarray(a)))
        pinned[name] = t
        if t.data_ptr() != _shared_tensor(a).data_ptr():  # a copy: the graph uses it from now on
            setattr(graph, name, t.numpy())
    graph._pinned = pinned
    graph._tensors["cpu"] = (pinned["indptr"], pinned["indices"])
    return graph


def pin_memory(obj):
    """Pin a tensor, an ``InMemoryFeature`` (-> ``PinnedFeature``) or a ``CSCGraph`` (in place)."""
    if isinstance(obj, torch.Tensor):
        return pin_tensor(obj)
    if isinstance(obj, Feature):
        return obj if isinstance(obj, PinnedFeature) else PinnedFeature(obj)
    if hasattr(obj, "indptr") and hasattr(obj, "indices"):
        return pin_graph(obj)
    raise GraphfeedError(f"cannot pin a {type(obj).__name__}")
