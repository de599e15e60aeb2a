"""``num_workers`` per placement mode: the loader's message (:mod:`graphfeed.loader.workers`)
told whether the mode trains on a GPU."""

from __future__ import annotations

from typing import Optional

from ..loader.workers import NumWorkersWarning
from ..loader.workers import num_workers_message as _message
from ..loader.workers import warn_num_workers as _warn
from .modes import AUTO, mode_spec, validate_mode

__all__ = ["NumWorkersWarning", "num_workers_message", "warn_num_workers"]


def _on_gpu(mode: str) -> tuple[str, bool]:
    mode = validate_mode(mode)
    return mode, mode != AUTO and mode_spec(mode).uses_cuda


def num_workers_message(mode: str, num_workers: Optional[int] = None, *,
                        threads_option: str = "num_threads") -> str:
    """Why worker processes are not needed in placement ``mode`` and what to use instead."""
    mode, gpu = _on_gpu(mode)
    return _message(mode, num_workers, on_gpu=gpu, threads_option=threads_option)


def warn_num_workers(mode: str, num_workers: Optional[int], *, threads_option: str = "num_threads",
                     stacklevel: int = 3) -> bool:
    """Warn once with :func:`num_workers_message` when ``num_workers`` > 0; returns whether it
    warned (``None`` and 0 are silent; a negative or non-integer value is an error)."""
    mode, gpu = _on_gpu(mode)
    return _warn(mode, num_workers, on_gpu=gpu, threads_option=threads_option,
                 stacklevel=stacklevel + 1)
