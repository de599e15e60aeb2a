"""Helpers shared by the samplers: argument checks and the counter-based batch keys."""

from __future__ import annotations

import operator
from typing import Sequence

from ..errors import GraphfeedError

_M64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix64(x: int) -> int:
    """splitmix64 step on a Python int (same constants as the numba kernels)."""
    z = (x + _GOLDEN) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def batch_key(seed: int, epoch: int, batch_index: int, layer: int = -1) -> int:
    """A uint64 (as a Python int) that depends only on its arguments."""
    k = mix64(int(seed) & _M64)
    k = mix64(k ^ (int(epoch) & _M64))
    k = mix64(k ^ (int(batch_index) & _M64))
    return mix64(k ^ (int(layer) & _M64))


def check_fanouts(fanouts) -> list[int]:
    """A non-empty list of ints, each ``>= 1`` or ``-1`` (every neighbour)."""
    if isinstance(fanouts, (str, bytes)) or not isinstance(fanouts, Sequence):
        try:
            fanouts = list(fanouts)
        except TypeError:
            raise GraphfeedError(f"fanouts must be a sequence of ints, got {fanouts!r}") from None
    out = []
    for f in fanouts:
        if isinstance(f, bool):
            raise GraphfeedError(f"fanouts must be ints >= 1 or -1, got {f!r} in {list(fanouts)}")
        try:
            f = operator.index(f)
        except TypeError:
            raise GraphfeedError(
                f"fanouts must be ints >= 1 or -1, got {f!r} in {list(fanouts)}"
            ) from None
        if f < 1 and f != -1:
            raise GraphfeedError(f"fanouts must be ints >= 1 or -1, got {f} in {list(fanouts)}")
        out.append(int(f))
    if not out:
        raise GraphfeedError("fanouts must not be empty (one entry per GNN layer)")
    return out
