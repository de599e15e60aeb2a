"""Open a ``.npy`` feature with a chosen backend: ``open_feature(path, "disk", cache_size="2GB")``.

``BACKENDS`` names every backend and the function (or class) that opens a ``.npy`` with it, as
``opener(path, **options)``; the options a backend takes are its opener's keyword parameters.
A new backend is one module with an opener and one line here.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .._registry import Registry
from .._units import parse_size
from ._policies import POLICIES, policy_code, resolve_policy
from ..errors import GraphfeedError

if TYPE_CHECKING:  # pragma: no cover - importing the registry loads no torch
    from .base import Feature

__all__ = ["BACKENDS", "POLICIES", "open_feature", "policy_code"]

BACKENDS = Registry("feature backend", package=__package__)
BACKENDS.add("ram", ".memory:open_npy", "loaded into memory; mmap=True shares a read-only map")
BACKENDS.add("disk", ".disk:DiskFeature", "read from the .npy on demand (page cache or O_DIRECT)")
BACKENDS.add("lmdb", ".lmdb_store:open_npy", "an LMDB copy beside the .npy, built on first use")


def open_feature(
    npy_path: str | os.PathLike,
    backend: str = "ram",
    *,
    cache_size=0,
    cache_policy: str = "sieve",
    dtype=None,
    degrees=None,
    **options,
) -> "Feature":
    """A ``Feature`` over the rows of ``npy_path``.

    - ``"ram"``: loaded into memory (``InMemoryFeature``; ``mmap=True`` shares a read-only map
      instead).
    - ``"disk"``: ``DiskFeature`` (options: ``num_threads``, ``direct_io`` (``"auto"``: direct
      reads when the file exceeds half the memory available), ``queue_depth`` (64 reads in
      flight), ``io_engine`` (``auto``, ``uring``, ``threads``), ``sort_ids``, ``max_gap`` (8 KiB)
      and ``max_read`` (128 KiB)).
    - ``"lmdb"``: ``LMDBFeature`` at ``lmdb_path`` (default ``<name>.lmdb`` beside the file), built
      atomically from the ``.npy`` on first use; a store whose dtype or shape does not match the
      ``.npy`` is rebuilt (options: ``lmdb_path``, ``rows_per_chunk``, ``num_threads``).

    ``cache_size`` (bytes, or a string such as ``"512MB"``/``"2GiB"``) > 0 wraps the store in a
    ``CachedFeature`` with ``cache_policy`` (not an in-memory one, which needs no cache; ``auto``
    is ``degree`` when ``degrees`` are given, else ``sieve``); ``degrees``: the ``"degree"``
    policy's score per row (a graph's ``out_degrees``). An
    unknown backend or an option the backend does not take is a ``GraphfeedError``.

    ``dtype``: the rows' dtype where the file holds the bits of one numpy lacks: ``"bfloat16"``
    for a uint16 ``.npy`` of bf16 bits, as a dataset stores them (``Dataset.node_feature``
    passes its metadata's dtype). Every built-in backend takes it (an option of the opener);
    a backend that does not cannot read such a file and says so.
    """
    name = backend.lower() if isinstance(backend, str) else backend
    cache_policy = resolve_policy(cache_policy, degrees is not None)
    opener = BACKENDS.get(name)
    if dtype is not None:
        options["dtype"] = dtype
    cache_bytes = parse_size(cache_size)
    unexpected = sorted(set(options) - _option_names(opener))
    if unexpected:
        raise GraphfeedError(f"unexpected options for the {name!r} backend: {unexpected}")
    feature = opener(Path(npy_path), **options)
    from .memory import InMemoryFeature

    if cache_bytes > 0 and not isinstance(feature, InMemoryFeature):
        from .cache import CachedFeature

        feature = CachedFeature(feature, cache_bytes, policy=cache_policy, degrees=degrees)
    elif degrees is not None and cache_policy != "degree":
        raise GraphfeedError(f"degrees are for cache policy 'degree', not {cache_policy!r}")
    return feature


def _option_names(opener) -> set:
    """The keyword options ``opener(path, **options)`` takes (its parameters after the path)."""
    params = list(inspect.signature(opener).parameters.values())[1:]
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in params if p.kind in kinds}
