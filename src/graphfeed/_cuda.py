"""CUDA facts that do not start CUDA, and page-locking host memory through the driver API.

The bottom floor for everything in graphfeed that asks about or pins for a GPU.

**Asking "is there a GPU?" never initialises CUDA.** ``torch.cuda.is_available()`` calls
``cudaGetDeviceCount``, which initialises the CUDA driver in the calling process (torch >= 2.x,
unless ``PYTORCH_NVML_BASED_CUDA_CHECK=1``): a process that then forks hands its children a
driver they cannot use ("CUDA error: initialization error", or torch's "Cannot re-initialize CUDA
in forked subprocess"). :func:`device_count` asks NVML instead (the management library ships with
the driver and honours ``CUDA_VISIBLE_DEVICES``); only where NVML cannot answer does it ask a
short-lived child process, so this process still never touches the driver. Once torch has
initialised CUDA itself, torch's own count is used.

**Pinning in place goes through the CUDA driver API** (``cuMemHostRegister``, via ``ctypes`` on
``libcuda.so.1``), not through ``torch.cuda.cudart()``. A refused runtime call
(``cudaHostRegister``) leaves its error as the runtime's sticky "last error", which torch's next
kernel launch then reports as its own failure ("CUDA error: invalid argument" at an unrelated
``model.to(device)``), and torch's binding offers no ``cudaGetLastError`` to clear it. Driver API
calls return their status and leave no such state behind, so a refusal costs nothing: the caller
falls back to a pinned copy. The flags are chosen from the memory itself: a range that any
read-only mapping covers (``np.load(..., mmap_mode="r")``, a shared segment attached read-only)
is registered with ``CU_MEMHOSTREGISTER_READ_ONLY`` from the start (``/proc/self/maps`` says which).

Tests simulate a machine with or without a GPU by replacing :func:`device_count` (every caller
goes through this module's attribute, never a copied import), and the driver by replacing
``_driver_factory`` with a fake that records the calls and flags.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Optional

__all__ = [
    "cuda_built",
    "device_count",
    "cuda_available",
    "driver_initialized",
    "refuse_if_forked_tainted",
    "resolve_device",
    "HostRegistration",
    "host_register",
    "host_unregister",
    "mapping_writable",
    "REGISTER_PORTABLE",
    "REGISTER_DEVICEMAP",
    "REGISTER_READ_ONLY",
]

# cuMemHostRegister flags (cuda.h); the runtime's cudaHostRegister* flags have the same values.
REGISTER_PORTABLE = 0x01  # usable from every CUDA context, not only the registering one
REGISTER_DEVICEMAP = 0x02  # mapped into the device address space (UVA: device ptr == host ptr)
REGISTER_READ_ONLY = 0x08  # the device only reads; required for memory mapped read-only

_CUDA_SUCCESS = 0
_CUDA_ERROR_NOT_INITIALIZED = 3

_lock = threading.Lock()
_probe_cache: dict = {}


# ---------------------------------------------------------------------- "is there a GPU?"
def cuda_built() -> bool:
    """This torch build has CUDA (or ROCm) support. Imports torch; touches no driver."""
    import torch

    return torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None


def _count_in_child() -> int:
    """Ask a fresh interpreter (NVML unavailable): it may initialise CUDA, this process does not."""
    key = ("child", os.environ.get("CUDA_VISIBLE_DEVICES"))
    if key in _probe_cache:
        return _probe_cache[key]
    code = "import torch; print(torch.cuda.device_count())"
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=120, check=False)
        n = int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else 0
    except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
        n = 0
    _probe_cache[key] = n
    return n


def device_count() -> int:
    """Visible CUDA devices, without initialising CUDA in this process.

    0 on a CPU-only build. Honours ``CUDA_VISIBLE_DEVICES`` (including UUIDs and MIG names, as
    torch's NVML path does). Costs: an NVML query (milliseconds), or once per process a child
    interpreter where NVML is missing.
    """
    if not cuda_built():
        return 0
    import torch

    if torch.cuda.is_initialized():
        return int(torch.cuda.device_count())
    if getattr(torch.version, "hip", None) is not None:  # pragma: no cover - ROCm: amdsmi path
        return int(torch.cuda.device_count())
    nvml = getattr(torch.cuda, "_device_count_nvml", None)
    if nvml is not None:
        try:
            n = int(nvml())
        except Exception:  # noqa: BLE001 - a private helper; fall through to the child probe
            n = -1
        if n >= 0:
            return n
    return _count_in_child()


def cuda_available() -> bool:
    """At least one CUDA device is visible. Never initialises CUDA (see the module docstring)."""
    return device_count() > 0


def resolve_device(device="auto", mode: str = "auto"):
    """``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or a ``torch.device`` -> a concrete
    ``torch.device``, validated, without initialising CUDA: the one resolution of a device
    (the loader's output, the placement plan, ``graphfeed train --device``).

    ``"auto"`` is ``cuda`` when a device is visible, else ``cpu`` (the CPU whatever the
    machine when the placement ``mode`` is ``cpu-cpu``). A bare ``cuda`` is torch's
    current device once CUDA runs in this process, else ``LOCAL_RANK`` modulo the visible devices
    (one rank per GPU under torchrun), else 0. Raises ``GraphfeedError`` (a ``ValueError``)
    naming the value for an unknown device, a CUDA device on a machine or build without one, or
    an index out of range.
    """
    import torch

    from .errors import GraphfeedError

    if isinstance(device, str) and device.strip().lower() == "auto":
        device = "cuda" if mode != "cpu-cpu" and cuda_available() else "cpu"
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise GraphfeedError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if d.type == "cpu":
        return torch.device("cpu")
    if d.type != "cuda":
        raise GraphfeedError(f"unsupported device {device!r}; use auto, cpu, cuda or cuda:N")
    count = device_count()
    if count == 0:
        if not cuda_built():
            why = f"this torch build ({torch.__version__}) has no CUDA support"
        else:
            why = (f"torch was built with CUDA {torch.version.cuda} but no GPU is visible "
                   f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r})")
        raise GraphfeedError(f"device {str(device)!r} needs CUDA, but {why}; use device 'cpu'")
    if d.index is not None:
        index = d.index
    elif torch.cuda.is_initialized():
        index = int(torch.cuda.current_device())
    else:
        local = os.environ.get("LOCAL_RANK", "").strip()
        index = int(local) % count if local.isdigit() else 0
    if index >= count:
        raise GraphfeedError(f"device {str(device)!r}: only {count} CUDA device(s) are visible")
    return torch.device("cuda", index)


# ---------------------------------------------------------------------- the driver API
class _Driver:
    """The few ``libcuda`` entry points graphfeed uses, typed for ``ctypes``."""

    def __init__(self, lib):
        self._lib = lib
        c_int, c_uint, c_size_t, c_void_p = ctypes.c_int, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p
        sigs = {
            "cuCtxGetCurrent": ([ctypes.POINTER(c_void_p)], c_int),
            "cuDeviceGet": ([ctypes.POINTER(c_int), c_int], c_int),
            "cuDevicePrimaryCtxRetain": ([ctypes.POINTER(c_void_p), c_int], c_int),
            "cuDevicePrimaryCtxRelease_v2": ([c_int], c_int),
            "cuCtxPushCurrent_v2": ([c_void_p], c_int),
            "cuCtxPopCurrent_v2": ([ctypes.POINTER(c_void_p)], c_int),
            "cuMemHostRegister_v2": ([c_void_p, c_size_t, c_uint], c_int),
            "cuMemHostUnregister": ([c_void_p], c_int),
            "cuGetErrorName": ([c_int, ctypes.POINTER(ctypes.c_char_p)], c_int),
        }
        for name, (args, res) in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        # per registered address, the device handles whose primary context it keeps retained
        self._held: dict = {}
        self._held_lock = threading.Lock()

    def initialized(self) -> bool:
        ctx = ctypes.c_void_p()
        return self._lib.cuCtxGetCurrent(ctypes.byref(ctx)) != _CUDA_ERROR_NOT_INITIALIZED

    def error_name(self, code: int) -> str:
        s = ctypes.c_char_p()
        if self._lib.cuGetErrorName(int(code), ctypes.byref(s)) == _CUDA_SUCCESS and s.value:
            return s.value.decode()
        return f"CUresult {code}"

    def _in_primary_context(self, ordinal: int, call, *, keep: bool = False):
        """Run ``call`` with device ``ordinal``'s primary context (the one torch uses) current.

        Returns ``(status, device)``. With ``keep``, a call that succeeds leaves the context
        retained (the caller releases ``device`` later); otherwise the retain is released here.
        """
        device = ctypes.c_int()
        err = self._lib.cuDeviceGet(ctypes.byref(device), int(ordinal))
        if err != _CUDA_SUCCESS:
            return err, None
        ctx = ctypes.c_void_p()
        err = self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device)
        if err != _CUDA_SUCCESS:
            return err, None
        try:
            err = self._lib.cuCtxPushCurrent_v2(ctx)
            if err == _CUDA_SUCCESS:
                try:
                    err = call()
                finally:
                    popped = ctypes.c_void_p()
                    self._lib.cuCtxPopCurrent_v2(ctypes.byref(popped))
        except BaseException:
            self._lib.cuDevicePrimaryCtxRelease_v2(device)
            raise
        if keep and err == _CUDA_SUCCESS:
            return err, device
        self._lib.cuDevicePrimaryCtxRelease_v2(device)
        return err, None

    def register(self, ptr: int, nbytes: int, flags: int, device: int) -> int:
        """``cuMemHostRegister`` in ``device``'s primary context, which stays retained for as
        long as the registration lives: released at once, it would be reset if nothing else
        held it (torch had not created it yet), and the registration would go with it, without
        an error."""
        err, handle = self._in_primary_context(
            device, lambda: self._lib.cuMemHostRegister_v2(ctypes.c_void_p(ptr), nbytes, flags),
            keep=True)
        if err == _CUDA_SUCCESS:
            with self._held_lock:
                self._held.setdefault(int(ptr), []).append(handle)
        return err

    def unregister(self, ptr: int, device: int) -> int:
        """``cuMemHostUnregister``; then releases the primary context that the registration
        held (:meth:`register`)."""
        err, _ = self._in_primary_context(
            device, lambda: self._lib.cuMemHostUnregister(ctypes.c_void_p(ptr)))
        if err == _CUDA_SUCCESS:
            with self._held_lock:
                handles = self._held.get(int(ptr))
                handle = handles.pop() if handles else None
                if handles == []:
                    del self._held[int(ptr)]
            if handle is not None:
                self._lib.cuDevicePrimaryCtxRelease_v2(handle)
        return err

    def held(self) -> int:
        """How many registrations hold a primary context retained (for tests)."""
        with self._held_lock:
            return sum(len(h) for h in self._held.values())


def _load_driver() -> Optional[_Driver]:
    try:
        return _Driver(ctypes.CDLL("libcuda.so.1"))
    except (OSError, AttributeError):
        return None


#: How the driver is found; tests replace it with a fake that records the calls.
_driver_factory = _load_driver
_driver_cache: dict = {}


def _driver() -> Optional[_Driver]:
    with _lock:
        key = _driver_factory
        if key not in _driver_cache:
            _driver_cache[key] = _driver_factory()
        return _driver_cache[key]


def refuse_if_forked_tainted() -> None:
    """Raise ``GraphfeedError`` in a rank forked from a fork server whose preload initialised
    the CUDA driver (:mod:`graphfeed.distributed._preload`): CUDA cannot work in such a process,
    and torch would only say "initialization error" at the first CUDA call."""
    from .errors import GraphfeedError

    preload = sys.modules.get("graphfeed.distributed._preload")
    tainted = getattr(preload, "CUDA_TAINTED_BY", None)
    if tainted:
        raise GraphfeedError(
            f"this rank was forked from a fork server whose import of {tainted!r} initialised the "
            "CUDA driver, which a forked process cannot use; report this, and meanwhile start "
            "the ranks with torchrun"
        )


def driver_initialized() -> bool:
    """Whether this process has initialised the CUDA driver (``cuInit`` ran), without running it.

    A process for which this is true must not fork children that use CUDA. False where there is
    no driver.
    """
    drv = _driver()
    return bool(drv is not None and drv.initialized())


# ---------------------------------------------------------------------- pinning in place
def mapping_writable(ptr: int, nbytes: int, maps_path: str = "/proc/self/maps") -> Optional[bool]:
    """Whether every page of ``[ptr, ptr + nbytes)`` is mapped writable in this process.

    ``False`` when any page lies in a read-only mapping (a read-only ``np.memmap``, a segment
    attached read-only), ``None`` when it cannot be told (no ``/proc``, or the range is not fully
    mapped).
    """
    end = ptr + max(int(nbytes), 1)
    pos = ptr
    try:
        with open(maps_path) as f:
            regions = []
            for line in f:
                addr, perms = line.split(None, 2)[:2]
                lo, hi = (int(x, 16) for x in addr.split("-"))
                if hi > ptr and lo < end:
                    regions.append((lo, hi, perms))
    except (OSError, ValueError):
        return None
    for lo, hi, perms in sorted(regions):
        if lo > pos:
            return None  # a hole: not ours to judge
        if "w" not in perms:
            return False
        pos = max(pos, hi)
        if pos >= end:
            return True
    return None


@dataclass(frozen=True)
class HostRegistration:
    """The outcome of :func:`host_register`: ``ok``, the flags tried last, and why it failed."""

    ok: bool
    flags: int
    error: str = ""


def host_register(ptr: int, nbytes: int, *, device: int = 0,
                  read_only: Optional[bool] = None) -> HostRegistration:
    """Page-lock ``[ptr, ptr + nbytes)`` in place for ``device``, mapped for UVA, portable.

    ``read_only``: ``None`` decides from the mapping (:func:`mapping_writable`); a read-only
    mapping is registered with ``CU_MEMHOSTREGISTER_READ_ONLY``. When the first choice is refused
    the other is tried once. A refusal leaves no CUDA error state behind (driver API). The caller
    must have let torch initialise CUDA on ``device``; the registration keeps its primary context
    retained until :func:`host_unregister` (so it cannot be reset under it).
    """
    drv = _driver()
    if drv is None:
        return HostRegistration(False, 0, "the CUDA driver library (libcuda.so.1) was not found")
    if read_only is None:
        writable = mapping_writable(ptr, nbytes)
        read_only = writable is False
        tries = [read_only] if writable is not None else [False, True]
    else:
        tries = [bool(read_only)]
    if len(tries) == 1:
        tries.append(not tries[0])
    errors = []
    flags = 0
    for ro in tries:
        flags = REGISTER_PORTABLE | REGISTER_DEVICEMAP | (REGISTER_READ_ONLY if ro else 0)
        err = drv.register(ptr, int(nbytes), flags, int(device))
        if err == _CUDA_SUCCESS:
            return HostRegistration(True, flags)
        errors.append(f"{'read-only' if ro else 'read-write'}: {drv.error_name(err)}")
    return HostRegistration(False, flags, "; ".join(errors))


def host_unregister(ptr: int, *, device: int = 0) -> bool:
    """Undo :func:`host_register`. Returns whether the driver accepted it (False once the driver
    is gone at interpreter exit, which releases the registration anyway)."""
    drv = _driver()
    if drv is None:
        return False
    try:
        return drv.unregister(ptr, int(device)) == _CUDA_SUCCESS
    except (OSError, ValueError, ctypes.ArgumentError):  # pragma: no cover - teardown
        return False
