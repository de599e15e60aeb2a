"""Byte sizes for humans: ``format_bytes(38.2e9) == "38.2 GB"`` and ``parse_size("38.2GB")``.

Units are decimal (``GB`` = 10**9 bytes), as ``nvidia-smi`` and ``free -h --si`` print them;
binary suffixes (``GiB`` = 2**30) are accepted by ``parse_size``.
"""

from __future__ import annotations

import re

from .errors import GraphfeedError

__all__ = ["format_bytes", "parse_size"]

_DECIMAL = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_BINARY = {"ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40, "pi": 2**50}
_SIZE_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([kmgtp]i?)?\s*(b|bytes?)?\s*$", re.I)


def format_bytes(n: float) -> str:
    """``n`` bytes with a decimal unit and about three significant digits: ``"0 B"``,
    ``"512 B"``, ``"1.5 kB"``, ``"38.2 GB"``, ``"171 GB"``. Negative sizes keep their sign."""
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            v = n / scale
            text = f"{v:.0f}" if v >= 99.95 else f"{v:.1f}"
            return f"{sign}{text} {unit}"
    return f"{sign}{n:.0f} B"


def parse_size(text) -> int:
    """Bytes in ``text``: an int (returned as is) or a string like ``"512"``, ``"64MB"``,
    ``"1.5 GB"``, ``"2GiB"``, ``"10g"``. Decimal suffixes are powers of 1000, ``Ki/Mi/Gi/Ti``
    powers of 1024. Raises ``GraphfeedError`` naming the value when it cannot be parsed or is
    negative."""
    if isinstance(text, bool):
        raise GraphfeedError(f"not a size: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise GraphfeedError(f"a size must be >= 0, got {text}")
        return text
    if isinstance(text, float):
        if not text >= 0 or text == float("inf"):
            raise GraphfeedError(f"a size must be a finite number >= 0, got {text}")
        return int(text)
    m = _SIZE_RE.match(str(text))
    if m is None:
        raise GraphfeedError(
            f"not a size: {text!r} (expected a number of bytes with an optional unit, "
            "e.g. 512MB, 1.5GB, 2GiB)"
        )
    number, unit, _ = m.groups()
    unit = (unit or "").lower()
    scale = _BINARY[unit] if unit.endswith("i") else _DECIMAL[unit]
    return int(round(float(number) * scale))
