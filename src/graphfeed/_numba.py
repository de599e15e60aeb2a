"""The one place that owns numba's JIT flags.

Kernels elsewhere use ``@kernel`` (``njit(nogil=True, cache=True)``) and ``@parallel_kernel``.
numba itself is imported when a kernel module is first imported, never by ``import graphfeed``.
"""

from __future__ import annotations

import numba

KERNEL_FLAGS = dict(nogil=True, cache=True, fastmath=False, boundscheck=False)

kernel = numba.njit(**KERNEL_FLAGS)


def parallel_kernel(fn):
    """A kernel that uses ``numba.prange``. Only call it from one Python thread at a time."""
    return numba.njit(parallel=True, **KERNEL_FLAGS)(fn)
