"""The one place that owns numba's JIT flags.

Kernels elsewhere use ``@kernel`` (``njit(nogil=True, cache=True)``): module-level functions over
plain arrays, callable from several threads at once (they release the GIL). numba itself is
imported when a kernel module is first imported, never by ``import graphfeed``.
"""

from __future__ import annotations

import numba

KERNEL_FLAGS = dict(nogil=True, cache=True, fastmath=False, boundscheck=False)

kernel = numba.njit(**KERNEL_FLAGS)
