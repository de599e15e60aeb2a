"""Argument types shared by the subcommands (argparse turns their ValueErrors into one-line errors)."""

from __future__ import annotations

import argparse


def fanouts(text: str) -> list[int]:
    try:
        vals = [int(t) for t in text.replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"fanouts must be comma-separated integers, got {text!r}") from None
    if not vals or any(v < 1 and v != -1 for v in vals):
        raise argparse.ArgumentTypeError(f"fanouts must be integers >= 1 (or -1 for all), got {text!r}")
    return vals


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {v}")
    return v


def size(text: str) -> int:
    """Bytes from '0', '512MB', '2GiB', '1.5G' ..."""
    from .._units import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
