"""The one message for users who ask for worker processes (``num_workers``).

graphfeed's loader runs sampling and feature reads in threads of the training process (the
numba kernels and torch's gathers release the GIL), so it never forks. Forking after CUDA has
started is what produces "Cannot re-initialize CUDA in forked subprocess" and, with pinned
memory, crashes like "'PyCapsule' object has no attribute 'cudaHostUnregister'" when a worker
exits; graphfeed avoids both by design.
"""

from __future__ import annotations

import warnings
from typing import Optional

from .._checks import check_int
from ..errors import GraphfeedWarning

__all__ = ["NumWorkersWarning", "num_workers_message", "warn_num_workers"]


class NumWorkersWarning(GraphfeedWarning):
    """``num_workers`` was given; graphfeed uses threads instead of worker processes."""


def num_workers_message(
    mode: Optional[str], num_workers: Optional[int] = None, *, on_gpu: bool = False,
    threads_option: str = "num_threads"
) -> str:
    """The text shown when ``num_workers`` is given: why worker processes are not needed and
    what to use instead (``threads_option``, the loader's parallelism setting). ``on_gpu``:
    batches go to a GPU (placement ``mode``, named in the text)."""
    asked = f"num_workers={num_workers}" if num_workers is not None else "num_workers"
    if on_gpu:
        return (
            f"graphfeed: {asked} is not needed and is ignored in {mode} mode. graphfeed's loader "
            "runs sampling and feature reads in threads of this process (its numba and torch "
            "kernels release the GIL), so it starts no worker processes: forked workers cannot "
            "use CUDA ('Cannot re-initialize CUDA in forked subprocess') and would each hold "
            "their own copy of the pinned buffers. To change the parallelism, set "
            f"{threads_option}=N; to overlap more batches, raise the loader's prefetch depth."
        )
    return (
        f"graphfeed: {asked} is not needed and is ignored. graphfeed's loader runs sampling and "
        "feature reads in threads of this process (its numba and torch kernels release the "
        "GIL), so it never forks worker processes: the threads share one copy of the graph and "
        f"features instead of one per worker. To change the parallelism, set {threads_option}=N."
    )


def warn_num_workers(
    mode: Optional[str],
    num_workers: Optional[int],
    *,
    on_gpu: bool = False,
    threads_option: str = "num_threads",
    stacklevel: int = 3,
) -> bool:
    """Warn once with :func:`num_workers_message` when ``num_workers`` asks for worker
    processes (an int > 0). Returns whether it warned. ``num_workers`` of ``None`` or 0 is
    silent. A negative or non-integer value is a ``GraphfeedError``."""
    if num_workers is None:
        return False
    if check_int("num_workers", num_workers, 0) == 0:
        return False
    warnings.warn(
        num_workers_message(mode, num_workers, on_gpu=on_gpu, threads_option=threads_option),
        NumWorkersWarning,
        stacklevel=stacklevel,
    )
    return True
