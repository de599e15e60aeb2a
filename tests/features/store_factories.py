"""Every feature store, built over the same array, for the contract tests."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from graphfeed.features.memory import InMemoryFeature

POLICIES = ("lru", "clock", "sieve", "s3fifo")

STORE_KINDS = (
    "memory",
    "disk",
    "disk-sorted",
    "disk-direct",
    "lmdb",
    *(f"cache-{p}" for p in POLICIES),
    "cache-disk",
    "pinned",
)


def make_array(dtype: str, width, num_rows: int, seed: int = 0) -> np.ndarray:
    """``(num_rows,)`` when ``width`` is None (one scalar per row), else ``(num_rows, width)``."""
    rng = np.random.default_rng(seed)
    shape = (num_rows,) if width is None else (num_rows, width)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-(2**62), 2**62, size=shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(dtype)


def make_store(kind: str, array: np.ndarray, tmp: Path):
    """The store ``kind`` holding ``array``; files go under ``tmp``."""
    from graphfeed.features.cache import CachedFeature
    from graphfeed.features.disk import DiskFeature
    from graphfeed.features.lmdb_store import LMDBFeature

    npy = tmp / "feature.npy"
    if kind.startswith("disk") or kind == "cache-disk":
        np.save(npy, array)
    row_nbytes = max(1, array[:1].nbytes)
    cap = max(1, array.shape[0] // 3) * row_nbytes  # a third of the rows
    if kind == "memory":
        return InMemoryFeature(array)
    if kind == "disk":
        return DiskFeature(npy)
    if kind == "disk-sorted":
        return DiskFeature(npy, sort_ids=True, num_threads=3)
    if kind == "disk-direct":
        # tiny gap and read limits force many separate, coalesced and split reads
        return DiskFeature(npy, direct_io=True, max_gap=4096, max_read=8192)
    if kind == "lmdb":
        return LMDBFeature.build(tmp / "feature.lmdb", array, rows_per_chunk=7)
    if kind.startswith("cache-"):
        policy = kind.split("-", 1)[1]
        if policy == "disk":
            return CachedFeature(DiskFeature(npy), cap, policy="s3fifo")
        return CachedFeature(InMemoryFeature(array), cap, policy=policy)
    if kind == "pinned":
        from graphfeed.features.pinned import PinnedFeature

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "pinning needs CUDA" on CPU
            return PinnedFeature(InMemoryFeature(array))
    raise AssertionError(kind)
