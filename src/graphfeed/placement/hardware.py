"""What the machine offers: host memory, GPU memory, ranks per machine (a plain value).

:func:`detect_hardware` reads ``/proc/meminfo`` (and the cgroup limit, in containers) and asks
PyTorch about the GPU. It never initialises CUDA on a CPU-only build of torch or when no
device is visible; with a GPU it configures the allocator (:mod:`graphfeed.cuda_alloc`) first,
because measuring free GPU memory starts CUDA.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Optional

from .._memory import host_memory  # in the bottom floor: partition asks it too
from .._units import format_bytes
from ..errors import GraphfeedError

__all__ = ["Hardware", "detect_hardware", "host_memory"]


@dataclass(frozen=True)
class Hardware:
    """Memory and devices available to one rank (all sizes in bytes).

    - ``host_total_bytes`` / ``host_free_bytes``: the machine's RAM and what can still be used
      without swapping (``MemAvailable``, capped by the container's cgroup limit).
    - ``gpu_*``: the rank's GPU (``None`` without CUDA); ``gpu_free_bytes`` is what
      ``torch.cuda.mem_get_info`` reports, i.e. free for every process on that GPU.
    - ``gpu_count``: visible GPUs on this machine (0 without CUDA).
    - ``ranks_per_machine``: processes of the job on this machine; they share the host copy
      of the data and, when there are more ranks than GPUs, the GPUs.
    - ``supports_uva``: the GPU can read pinned host memory directly (pinned-cuda mode).
    """

    host_total_bytes: int
    host_free_bytes: int
    gpu_name: Optional[str] = None
    gpu_total_bytes: Optional[int] = None
    gpu_free_bytes: Optional[int] = None
    gpu_count: int = 0
    ranks_per_machine: int = 1
    cuda_available: bool = False
    supports_uva: bool = False
    device: str = "cpu"

    def __post_init__(self):
        if self.ranks_per_machine < 1:
            raise GraphfeedError(f"ranks_per_machine must be >= 1, got {self.ranks_per_machine}")
        if self.cuda_available and (self.gpu_free_bytes is None or self.gpu_total_bytes is None):
            raise GraphfeedError("a Hardware with cuda_available=True needs the GPU's memory sizes")
        if self.cuda_available and self.gpu_count < 1:
            object.__setattr__(self, "gpu_count", 1)
        if self.cuda_available and self.device == "cpu":
            object.__setattr__(self, "device", "cuda:0")

    @property
    def ranks_per_gpu(self) -> int:
        """Ranks sharing one GPU (1 in the usual one-rank-per-GPU setup)."""
        if not self.cuda_available:
            return 0
        return max(1, -(-self.ranks_per_machine // max(1, self.gpu_count)))

    def describe(self) -> str:
        host = (
            f"host {format_bytes(self.host_free_bytes)} free of "
            f"{format_bytes(self.host_total_bytes)}"
        )
        if not self.cuda_available:
            return f"{host}, no CUDA device, {self.ranks_per_machine} rank(s) per machine"
        return (
            f"{host}, {self.device} {self.gpu_name or 'GPU'} {format_bytes(self.gpu_free_bytes)} "
            f"free of {format_bytes(self.gpu_total_bytes)}, {self.gpu_count} GPU(s), "
            f"{self.ranks_per_machine} rank(s) per machine"
        )


# ---------------------------------------------------------------------- GPU
def detect_hardware(ranks_per_machine: Optional[int] = None, device=None) -> Hardware:
    """Measure this machine for placement.

    ``ranks_per_machine``: ``None`` reads ``LOCAL_WORLD_SIZE`` (set by torchrun), else 1.
    ``device``: ``"cpu"`` forces a CPU-only answer; ``"cuda:1"`` measures that GPU; ``None``
    uses CUDA when available, on GPU ``LOCAL_RANK`` (else 0).
    Costs: reads two small files; with a GPU, starts CUDA on that device (after
    :func:`graphfeed.cuda_alloc.configure_cuda_allocator`).
    """
    if ranks_per_machine is None:
        env = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
        ranks_per_machine = int(env) if env.isdigit() and int(env) > 0 else 1
    host_total, host_free = host_memory()
    base = dict(
        host_total_bytes=host_total,
        host_free_bytes=host_free,
        ranks_per_machine=int(ranks_per_machine),
    )

    import torch

    if device is not None and torch.device(device).type == "cpu":
        return Hardware(**base)
    if device is not None and torch.device(device).type != "cuda":
        raise GraphfeedError(f"placement supports 'cpu' and 'cuda' devices, got {device!r}")
    from .. import _cuda, cuda_alloc

    # CPU-only build, or no visible device: answer without touching CUDA (NVML asks, see _cuda).
    if not _cuda.cuda_available():
        return Hardware(**base)
    index = _cuda.resolve_device("cuda" if device is None else device).index
    count = _cuda.device_count()
    cuda_alloc.start_cuda()  # allocator configured before the first CUDA call below
    free, total = torch.cuda.mem_get_info(index)
    name = torch.cuda.get_device_name(index)
    # UVA (a device pointer for pinned host memory) holds on 64-bit Linux/Windows-TCC CUDA;
    # graphfeed's pinned-cuda mode relies on cudaHostRegister, available on NVIDIA CUDA builds.
    uva = torch.version.cuda is not None and sys.maxsize > 2**32
    return Hardware(
        **base,
        gpu_name=name,
        gpu_total_bytes=int(total),
        gpu_free_bytes=int(free),
        gpu_count=int(count),
        cuda_available=True,
        supports_uva=bool(uva),
        device=f"cuda:{index}",
    )
