"""Every feature store, built over the same array, for the contract tests.

A dtype numpy lacks (bfloat16) is given as a dataset stores it: the array holds its bits
(uint16), and every store is told the dtype (``make_store(..., dtype=)``), as
``Dataset.node_feature`` tells the backends from the metadata; :func:`reference` is the tensor
the stores must return."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from graphfeed.datasets.schema import BITS_DTYPES
from graphfeed.features.memory import InMemoryFeature

POLICIES = ("lru", "clock", "sieve", "s3fifo", "degree")

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
    if dtype in BITS_DTYPES:  # the bits of rounded normals, as a dataset's file holds them
        from graphfeed.features._rows import numpy_rows

        values = torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
        return numpy_rows(values.to(getattr(torch, dtype)))[0]
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype == "int64":
        return rng.integers(-(2**62), 2**62, size=shape, dtype=np.int64)
    return rng.standard_normal(shape).astype(dtype)


def bits_of(dtype: str):
    """The ``dtype`` option the stores take for ``make_array(dtype)``: set for bits only."""
    return dtype if dtype in BITS_DTYPES else None


def reference(array: np.ndarray, dtype=None) -> torch.Tensor:
    """What reading every row of a store over ``array`` gives (``dtype``: as ``make_store``)."""
    t = torch.from_numpy(array.view(np.int16) if dtype in BITS_DTYPES else array)
    return t.view(getattr(torch, dtype)) if dtype in BITS_DTYPES else t


def make_store(kind: str, array: np.ndarray, tmp: Path, dtype=None):
    """The store ``kind`` holding ``array``; files go under ``tmp``; ``dtype``: the rows' dtype
    where ``array`` holds the bits of one numpy lacks (``"bfloat16"``)."""
    from graphfeed.features.cache import CachedFeature
    from graphfeed.features.disk import DiskFeature
    from graphfeed.features.lmdb_store import LMDBFeature

    npy = tmp / "feature.npy"
    if kind.startswith("disk") or kind == "cache-disk":
        np.save(npy, array)
    row_nbytes = max(1, array[:1].nbytes)
    cap = max(1, array.shape[0] // 3) * row_nbytes  # a third of the rows
    if kind == "memory":
        return InMemoryFeature(array, dtype=dtype)
    if kind == "disk":
        return DiskFeature(npy, dtype=dtype)
    if kind == "disk-sorted":
        return DiskFeature(npy, sort_ids=True, num_threads=3, dtype=dtype)
    if kind == "disk-direct":
        # tiny gap and read limits force many separate, coalesced and split reads
        return DiskFeature(npy, direct_io=True, max_gap=4096, max_read=8192, dtype=dtype)
    if kind == "lmdb":
        return LMDBFeature.build(tmp / "feature.lmdb", array, rows_per_chunk=7, dtype=dtype)
    if kind.startswith("cache-"):
        policy = kind.split("-", 1)[1]
        if policy == "disk":
            return CachedFeature(DiskFeature(npy, dtype=dtype), cap, policy="s3fifo")
        degrees = (np.random.default_rng(5).integers(0, 50, array.shape[0])
                   if policy == "degree" else None)
        return CachedFeature(InMemoryFeature(array, dtype=dtype), cap, policy=policy,
                             degrees=degrees)
    if kind == "pinned":
        from graphfeed.features.pinned import PinnedFeature

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "pinning needs CUDA" on CPU
            return PinnedFeature(InMemoryFeature(array, dtype=dtype))
    raise AssertionError(kind)
