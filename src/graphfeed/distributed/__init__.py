"""Multi-process training on torch.distributed with one copy of the data per machine.

- :class:`World` (``World.from_env()``): who this process is, from torchrun's variables.
- :func:`init` / :func:`shutdown` / :func:`barrier`: the process group, with a timeout on every
  collective (gloo on CPU, NCCL on CUDA).
- :func:`launch`: run a function in N spawned processes as torchrun would; fail fast, clean up.
- :func:`share_dataset` / :func:`share_arrays`: graph and features mapped from files or placed
  once per machine in shared memory (:mod:`.shm`), or a private copy per rank for comparison.
- :func:`share_prepared`: a sampler's derived tables (alias records, sorted columns) built
  once per machine and mapped by the other ranks (:mod:`.tables`).
- :func:`pss_bytes`: proportional set size of a process (``/proc/<pid>/smaps_rollup``).
- :func:`register_pinned`: page-lock a shared segment for CUDA copies (:mod:`.pinned`).

Nothing here imports torch.distributed until a function that needs it is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# module -> the public names it defines, each imported on first use
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    ".world": "World init shutdown barrier is_initialized default_backend check_gpus_for_ranks",
    ".launcher": "launch RankFailedError RankFailure LaunchTerminated",
    ".sharing": "share_arrays collective_device share_dataset SharedDataset run_id",
    ".shm": "SharedArrays list_segments remove_segments",
    ".tables": "share_prepared TableCache",
    ".pss": "pss_bytes",
    ".pinned": "register_pinned",
})


if TYPE_CHECKING:  # pragma: no cover
    from .launcher import LaunchTerminated, RankFailedError, RankFailure, launch
    from .pinned import register_pinned
    from .pss import pss_bytes
    from .sharing import SharedDataset, collective_device, run_id, share_arrays, share_dataset
    from .shm import SharedArrays, list_segments, remove_segments
    from .tables import TableCache, share_prepared
    from .world import (World, barrier, check_gpus_for_ranks, default_backend, init,
                        is_initialized, shutdown)
