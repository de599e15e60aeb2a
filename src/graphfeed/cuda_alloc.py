"""Enable PyTorch's ``expandable_segments`` CUDA allocator option, unless the user chose.

Mini-batches of a sampled graph change size every step, which fragments PyTorch's default
caching allocator (reserved memory grows far beyond what is in use, then OOMs).
``expandable_segments:True`` maps more physical memory into one growing segment instead.

:func:`configure_cuda_allocator` is called by graphfeed right before it first touches CUDA
(hardware detection for placement, the loader and training on a CUDA device), never at import:
``import graphfeed`` changes no environment variable. Decisions, in order:

1. ``GRAPHFEED_ALLOC_CONF=off`` (also ``0``, ``false``, ``no``, ``none``): do nothing.
2. ``PYTORCH_ALLOC_CONF``, ``PYTORCH_CUDA_ALLOC_CONF`` or ``PYTORCH_HIP_ALLOC_CONF`` holds a
   non-empty value: the user's setting, never touched. An *empty* variable specifies nothing
   (PyTorch then uses its defaults, exactly as when it is unset), so it counts as unset.
3. No CUDA (CPU-only build of torch, or no visible device), a ROCm build, or a platform
   other than Linux (no expandable segments there): do nothing, print nothing.
4. The allocator was already configured in this process through PyTorch's own API
   (``torch._C._accelerator_setAllocatorSettings``): respected, do nothing.
5. CUDA is already initialised (the allocator has read its settings): warn once that the
   setting cannot take effect and how to set it before CUDA starts.
6. Otherwise set the variable PyTorch reads (``PYTORCH_ALLOC_CONF`` from torch 2.9,
   ``PYTORCH_CUDA_ALLOC_CONF`` before; child processes inherit it), apply it to the running
   allocator through PyTorch's API too (PyTorch parses the variable only once, possibly
   already at import), and warn once with how to keep PyTorch's default.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from typing import Optional

__all__ = [
    "EXPANDABLE",
    "OPT_OUT_VAR",
    "USER_VARS",
    "GraphfeedAllocatorWarning",
    "configure_cuda_allocator",
    "start_cuda",
]

EXPANDABLE = "expandable_segments:True"
OPT_OUT_VAR = "GRAPHFEED_ALLOC_CONF"
#: The variables PyTorch reads its allocator settings from, first one wins (torch >= 2.9).
USER_VARS = ("PYTORCH_ALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
_OFF_VALUES = {"off", "0", "false", "no", "none", "disable", "disabled"}

_lock = threading.Lock()
_done = False  # decided once per process; later calls return the first answer
_result: Optional[str] = None


class GraphfeedAllocatorWarning(UserWarning):
    """graphfeed changed (or could not change) PyTorch's CUDA allocator settings."""


def _torch_var_name(torch) -> str:
    """The variable this torch reads first: ``PYTORCH_ALLOC_CONF`` from 2.9, else the CUDA one."""
    try:
        major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    except ValueError:  # pragma: no cover - unusual local builds
        return "PYTORCH_ALLOC_CONF" if hasattr(torch._C, "_accelerator_setAllocatorSettings") else (
            "PYTORCH_CUDA_ALLOC_CONF"
        )
    return "PYTORCH_ALLOC_CONF" if (major, minor) >= (2, 9) else "PYTORCH_CUDA_ALLOC_CONF"


def _current_settings(torch) -> str:
    """What the running allocator was told through PyTorch's API ('' when nothing)."""
    get = getattr(torch._C, "_accelerator_getAllocatorSettings", None)
    if get is None:
        return ""
    try:
        return str(get() or "")
    except Exception:  # pragma: no cover - defensive: a private API may change
        return ""


def _apply_runtime(torch, conf: str) -> bool:
    """Hand ``conf`` to the running allocator (PyTorch reads the variable only once)."""
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None)
    if setter is None:  # torch < 2.9
        setter = getattr(torch._C, "_cuda_cudaCachingAllocator_set_allocator_settings", None)
    if setter is None:
        return False
    try:
        setter(conf)
        return True
    except Exception:  # pragma: no cover - the variable still reaches a fresh allocator
        return False


def _platform_supports_expandable(torch) -> bool:
    # Expandable segments use the CUDA driver's virtual memory API; PyTorch supports them on
    # Linux CUDA builds (Windows prints "not supported on this platform"; ROCm varies).
    return sys.platform.startswith("linux") and getattr(torch.version, "cuda", None) is not None


def configure_cuda_allocator() -> Optional[str]:
    """Enable ``expandable_segments:True`` before the first CUDA allocation, as described in
    the module docstring. Returns the setting graphfeed applied, or ``None`` when it changed
    nothing. Safe to call many times and from several threads; it decides once per process.
    Never initialises CUDA itself."""
    global _done, _result
    with _lock:
        if _done:
            return _result
        _result = _decide()
        _done = True
        return _result


def _decide() -> Optional[str]:
    if os.environ.get(OPT_OUT_VAR, "").strip().lower() in _OFF_VALUES:
        return None
    if any(os.environ.get(v, "").strip() for v in USER_VARS):
        return None
    import torch
    if getattr(torch.version, "cuda", None) is None:
        return None  # CPU-only (or ROCm) build: nothing to configure, nothing to say
    if not _platform_supports_expandable(torch):
        return None
    from . import _cuda

    if not _cuda.cuda_available():  # NVML: asking does not initialise CUDA
        return None
    if _current_settings(torch).strip():
        return None  # configured earlier through PyTorch's API: the user's choice
    if torch.cuda.is_initialized():
        warnings.warn(
            "graphfeed: CUDA was initialised before graphfeed could enable "
            f"{EXPANDABLE} in PyTorch's CUDA allocator, so the setting cannot take effect "
            "(variable-size mini-batches may fragment GPU memory). To use it, start Python "
            f"with PYTORCH_ALLOC_CONF={EXPANDABLE} (torch < 2.9: PYTORCH_CUDA_ALLOC_CONF), or "
            "create the graphfeed loader before any CUDA work. To silence this, set "
            f"{OPT_OUT_VAR}=off.",
            GraphfeedAllocatorWarning,
            stacklevel=3,
        )
        return None
    name = _torch_var_name(torch)
    os.environ[name] = EXPANDABLE
    _apply_runtime(torch, EXPANDABLE)
    warnings.warn(
        f"graphfeed: enabled {EXPANDABLE} in PyTorch's CUDA allocator ({name}) to avoid "
        "fragmentation from variable-size mini-batches. To keep PyTorch's default, set "
        f"PYTORCH_ALLOC_CONF or PYTORCH_CUDA_ALLOC_CONF yourself (e.g. "
        f"PYTORCH_ALLOC_CONF=expandable_segments:False), or set {OPT_OUT_VAR}=off.",
        GraphfeedAllocatorWarning,
        stacklevel=3,
    )
    return EXPANDABLE


def start_cuda() -> int:
    """Start CUDA in this process the graphfeed way (the allocator configured first, see
    :func:`configure_cuda_allocator`) and return torch's current device index."""
    import torch

    from . import _cuda

    _cuda.refuse_if_forked_tainted()
    configure_cuda_allocator()
    return int(torch.cuda.current_device())
