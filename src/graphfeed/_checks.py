"""Checks of plain values at the library's boundary, with one wording for every error.

``check_int("batch_size", v, 1)`` accepts Python and numpy integers (never ``bool``) and raises
``GraphfeedError`` naming the argument, the bound and the value; ``check_float`` does the same for
numbers in an interval. Every module validates user input through these (one copy of the rules).
"""

from __future__ import annotations

import math
import operator
from typing import Optional

from .errors import GraphfeedError

__all__ = ["check_int", "check_float", "shown"]


def check_int(name: str, value, lo: int, hi: Optional[int] = None) -> int:
    """``value`` as an ``int`` in ``[lo, hi]`` (``hi=None``: no upper bound)."""
    if isinstance(value, bool):
        raise GraphfeedError(f"{name} must be an integer, got {value!r}")
    try:
        v = operator.index(value)  # int, numpy integers; not float, str
    except TypeError:
        raise GraphfeedError(f"{name} must be an integer, got {value!r}") from None
    if v < lo or (hi is not None and v > hi):
        bound = f">= {lo}" if hi is None else f"between {lo} and {hi}"
        raise GraphfeedError(f"{name} must be an integer {bound}, got {v}")
    return int(v)


def check_float(name: str, value, lo: float, hi: float, *, lo_open: bool = False,
                hi_open: bool = False) -> float:
    """``value`` as a finite ``float`` in the interval from ``lo`` to ``hi`` (closed unless
    ``lo_open``/``hi_open``)."""
    if isinstance(value, bool):
        raise GraphfeedError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        raise GraphfeedError(f"{name} must be a number, got {value!r}") from None
    ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and (v < hi if hi_open else v <= hi)
    if not ok:
        left, right = "(" if lo_open else "[", ")" if hi_open else "]"
        raise GraphfeedError(
            f"{name} must be a finite number in {left}{lo:g}, {hi:g}{right}, got {value!r}")
    return v


#: a container with more items than this, or holding a container, is shown by its size
_SHOWN_ITEMS = 16


def shown(value, limit: int = 60) -> str:
    """``value`` for naming a bad value in an error message, at most ``limit`` characters: its
    ``repr`` cut, or for a list, tuple, set or mapping that holds more than a few items or any
    container, its type and size, never its ``repr`` (a corrupt file can hold a value of any
    size: a pickle's memo or a YAML alias makes a 1 kB file hold a list of 9 references to a
    list of 9 references ..., whose ``repr`` has billions of items)."""
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        n = len(value)  # first: a huge container is never copied to be looked at
        flat = ([x for kv in value.items() for x in kv] if isinstance(value, dict)
                else list(value)) if n <= _SHOWN_ITEMS else []
        if n > _SHOWN_ITEMS or any(
                isinstance(x, (list, tuple, set, frozenset, dict)) or
                (isinstance(x, (str, bytes)) and len(x) > limit) for x in flat):
            kind = "mapping" if isinstance(value, dict) else type(value).__name__
            return f"a {kind} of {n} item{'' if n == 1 else 's'}"
    elif isinstance(value, (str, bytes)) and len(value) > limit:
        value = value[:limit]
    r = repr(value)
    return r if len(r) <= limit else r[:limit - 3] + "..."
