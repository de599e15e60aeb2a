"""The distributed topology as a plain value, and the process group's lifecycle.

``World`` says who this process is (global rank, rank on its machine, machine index); it is read
from the variables torchrun sets and defaults to one process. ``init`` / ``shutdown`` / ``barrier``
wrap ``torch.distributed`` with a timeout on every collective, so that when one rank dies the
others raise instead of waiting forever.

``torch.distributed`` is imported inside the functions that need it, never at module import.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import Mapping, Optional

from ..errors import GraphfeedError

#: Default timeout of every collective (seconds). Overridden by ``GRAPHFEED_DIST_TIMEOUT``.
DEFAULT_TIMEOUT_S = 300.0
#: Environment variable through which ``launch`` passes the collective timeout to its ranks.
TIMEOUT_ENV = "GRAPHFEED_DIST_TIMEOUT"


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise GraphfeedError(f"environment variable {name}={raw!r} is not an integer") from None


@dataclass(frozen=True)
class World:
    """Who this process is among the training processes.

    - ``rank`` / ``world_size``: global rank in ``[0, world_size)``.
    - ``local_rank`` / ``local_world_size``: rank among the processes on this machine.
    - ``group_rank``: index of this machine (torchrun's ``GROUP_RANK``; 0 on a single machine).
    - ``master_addr`` / ``master_port``: rendezvous address of rank 0 (``None`` for one process).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    group_rank: int = 0
    master_addr: Optional[str] = None
    master_port: Optional[int] = None

    def __post_init__(self):
        if self.world_size < 1:
            raise GraphfeedError(f"world_size must be >= 1, got {self.world_size}")
        if not 0 <= self.rank < self.world_size:
            raise GraphfeedError(f"rank {self.rank} is outside [0, {self.world_size})")
        if not 1 <= self.local_world_size <= self.world_size:
            raise GraphfeedError(
                f"local_world_size {self.local_world_size} must be in [1, {self.world_size}]"
            )
        if not 0 <= self.local_rank < self.local_world_size:
            raise GraphfeedError(
                f"local_rank {self.local_rank} is outside [0, {self.local_world_size})"
            )

    @property
    def is_main(self) -> bool:
        """The one process that logs and writes checkpoints (global rank 0)."""
        return self.rank == 0

    @property
    def is_local_main(self) -> bool:
        """The first process on this machine: it creates the machine's shared copy of the data."""
        return self.local_rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    @property
    def num_machines(self) -> int:
        return max(1, self.world_size // self.local_world_size)

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None) -> "World":
        """Read torchrun's variables (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
        ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``).

        Missing variables mean a single process: ``World()``. ``LOCAL_WORLD_SIZE`` defaults to
        ``WORLD_SIZE`` (one machine) and ``LOCAL_RANK`` to ``RANK``.
        """
        env = os.environ if env is None else env
        world_size = _env_int(env, "WORLD_SIZE", 1)
        rank = _env_int(env, "RANK", 0)
        local_world_size = _env_int(env, "LOCAL_WORLD_SIZE", world_size)
        local_rank = _env_int(env, "LOCAL_RANK", rank % max(local_world_size, 1))
        group_rank = _env_int(env, "GROUP_RANK", rank // max(local_world_size, 1))
        port = env.get("MASTER_PORT")
        return cls(
            rank=rank,
            world_size=world_size,
            local_rank=local_rank,
            local_world_size=local_world_size,
            group_rank=group_rank,
            master_addr=env.get("MASTER_ADDR") or None,
            master_port=_env_int(env, "MASTER_PORT", 0) if port else None,
        )


def timeout_from_env(default: float = DEFAULT_TIMEOUT_S) -> float:
    """The collective timeout ``launch`` passed down (``GRAPHFEED_DIST_TIMEOUT``), else ``default``."""
    raw = os.environ.get(TIMEOUT_ENV)
    if not raw:
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise GraphfeedError(f"{TIMEOUT_ENV}={raw!r} is not a number of seconds") from None
    if value <= 0:
        raise GraphfeedError(f"{TIMEOUT_ENV} must be > 0 seconds, got {value}")
    return value


def check_gpus_for_ranks(ranks_per_machine: int, backend: str) -> None:
    """Refuse, in one line, a job NCCL cannot run: it needs one GPU per rank on each machine.

    Asks NVML (never initialises CUDA, so the launcher may still fork ranks after it). Raises
    ``GraphfeedError`` saying how many GPUs and ranks there are and what to do instead.
    """
    if backend != "nccl":
        return
    from .. import _cuda

    _cuda.refuse_if_forked_tainted()
    gpus = _cuda.device_count()
    if gpus == 0:
        raise GraphfeedError(
            "backend 'nccl' trains on GPUs, but no CUDA device is visible "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')!r}); "
            "use --device cpu (gloo)"
        )
    if ranks_per_machine > gpus:
        raise GraphfeedError(
            f"{ranks_per_machine} ranks per machine but {gpus} GPU(s) visible: NCCL needs one GPU "
            f"per rank. Run {gpus} rank(s) (--nproc {gpus}, or torchrun --nproc-per-node {gpus}), "
            "or pass --dist-backend gloo to let ranks share a GPU (slower collectives)"
        )


def default_backend(device=None) -> str:
    """``"nccl"`` when ``device`` is a CUDA device (and NCCL is built in), else ``"gloo"``."""
    import torch

    if device is not None and torch.device(device).type == "cuda":
        import torch.distributed as dist

        if dist.is_nccl_available():
            return "nccl"
    return "gloo"


def exchange_backend(device=None, backend: Optional[str] = None):
    """``(backend, tensor_device)`` of a partitioned run's all-to-all exchanges (sampling
    requests and replies, feature rows) for ranks training on ``device``.

    GPU ranks exchange on NCCL, with the tensors on the rank's GPU (NCCL moves only CUDA
    tensors; it is what carries rows between GPUs over NVLink and InfiniBand, where gloo
    would go through the host's TCP stack); CPU ranks on gloo with CPU tensors.
    ``backend``: the run's choice (``--dist-backend``), ``None`` for ``default_backend(device)``;
    ``"gloo"`` keeps GPU ranks' exchanges on CPU tensors (ranks sharing a GPU, where NCCL
    cannot run). A CUDA device without an index is the rank's GPU, ``LOCAL_RANK`` (the device
    ``init`` makes current). Never starts CUDA."""
    import torch

    d = torch.device("cpu" if device is None else device)
    if d.type not in ("cpu", "cuda"):
        raise GraphfeedError(f"the partitioned exchange runs on 'cpu' or 'cuda' devices, "
                             f"got {str(d)!r}")
    backend = backend or default_backend(d)
    if backend not in ("gloo", "nccl"):
        raise GraphfeedError(f"unknown backend {backend!r}; choose 'gloo' or 'nccl'")
    if backend == "gloo":
        return "gloo", torch.device("cpu")
    if d.type != "cuda":
        raise GraphfeedError(f"backend 'nccl' exchanges CUDA tensors, but the ranks are on "
                             f"{str(d)!r}; use gloo (--dist-backend gloo) or GPU ranks")
    index = d.index if d.index is not None else World.from_env().local_rank
    return "nccl", torch.device("cuda", index)


def is_initialized() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


def init(
    world: Optional[World] = None,
    *,
    backend: Optional[str] = None,
    device=None,
    timeout_s: Optional[float] = None,
) -> World:
    """Initialise the default process group for ``world`` (``World.from_env()`` when omitted).

    - ``backend``: ``"gloo"`` or ``"nccl"``; ``None`` picks ``default_backend(device)``.
    - ``timeout_s``: every collective raises after this many seconds instead of hanging
      (``GRAPHFEED_DIST_TIMEOUT`` or 300 s when omitted). Gloo honours it directly. For NCCL the
      watchdog's asynchronous error handling is switched on (``TORCH_NCCL_ASYNC_ERROR_HANDLING=1``,
      unless the user set it) so a timed-out collective tears the process down with an error
      instead of leaving it blocked in a kernel; the CUDA device is set to ``local_rank``. More
      ranks on a machine than GPUs is refused in one line (:func:`check_gpus_for_ranks`).

    A one-process world is a no-op (no process group). Calling ``init`` again in an initialised
    process returns ``world`` unchanged. Returns ``world``.
    """
    import torch
    import torch.distributed as dist

    world = World.from_env() if world is None else world
    if not world.is_distributed:
        return world
    if not dist.is_available():  # pragma: no cover - every official build has it
        raise GraphfeedError("this torch build has no torch.distributed")
    if dist.is_initialized():
        if dist.get_world_size() != world.world_size or dist.get_rank() != world.rank:
            raise GraphfeedError(
                f"a process group is already initialised as rank {dist.get_rank()} of "
                f"{dist.get_world_size()}, not rank {world.rank} of {world.world_size}"
            )
        return world
    backend = backend or default_backend(device)
    if backend not in ("gloo", "nccl"):
        raise GraphfeedError(f"unknown backend {backend!r}; choose 'gloo' or 'nccl'")
    timeout_s = timeout_from_env() if timeout_s is None else float(timeout_s)
    if timeout_s <= 0:
        raise GraphfeedError(f"timeout_s must be > 0, got {timeout_s}")
    if world.master_addr is None or world.master_port is None:
        raise GraphfeedError(
            f"rank {world.rank} of {world.world_size}: MASTER_ADDR and MASTER_PORT must be set "
            "(run under torchrun or graphfeed.distributed.launch)"
        )
    kwargs = {}
    if backend == "nccl":
        check_gpus_for_ranks(world.local_world_size, backend)
        os.environ.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1")
        from .. import cuda_alloc

        cuda_alloc.start_cuda()  # allocator configured before the device's first allocation
        torch.cuda.set_device(world.local_rank)
        import inspect

        if "device_id" in inspect.signature(dist.init_process_group).parameters:  # torch >= 2.3
            kwargs["device_id"] = torch.device("cuda", torch.cuda.current_device())
    dist.init_process_group(
        backend=backend,
        init_method=f"tcp://{world.master_addr}:{world.master_port}",
        rank=world.rank,
        world_size=world.world_size,
        timeout=datetime.timedelta(seconds=timeout_s),
        **kwargs,
    )
    return world


def shutdown() -> None:
    """Destroy the default process group if there is one (safe to call twice)."""
    if is_initialized():
        import torch.distributed as dist

        dist.destroy_process_group()


def barrier(timeout_s: Optional[float] = None) -> None:
    """Wait for every rank; a no-op without a process group.

    On gloo this is ``monitored_barrier``: after ``timeout_s`` (default: the group's timeout) it
    raises naming the ranks that did not arrive. On NCCL it is ``barrier`` (bounded by the group's
    timeout through the watchdog).
    """
    if not is_initialized():
        return
    import torch.distributed as dist

    if dist.get_backend() == "gloo":
        kw = {}
        if timeout_s is not None:
            kw["timeout"] = datetime.timedelta(seconds=float(timeout_s))
        dist.monitored_barrier(**kw)
    else:
        dist.barrier()
