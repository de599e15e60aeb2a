"""The one place that owns numba's JIT flags, and the intrinsics every kernel module shares.

Kernels elsewhere use ``@kernel`` (``njit(nogil=True, cache=True)``): module-level functions over
plain arrays, callable from several threads at once (they release the GIL). numba itself is
imported when a kernel module is first imported, never by ``import graphfeed``.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

KERNEL_FLAGS = dict(nogil=True, cache=True, fastmath=False, boundscheck=False)

kernel = numba.njit(**KERNEL_FLAGS)


@intrinsic
def prefetch(typingctx, arr, idx):
    """Hint the CPU to load ``arr[idx]`` into cache (``llvm.prefetch``, read, high locality;
    never faults, so an address past the end of ``arr`` is harmless). Random-access kernels
    (the samplers' fill and relabel loops, the feature gathers) issue it a few iterations
    ahead, so several cache misses are in flight at once instead of one."""
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]], wraparound=False)
        i32 = ir.IntType(32)
        opaque = getattr(ptr.type, "is_opaque", True)
        if not opaque:  # typed pointers: the intrinsic takes an i8* (one declaration for all dtypes)
            ptr = builder.bitcast(ptr, ir.IntType(8).as_pointer())
        fnty = ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32])
        name = "llvm.prefetch.p0" if opaque else "llvm.prefetch.p0i8"
        fn = cgutils.get_or_insert_function(builder.module, fnty, name)
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


_MIX_C1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_C2 = np.uint64(0x94D049BB133111EB)
_MIX_S30, _MIX_S27, _MIX_S31 = np.uint64(30), np.uint64(27), np.uint64(31)


@kernel
def mix64(z):
    """splitmix64's finaliser (a bijection on uint64): every counter-based draw's hash."""
    z = (z ^ (z >> _MIX_S30)) * _MIX_C1
    z = (z ^ (z >> _MIX_S27)) * _MIX_C2
    return z ^ (z >> _MIX_S31)


@kernel
def bucket_of(bounds, v):
    """The ``t`` with ``bounds[t] <= v < bounds[t + 1]`` (``bounds`` ascending, ``bounds[0] <= v
    < bounds[-1]``): a binary search over a few bounds (node type offsets, class ranges)."""
    lo = 0
    hi = bounds.shape[0] - 1
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if bounds[mid] <= v:
            lo = mid
        else:
            hi = mid
    return lo
